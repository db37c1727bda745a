//! The writes of one step: 1 KiB ConfigMaps `scale-<i>` in `default` created from concurrent
//! HTTPS clients (the API benchmark's client and load loop, one HTTP/1.1 connection each)
//! until the store holds the step's size, then a sample of merge-patch updates and of deletes,
//! the deleted objects re-created so that the size stays at the step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};

use crate::bench::api::client::{Call, Client, Protocol};
use crate::bench::api::load::{self, Budget, MakeCall, Ran};

/// The namespace written to.
pub(super) const NAMESPACE: &str = "default";
/// The ConfigMaps' name prefix.
const PREFIX: &str = "scale";
/// The longest one batch of writes may take before the run fails.
const RUN_TIME: Duration = Duration::from_secs(6 * 3600);

/// The name of object `i`.
fn name(i: u64) -> String {
    format!("{PREFIX}-{i:07}")
}

/// The path of object `i`.
fn path(i: u64) -> String {
    format!("{}/{}", load::configmaps(NAMESPACE), name(i))
}

/// The JSON of object `i` as created.
fn body(i: u64) -> String {
    load::configmap(&name(i), 0)
}

/// Sends one request per index of `indexes` (`make` builds it from the index) from `clients`
/// concurrent clients; fails unless every one is answered as expected.
async fn each(
    client: &Client,
    clients: usize,
    indexes: Arc<Vec<u64>>,
    make: impl Fn(u64) -> Call + Send + Sync + 'static,
) -> Result<Ran> {
    let connections = load::clients(client, Protocol::Http1, clients).await?;
    let n = indexes.len() as u64;
    let make: MakeCall = Arc::new(move |op| {
        let at = usize::try_from(op).unwrap_or(usize::MAX);
        make(indexes.get(at).copied().unwrap_or(u64::MAX))
    });
    let ran = load::run(connections, Budget::new(n, RUN_TIME), make).await?;
    ensure!(
        ran.ops == n,
        "only {} of {n} requests were answered within {RUN_TIME:?}",
        ran.ops
    );
    Ok(ran)
}

/// Creates objects `from..to`; adds the bytes of JSON sent to `bytes`.
pub(super) async fn create(
    client: &Client,
    clients: usize,
    from: u64,
    to: u64,
    bytes: Arc<AtomicU64>,
) -> Result<Ran> {
    let collection = load::configmaps(NAMESPACE);
    let indexes = Arc::new((from..to).collect::<Vec<u64>>());
    each(client, clients, indexes, move |i| {
        let json = body(i);
        bytes.fetch_add(json.len() as u64, Ordering::Relaxed);
        Call::post_json(collection.clone(), json)
    })
    .await
}

/// Updates each object of `indexes` (a merge patch of its `data.sent`, the same size as
/// created).
pub(super) async fn update(client: &Client, clients: usize, indexes: Arc<Vec<u64>>) -> Result<Ran> {
    each(client, clients, indexes, |i| {
        Call::merge_patch(path(i), r#"{"data":{"sent":"1"}}"#)
    })
    .await
}

/// Deletes each object of `indexes`.
pub(super) async fn delete(client: &Client, clients: usize, indexes: Arc<Vec<u64>>) -> Result<Ran> {
    each(client, clients, indexes, |i| Call::delete(path(i))).await
}

/// Creates each object of `indexes` again, as [`create`] first did.
pub(super) async fn recreate(
    client: &Client,
    clients: usize,
    indexes: Arc<Vec<u64>>,
) -> Result<Ran> {
    let collection = load::configmaps(NAMESPACE);
    each(client, clients, indexes, move |i| {
        Call::post_json(collection.clone(), body(i))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_should_be_valid_and_distinct_up_to_ten_million() {
        assert_eq!(name(42), "scale-0000042");
        assert_ne!(name(999_999), name(1_000_000));
        assert!(path(1).ends_with("/namespaces/default/configmaps/scale-0000001"));
    }

    #[test]
    fn the_update_should_not_change_the_object_size() {
        // `sent` is "0" when created and "1" after the update.
        assert!(body(7).contains(r#""sent":"0""#), "{}", body(7));
    }
}
