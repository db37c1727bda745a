//! `setpoint migrate`: copies every key of one store into another, empty one — the embedded
//! store of a data directory into etcd, or etcd into it — so a cluster can move between them.
//!
//! The source is read as one snapshot (a paged list at one revision); values are copied as they
//! are (the API server stores objects without their `resourceVersion` and sets it from the
//! key's mod revision when it reads them), each key created anew in the destination. Revisions
//! are the destination's own, so resource versions change: servers and clients must be stopped
//! during the copy and relist afterwards (a restarted client does). etcd's
//! `/registry/compact_rev_key`, the compactors' bookkeeping, is not copied.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use setpoint_store::{EmbeddedConfig, EmbeddedStore, ListRequest, Pages, Store};

use crate::cli::{MigrateArgs, StoreKind};

/// Keys read per page of the source.
const PAGE: usize = 500;
/// Creates in flight in the destination.
const CONCURRENT_CREATES: usize = 32;
/// The compactors' key in etcd, which is not an object.
const COMPACT_REV_KEY: &[u8] = b"/registry/compact_rev_key";

/// Runs `setpoint migrate`.
pub(crate) async fn migrate(args: MigrateArgs) -> Result<()> {
    let store_dir = args.data_dir.join("store");
    let embedded = tokio::task::spawn_blocking({
        let config = EmbeddedConfig::on_disk(&store_dir).without_auto_compaction();
        move || EmbeddedStore::open(config)
    })
    .await?
    .with_context(|| format!("opening the embedded store in {}", store_dir.display()))?;
    let etcd = crate::server::open_etcd(&args.etcd, None).await?;
    let (from, to): (Arc<dyn Store>, Arc<dyn Store>) = match args.to {
        StoreKind::Etcd => (Arc::new(embedded.clone()), etcd),
        StoreKind::Embedded => (etcd, Arc::new(embedded.clone())),
    };
    let result = copy(from.as_ref(), to.as_ref()).await;
    drop((from, to));
    tokio::task::spawn_blocking(move || embedded.close()).await?;
    let copied = result?;
    eprintln!(
        "copied {copied} keys into {}",
        match args.to {
            StoreKind::Etcd => "etcd".to_owned(),
            StoreKind::Embedded => store_dir.display().to_string(),
        }
    );
    Ok(())
}

/// Copies every key of `from` (but the compaction key) into `to`, which must hold none;
/// returns how many were copied.
pub(crate) async fn copy(from: &dyn Store, to: &dyn Store) -> Result<u64> {
    let present = objects(to, ListRequest::prefix("").limit(2)).await?;
    if let Some(key) = present.first() {
        bail!(
            "the destination already holds objects (e.g. {}); migrate only into an empty store",
            String::from_utf8_lossy(key)
        );
    }
    let mut pages = Pages::new(from, ListRequest::prefix("").limit(PAGE));
    let mut copied = 0;
    while let Some(page) = pages.next().await.context("reading the source")? {
        let kvs: Vec<_> = page
            .kvs
            .iter()
            .filter(|kv| kv.key.as_ref() != COMPACT_REV_KEY)
            .cloned()
            .collect();
        copied += kvs.len() as u64;
        futures::stream::iter(kvs)
            .map(|kv| async move {
                to.create(kv.key.clone(), kv.value.clone())
                    .await
                    .with_context(|| format!("writing {}", String::from_utf8_lossy(&kv.key)))
            })
            .buffer_unordered(CONCURRENT_CREATES)
            .try_collect::<Vec<_>>()
            .await?;
    }
    Ok(copied)
}

/// The keys of a page of `store`, but the compaction key.
async fn objects(store: &dyn Store, request: ListRequest) -> Result<Vec<Bytes>> {
    let page = store
        .list(request)
        .await
        .context("reading the destination")?;
    Ok(page
        .kvs
        .into_iter()
        .map(|kv| kv.key)
        .filter(|key| key.as_ref() != COMPACT_REV_KEY)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use setpoint_store::ModelStore;

    #[tokio::test]
    async fn copy_should_copy_every_key_across_pages_and_refuse_a_non_empty_destination() {
        let from = ModelStore::new();
        for i in 0..(PAGE * 2 + 7) {
            from.create(
                Bytes::from(format!("/registry/configmaps/ns/c{i:05}")),
                Bytes::from(format!("v{i}")),
            )
            .await
            .expect("create");
        }
        from.create(
            Bytes::from_static(COMPACT_REV_KEY),
            Bytes::from_static(b"9"),
        )
        .await
        .expect("create");
        let to = ModelStore::new();
        assert_eq!(copy(&from, &to).await.expect("copy"), (PAGE * 2 + 7) as u64);
        let copied = to.list(ListRequest::prefix("")).await.expect("list");
        let original = from
            .list(ListRequest::prefix("/registry/configmaps/"))
            .await
            .expect("list");
        let pairs = |kvs: &[setpoint_store::KeyValue]| -> Vec<(Bytes, Bytes)> {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect()
        };
        assert_eq!(pairs(&copied.kvs), pairs(&original.kvs));
        let again = copy(&from, &to).await.expect_err("a second copy");
        assert!(
            again.to_string().contains("already holds objects"),
            "{again}"
        );
    }
}
