//! Apply: server-side apply against merge patch. [`CLIENTS`] clients write the same objects —
//! 1 KiB ConfigMaps, and Deployments of about 5 KB (three containers with env, ports, probes
//! and resources; `replicas: 0`) — first as JSON merge patches of the whole object, then as
//! apply configurations of the whole object (`fieldManager=bench`), each write changing one
//! value. Reports writes/s of both and their ratio (goal: an apply costs at most twice a merge
//! patch), and the bytes `managedFields` add to a stored object (a list's items with and
//! without them), for 10,000 objects.

use std::sync::Arc;

use anyhow::{ensure, Context as _, Result};
use http::StatusCode;
use serde_json::{json, Value};

use super::client::{Call, Protocol};
use super::load::{self, Budget, MakeCall, CLIENTS};
use super::Harness;
use crate::bench::report::{self, Row};
use crate::bench::usage::Meter;

/// The namespace written in.
const NAMESPACE: &str = "bench-apply";
/// The field manager of the applies.
const MANAGER: &str = "bench";
/// An apply may cost this many merge patches.
const MAX_COST_RATIO: f64 = 2.0;

/// One kind the benchmark writes.
struct Kind {
    label: &'static str,
    path: String,
    body: fn(&str, u64) -> String,
}

/// Runs the apply benchmark for ConfigMaps and Deployments.
pub(super) async fn bench_apply(harness: &mut Harness) -> Result<Vec<Row>> {
    let sizes = harness.sizes;
    let mut setup = harness.client.connect(Protocol::Http1).await?;
    load::create_namespace(&mut setup, NAMESPACE).await?;
    let kinds = [
        Kind {
            label: "1 KiB ConfigMaps",
            path: load::configmaps(NAMESPACE),
            body: |name, i| load::configmap(name, i),
        },
        Kind {
            label: "5 KB Deployments",
            path: format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments"),
            body: deployment,
        },
    ];
    let mut rows = Vec::new();
    for kind in kinds {
        eprintln!(
            "[apply: {}] creating {} by apply",
            kind.label, sizes.apply_objects
        );
        let objects = sizes.apply_objects;
        let (path, body) = (kind.path.clone(), kind.body);
        let create: MakeCall = Arc::new(move |i| {
            let name = load::name("obj", i);
            Call::apply(
                format!("{path}/{name}?fieldManager={MANAGER}"),
                body(&name, 0),
                StatusCode::CREATED,
            )
        });
        let connections = load::clients(&harness.client, Protocol::Http1, CLIENTS).await?;
        let ran = load::run(connections, Budget::new(objects, sizes.run_time), create).await?;
        ensure!(ran.ops == objects, "created only {} of {objects}", ran.ops);
        harness.objects += objects;
        let bytes = body(&load::name("obj", 0), 1).len();

        let mut rates = Vec::new();
        for apply in [false, true] {
            let (path, body) = (kind.path.clone(), kind.body);
            let make: MakeCall = Arc::new(move |i| {
                let name = load::name("obj", i % objects);
                // Every write changes one value: `sent` (a ConfigMap's data, a Deployment's
                // annotation) is the write's number, unique across both runs.
                let sent = i + 1 + if apply { 1 << 32 } else { 0 };
                if apply {
                    // Forced, as a controller applies: the merge patches before made their
                    // (unnamed) manager own `sent`.
                    Call::apply(
                        format!("{path}/{name}?fieldManager={MANAGER}&force=true"),
                        body(&name, sent),
                        StatusCode::OK,
                    )
                } else {
                    Call::merge_patch(format!("{path}/{name}"), body(&name, sent))
                }
            });
            let what = if apply { "applies" } else { "merge patches" };
            let label = format!("apply: {}, {what}", kind.label);
            eprintln!("[{label}]");
            let connections = load::clients(&harness.client, Protocol::Http1, CLIENTS).await?;
            let meter = Meter::start(harness.server.pid())?;
            let ran = load::run(
                connections,
                Budget::new(sizes.apply_writes, sizes.run_time),
                make,
            )
            .await?;
            let cpu = meter.stop()?;
            ensure!(
                ran.ops > 0,
                "no {what} finished within {:?}",
                sizes.run_time
            );
            rates.push(report::per_second(ran.ops, ran.elapsed) as f64);
            rows.push(
                Row::new(
                    format!(
                        "{label} ({bytes} B bodies) over {} objects",
                        report::count(objects)
                    ),
                    format!(
                        "{} {what}/s ({} in {:.2} s)",
                        report::rate(ran.ops, ran.elapsed),
                        report::count(ran.ops),
                        ran.elapsed.as_secs_f64()
                    ),
                )
                .latency(ran.latencies.summary()),
            );
            rows.push(cpu.row(&label, ran.ops, "write"));
        }
        let ratio = rates[0] / rates[1].max(f64::MIN_POSITIVE);
        rows.push(
            Row::new(
                format!("apply: {}, cost of an apply in merge patches", kind.label),
                format!("{ratio:.2}×"),
            )
            .target(format!("≤ {MAX_COST_RATIO}×"), ratio <= MAX_COST_RATIO),
        );
    }
    rows.push(managed_fields_size(harness).await?);
    Ok(rows)
}

