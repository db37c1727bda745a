//! A minimal WebSocket client for `setpoint bench streams`, enough to measure what a client
//! without kubectl's start-up costs sees: the upgrade over HTTPS (HTTP/1.1, bearer token) to a
//! `pods/exec` or `pods/portforward` URL with one offered subprotocol, then RFC 6455 frames —
//! server frames read (never masked, possibly fragmented), client frames written masked.

use std::sync::Arc;

use anyhow::{bail, ensure, Context as _, Result};
use base64::Engine as _;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::Empty;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::bench::kubeconfig::Endpoint;

/// Binary message opcode.
const BINARY: u8 = 0x2;
/// Close opcode.
const CLOSE: u8 = 0x8;
/// The largest message read.
const MAX_MESSAGE: u64 = 64 * 1024 * 1024;

/// Opens WebSocket connections to one API server.
pub(super) struct WsClient {
    endpoint: Endpoint,
    tls: TlsConnector,
}

/// One open WebSocket.
pub(super) struct WebSocket {
    reader: BufReader<tokio::io::ReadHalf<TokioIo<Upgraded>>>,
    writer: BufWriter<tokio::io::WriteHalf<TokioIo<Upgraded>>>,
}

impl WsClient {
    /// A client trusting the endpoint's CA, offering only `http/1.1`.
    pub(super) fn new(endpoint: Endpoint) -> Result<WsClient> {
        let ca = CertificateDer::from_pem_slice(endpoint.ca_pem.as_bytes())
            .context("reading the CA certificate")?;
        let mut roots = RootCertStore::empty();
        roots.add(ca).context("trusting the CA certificate")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("configuring TLS")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(WsClient {
            endpoint,
            tls: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Connects (TCP, TLS, HTTP/1.1) and upgrades `GET path_and_query` to a WebSocket speaking
    /// `protocol`.
    pub(super) async fn open(&self, path_and_query: &str, protocol: &str) -> Result<WebSocket> {
        let address = self.endpoint.addr;
        let tcp = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        tcp.set_nodelay(true)
            .context("disabling Nagle's algorithm")?;
        let tls = self
            .tls
            .connect(ServerName::IpAddress(address.ip().into()), tcp)
            .await
            .context("TLS handshake")?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .context("HTTP handshake")?;
        tokio::spawn(connection.with_upgrades());
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 16]>());
        let request = Request::get(path_and_query)
            .header(header::HOST, address.to_string())
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.endpoint.token),
            )
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .header(header::SEC_WEBSOCKET_KEY, key)
            .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
            .body(Empty::<Bytes>::new())
            .context("building the upgrade request")?;
        let response = sender
            .send_request(request)
            .await
            .context("sending the upgrade request")?;
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            bail!("the upgrade was answered {}", response.status());
        }
        let chosen = response
            .headers()
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        ensure!(
            chosen == protocol,
            "the server chose subprotocol {chosen:?}, not {protocol:?}"
        );
        let upgraded = hyper::upgrade::on(response)
            .await
            .context("upgrading the connection")?;
        let (reader, writer) = tokio::io::split(TokioIo::new(upgraded));
        Ok(WebSocket {
            reader: BufReader::with_capacity(256 * 1024, reader),
            writer: BufWriter::with_capacity(256 * 1024, writer),
        })
    }
}

impl WebSocket {
    /// The next data message (fragments joined), or `None` once the server closed.
    pub(super) async fn next(&mut self) -> Result<Option<Vec<u8>>> {
        let mut message = Vec::new();
        loop {
            let mut head = [0_u8; 2];
            if self.reader.read_exact(&mut head).await.is_err() {
                return Ok(None);
            }
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0f;
            let length = match head[1] & 0x7f {
                126 => u64::from(self.reader.read_u16().await?),
                127 => self.reader.read_u64().await?,
                n => u64::from(n),
            };
            ensure!(head[1] & 0x80 == 0, "the server masked a frame");
            ensure!(length <= MAX_MESSAGE, "a {length}-byte frame");
            let mut payload = vec![0_u8; usize::try_from(length)?];
            self.reader.read_exact(&mut payload).await?;
            match opcode {
                CLOSE => return Ok(None),
                0x9 | 0xA => continue, // ping, pong: not needed for a benchmark run
                _ => message.extend_from_slice(&payload),
            }
            if fin {
                return Ok(Some(message));
            }
        }
    }

    /// Sends `channel` + `payload` as one masked binary message.
    pub(super) async fn send(&mut self, channel: u8, payload: &[u8]) -> Result<()> {
        let length = payload.len() + 1;
        let mut head = Vec::with_capacity(14);
        head.push(0x80 | BINARY);
        match length {
            0..=125 => head.push(0x80 | length as u8),
            126..=0xffff => {
                head.push(0x80 | 126);
                head.extend_from_slice(&(length as u16).to_be_bytes());
            }
            _ => {
                head.push(0x80 | 127);
                head.extend_from_slice(&(length as u64).to_be_bytes());
            }
        }
        let mask: [u8; 4] = rand::random();
        head.extend_from_slice(&mask);
        let mut body = Vec::with_capacity(length);
        body.push(channel);
        body.extend_from_slice(payload);
        for chunk in body.chunks_mut(4) {
            for (b, m) in chunk.iter_mut().zip(mask) {
                *b ^= m;
            }
        }
        self.writer.write_all(&head).await?;
        self.writer.write_all(&body).await?;
        self.writer.flush().await?;
        Ok(())
    }
}
