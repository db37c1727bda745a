//! The PostgreSQL provider against a real server: a `setpoint server` child (roles `apiserver`
//! and `controllers`, `--managed-poll-interval 2s`) and a throwaway PostgreSQL
//! (`LocalPostgres`: Debian's binaries, a fresh cluster on a free loopback port).
//!
//! Measured, from this process:
//! - create: `N` Databases (100; `--quick`: 10) created at once through the API, from the first
//!   create to the last one `Ready=True` (goal ≤ 10 s for 100);
//! - drift → reverted: `D` times (20; `--quick`: 3), one database's connection limit altered
//!   behind the provider's back (`ALTER DATABASE … CONNECTION LIMIT`), from the statement's
//!   answer to the server showing the spec's limit again, polled every 5 ms (goal p99 within
//!   one observation interval, 2 s). Each drift comes after a pause of a random fraction of
//!   the interval (seeded, [`DRIFT_SEED`]), so drifts land anywhere in the observation cycle.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PostParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use setpoint_providers::postgres::{Database, LocalPostgres, ProviderConfig};
use setpoint_runtime::managed::Managed;
use setpoint_runtime::Client;

use crate::bench::latency::summarize_samples;
use crate::bench::report::Row;
use crate::bench::server::ServerProcess;

/// The observation interval the server runs with.
const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// How often the benchmark looks at what it waits for.
const POLL: Duration = Duration::from_millis(5);
/// How long any one wait may take before the benchmark fails.
const WAIT: Duration = Duration::from_secs(300);
/// The seed of the random pauses between drifts.
const DRIFT_SEED: u64 = 21;
/// The connection limit every benchmark database asks for.
const LIMIT: i32 = 10;

/// Runs this provider's benchmark in `dir`; its rows.
pub(super) async fn run(dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let (databases, drifts) = if quick { (10, 3) } else { (100, 20) };
    let pg = tokio::task::spawn_blocking(LocalPostgres::start)
        .await
        .context("starting PostgreSQL")?
        .context("starting PostgreSQL")?;
    let (server, _) = ServerProcess::start(
        dir,
        &[
            "--roles",
            "apiserver,controllers",
            "--managed-poll-interval",
            "2s",
        ],
    )
    .await?;
    let result = measure(&server, &pg, databases, drifts).await;
    let log = server.log_tail();
    server.stop().await?;
    tokio::task::spawn_blocking(move || drop(pg))
        .await
        .context("stopping PostgreSQL")?;
    result.with_context(|| log)
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
        tokio::time::sleep(POLL).await;
    }
}

fn ready(db: &Database) -> bool {
    db.conditions()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn measure(
    server: &ServerProcess,
    pg: &LocalPostgres,
    databases: usize,
    drifts: usize,
) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig()).await?;
    configure(&client, pg).await?;
    let api = client.api::<Database>();

    // N Databases at once, until every one is Ready.
    let start = Instant::now();
    let creates = futures::stream::iter(0..databases)
        .map(|i| {
            let api = api.clone();
            async move {
                let db: Database = serde_json::from_value(json!({
                    "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "Database",
                    "metadata": {"name": format!("bench-{i:04}")},
                    "spec": {"forProvider": {"connectionLimit": LIMIT}}
                }))?;
                api.create(&PostParams::default(), &db)
                    .await
                    .with_context(|| format!("creating Database bench-{i:04}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    for result in creates {
        result?;
    }
    until("every Database is Ready", || {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            (list.items.iter().filter(|db| ready(db)).count() >= databases).then_some(())
        }
    })
    .await?;
    let created = start.elapsed();
    let (sql, connection) = tokio_postgres::connect(
        &pg.url(pg.user(), pg.password(), "postgres"),
        tokio_postgres::NoTls,
    )
    .await
    .context("connecting to PostgreSQL")?;
    let connection = tokio::spawn(connection);
    let row = sql
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'bench-%'",
            &[],
        )
        .await?;
    let made: i64 = row.try_get(0)?;
    if usize::try_from(made).ok() != Some(databases) {
        bail!("{made} databases on the server, {databases} Ready in the API");
    }

    // Drift behind the provider's back, until the server shows the spec's limit again.
    let mut rng = SmallRng::seed_from_u64(DRIFT_SEED);
    let mut reverted = Vec::with_capacity(drifts);
    for i in 0..drifts {
        // At a random moment of the observation cycle: drifting right after the last revert
        // would always wait a whole interval.
        tokio::time::sleep(POLL_INTERVAL.mul_f64(rng.gen_range(0.0..1.0))).await;
        let name = format!("bench-{:04}", (i * 7) % databases);
        sql.batch_execute(&format!(
            "ALTER DATABASE \"{name}\" CONNECTION LIMIT {}",
            LIMIT + 1 + i32::try_from(i).unwrap_or(0)
        ))
        .await
        .context("drifting a database")?;
        let drifted = Instant::now();
        until(&format!("{name}'s connection limit is put back"), || {
            let sql = &sql;
            let name = &name;
            async move {
                let row = sql
                    .query_one(
                        "SELECT datconnlimit FROM pg_database WHERE datname = $1",
                        &[name],
                    )
                    .await
                    .ok()?;
                (row.try_get::<_, i32>(0).ok()? == LIMIT).then_some(())
            }
        })
        .await?;
        reverted.push(drifted.elapsed());
    }
    drop(sql);
    let _ = connection.await;

    let summary = summarize_samples(&reverted);
    let goal = Duration::from_secs(10);
    Ok(vec![
        Row::new(
            format!("postgres: {databases} Databases created and Ready"),
            format!("{:.2} s", created.as_secs_f64()),
        )
        .target(
            if databases >= 100 {
                "≤ 10 s"
            } else {
                "≤ 10 s (for 100)"
            },
            created <= goal,
        ),
        Row::new(
            format!(
                "postgres: drift reverted ({drifts} drifts, poll {} s)",
                POLL_INTERVAL.as_secs()
            ),
            format!("{drifts} reverted"),
        )
        .latency(summary)
        .target("p99 ≤ 2 s", summary.p99 <= POLL_INTERVAL),
    ])
}

/// The admin Secret and the ProviderConfig `default` naming `pg` (once the provider serves
/// its kinds).
async fn configure(client: &Client, pg: &LocalPostgres) -> Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "postgres-admin", "namespace": "default"},
        "stringData": {"username": pg.user(), "password": pg.password()}
    }))?;
    client
        .namespaced_api::<Secret>("default")
        .create(&PostParams::default(), &secret)
        .await
        .context("creating the credentials Secret")?;
    let config: ProviderConfig = serde_json::from_value(json!({
        "apiVersion": "postgresql.sql.crossplane.io/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "PostgreSQLConnectionSecret",
            "connectionSecretRef": {"namespace": "default", "name": "postgres-admin"}},
            "host": pg.host(), "port": pg.port()}
    }))?;
    let configs = client.api::<ProviderConfig>();
    until("the ProviderConfig kind is served", || {
        let configs = configs.clone();
        let config = config.clone();
        async move { configs.create(&PostParams::default(), &config).await.ok() }
    })
    .await?;
    let databases = client.api::<Database>();
    until("the Database kind is served", || {
        let databases = databases.clone();
        async move { databases.list(&ListParams::default().limit(1)).await.ok() }
    })
    .await?;
    Ok(())
}