/// What `managedFields` add to the stored objects: the ConfigMaps of the namespace with the
/// most (the create benchmark's 10,000, else this benchmark's), listed, measured with and
/// without them, scaled to 10,000 objects.
async fn managed_fields_size(harness: &Harness) -> Result<Row> {
    let namespace = if harness.created > 0 {
        super::creates::NAMESPACE
    } else {
        NAMESPACE
    };
    let mut connection = harness.client.connect(Protocol::Http1).await?;
    let body = connection
        .call(Call::get(load::configmaps(namespace)))
        .await?;
    let list: Value = serde_json::from_slice(&body).context("decoding the list")?;
    let items = list["items"].as_array().context("a list without items")?;
    ensure!(!items.is_empty(), "no ConfigMaps in {namespace}");
    let (mut with, mut without) = (0usize, 0usize);
    for item in items {
        with += serde_json::to_vec(item)?.len();
        let mut bare = item.clone();
        if let Some(meta) = bare["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        without += serde_json::to_vec(&bare)?.len();
    }
    let n = items.len();
    let added = (with - without) as f64 / n as f64;
    Ok(Row::new(
        format!("apply: managedFields per stored ConfigMap ({n} in {namespace})"),
        format!(
            "+{added:.0} B per object ({:.1}% of {:.0} B); {:.1} MB per 10,000 objects",
            100.0 * added / (without as f64 / n as f64),
            without as f64 / n as f64,
            added * 10_000.0 / 1e6
        ),
    ))
}

/// A Deployment of about 5 KB named `name`, its `sent` annotation set to `sent`.
fn deployment(name: &str, sent: u64) -> String {
    let container = |c: &str, port: u16| {
        json!({
            "name": c,
            "image": format!("registry.example.invalid/team/{c}:1.2.3"),
            "args": ["--listen", format!(":{port}"), "--log-level", "info"],
            "ports": [{"name": "http", "containerPort": port}, {"name": "metrics", "containerPort": port + 1}],
            "env": (0..18).map(|e| json!({"name": format!("SETTING_{e:02}"), "value": format!("value-of-setting-{e:02}-for-{c}")})).collect::<Vec<_>>(),
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 5},
            "livenessProbe": {"httpGet": {"path": "/live", "port": port}, "periodSeconds": 10},
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": {"app": name, "tier": "bench"},
            "annotations": {"sent": sent.to_string(), "owner": "bench@example.invalid"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "bench"}},
                "spec": {"containers": [container("api", 8080), container("worker", 9090), container("proxy", 7070)]},
            },
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployment_should_weigh_about_five_kilobytes() {
        let d = deployment("obj-000001", 7);
        assert!((4_500..=6_000).contains(&d.len()), "{}", d.len());
        let v: Value = serde_json::from_str(&d).unwrap();
        assert_eq!(v["metadata"]["annotations"]["sent"], "7");
    }
}
