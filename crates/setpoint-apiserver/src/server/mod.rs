//! The API server's transport: [`serve`] loads or creates the cluster's credentials, listens
//! for TLS connections, writes the admin kubeconfig for the address it actually bound, and
//! serves HTTP/1.1 and HTTP/2 to a [`Handler`] until told to shut down. There is no plaintext
//! port.

mod connection;
mod deadline;
mod failure;
mod handler;
mod health;
pub(crate) mod impersonation;
mod request;
mod request_id;
mod upgrades;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::{CancellationToken, DropGuard};

use self::connection::{serve_connection, ConnectionContext};
use self::request::RequestContext;
use crate::pki::{Pki, PkiError};
use crate::tls::{self, TlsError};
pub(crate) use failure::failure_response;
pub(crate) use handler::body_holding;
pub use handler::{empty_body, full_body, stream_body, Body, Handler};
pub(crate) use request_id::{AuditId, ImpersonatedBy, PeerAddr};
pub(crate) use upgrades::Upgrades;

/// kube-apiserver's limit on request bodies: 3 MiB.
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// kube-apiserver's default `--request-timeout`: one minute.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a pause follows an accept error that is not about one connection (such as running
/// out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// How to run the transport.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransportConfig {
    /// The data directory; credentials go to `pki/` and the kubeconfig to `admin.kubeconfig`.
    pub data_dir: PathBuf,
    /// The address to listen on; port 0 picks a free port (see [`RunningServer::local_addr`]).
    pub listen: SocketAddr,
    /// The longest request body accepted; longer ones are answered with 413.
    pub max_request_body_bytes: usize,
    /// How long a client may take to complete the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// How long open connections may take to finish after shutdown begins before they are
    /// closed abruptly. Watches never finish by themselves, so this bounds every shutdown.
    pub shutdown_grace: Duration,
    /// How long a request may take to send its body and get the head of its answer before it
    /// is answered with 504 (kube-apiserver's `--request-timeout`). A streamed answer (watch,
    /// logs) is not cut: its head comes at once. Zero: no timeout.
    pub request_timeout: Duration,
}

