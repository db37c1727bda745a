//! A real Setpoint API server inside the test process, on a memory store, with a
//! [`Client`] for it — controller-runtime's envtest without the etcd
//! and kube-apiserver binaries, started in milliseconds.
//!
//! ```no_run
//! # async fn example() -> Result<(), setpoint_testenv::TestEnvError> {
//! let env = setpoint_testenv::TestEnv::start().await?;
//! let configmaps = env.client().namespaced_api::<k8s_openapi::api::core::v1::ConfigMap>("default");
//! # let _ = configmaps;
//! # Ok(()) }
//! ```
//!
//! The server is the same code `setpoint server` runs (registry, validation, defaults, watch
//! cache), reached through the SDK's in-process transport. No controllers run in it: what a test
//! starts is all that acts. Everything stops when the [`TestEnv`] and its clients are dropped.
//!
//! Beside it, what the workspace's tests share: [`eventually`] (wait for a condition, with a
//! deadline and a message naming it) and [`Running`] (a loop run in the background and stopped
//! cleanly); with the `tls` feature, the `tls` module: a test CA and TLS client settings; with
//! the `process` feature, the `process` module: a `setpoint server` process with kubectl; the
//! `kubectl` module: which kubectl binary tests run.

mod eventually;
pub mod kubectl;
#[cfg(feature = "process")]
pub mod process;
mod running;
#[cfg(feature = "tls")]
pub mod tls;

pub use eventually::{
    eventually, eventually_blocking, eventually_blocking_within, eventually_within, Check, DEADLINE,
};
pub use running::Running;

use std::sync::Arc;

use setpoint_apiserver::Api;
use setpoint_runtime::Client;
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Store};

/// Errors starting a [`TestEnv`].
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    /// The memory store could not be opened.
    #[error("opening the memory store: {0}")]
    Store(String),
    /// The API server could not start on it.
    #[error("starting the API server: {0}")]
    Api(String),
}

/// An in-process API server and a client for it. Must be started and used within a tokio
/// runtime (the server's watch caches run as tasks on it).
pub struct TestEnv {
    api: Arc<Api>,
    client: Client,
}

impl TestEnv {
    /// Starts an API server on a fresh memory store (namespaces `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease` exist).
    pub async fn start() -> Result<TestEnv, TestEnvError> {
        Self::start_with_watch_window(10_000).await
    }

    /// Like [`TestEnv::start`], keeping only `window` recent events per resource for watches to
    /// resume from: a watch from an older resource version gets `410 Gone`, so tests can force
    /// relists.
    pub async fn start_with_watch_window(window: usize) -> Result<TestEnv, TestEnvError> {
        let store = EmbeddedStore::open(EmbeddedConfig::in_memory())
            .map_err(|e| TestEnvError::Store(e.to_string()))?;
        let store: Arc<dyn Store> = Arc::new(store);
        let api = Api::with_watch_window(store, window)
            .await
            .map_err(|e| TestEnvError::Api(e.message.clone()))?;
        let handler_api = api.clone();
        let client = Client::in_process(move |request| {
            let api = handler_api.clone();
            async move { api.handle_loopback(request).await }
        });
        Ok(TestEnv { api, client })
    }

    /// A client for this server (in-process transport).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The server itself, e.g. to serve it over HTTPS or to build more clients.
    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }
}
