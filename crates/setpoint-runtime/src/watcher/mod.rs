//! The watcher (client-go's reflector): a never-ending stream of a collection's complete lists
//! and changes, kept going through watch timeouts, expired resource versions and errors.
//!
//! Use [`watcher`] (or [`metadata_watcher`]) when you want the raw stream; informers
//! ([`SharedInformer`](crate::SharedInformer)) run one and keep a cache from it.
//!
//! What it does, as an explicit state machine (`machine.rs`, `list.rs`):
//! 1. **List**: a streaming list (`sendInitialEvents=true&resourceVersionMatch=NotOlderThan`,
//!    complete at the bookmark annotated `k8s.io/initial-events-end: "true"`) where the server
//!    offers it, else a paged list (`limit`/`continue`; a `410` on a continue token restarts
//!    the list). The complete set is handed out as one [`WatcherEvent::Listed`]. The first list
//!    is a consistent read (no `resourceVersion`: it reflects every write acknowledged before
//!    it); a relist asks for data not older than the last resource version seen.
//! 2. **Watch** from the list's resource version, with bookmarks, asking the server for a
//!    random timeout in [`WatcherConfig::watch_timeout`]. A watch that ends is renewed from the
//!    last resource version seen (bookmarks advance it) without relisting.
//! 3. **410 Gone** — an HTTP 410 answer to the watch request or an `ERROR` event with code
//!    410 — means the resource version left the server's window: relist (step 1) at once.
//! 4. **Errors** are yielded (for visibility), then the watcher backs off
//!    ([`WatchBackoff`]: 800 ms doubling to 30 s, jittered, reset after 2 minutes without a
//!    failure) and retries what failed: a failed list relists, a failed watch is renewed from
//!    its resource version (a relist follows only if that version is gone).
//!
//! Promises: after a `Listed`, the `Applied`/`Deleted` events that follow are exactly the
//! changes after it, in order, until the next `Listed` (which supersedes everything before
//! it: objects not in it are gone). The stream never ends on its own; drop it to stop.
//! Memory: list pages are moved into the `Listed` vector as they arrive, never kept as raw
//! responses.

mod backoff;
mod error;
mod list;
mod machine;
mod source;
mod stats;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kube::api::PartialObjectMeta;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

pub use backoff::WatchBackoff;
pub use error::WatchError;
pub(crate) use machine::Machine;
pub(crate) use source::ListWatch;
pub(crate) use stats::WatchStats;

/// How the first list (and every relist) is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Try a streaming list; if it fails (refused, broken, or ended before its final
    /// bookmark), read a paged list at once instead. Every relist tries streaming again, as
    /// client-go does.
    #[default]
    Auto,
    /// Paged lists only.
    List,
    /// Streaming lists only (retried with backoff if they fail).
    Stream,
}

/// What to watch and how.
#[derive(Debug, Clone, PartialEq)]
pub struct WatcherConfig {
    /// Only objects whose labels match this selector (`labelSelector`).
    pub label_selector: Option<String>,
    /// Only objects whose fields match this selector (`fieldSelector`).
    pub field_selector: Option<String>,
    /// Objects per page of a paged list; `None` lists everything in one response.
    pub page_size: Option<u32>,
    /// How lists are read.
    pub initial_list: InitialList,
    /// Each watch asks the server for a random timeout in `[min, max]` (whole seconds, at
    /// least 1) and is renewed from the last resource version when it ends.
    pub watch_timeout: (Duration, Duration),
    /// How long to wait after failures.
    pub backoff: WatchBackoff,
}

impl Default for WatcherConfig {
    /// Everything, pages of 500, streaming lists where offered, watches of 5 to 10 minutes,
    /// [`WatchBackoff::default`].
    fn default() -> Self {
        WatcherConfig {
            label_selector: None,
            field_selector: None,
            page_size: Some(500),
            initial_list: InitialList::Auto,
            watch_timeout: (Duration::from_secs(300), Duration::from_secs(600)),
            backoff: WatchBackoff::default(),
        }
    }
}

/// What a watcher hands out.
#[derive(Debug, Clone)]
pub enum WatcherEvent<K> {
    /// A complete list (initial or relist): the full set of objects at `resource_version`;
    /// objects not in it are gone.
    Listed {
        /// Every object, in no particular order.
        objects: Vec<K>,
        /// The resource version of the list.
        resource_version: String,
    },
    /// An object was added or modified (`ADDED` or `MODIFIED`).
    Applied(K),
    /// An object was deleted (`DELETED`), with its final state.
    Deleted(K),
}

/// Watches the collection `api` addresses (all namespaces or one): its complete lists and
/// its changes, forever.
///
/// Never ends on its own (drop it to stop). Errors are yielded for visibility; the watcher
/// then backs off (jittered) and carries on: a watch that ends normally is renewed from the
/// last resourceVersion (bookmarks advance it); 410 Gone relists.
///
/// Polling is cancel-safe: a `next()` dropped half-way (say, losing a `select!`) loses
/// nothing; the work in progress resumes at the next poll.
///
/// ```no_run
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::{watcher, WatcherConfig, WatcherEvent};
/// # async fn example(client: setpoint_runtime::Client) {
/// let mut events = std::pin::pin!(watcher(client.api::<ConfigMap>(), WatcherConfig::default()));
/// while let Some(event) = events.next().await {
///     match event {
///         Ok(WatcherEvent::Listed { objects, .. }) => println!("{} config maps", objects.len()),
///         Ok(WatcherEvent::Applied(cm)) => println!("changed: {:?}", cm.metadata.name),
///         Ok(WatcherEvent::Deleted(cm)) => println!("deleted: {:?}", cm.metadata.name),
///         Err(e) => eprintln!("{e}"),
///     }
/// }
/// # }
/// ```
pub fn watcher<K>(
    api: Api<K>,
    config: WatcherConfig,
) -> impl Stream<Item = Result<WatcherEvent<K>, WatchError>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let url = api.resource_url().to_string();
    let source = ListWatch::new(api.into_client(), url, K::metadata_api());
    Machine::new(source, config, Arc::default()).into_stream()
}

/// Like [`watcher`], listing and watching object metadata only (`PartialObjectMetadata`), for
/// memory-bounded caches.
pub fn metadata_watcher<K>(
    api: Api<K>,
    config: WatcherConfig,
) -> impl Stream<Item = Result<WatcherEvent<PartialObjectMeta<K>>, WatchError>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let url = api.resource_url().to_string();
    let source = ListWatch::<PartialObjectMeta<K>>::new(api.into_client(), url, true);
    Machine::new(source, config, Arc::default()).into_stream()
}
