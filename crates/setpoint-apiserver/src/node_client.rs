//! How the API server calls node agents (what kube-apiserver calls the kubelet client): HTTPS
//! to a Node's `InternalIP` and `status.daemonEndpoints.kubeletEndpoint.Port`, presenting the
//! API server's client certificate (the admin certificate of the cluster PKI, which agents
//! accept because the cluster CA issued it).
//!
//! The agent's serving certificate is NOT verified: agents make a self-signed one at start,
//! and kube-apiserver by default does not verify kubelets' serving certificates either
//! (`--kubelet-certificate-authority` is unset). The channel is encrypted and the agent
//! authenticates the API server, but a machine impersonating a node's address could serve
//! forged logs. Verifying agents (a CA-signed serving certificate per node) is future work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;

use crate::pki::Pki;

/// How long connecting, the TLS handshake and the response's head may take together.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to a node agent failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeClientError {
    /// The client certificate or key is unusable.
    #[error("the client credentials are unusable: {0}")]
    Credentials(String),
    /// The agent could not be reached or did not answer.
    #[error("calling the node agent at {address}: {message}")]
    Unreachable {
        /// The agent's address.
        address: SocketAddr,
        /// What went wrong.
        message: String,
    },
}

/// Calls node agents over HTTPS with a client certificate. Cheap to clone.
#[derive(Clone)]
pub struct NodeClient {
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for NodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeClient").finish_non_exhaustive()
    }
}

impl NodeClient {
    /// A client presenting the certificate `cert_pem` (with its chain, if any) and the key
    /// `key_pem`.
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<NodeClient, NodeClientError> {
        let credentials = |e: &dyn std::fmt::Display| NodeClientError::Credentials(e.to_string());
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| credentials(&e))?;
        if chain.is_empty() {
            return Err(credentials(&"no certificate in the PEM"));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| credentials(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| credentials(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(UnverifiedAgent(provider)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| credentials(&e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(NodeClient {
            tls: Arc::new(config),
        })
    }

    /// A client presenting the cluster's admin client certificate.
    pub fn from_pki(pki: &Pki) -> Result<NodeClient, NodeClientError> {
        NodeClient::new(pki.admin_certificate_pem(), pki.admin_key_pem())
    }

    /// Sends `GET path_and_query` to the agent at `address` and returns the response once its
    /// head has arrived; the body streams as the agent sends it, and dropping it closes the
    /// connection. Cancel-safe.
    pub(crate) async fn get(
        &self,
        address: SocketAddr,
        path_and_query: &str,
    ) -> Result<Response<Incoming>, NodeClientError> {
        let request = Request::get(path_and_query)
            .body(Empty::<Bytes>::new())
            .map_err(|e| NodeClientError::Unreachable {
                address,
                message: format!("building the request: {e}"),
            })?;
        self.send(address, request).await
    }

    /// Sends `request` (its `Host` set to `address`, its other headers as given — an upgrade
    /// request's `Connection` and `Upgrade` included) to the agent at `address` over a new
    /// HTTP/1.1 connection that supports upgrades, and returns the response once its head has
    /// arrived: after a `101`, `hyper::upgrade::on(response)` is the agent's side of the
    /// upgraded connection. Cancel-safe.
    pub(crate) async fn send(
        &self,
        address: SocketAddr,
        mut request: Request<Empty<Bytes>>,
    ) -> Result<Response<Incoming>, NodeClientError> {
        let unreachable = |message: String| NodeClientError::Unreachable { address, message };
        let host = HeaderValue::from_str(&address.to_string())
            .map_err(|e| unreachable(format!("building the request: {e}")))?;
        request.headers_mut().insert(http::header::HOST, host);
        let exchange = async {
            let tcp = TcpStream::connect(address)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot disable Nagle's algorithm");
            }
            let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(ServerName::IpAddress(address.ip().into()), tcp)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| format!("HTTP handshake: {e}"))?;
            tokio::spawn(async move {
                if let Err(e) = connection.with_upgrades().await {
                    tracing::debug!(error = %e, "node agent connection ended");
                }
            });
            sender
                .send_request(request)
                .await
                .map_err(|e| format!("request: {e}"))
        };
        match tokio::time::timeout(RESPONSE_TIMEOUT, exchange).await {
            Ok(result) => result.map_err(unreachable),
            Err(_) => Err(unreachable(format!(
                "no response within {}s",
                RESPONSE_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// Accepts the agent's certificate without verifying it (see the module docs), checking only
/// that the handshake is signed by its key.
/// Also what an APIService with `insecureSkipTLSVerify` is called with (`aggregation/`).
#[derive(Debug)]
pub(crate) struct UnverifiedAgent(pub(crate) Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for UnverifiedAgent {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
