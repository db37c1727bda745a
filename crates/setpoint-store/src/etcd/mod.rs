//! The etcd backend: the [`Store`] trait on an etcd v3 cluster, through the `etcd-client` crate.
//! Keys are stored as they are given (the same layout as the embedded store); conditional writes
//! are transactions comparing a key's `mod_revision`; watches are etcd watches with progress
//! notifications. Mapping, compaction and the differences from the embedded store:
//! `docs/design/storage.md`.
//!
//! Revisions: etcd counts its empty store as revision 1, Setpoint as revision 0. The backend
//! reports etcd's revision minus one everywhere (resource versions, create and mod revisions,
//! compaction), so the first write is revision 1 on both backends and the conformance suite holds
//! unchanged.

mod compactor;
mod config;
mod errors;
mod kv;
mod local;
mod local_cluster;
mod watch;

pub use compactor::COMPACT_REV_KEY;
pub use config::{EtcdConfig, EtcdTls};
pub use local::{LocalEtcd, LocalEtcdError, LocalEtcdTls};
pub use local_cluster::LocalEtcdCluster;

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, ConnectOptions, Identity, KvClient, TlsOptions, WatchClient,
};
use setpoint_core::Revision;
use tokio::task::JoinHandle;

use self::errors::from_client;
pub(crate) use self::errors::from_client as from_client_error;
use crate::error::{Result, StoreError};
use crate::store::{Store, WatchStream};
use crate::types::{Event, KeyValue, ListRequest, ListResult};

/// How often an HTTP/2 ping checks the connection to etcd, and how long its answer may take.
const KEEP_ALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
/// See [`KEEP_ALIVE_INTERVAL`].
const KEEP_ALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The largest gRPC message the backend accepts from etcd (a list of many objects is one).
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// The store on an etcd cluster. Cheap to clone: clones share one connection.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    kv: KvClient,
    watch: WatchClient,
    config: EtcdConfig,
    /// Whether etcd answers `RequestProgress` in order with each watch's events (see
    /// [`progress_requests_are_ordered`]); if not, watches rely on etcd's periodic progress
    /// notifications alone.
    request_progress: bool,
    /// The etcd server version reported at connect time.
    server_version: String,
    compactor: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(compactor) = self.compactor.take() {
            compactor.abort();
        }
    }
}

impl EtcdStore {
    /// Connects to the cluster and checks that it answers (within `connect_timeout` plus
    /// `request_timeout`); starts the background compactor if configured. Must be called within
    /// a Tokio runtime.
    pub async fn connect(config: EtcdConfig) -> Result<EtcdStore> {
        if config.endpoints.is_empty() {
            return Err(StoreError::InvalidArgument(
                "no etcd endpoints were given".into(),
            ));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_timeout(config.request_timeout)
            // HTTP/2 pings find a dead member under an idle watch; etcd refuses pings more
            // often than every 5 s (`--grpc-keepalive-min-time`) and closes the connection.
            .with_keep_alive(KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)
            // etcd fails requests and ends watches at once when the member has no leader,
            // instead of letting them wait for one.
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls_options(tls)?);
        }
        let client = Client::connect(&config.endpoints, Some(options))
            .await
            .map_err(|e| {
                StoreError::Unavailable(format!(
                    "cannot reach etcd at {}: {}",
                    config.endpoints.join(","),
                    from_client(e)
                ))
            })?;
        let mut maintenance = client.maintenance_client();
        let status = with_timeout(&config, maintenance.status())
            .await
            .map_err(|e| {
                StoreError::Unavailable(format!(
                    "etcd at {} does not answer: {e}",
                    config.endpoints.join(",")
                ))
            })?;
        let server_version = status.version().to_owned();
        let request_progress = progress_requests_are_ordered(&server_version);
        let kv = client
            .kv_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES);
        let watch = client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES);
        let compactor = config
            .compaction_interval
            .map(|interval| tokio::spawn(compactor::run(kv.clone(), config.clone(), interval)));
        if !request_progress {
            tracing::warn!(
                version = %server_version,
                "this etcd may answer a progress request ahead of a watch's events, so it is \
                 never asked for one: consistent reads of a resource whose watch cache is behind \
                 read etcd directly (as kube-apiserver does on such an etcd); etcd 3.4.31+ / \
                 3.5.13+ lets them be served from the cache"
            );
        }
        tracing::info!(
            endpoints = %config.endpoints.join(","),
            version = %server_version,
            request_progress,
            "connected to etcd"
        );
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                kv,
                watch,
                config,
                request_progress,
                server_version,
                compactor,
            }),
        })
    }

    /// The version of the etcd member that answered at connect time.
    #[must_use]
    pub fn server_version(&self) -> &str {
        &self.inner.server_version
    }
}