impl TransportConfig {
    /// A configuration with defaults: a 3 MiB body limit, a 10 s TLS handshake timeout, a 5 s
    /// shutdown grace period and kube-apiserver's 60 s request timeout.
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> Self {
        Self {
            data_dir: data_dir.into(),
            listen,
            max_request_body_bytes: DEFAULT_MAX_REQUEST_BODY_BYTES,
            tls_handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Failure to start or run the transport.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The credentials could not be loaded, created or written.
    #[error("cannot set up the cluster's credentials")]
    Pki(#[from] PkiError),
    /// TLS could not be configured.
    #[error("cannot set up TLS")]
    Tls(#[from] TlsError),
    /// The listen address could not be bound.
    #[error("cannot listen on {address}")]
    Bind {
        /// The listen address.
        address: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A task of the server panicked.
    #[error("a server task panicked")]
    Panicked(#[source] JoinError),
}

/// Result of starting or running the transport.
pub(crate) type Result<T, E = ServeError> = std::result::Result<T, E>;

/// A server that is accepting connections. Dropping it begins a graceful shutdown, as does
/// cancelling the token given to [`serve`].
#[must_use = "dropping a RunningServer shuts the server down"]
#[derive(Debug)]
pub struct RunningServer {
    /// The address the listener is bound to.
    local_addr: SocketAddr,
    /// The admin kubeconfig, pointing at `local_addr`.
    kubeconfig_path: PathBuf,
    /// The credentials the server uses.
    pki: Arc<Pki>,
    /// The accept loop; it ends once shutdown began and every connection has closed.
    task: JoinHandle<()>,
    /// Cancels the server's own shutdown token when dropped.
    stop: DropGuard,
}

impl RunningServer {
    /// The address the server listens on (with the actual port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The admin kubeconfig, written for [`local_addr`](Self::local_addr).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The credentials the server uses.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// Waits until the server has stopped, after the token given to [`serve`] was cancelled.
    ///
    /// Not cancel-safe: dropping the returned future shuts the server down without waiting.
    pub async fn wait(self) -> Result<()> {
        let Self { task, stop, .. } = self;
        let result = task.await;
        drop(stop);
        result.map_err(ServeError::Panicked)
    }

    /// Shuts the server down gracefully and waits until it has stopped: no new connections
    /// are accepted, open ones finish their requests within the grace period, then the rest
    /// are closed.
    ///
    /// Not cancel-safe: dropping the returned future leaves the shutdown running unobserved.
    pub async fn shutdown(self) -> Result<()> {
        let Self { task, stop, .. } = self;
        stop.disarm().cancel();
        task.await.map_err(ServeError::Panicked)
    }
}

/// Starts the transport: loads or creates the credentials in `config.data_dir` (see
/// [`Pki::load_or_create`]), binds `config.listen`, writes the admin kubeconfig for the bound
/// address, logs where it listens, and serves `handler` in a background task until `shutdown`
/// is cancelled or the returned [`RunningServer`] is dropped or shut down.
///
/// Cancel-safe: dropped before it returns, it leaves no server running (files already written
/// stay). Must be called within a Tokio runtime.
pub async fn serve(
    config: TransportConfig,
    handler: Arc<dyn Handler>,
    shutdown: CancellationToken,
) -> Result<RunningServer> {
    let TransportConfig {
        data_dir,
        listen,
        max_request_body_bytes,
        tls_handshake_timeout,
        shutdown_grace,
        request_timeout,
    } = config;
    let pki = tokio::task::spawn_blocking(move || Pki::load_or_create(&data_dir, listen))
        .await
        .map_err(ServeError::Panicked)??;
    let pki = Arc::new(pki);
    handler.credentials_loaded(&pki);
    let tls = tls::server_config(&pki)?;
    let bind_error = |source| ServeError::Bind {
        address: listen,
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    let kubeconfig_path = {
        let pki = pki.clone();
        tokio::task::spawn_blocking(move || pki.write_admin_kubeconfig(local_addr))
            .await
            .map_err(ServeError::Panicked)??
    };

    let context = Arc::new(ConnectionContext {
        acceptor: TlsAcceptor::from(tls),
        http: ConnectionContext::http_builder(),
        handshake_timeout: tls_handshake_timeout,
        requests: Arc::new(RequestContext {
            handler,
            admin_token: pki.token().clone(),
            max_body: max_request_body_bytes,
            timeout: request_timeout,
            shutdown: shutdown.clone(),
            upgrades: Upgrades::default(),
        }),
    });
    let stop = shutdown.child_token();
    let task = tokio::spawn(accept_loop(listener, context, stop.clone(), shutdown_grace));
    tracing::info!(
        address = %local_addr,
        kubeconfig = %kubeconfig_path.display(),
        "API server listening (HTTPS)"
    );
    Ok(RunningServer {
        local_addr,
        kubeconfig_path,
        pki,
        task,
        stop: stop.drop_guard(),
    })
}

/// Accepts connections until `shutdown` is cancelled, then gives open connections `grace` to
/// finish and aborts the rest.
async fn accept_loop(
    listener: TcpListener,
    context: Arc<ConnectionContext>,
    shutdown: CancellationToken,
    grace: Duration,
) {
    let upgrades = context.requests.upgrades.clone();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            Some(finished) = connections.join_next(), if !connections.is_empty() => {
                if let Err(error) = finished {
                    tracing::error!(%error, "connection task failed");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_connection(
                        stream,
                        peer,
                        context.clone(),
                        shutdown.clone(),
                    ));
                }
                Err(error) if is_connection_error(&error) => {
                    tracing::debug!(%error, "a connection failed before it was accepted");
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot accept connections; pausing");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    tracing::info!(
        open = connections.len(),
        upgraded = upgrades.len(),
        "API server shutting down; letting open connections finish"
    );
    let deadline = tokio::time::Instant::now() + grace;
    let finished = tokio::time::timeout_at(deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        tracing::warn!(
            open = connections.len(),
            "closing connections still open after the grace period"
        );
        connections.shutdown().await;
    }
    // Upgraded connections (exec, attach, port-forward) left their HTTP connections behind:
    // they get what is left of the grace period too.
    upgrades.shut_down(deadline).await;
    tracing::info!("API server stopped");
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}
