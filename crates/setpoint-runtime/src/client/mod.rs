//! The client every controller talks to the API through, with two transports behind one type.
//!
//! - **Remote**: HTTPS to any Kubernetes API server (Setpoint's or a real cluster's), configured
//!   from a kubeconfig — the `kube` crate's client.
//!   With several API servers of one cluster, [`Client::with_failover`] tries them in turn when
//!   one cannot be reached (module `failover`).
//! - **In-process**: requests are handed straight to an API handler living in the same process
//!   (Setpoint's API server, which answers from its watch cache and registry). No socket, no TLS,
//!   no HTTP framing; the request and response are the same Kubernetes REST messages, so a
//!   controller cannot tell the two apart and runs unchanged against either.
//!
//! Both transports produce a [`kube::Client`], so the typed and dynamic APIs are `kube`'s:
//! [`Client::api`] and [`Client::namespaced_api`] for `k8s-openapi` kinds and custom types, [`Client::dynamic_api`] for
//! [`DynamicObject`]s described by an [`ApiResource`].

mod failover;
mod in_process;

use std::path::Path;

use kube::api::{ApiResource, DynamicObject};
use kube::Resource;

pub use in_process::InProcessService;

/// Errors creating a [`Client`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig could not be read or parsed.
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No configuration was found (no `KUBECONFIG`, `~/.kube/config`, or in-cluster service
    /// account).
    #[error("no Kubernetes client configuration found: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The configuration was read but a client could not be built from it.
    #[error("building the client: {0}")]
    Build(#[source] kube::Error),
    /// A failover client was asked for with no server.
    #[error("a failover client needs at least one API server URL")]
    NoServers,
}

/// Which way a [`Client`]'s requests travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Handed to an API handler in this process.
    InProcess,
    /// HTTPS to an API server.
    Remote,
}

/// A Kubernetes API client: cheap to clone, shared by every informer and controller of a process.
#[derive(Clone)]
pub struct Client {
    inner: kube::Client,
    transport: Transport,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.transport)
            .field("default_namespace", &self.inner.default_namespace())
            .finish()
    }
}

impl Client {
    /// A remote client configured from the kubeconfig file at `path` (its current context).
    pub async fn from_kubeconfig(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        Self::from_config(kubeconfig_config(path.as_ref()).await?)
    }

    /// A failover client ([`Client::with_failover`]) with the credentials of the kubeconfig at
    /// `path` (its current context) and the API servers `servers` (URLs) instead of its one.
    pub async fn from_kubeconfig_with_servers(
        path: impl AsRef<Path>,
        servers: &[http::Uri],
    ) -> Result<Client, ClientError> {
        Self::with_failover(kubeconfig_config(path.as_ref()).await?, servers)
    }

    /// A remote client configured the way `kubectl` finds its configuration: `KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account.
    pub async fn infer() -> Result<Client, ClientError> {
        let config = kube::Config::infer().await.map_err(ClientError::Infer)?;
        Self::from_config(config)
    }

    /// A remote client from a `kube` configuration.
    pub fn from_config(config: kube::Config) -> Result<Client, ClientError> {
        let inner = kube::Client::try_from(config).map_err(ClientError::Build)?;
        Ok(Client {
            inner,
            transport: Transport::Remote,
        })
    }

    /// A remote client over several API servers of one cluster (servers sharing a store and
    /// credentials): `config` gives the credentials and TLS trust, `servers` the URLs used in
    /// place of its `cluster_url`. Requests go to the server that last answered; when one
    /// cannot be reached, reads (watches included) and requests that were never sent (refused
    /// connection) are retried on the next. Writes that may have reached a dead server are not
    /// retried: their error is returned, as with one server.
    pub fn with_failover(
        config: kube::Config,
        servers: &[http::Uri],
    ) -> Result<Client, ClientError> {
        if servers.is_empty() {
            return Err(ClientError::NoServers);
        }
        let clients = servers
            .iter()
            .map(|server| {
                let mut config = config.clone();
                config.cluster_url = server.clone();
                kube::Client::try_from(config).map_err(ClientError::Build)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let namespace = config.default_namespace.clone();
        Ok(Client {
            inner: kube::Client::new(failover::FailoverService::new(clients), namespace),
            transport: Transport::Remote,
        })
    }

    /// An in-process client: every request is answered by `handler`, called directly.
    ///
    /// `handler` receives a complete Kubernetes REST request (method, path and query,
    /// headers, body) and returns the response, whose body may stream (watches). Setpoint's API
    /// server is wired in with one line:
    ///
    /// ```no_run
    /// # async fn wire(handler: impl Fn(http::Request<bytes::Bytes>) -> std::future::Ready<http::Response<String>> + Send + Sync + 'static) {
    /// // let api: Arc<setpoint_apiserver::Api> = …;
    /// // let client = Client::in_process(move |req| { let api = api.clone(); async move { api.handle(req).await } });
    /// let client = setpoint_runtime::Client::in_process(handler);
    /// # }
    /// ```
    pub fn in_process<F, Fut, B>(handler: F) -> Client
    where
        F: Fn(http::Request<bytes::Bytes>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = http::Response<B>> + Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let service = InProcessService::new(handler);
        Client {
            inner: kube::Client::new(service, "default"),
            transport: Transport::InProcess,
        }
    }

    /// How this client's requests travel.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The underlying `kube` client, for anything this SDK does not wrap.
    pub fn kube(&self) -> &kube::Client {
        &self.inner
    }

    /// A typed API for `K` across all namespaces (or for a cluster-scoped kind).
    pub fn api<K>(&self) -> kube::Api<K>
    where
        K: Resource,
        K::DynamicType: Default,
    {
        kube::Api::all(self.inner.clone())
    }

    /// A typed API for the namespaced kind `K` in one namespace.
    pub fn namespaced_api<K>(&self, namespace: &str) -> kube::Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        kube::Api::namespaced(self.inner.clone(), namespace)
    }

    /// A dynamic API for objects of `resource`, in one namespace or across all of them.
    pub fn dynamic_api(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> kube::Api<DynamicObject> {
        match namespace {
            Some(ns) => kube::Api::namespaced_with(self.inner.clone(), ns, resource),
            None => kube::Api::all_with(self.inner.clone(), resource),
        }
    }
}

/// The `kube` configuration of the kubeconfig at `path` (its current context).
async fn kubeconfig_config(path: &Path) -> Result<kube::Config, ClientError> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).map_err(|source| ClientError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| ClientError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
}
