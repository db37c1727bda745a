//! The background compactor: every interval, compacts etcd up to the revision the previous run
//! saw, so history is kept for one to two intervals. Several servers on one cluster take turns
//! rather than fight, through a compare-and-swap on the version of [`COMPACT_REV_KEY`]: a run
//! compacts only if it bumped that version from the one it saw last; a server that finds it
//! moved learns the new version and tries again next interval. (kube-apiserver coordinates its
//! compactions through the same key, so a Setpoint server and a kube-apiserver on one cluster
//! take turns too.)
//!
//! The key is written by the compare-and-swap, which consumes a revision per run: an idle
//! cluster's revision moves by one per interval per winning server.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp, TxnOpResponse};

use super::errors::Failure;
use super::kv::header_revision;
use super::EtcdConfig;
use crate::error::{Result, StoreError};

/// The key whose version orders compactions among servers; its value is the etcd revision the
/// last compaction was asked for.
pub const COMPACT_REV_KEY: &[u8] = b"/registry/compact_rev_key";

/// Runs until aborted (when the store is dropped).
pub(crate) async fn run(kv: KvClient, config: EtcdConfig, interval: Duration) {
    let mut seen = Seen::default();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is immediate: nothing to compact yet
    loop {
        ticker.tick().await;
        match compact_once(kv.clone(), &config, seen).await {
            Ok(next) => seen = next,
            Err(error) => tracing::warn!(%error, "etcd compaction failed; retrying next interval"),
        }
    }
}

/// What the previous run saw.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The version of [`COMPACT_REV_KEY`] (0: absent).
    version: i64,
    /// etcd's revision (0 before the first run).
    revision: i64,
}

/// One run: takes the turn if the key's version is still `seen.version`, and then compacts to
/// `seen.revision`.
async fn compact_once(mut kv: KvClient, config: &EtcdConfig, seen: Seen) -> Result<Seen> {
    let txn = Txn::new()
        .when([Compare::version(
            COMPACT_REV_KEY,
            CompareOp::Equal,
            seen.version,
        )])
        .and_then([TxnOp::put(COMPACT_REV_KEY, seen.revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let response = timed(config, kv.txn(txn))
        .await
        .map_err(Failure::into_store_error)?;
    let revision = header_revision(response.header())?;
    if !response.succeeded() {
        // Another server took this turn: remember where the key is now.
        let version = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(get) => get.kvs().first().map(etcd_client::KeyValue::version),
                _ => None,
            })
            .unwrap_or(0);
        return Ok(Seen { version, revision });
    }
    let next = Seen {
        version: seen.version + 1,
        revision,
    };
    if seen.revision > 0 {
        match timed(config, kv.compact(seen.revision, None)).await {
            Ok(_) => tracing::debug!(revision = seen.revision, "compacted etcd"),
            // Someone compacted further already (etcd's own auto-compaction, say).
            Err(Failure::Compacted) => {}
            Err(failure) => return Err(failure.into_store_error()),
        }
    }
    Ok(next)
}

async fn timed<T>(
    config: &EtcdConfig,
    request: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
) -> std::result::Result<T, Failure> {
    match tokio::time::timeout(config.request_timeout, request).await {
        Ok(result) => result.map_err(Failure::classify),
        Err(_) => Err(Failure::Other(StoreError::Unavailable(format!(
            "etcd did not answer within {:?}",
            config.request_timeout
        )))),
    }
}
