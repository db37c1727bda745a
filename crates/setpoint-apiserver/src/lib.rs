//! Setpoint's API server: the Kubernetes REST API over a [`setpoint_store::Store`].
//!
//! An [`Api`] serves the built-in kinds and those of CustomResourceDefinitions: requests are
//! routed and decoded in `handlers/`, stored by each resource's registry store
//! (`registry/store/`) under the rules of its kind's strategy (`registry/kinds/`, one file per
//! kind), and listed and watched from per-resource watch caches (`watchcache/`).
//! `ARCHITECTURE.md` at the repository root walks a request through these folders. The
//! transport ([`serve`], `server/`) is everything between a TCP socket and a [`Handler`]:
//!
//! - **Credentials** ([`Pki`]): at first start, a CA, a serving certificate, an admin client
//!   certificate and an admin bearer token are created in `DATA_DIR/pki` (mode `0700`, keys
//!   `0600`); later starts reuse them, re-issuing a leaf certificate from the same CA when it
//!   nears expiry or no longer covers the listen address.
//! - **Kubeconfig**: `DATA_DIR/admin.kubeconfig` (mode `0600`) points at the bound address,
//!   trusts the CA and authenticates with the token (context `setpoint`, the default) or the
//!   client certificate (context `setpoint-cert`).
//! - **TLS**: TLS 1.2 and 1.3 only (rustls, ring), ALPN `h2` and `http/1.1`, optional client
//!   certificates that must chain to the CA. There is no plaintext port.
//! - **Authentication** ([`User`]): a client certificate of the CA (CN = user, O = groups) or
//!   the admin token; anonymous requests get a 401 `Status`, except on `/healthz`, `/livez`,
//!   `/readyz` and their subpaths, which run their checks (`ping`, the store answering, the
//!   watch caches loaded, not shutting down) and answer `ok` or `500`.
//! - **Audit** ([`Api::enable_audit`]): kube's `audit.k8s.io/v1` policy and events, one JSON
//!   line per event, written by a thread that never blocks a request; every answer carries an
//!   `Audit-Id` header (docs/design/audit.md).
//! - **HTTP** ([`serve`]): HTTP/1.1 and HTTP/2 with hyper; bodies over 3 MiB get 413; a
//!   panicking handler gets 500; streaming response bodies are sent chunk by chunk; shutdown
//!   is graceful within a grace period.
//! - **Node agents** ([`NodeClient`]): `pods/log` is proxied to the pod's node agent over
//!   HTTPS with the admin client certificate, and `metrics.k8s.io` (`kubectl top`) is
//!   answered from the agents' resource reports; [`serve`] hands the credentials to the handler
//!   ([`Handler::credentials_loaded`]). An [`Api`] never served has none and answers 503.
//! - **API aggregation**: an APIService with a Service has its group-version proxied to that
//!   Service's server with the front-proxy client certificate (`DATA_DIR/pki/front-proxy-*`)
//!   and the user in `X-Remote-*` headers; its availability is checked every
//!   [`Api::set_apiservice_check_interval`]; every group-version served here has a local
//!   APIService (`aggregation/`).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use bytes::Bytes;
//! use setpoint_apiserver::{full_body, serve, Body, Handler, TransportConfig, User};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Hello;
//!
//! #[async_trait::async_trait]
//! impl Handler for Hello {
//!     async fn handle(&self, _request: http::Request<Bytes>, user: User) -> http::Response<Body> {
//!         http::Response::new(full_body(format!("hello, {}\n", user.name)))
//!     }
//! }
//!
//! # async fn run() -> Result<(), setpoint_apiserver::ServeError> {
//! let shutdown = CancellationToken::new();
//! let config = TransportConfig::new("/var/lib/setpoint", "127.0.0.1:6443".parse().unwrap());
//! let server = serve(config, Arc::new(Hello), shutdown.clone()).await?;
//! println!("kubectl --kubeconfig {} get --raw /", server.kubeconfig_path().display());
//! shutdown.cancel();
//! server.wait().await
//! # }
//! ```