/// Whether an etcd version sends requested progress notifications through the watch stream, in
/// order with its events, and answers them for newly created watches: the fixes of etcd issues
/// 15220 and 17507, in 3.4.31, 3.5.13 and 3.6.0. Older servers may send a requested progress
/// notification ahead of events it claims were delivered, so it is never asked of them.
fn progress_requests_are_ordered(version: &str) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m >= 6,
        (m, _) => m > 3,
    }
}

fn tls_options(tls: &EtcdTls) -> Result<TlsOptions> {
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path)
            .map_err(|e| StoreError::io(format!("reading the etcd {what} {}", path.display()), e))
    };
    let mut options = TlsOptions::new();
    if let Some(ca) = &tls.ca_cert {
        options = options.ca_certificate(Certificate::from_pem(read(ca, "CA certificate")?));
    }
    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            options = options.identity(Identity::from_pem(
                read(cert, "client certificate")?,
                read(key, "client key")?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err(StoreError::InvalidArgument(
                "an etcd client certificate needs its key, and a key its certificate".into(),
            ))
        }
    }
    Ok(options)
}

/// Runs one etcd request within the configured timeout, mapping its failure.
pub(crate) async fn with_timeout<T>(
    config: &EtcdConfig,
    request: impl Future<Output = std::result::Result<T, etcd_client::Error>>,
) -> Result<T> {
    match tokio::time::timeout(config.request_timeout, request).await {
        Ok(result) => result.map_err(from_client),
        Err(_) => Err(StoreError::Unavailable(format!(
            "etcd did not answer within {:?}",
            config.request_timeout
        ))),
    }
}

/// Our revision for an etcd revision (etcd's empty store is revision 1, ours 0).
pub(crate) fn ours(etcd: i64) -> Revision {
    Revision(u64::try_from(etcd.saturating_sub(1)).unwrap_or(0))
}

/// The etcd revision for one of ours.
pub(crate) fn theirs(revision: Revision) -> Result<i64> {
    i64::try_from(revision.get())
        .ok()
        .and_then(|r| r.checked_add(1))
        .ok_or_else(|| StoreError::InvalidArgument(format!("revision {revision} is out of range")))
}

/// Our key-value for one of etcd's.
pub(crate) fn key_value(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: Bytes::copy_from_slice(kv.key()),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: ours(kv.create_revision()),
        mod_revision: ours(kv.mod_revision()),
        version: u64::try_from(kv.version()).unwrap_or(0),
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        self.inner.list(request).await
    }

    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        self.inner.count(prefix).await
    }

    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        self.inner.create(key, value).await
    }

    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        self.inner.update(key, value, expected).await
    }

    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        self.inner.delete(key, expected).await
    }

    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        watch::watch(&self.inner, prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    /// Only where progress can be requested: older servers send progress only every
    /// `--experimental-watch-progress-notify-interval` (10 minutes by default).
    fn watch_progress_is_prompt(&self) -> bool {
        self.inner.request_progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_requests_should_be_used_only_on_fixed_versions() {
        for (version, ordered) in [
            ("3.4.23", false),
            ("3.4.31", true),
            ("3.5.12", false),
            ("3.5.13", true),
            ("3.6.0", true),
            ("3.3.27", false),
            ("4.0.0", true),
            ("garbage", false),
        ] {
            assert_eq!(progress_requests_are_ordered(version), ordered, "{version}");
        }
    }

    #[test]
    fn revisions_should_map_etcd_one_to_our_zero() {
        assert_eq!(ours(1), Revision(0));
        assert_eq!(ours(8), Revision(7));
        assert_eq!(ours(0), Revision(0));
        assert_eq!(ours(-1), Revision(0));
        assert_eq!(theirs(Revision(0)).ok(), Some(1));
        assert!(theirs(Revision(u64::MAX)).is_err());
    }
}
