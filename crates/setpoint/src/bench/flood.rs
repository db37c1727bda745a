//! `setpoint bench flood`: does one abusive client starve the others? An API server in this
//! process (in-memory embedded store; requests enter through `Handler::handle`, as the
//! transport hands them over once it has authenticated the user, so TLS is not measured)
//! holds `--configmaps` ConfigMaps. Two victims — a user (`victim`, global-default) getting
//! and creating ConfigMaps, and a controller-like identity (the replicaset controller's
//! ServiceAccount, workload-high) doing the same — are timed alone ("idle"), then while
//! `--flooders` tasks of one user (`flooder`) LIST every ConfigMap in a loop; with API
//! Priority and Fairness on and off. Goal: each victim's p99 under flood within 2× of idle
//! with APF on. 429s the flooder gets are counted, not timed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::json;
use setpoint_apiserver::{Api, FlowControlSettings, Handler, User};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

use super::latency::Latencies;
use super::machine::Machine;
use super::report::{count, Report, Row};
use crate::cli::FloodBenchArgs;

const NS: &str = "default";

fn request(method: &str, uri: &str, body: Option<serde_json::Value>) -> Request<Bytes> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())))
        .unwrap_or_default()
}

/// Sends one request as `user` and reads the whole answer; its status.
async fn send(api: &Api, user: &User, request: Request<Bytes>) -> StatusCode {
    // A request from the network arrives as a new poll of its connection's task; in-process,
    // an answer served from the cache may never return Pending, and a loop of them would hold
    // its worker thread for good.
    tokio::task::yield_now().await;
    let response = Handler::handle(api, request, user.clone()).await;
    let status = response.status();
    let _ = response.into_body().collect().await;
    status
}

fn victims() -> [(&'static str, User); 2] {
    [
        ("user", User::new("victim", [])),
        (
            "controller",
            User::new(
                "system:serviceaccount:kube-system:replicaset-controller",
                [
                    "system:serviceaccounts".to_owned(),
                    "system:serviceaccounts:kube-system".to_owned(),
                ],
            ),
        ),
    ]
}

/// Each victim alternating get and create for `period`; their latencies.
async fn time_victims(api: &Arc<Api>, period: Duration, round: &str) -> Vec<Latencies> {
    let tasks: Vec<_> = victims()
        .into_iter()
        .map(|(label, user)| {
            let api = api.clone();
            let round = round.to_owned();
            tokio::spawn(async move {
                let mut latencies = Latencies::new();
                let until = Instant::now() + period;
                let mut i = 0_u64;
                while Instant::now() < until {
                    let r = if i.is_multiple_of(2) {
                        request(
                            "GET",
                            &format!("/api/v1/namespaces/{NS}/configmaps/cm-0"),
                            None,
                        )
                    } else {
                        request(
                            "POST",
                            &format!("/api/v1/namespaces/{NS}/configmaps"),
                            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": format!("{label}-{round}-{i}")}})),
                        )
                    };
                    let started = Instant::now();
                    let _ = send(&api, &user, r).await;
                    latencies.record(started.elapsed());
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|_| Latencies::new()));
    }
    out
}

/// Runs `setpoint bench flood`.
pub(crate) async fn bench_flood(args: FloodBenchArgs) -> Result<()> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory())?;
    let api = Api::new(Arc::new(store)).await?;
    let admin = User::new("setpoint-admin", ["system:masters".to_owned()]);
    for i in 0..args.configmaps {
        let status = send(
            &api,
            &admin,
            request(
                "POST",
                &format!("/api/v1/namespaces/{NS}/configmaps"),
                Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}")}, "data": {"k": "v".repeat(64)}})),
            ),
        )
        .await;
        ensure!(
            status == StatusCode::CREATED,
            "creating ConfigMap {i}: {status}"
        );
    }
    let period = args.duration;
    let mut rows = Vec::new();
    for apf in [true, false] {
        let mut settings = FlowControlSettings::default();
        settings.enabled = apf;
        api.set_flow_control(settings);
        let mode = if apf { "APF on" } else { "APF off" };
        let idle = time_victims(&api, period, &format!("idle-{apf}")).await;
        let stop = Arc::new(AtomicBool::new(false));
        let (lists, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let flooders: Vec<_> = (0..args.flooders)
            .map(|_| {
                let (api, stop, lists, refused) =
                    (api.clone(), stop.clone(), lists.clone(), refused.clone());
                tokio::spawn(async move {
                    let flooder = User::new("flooder", []);
                    while !stop.load(Ordering::Relaxed) {
                        let status = send(
                            &api,
                            &flooder,
                            request("GET", &format!("/api/v1/namespaces/{NS}/configmaps"), None),
                        )
                        .await;
                        if status == StatusCode::TOO_MANY_REQUESTS {
                            refused.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        } else {
                            lists.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let flooded = time_victims(&api, period, &format!("flood-{apf}")).await;
        stop.store(true, Ordering::Relaxed);
        // How long the flood's and the victims' requests waited for seats, per level.
        for (level, schema, executed, h) in api.flow_control_figures().waits {
            if apf && executed && h.count > 0 {
                rows.push(Row::new(
                    format!("{mode}: queue wait at {level} ({schema}), both rounds"),
                    format!(
                        "{} requests, mean {:.3} ms",
                        count(h.count),
                        h.sum * 1e3 / h.count as f64
                    ),
                ));
            }
        }
        for f in flooders {
            let _ = f.await;
        }
        for (((label, _), idle), flooded) in victims().iter().zip(&idle).zip(&flooded) {
            let (idle, flooded) = (idle.summary(), flooded.summary());
            let ratio = flooded.p99.as_secs_f64() / idle.p99.as_secs_f64().max(1e-9);
            rows.push(
                Row::new(
                    format!("{mode}: {label} idle"),
                    format!("{} requests", count(idle.count)),
                )
                .latency(idle),
            );
            let row = Row::new(
                format!("{mode}: {label} under flood"),
                format!("{} requests, p99 {ratio:.1}× idle", count(flooded.count)),
            )
            .latency(flooded);
            rows.push(if apf {
                row.target("p99 ≤ 2× idle", ratio <= 2.0)
            } else {
                row
            });
        }
        rows.push(Row::new(
            format!("{mode}: flooder ({} tasks)", args.flooders),
            format!(
                "{} LISTs of {} served, {} refused (429)",
                count(lists.load(Ordering::Relaxed)),
                count(args.configmaps as u64),
                count(refused.load(Ordering::Relaxed))
            ),
        ));
    }
    let report = Report {
        title: format!(
            "setpoint bench flood (setpoint {})",
            env!("CARGO_PKG_VERSION")
        ),
        machine: Machine::describe(&std::env::temp_dir()),
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}
