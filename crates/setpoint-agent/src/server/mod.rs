//! The agent's HTTPS endpoint, which the API server calls for `pods/log` (the kubelet's
//! `/containerLogs/{namespace}/{pod}/{container}`) and for resource metrics
//! (`/metrics/resource`, our own JSON shape, for `metrics.k8s.io`).
//!
//! Promises: TLS 1.2 or 1.3 only; every client must present a certificate issued by the CA
//! given to [`serve`] (the cluster CA; the API server presents its client certificate), or the
//! handshake fails — nothing is served to anyone else. The serving certificate is self-signed,
//! made at start (the API server does not verify it, as kube-apiserver by default does not
//! verify kubelets'). Errors are Kubernetes `Status` objects. When `shutdown` is cancelled the
//! endpoint stops accepting and drops open connections (ending followed logs). Connections
//! may be upgraded (`/exec`, `/attach`, `/portforward`: `streams.rs`).

mod clients;
mod routes;
mod streams;
#[cfg(test)]
mod tests;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Sampler;

/// ALPN protocols offered, most preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Starts the endpoint on `listen` (port 0 picks a free port), serving the logs under
/// `root_dir` and the reports of `metrics` to clients whose certificates `client_ca_pem`
/// issued, until `shutdown`. Returns the address it listens on. Fails if the CA or the address
/// cannot be used.
pub(crate) async fn serve(
    listen: SocketAddr,
    client_ca_pem: &str,
    root_dir: PathBuf,
    metrics: Arc<Sampler>,
    shim: Vec<std::ffi::OsString>,
    shutdown: CancellationToken,
) -> io::Result<SocketAddr> {
    let shim = Arc::new(shim);
    let config = tls_config(client_ca_pem)?;
    let listener = TcpListener::bind(listen).await?;
    let local = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let root = Arc::new(root_dir);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "agent endpoint: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let root = root.clone();
            let metrics = metrics.clone();
            let shim = shim.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(tls) => tls,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "agent endpoint: TLS handshake refused");
                        return;
                    }
                };
                let refused = clients::refusal(tls.get_ref().1.peer_certificates());
                if let Some(why) = &refused {
                    tracing::warn!(%peer, "agent endpoint: refusing a caller: {why}");
                }
                let service = hyper::service::service_fn(move |request| {
                    let root = root.clone();
                    let metrics = metrics.clone();
                    let shim = shim.clone();
                    let refused = refused.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(match refused {
                            Some(why) => routes::status(&setpoint_core::ApiError::forbidden(why)),
                            None => routes::handle(&root, &metrics, shim, request).await,
                        })
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                // Stream routes upgrade HTTP/1.1 connections (exec, attach, port-forward).
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    result = connection => {
                        if let Err(e) = result {
                            tracing::debug!(%peer, error = %e, "agent endpoint: connection ended");
                        }
                    }
                }
            });
        }
    });
    Ok(local)
}

/// TLS 1.3/1.2, a fresh self-signed serving certificate, client certificates required and
/// verified against `client_ca_pem`.
fn tls_config(client_ca_pem: &str) -> io::Result<Arc<ServerConfig>> {
    let invalid = |what: &str, e: &dyn std::fmt::Display| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| invalid("the client CA", &e))?;
        roots.add(cert).map_err(|e| invalid("the client CA", &e))?;
    }
    if roots.is_empty() {
        return Err(invalid("the client CA", &"no certificate in the PEM"));
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid("the client certificate verifier", &e))?;
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let names = vec![host, "localhost".to_owned(), "127.0.0.1".to_owned()];
    let cert = rcgen::generate_simple_self_signed(names)
        .map_err(|e| invalid("the serving certificate", &e))?;
    let key = PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| invalid("TLS versions", &e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .map_err(|e| invalid("the serving certificate", &e))?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