mod admission;
mod aggregation;
mod api;
mod audit;
mod auth;
mod authz;
mod console;
mod crd;
pub mod encryption;
mod flowcontrol;

mod handlers;
pub mod identities;
mod ids;
mod kubeconfig;
mod node_client;
mod openapi;
mod pki;
mod protobuf;
mod registry;
mod request_info;
mod server;
pub mod telemetry;
mod tls;
mod watchcache;
mod webhook;

pub use aggregation::DEFAULT_CHECK_INTERVAL as DEFAULT_APISERVICE_CHECK_INTERVAL;
pub use api::{Api, ComponentCheck, MetricsRenderer};
pub use audit::{
    AuditConfig, AuditError, AuditFigures, AuditLog, Level as AuditLevel, Policy as AuditPolicy,
    DEFAULT_POLICY as DEFAULT_AUDIT_POLICY, MEGABYTE as AUDIT_MEGABYTE,
};
pub use auth::{AuthenticationConfig, User, AUTHENTICATED_GROUP, DEFAULT_SERVICE_ACCOUNT_ISSUER};
pub use authz::bench::decision_latencies as authz_decision_latencies;
pub use flowcontrol::{FlowControlFigures, FlowControlSettings};
pub use ids::new_uid;
pub use node_client::{NodeClient, NodeClientError};
pub use pki::{Pki, PkiError, ADMIN_KUBECONFIG};
pub use server::{empty_body, full_body, stream_body, Body, Handler};
pub use server::{
    serve, RunningServer, ServeError, TransportConfig, DEFAULT_MAX_REQUEST_BODY_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use tls::TlsError;

use std::sync::Arc;

impl Api {
    /// What the server has counted so far (requests, watches, store calls), for `/metrics`.
    #[must_use]
    pub fn telemetry(&self) -> telemetry::Snapshot {
        let mut snapshot = self.telemetry.snapshot();
        snapshot.caches = self.cache_figures();
        snapshot
    }

    /// Answers a request of one of the process's own clients (an in-process transport), as
    /// [`User::loopback`].
    pub async fn handle_loopback(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> http::Response<Body> {
        self.handle_as(User::loopback(), request).await
    }

    /// Answers a request of one of the process's own clients acting as `user` (a built-in
    /// loop's ServiceAccount, the scheduler, a node agent: see [`identities`]), authorized and
    /// admitted as that user's requests over HTTPS would be — `Impersonate-*` headers included:
    /// `user` must be allowed to impersonate, and the request then runs as the impersonated
    /// user (the audit log names both), as the network transport does it.
    pub async fn handle_as(
        &self,
        user: User,
        mut request: http::Request<bytes::Bytes>,
    ) -> http::Response<Body> {
        if !server::impersonation::asks(request.headers()) {
            return Handler::handle(self, request, user).await; // the loops' every request
        }
        let acting = match Handler::impersonate(self, user.clone(), request.headers()) {
            Ok(acting) => acting,
            Err(failure) => {
                let (parts, _) = request.into_parts();
                Handler::refused_by_transport(self, &parts, Some(&user), &failure);
                return server::failure_response(&failure);
            }
        };
        if acting != user {
            request
                .extensions_mut()
                .insert(server::ImpersonatedBy(user));
        }
        Handler::handle(self, request, acting).await
    }

    /// Sets what `GET /metrics` (authenticated) answers: the process's whole exposition, which
    /// includes [`Api::telemetry`] rendered by the caller. Only the first call counts.
    pub fn set_metrics_renderer(&self, render: MetricsRenderer) {
        let _ = self.metrics_renderer.set(render);
    }

    /// Serves the built-in resources from `store`, creating the initial namespaces if missing,
    /// and starts the CRD controller (every stored CRD is served before this returns). Must be
    /// called within a tokio runtime (the watch caches run as tasks).
    pub async fn new(
        store: Arc<dyn setpoint_store::Store>,
    ) -> Result<Arc<Api>, setpoint_core::ApiError> {
        Self::with_watch_window(store, watchcache::DEFAULT_WINDOW).await
    }

    /// Like [`Api::new`], keeping `window` recent events per resource for watches to resume
    /// from (a watch from an older resource version gets `410 Expired`).
    pub async fn with_watch_window(
        store: Arc<dyn setpoint_store::Store>,
        window: usize,
    ) -> Result<Arc<Api>, setpoint_core::ApiError> {
        let builtins = registry::builtin_resources(crd::definitions());
        let api = Api::build(store, window, builtins).await?;
        crd::controller::start(&api).await?;
        authz::aggregation::start(&api.registry_store_of(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
        )?);
        aggregation::start(&api).await;
        flowcontrol::start(&api).await;
        Ok(api)
    }
}

#[async_trait::async_trait]
impl Handler for Api {
    async fn handle(
        &self,
        mut request: http::Request<bytes::Bytes>,
        user: User,
    ) -> http::Response<Body> {
        // Handlers that answer for the caller (review kinds) and admission webhooks, which are
        // told who asked, find the user here. An impersonation was authorized by the transport
        // (`impersonate` below): its headers go no further.
        if server::impersonation::asks(request.headers()) {
            let names: Vec<_> = (request.headers().keys())
                .filter(|k| k.as_str().starts_with("impersonate-"))
                .cloned()
                .collect();
            for name in names {
                request.headers_mut().remove(name);
            }
        }
        request.extensions_mut().insert(user);
        // The audit log records every request, the 429s of API Priority and Fairness too (as
        // kube-apiserver's filter order has it); APF then gives a seat (or a 429) before
        // anything else is done.
        let recording = audit::start(self, &mut request);
        let admission = match flowcontrol::admit(self, &request).await {
            Ok(admission) => admission,
            Err(refused) => return audit::finish(recording, refused).await,
        };
        let wide = admission.is_wide().then(|| self.this.upgrade()).flatten();
        let response = match wide {
            Some(api) => flowcontrol::execute_wide(api, request).await,
            None => Api::handle(self, request).await,
        };
        // The audit log reads a body it needs (an error's Status, a RequestResponse object)
        // before the seats are tied to it: tied, its size is no longer known in advance.
        admission.finish(audit::finish(recording, response).await)
    }

    fn refused_by_transport(
        &self,
        request: &http::request::Parts,
        user: Option<&User>,
        failure: &setpoint_core::ApiError,
    ) {
        audit::refused(self, request, user, failure);
    }

    fn public(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Option<http::Response<Body>> {
        console::public(self, method, uri, headers)
    }

    async fn authenticate(
        &self,
        certificate_user: Option<&User>,
        headers: &http::HeaderMap,
    ) -> Option<User> {
        self.authenticate_request(certificate_user, headers)
    }

    async fn health_checks(&self, endpoint: &str) -> Vec<(String, Result<(), String>)> {
        let store = match tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.store.current_revision(),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the store did not answer within 2s".to_owned()),
        };
        let mut checks = vec![("etcd".to_owned(), store.clone())];
        if endpoint == "readyz" {
            checks.push(("etcd-readiness".to_owned(), store));
            let unsynced: Vec<String> = self
                .served()
                .stores()
                .filter(|s| !s.cache().is_ready())
                .map(|s| s.def.group_resource().to_string())
                .collect();
            let synced = if unsynced.is_empty() {
                Ok(())
            } else {
                Err(format!("watch caches not loaded: {}", unsynced.join(", ")))
            };
            checks.push(("informer-sync".to_owned(), synced));
        }
        checks
    }

    fn impersonate(
        &self,
        user: User,
        headers: &http::HeaderMap,
    ) -> Result<User, setpoint_core::ApiError> {
        server::impersonation::impersonate(self.authorizer().as_ref(), user, headers)
    }

    fn credentials_loaded(&self, pki: &Pki) {
        self.load_authenticator(pki);
        aggregation::credentials_loaded(self, pki);
        match NodeClient::from_pki(pki) {
            Ok(client) => {
                self.set_node_client(client);
            }
            Err(error) => {
                tracing::warn!(%error, "pods/log and metrics.k8s.io will be unavailable: the admin certificate cannot be used to call node agents");
            }
        }
    }
}
