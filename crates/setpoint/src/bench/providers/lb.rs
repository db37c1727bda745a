//! CONTRACT SKELETON (providers-base): the helper `lb` writes this benchmark.

use std::path::Path;

use anyhow::Result;

use crate::bench::report::Row;

/// Runs this provider's benchmark in `dir`; its rows.
pub(super) async fn run(dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let _ = (dir, quick);
    Ok(Vec::new())
}
