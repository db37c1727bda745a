//! The `httpGet` probe's request: a plain HTTP/1.1 GET, over TLS for HTTPS without verifying
//! the server's certificate (as the kubelet does), judged by its status line alone.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::action::join_host_port;

/// The longest status line read.
const MAX_STATUS_LINE: usize = 4096;

/// HTTP or HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scheme {
    Http,
    Https,
}

/// GETs `path` from `host:port`; `Ok` for a status of 200–399.
pub(super) async fn http_get(
    scheme: Scheme,
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> Result<(), String> {
    let authority = join_host_port(host, port);
    let url = match scheme {
        Scheme::Http => format!("http://{authority}{path}"),
        Scheme::Https => format!("https://{authority}{path}"),
    };
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("Get {url:?}: dial tcp {authority}: {e}"))?;
    let request = request(&authority, path, headers);
    let status = match scheme {
        Scheme::Http => exchange(tcp, &request).await,
        Scheme::Https => {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| format!("Get {url:?}: invalid host: {e}"))?;
            let config = insecure_client_config().map_err(|e| format!("Get {url:?}: {e}"))?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("Get {url:?}: TLS handshake: {e}"))?;
            exchange(tls, &request).await
        }
    }
    .map_err(|e| format!("Get {url:?}: {e}"))?;
    if (200..400).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {status}"))
    }
}

fn request(authority: &str, path: &str, headers: &[(String, String)]) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut out = format!("GET {path} HTTP/1.1\r\n");
    if !has("host") {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    if !has("user-agent") {
        out.push_str("User-Agent: kube-probe/1.33\r\n");
    }
    if !has("accept") {
        out.push_str("Accept: */*\r\n");
    }
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// Sends `request` and reads the response's status code.
async fn exchange(
    mut io: impl AsyncRead + AsyncWrite + Unpin,
    request: &[u8],
) -> Result<u16, String> {
    io.write_all(request).await.map_err(|e| e.to_string())?;
    io.flush().await.map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    let mut buf = [0u8; 512];
    while !line.windows(2).any(|w| w == b"\r\n") {
        if line.len() > MAX_STATUS_LINE {
            return Err("malformed HTTP response: status line too long".to_owned());
        }
        let n = io.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("EOF before the response's status line".to_owned());
        }
        line.extend_from_slice(&buf[..n]);
    }
    parse_status(&line).ok_or_else(|| "malformed HTTP response".to_owned())
}

/// The code of a `HTTP/1.x NNN reason` status line.
fn parse_status(response: &[u8]) -> Option<u16> {
    let mut parts = response.split(|b| *b == b' ');
    let version = parts.next()?;
    if !version.starts_with(b"HTTP/") {
        return None;
    }
    let code = parts.next()?;
    let code = code.strip_suffix(b"\r\n").unwrap_or(code);
    std::str::from_utf8(code).ok()?.parse().ok()
}

fn insecure_client_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts any server certificate (checking only that the handshake is signed by its key),
/// as the kubelet's HTTPS probes do.
#[derive(Debug)]
pub(crate) struct AnyServer(pub(crate) Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_status_should_read_the_code() {
        assert_eq!(parse_status(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(parse_status(b"HTTP/1.0 500\r\n"), Some(500));
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
    }

    #[test]
    fn request_should_let_probe_headers_replace_the_defaults() {
        let text = request("h:1", "/x", &[("Host".to_owned(), "example".to_owned())]);
        let text = String::from_utf8(text).expect("ascii");
        assert!(text.starts_with("GET /x HTTP/1.1\r\n"));
        assert!(text.contains("Host: example\r\n"));
        assert!(!text.contains("Host: h:1"));
        assert!(text.contains("User-Agent: kube-probe/"));
    }
}
