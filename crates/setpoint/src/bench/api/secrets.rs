//! Secret creates with encryption at rest on and off: [`CLIENTS`] concurrent clients `POST`
//! 1 KiB Secrets over HTTP/1.1 into two servers started for it one after the other, with the
//! same flags (the API alone: no loops, no node agent) but for the encryption configuration:
//! the default one (Secrets encrypted with AES-256-GCM), then an identity-only one (stored in
//! plaintext). Reports creates per second of each and their ratio.

use std::path::Path;
use std::sync::Arc;

use anyhow::{ensure, Context as _, Result};
use serde_json::json;

use super::client::{Call, Client, Protocol};
use super::load::{self, Budget, MakeCall, CLIENTS};
use super::Harness;
use crate::bench::report::{self, Row};
use crate::bench::server::ServerProcess;

/// The configuration of the plaintext server: every Secret stored as is.
pub(super) const IDENTITY_ONLY: &str =
    "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
resources:\n  - resources: [secrets]\n    providers:\n      - identity: {}\n";

/// Runs the Secret creates against an encrypting and a plaintext server.
pub(super) async fn bench_secrets(harness: &Harness, root: &Path) -> Result<Vec<Row>> {
    let encrypted = with_server(&root.join("encrypting-server"), None, harness.sizes).await?;
    let plain = with_server(
        &root.join("plaintext-server"),
        Some(IDENTITY_ONLY),
        harness.sizes,
    )
    .await?;
    let rate = |(ops, elapsed): (u64, std::time::Duration)| report::per_second(ops, elapsed);
    let describe = |(ops, elapsed): (u64, std::time::Duration)| {
        format!(
            "{} creates/s ({} in {:.2} s)",
            report::rate(ops, elapsed),
            report::count(ops),
            elapsed.as_secs_f64()
        )
    };
    let label = load::clients_label(Protocol::Http1);
    let cost = if rate(encrypted) > 0 {
        format!(
            "{:.2}× the plaintext rate",
            rate(encrypted) as f64 / rate(plain).max(1) as f64
        )
    } else {
        "-".to_owned()
    };
    Ok(vec![
        Row::new(
            format!("secrets: {label}, 1 KiB Secrets encrypted (aesgcm, default)"),
            format!("{} — {cost}", describe(encrypted)),
        ),
        Row::new(
            format!("secrets: {label}, 1 KiB Secrets in plaintext (identity)"),
            describe(plain),
        ),
    ])
}

/// Starts a server in `root` (with the encryption configuration `config`, else the default),
/// runs the creates against it and stops it.
async fn with_server(
    root: &Path,
    config: Option<&str>,
    sizes: load::Sizes,
) -> Result<(u64, std::time::Duration)> {
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let mut args = vec!["--no-agent".to_owned(), "--controllers=".to_owned()];
    if let Some(config) = config {
        let path = root.join("encryption-config.yaml");
        std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
        args.push("--encryption-provider-config".to_owned());
        args.push(path.to_string_lossy().into_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (server, endpoint) = ServerProcess::start(root, &args).await?;
    let client = Client::new(endpoint)?;
    let ran = async {
        super::wait_ready(&client).await?;
        creates(&client, sizes).await
    }
    .await
    .with_context(|| server.log_tail());
    server.stop().await?;
    ran
}

/// Creates Secrets over HTTP/1.1 from [`CLIENTS`] clients; returns how many and how long.
pub(super) async fn creates(
    client: &Client,
    sizes: load::Sizes,
) -> Result<(u64, std::time::Duration)> {
    creates_named(client, sizes, "secret").await
}

/// [`creates`], the Secrets named `<prefix>-<i>` (runs against one server need their own).
pub(super) async fn creates_named(
    client: &Client,
    sizes: load::Sizes,
    prefix: &'static str,
) -> Result<(u64, std::time::Duration)> {
    let connections = load::clients(client, Protocol::Http1, CLIENTS).await?;
    let make: MakeCall = Arc::new(move |i| {
        Call::post_json(
            "/api/v1/namespaces/default/secrets",
            secret(&load::name(prefix, i)),
        )
    });
    let ran = load::run(
        connections,
        Budget::new(sizes.creates, sizes.run_time),
        make,
    )
    .await?;
    ensure!(
        ran.ops > 0,
        "no create finished within {:?}",
        sizes.run_time
    );
    Ok((ran.ops, ran.elapsed))
}

/// A Secret of `name` with a 1 KiB value.
fn secret(name: &str) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"payload": load::payload()},
    })
    .to_string()
}
