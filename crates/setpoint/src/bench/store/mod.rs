//! `setpoint bench store`: the embedded store on disk, measured where Kubernetes loads it —
//! durable writes, consistent lists, watch fan-out and the data directory's size over time.
//!
//! Every benchmark runs on a fresh store in a temporary directory (deleted afterwards), on the
//! multi-threaded runtime, with writers as tasks sharing clones of one store. A benchmark that
//! fails is reported in the table and makes the command fail, after the others have run.

mod list;
mod load;
mod size;
mod watch;
mod writes;

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::machine::Machine;
use super::report::{Report, Row};
use crate::cli::{StoreBench, StoreBenchArgs, StoreKind};

/// Runs `setpoint bench store` and prints its results, as text and as markdown.
pub(crate) async fn bench_store(args: StoreBenchArgs) -> Result<()> {
    let parent = args.dir.clone().unwrap_or_else(super::default_parent);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-store-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    let machine = Machine::describe(root.path());
    eprintln!(
        "benchmarking the {} store in {}",
        match args.store {
            StoreKind::Embedded => "embedded",
            StoreKind::Etcd => "etcd (a local member, fsyncs on)",
        },
        root.path().display()
    );
    eprintln!("{machine}");

    let sizes = load::Sizes::new(args.quick);
    let mut rows = Vec::new();
    let mut failed = 0;
    for bench in super::selected(&StoreBench::ALL, &args.only) {
        match run(bench, root.path(), sizes, args.store).await {
            Ok(more) => rows.extend(more),
            Err(error) => {
                eprintln!("[{bench:?}] FAILED: {error:#}");
                rows.push(Row::new(
                    format!("{bench:?}").to_lowercase(),
                    format!("FAILED: {error:#}"),
                ));
                failed += 1;
            }
        }
    }
    root.close()
        .context("deleting the benchmark's data directory")?;

    let report = Report {
        title: format!(
            "setpoint bench store{}{} (setpoint {})",
            if args.store == StoreKind::Etcd {
                " --store etcd"
            } else {
                ""
            },
            if args.quick { " --quick" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine,
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    if failed > 0 {
        bail!("{failed} store benchmark(s) failed");
    }
    Ok(())
}

/// Runs one benchmark in its own directories under `root`.
async fn run(
    bench: StoreBench,
    root: &Path,
    sizes: load::Sizes,
    kind: StoreKind,
) -> Result<Vec<Row>> {
    match bench {
        StoreBench::Writes => writes::bench_writes(root, sizes, kind).await,
        StoreBench::List => list::bench_list(root, sizes, kind).await,
        StoreBench::Watch => watch::bench_watch(root, sizes, kind).await,
        StoreBench::Size if kind == StoreKind::Etcd => Ok(vec![Row::new(
            "data directory size",
            "not measured on etcd (its size depends on etcd's own compaction and defragmentation)",
        )]),
        StoreBench::Size => size::bench_size(root, sizes).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_should_run_every_benchmark_when_none_is_named() {
        assert_eq!(
            super::super::selected(&StoreBench::ALL, &[]),
            StoreBench::ALL
        );
    }

    #[test]
    fn selected_should_keep_canonical_order_without_duplicates() {
        let only = [StoreBench::Size, StoreBench::Writes, StoreBench::Size];
        assert_eq!(
            super::super::selected(&StoreBench::ALL, &only),
            [StoreBench::Writes, StoreBench::Size]
        );
    }
}
