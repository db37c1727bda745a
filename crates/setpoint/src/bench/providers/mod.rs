//! `setpoint bench providers`: the providers of pattern 3 (API → outside world), each in a
//! file of its own — `lb.rs` (a LoadBalancer Service's balancer against a direct
//! connection), `postgres.rs` (Databases created and Ready against a real PostgreSQL; drift
//! reverted), `certs.rs` (Certificates issued) — printed as one table.

mod certs;
mod lb;
mod postgres;

use anyhow::{Context, Result};

use super::machine::Machine;
use super::report::{Report, Row};
use crate::cli::{ProvidersBench, ProvidersBenchArgs};

/// Runs the selected benchmarks and prints their table.
pub(crate) async fn bench_providers(args: ProvidersBenchArgs) -> Result<()> {
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-providers-")
        .tempdir_in(super::default_parent())
        .context("making the benchmark's directory")?;
    let all = [
        ProvidersBench::Lb,
        ProvidersBench::Postgres,
        ProvidersBench::Certs,
    ];
    let mut rows: Vec<Row> = Vec::new();
    for bench in super::selected(&all, &args.only) {
        let dir = root.path().join(format!("{bench:?}").to_lowercase());
        std::fs::create_dir_all(&dir).context("making a benchmark's directory")?;
        rows.extend(match bench {
            ProvidersBench::Lb => lb::run(&dir, args.quick).await?,
            ProvidersBench::Postgres => postgres::run(&dir, args.quick).await?,
            ProvidersBench::Certs => certs::run(&dir, args.quick).await?,
        });
    }
    let report = Report {
        title: format!(
            "setpoint bench providers{} (setpoint {})",
            if args.quick { " (quick)" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine: Machine::describe(root.path()),
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}
