//! The certificate provider's benchmark: a `setpoint server` child running only the
//! `cert-manager` loop; a self-signed Issuer makes a root CA, a CA Issuer signs with it; then
//! 1,000 Certificates (ECDSA P-256; `--quick`: 50) are created at once (32 requests in flight)
//! and a watch records when each turns `Ready=True`. Rows: the total, from the first create
//! to the last Ready (goal ≤ 20 s for 1,000), and each Certificate's creation → Ready latency.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use serde_json::json;
use setpoint_providers::certs::{Certificate, Issuer};
use setpoint_runtime::Client;

use super::super::latency::summarize_samples;
use super::super::report::{count, millis, Row};
use super::super::server::ServerProcess;

const NS: &str = "default";
/// How long the whole run may take before the benchmark fails.
const WAIT: Duration = Duration::from_secs(300);
/// Creates in flight at once.
const IN_FLIGHT: usize = 32;

/// Runs this provider's benchmark in `dir`; its rows.
pub(super) async fn run(dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let certificates = if quick { 50 } else { 1000 };
    let (server, _) = ServerProcess::start(
        dir,
        &[
            "--roles",
            "apiserver,controllers",
            "--controllers",
            "cert-manager",
        ],
    )
    .await?;
    let result = measure(&server, certificates).await;
    let log = server.log_tail();
    server.stop().await?;
    result.with_context(|| log)
}

fn is_ready(cert: &Certificate) -> bool {
    cert.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Polls `check` until it answers `Some`, at most [`WAIT`].
async fn until<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn leaf(name: &str) -> Result<Certificate> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"secretName": format!("{name}-tls"), "commonName": format!("{name}.bench.test"),
                 "dnsNames": [format!("{name}.bench.test")],
                 "privateKey": {"algorithm": "ECDSA", "size": 256},
                 "issuerRef": {"name": "bench-ca", "kind": "Issuer"}}
    }))?)
}

/// Makes the CA Issuer `bench-ca` (from a root CA a self-signed Issuer issues) and waits until
/// it is Ready.
async fn ca_issuer(issuers: &Api<Issuer>, certificates: &Api<Certificate>) -> Result<()> {
    let selfsigned: Issuer = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
        "metadata": {"name": "selfsigned", "namespace": NS}, "spec": {"selfSigned": {}}
    }))?;
    // The loop installs its CRDs at start.
    until("the Issuer kind is served", || async {
        issuers
            .create(&PostParams::default(), &selfsigned)
            .await
            .ok()
    })
    .await?;
    let root: Certificate = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "bench-root", "namespace": NS},
        "spec": {"secretName": "bench-root", "isCA": true, "commonName": "bench root",
                 "privateKey": {"algorithm": "ECDSA", "size": 256},
                 "issuerRef": {"name": "selfsigned", "kind": "Issuer"}}
    }))?;
    until("the Certificate kind is served", || async {
        certificates
            .create(&PostParams::default(), &root)
            .await
            .ok()
    })
    .await?;
    let ca: Issuer = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
        "metadata": {"name": "bench-ca", "namespace": NS},
        "spec": {"ca": {"secretName": "bench-root"}}
    }))?;
    issuers
        .create(&PostParams::default(), &ca)
        .await
        .context("creating the CA Issuer")?;
    until("the CA Issuer is Ready", || async {
        let issuer = issuers.get("bench-ca").await.ok()?;
        let ready = issuer
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(())
    })
    .await
}

async fn measure(server: &ServerProcess, n: usize) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig()).await?;
    let issuers: Api<Issuer> = client.namespaced_api(NS);
    let certificates: Api<Certificate> = client.namespaced_api(NS);
    ca_issuer(&issuers, &certificates).await?;

    // Watch from now on, then create every Certificate.
    let version = certificates
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut events = certificates
        .watch(&WatchParams::default().timeout(290), &version)
        .await?
        .boxed();
    let names: Vec<String> = (0..n).map(|i| format!("cert-{i:05}")).collect();
    let start = Instant::now();
    let created: HashMap<String, Instant> = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let certificates = certificates.clone();
            async move {
                let cert = leaf(&name)?;
                certificates
                    .create(&PostParams::default(), &cert)
                    .await
                    .with_context(|| format!("creating Certificate {name}"))?;
                anyhow::Ok((name, Instant::now()))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    let mut ready: HashMap<String, Instant> = HashMap::new();
    let deadline = start + WAIT;
    while ready.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, events.try_next())
            .await
            .with_context(|| format!("only {} of {n} Certificates Ready in time", ready.len()))?
            .context("watching Certificates")?;
        match event {
            Some(WatchEvent::Added(cert) | WatchEvent::Modified(cert)) if is_ready(&cert) => {
                let name = cert.metadata.name.unwrap_or_default();
                if created.contains_key(&name) {
                    ready.entry(name).or_insert_with(Instant::now);
                }
            }
            Some(WatchEvent::Error(e)) => bail!("the watch failed: {e}"),
            Some(_) => {}
            None => bail!("the watch ended with {} of {n} Ready", ready.len()),
        }
    }
    let total = ready.values().max().map_or(Duration::ZERO, |t| *t - start);
    let latencies: Vec<Duration> = ready
        .iter()
        .filter_map(|(name, at)| created.get(name).map(|c| at.saturating_duration_since(*c)))
        .collect();
    let row = Row::new(
        format!(
            "{} Certificates issued (ECDSA P-256, CA issuer)",
            count(n as u64)
        ),
        format!("{} to all Ready", millis(total)),
    );
    // The goal is for 1,000 Certificates: a quick run has no target to meet.
    let total_row = if n == 1000 {
        row.target("≤ 20 s", total <= Duration::from_secs(20))
    } else {
        row
    };
    Ok(vec![
        total_row,
        Row::new(
            "one Certificate, creation → Ready",
            format!("{} samples", count(latencies.len() as u64)),
        )
        .latency(summarize_samples(&latencies)),
    ])
}
