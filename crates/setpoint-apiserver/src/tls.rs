//! TLS for the API server: rustls with the ring provider, TLS 1.3 and 1.2 only (anything older
//! fails the handshake), ALPN `h2` then `http/1.1`. Client certificates are requested but
//! optional: a client that presents one must present one issued by the cluster CA for client
//! authentication, or the handshake fails; a client that presents none goes on to bearer-token
//! authentication.

use std::sync::Arc;

use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};

use crate::pki::Pki;

/// ALPN protocols offered, most preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Failure to build the TLS configuration from the cluster's credentials.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA certificate was rejected as a trust anchor.
    #[error("the CA certificate cannot be used to verify client certificates")]
    TrustAnchor(#[source] rustls::Error),
    /// The client certificate verifier could not be built.
    #[error("cannot build the client certificate verifier")]
    Verifier(#[source] VerifierBuilderError),
    /// The protocol versions or the serving certificate and key were rejected.
    #[error("cannot configure the TLS server")]
    Server(#[source] rustls::Error),
}

/// The rustls server configuration for `pki`'s serving certificate.
pub(crate) fn server_config(pki: &Pki) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots
        .add(pki.ca_der().clone())
        .map_err(TlsError::TrustAnchor)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(TlsError::Verifier)?;
    let (chain, key) = pki.serving_identity();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Server)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(TlsError::Server)?;
    config.alpn_protocols = ALPN.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(Arc::new(config))
}
