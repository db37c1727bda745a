//! Settings of the etcd backend: where the cluster is, how to authenticate to it, and the limits
//! and intervals the backend works with.

use std::path::PathBuf;
use std::time::Duration;

/// How an [`EtcdStore`](super::EtcdStore) connects to etcd and behaves on it.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    /// Client URLs of the cluster's members (`http://host:port` or `https://host:port`).
    pub endpoints: Vec<String>,
    /// Client TLS: the CA that signed the members' certificates and this client's certificate.
    pub tls: Option<EtcdTls>,
    /// Longest wait for one request (a read, a write or a watch's creation). A request that
    /// takes longer fails with `StoreError::Unavailable`: a lost etcd never hangs the server.
    pub request_timeout: Duration,
    /// Longest wait for a connection to a member.
    pub connect_timeout: Duration,
    /// Largest value accepted. etcd refuses requests over its `--max-request-bytes` (1.5 MiB by
    /// default); the default here leaves room under it for the key and the transaction.
    pub max_value_bytes: usize,
    /// How often the background compactor runs; `None` leaves compaction to
    /// [`Store::compact`](crate::Store::compact) (and to whatever else compacts the cluster).
    /// Each run compacts up to the revision the previous run saw, as kube-apiserver does, and
    /// several servers on one cluster take turns through `/registry/compact_rev_key`.
    pub compaction_interval: Option<Duration>,
    /// How often a watch asks etcd for a progress notification, on etcd versions that answer
    /// such requests in order with the watch's events (see `docs/design/storage.md`). A
    /// consistent list of a resource nobody writes waits up to this long for its watch cache.
    pub progress_interval: Duration,
}

/// Client TLS settings: PEM files.
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    /// The CA certificate to verify members with (`--etcd-cacert`); `None` uses no extra root
    /// and fails against a private CA.
    pub ca_cert: Option<PathBuf>,
    /// This client's certificate (`--etcd-cert`), for clusters that require client certificates.
    pub client_cert: Option<PathBuf>,
    /// The key of `client_cert` (`--etcd-key`).
    pub client_key: Option<PathBuf>,
}

impl EtcdConfig {
    /// The defaults, for a cluster at `endpoints`.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            tls: None,
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_value_bytes: (3 << 19) - (16 << 10),
            compaction_interval: Some(Duration::from_secs(300)),
            progress_interval: Duration::from_millis(100),
        }
    }

    /// Turns automatic compaction off (tests that compare with a model compact by hand).
    #[must_use]
    pub fn without_auto_compaction(mut self) -> Self {
        self.compaction_interval = None;
        self
    }
}
