//! What the transport's integration tests share: a test [`Handler`], a server on
//! `127.0.0.1:0` in a temporary data directory, and a TLS + HTTP client trusting its CA.
// Each test module uses a subset of these helpers.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use setpoint_apiserver::{
    full_body, serve, stream_body, Body, Handler, RunningServer, TransportConfig, User,
};
use setpoint_testenv::tls::client_config;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

/// What the test handler answers to `GET /version`, shaped like kube-apiserver's.
pub(crate) const VERSION_JSON: &str = r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"0000000000000000000000000000000000000000","gitTreeState":"clean","buildDate":"2025-04-23T00:00:00Z","goVersion":"go1.24.2","compiler":"gc","platform":"linux/amd64"}"#;

/// A handler for tests:
/// - `/version`: [`VERSION_JSON`];
/// - `/whoami`: `name` then the groups, one a line;
/// - `/echo`: the request body's length and whether an `Authorization` header reached it;
/// - `/panic`: panics;
/// - `/slow`: answers after 30 s;
/// - `/stream`: streams the chunks the test sends through [`TestServer::stream_chunks`].
#[derive(Default)]
pub(crate) struct TestHandler {
    stream: Mutex<Option<mpsc::Receiver<Bytes>>>,
}

#[async_trait::async_trait]
impl Handler for TestHandler {
    async fn handle(&self, request: Request<Bytes>, user: User) -> Response<Body> {
        let mut response = match request.uri().path() {
            "/version" => Response::new(full_body(VERSION_JSON)),
            "/whoami" => Response::new(full_body(format!(
                "{}\n{}\n",
                user.name,
                user.groups.join("\n")
            ))),
            "/echo" => Response::new(full_body(format!(
                "length={} authorization={}",
                request.body().len(),
                request.headers().contains_key(http::header::AUTHORIZATION)
            ))),
            "/panic" => panic!("test handler asked to panic"),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Response::new(full_body("slow"))
            }
            "/stream" => {
                let receiver = self.stream.lock().unwrap().take();
                let Some(receiver) = receiver else {
                    return status(StatusCode::CONFLICT);
                };
                let chunks = futures::stream::unfold(receiver, |mut receiver| async move {
                    let chunk = receiver.recv().await?;
                    Some((Ok(chunk), receiver))
                });
                Response::new(stream_body(chunks))
            }
            _ => return status(StatusCode::NOT_FOUND),
        };
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn status(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(full_body(""));
    *response.status_mut() = code;
    response
}

/// A server started for one test; dropping it shuts the server down.
pub(crate) struct TestServer {
    pub(crate) server: RunningServer,
    pub(crate) handler: Arc<TestHandler>,
    pub(crate) data_dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` in a new temporary data directory.
    pub(crate) async fn start() -> Self {
        let data_dir = tempfile::tempdir().unwrap();
        Self::start_in(data_dir, |_| {}).await
    }

    /// Starts a server in `data_dir`, with `configure` applied to the configuration.
    pub(crate) async fn start_in(
        data_dir: tempfile::TempDir,
        configure: impl FnOnce(&mut TransportConfig),
    ) -> Self {
        let mut config = TransportConfig::new(data_dir.path(), "127.0.0.1:0".parse().unwrap());
        configure(&mut config);
        let handler = Arc::new(TestHandler::default());
        let server = serve(config, handler.clone(), CancellationToken::new())
            .await
            .unwrap();
        Self {
            server,
            handler,
            data_dir,
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub(crate) fn token(&self) -> String {
        self.server.pki().admin_token().to_owned()
    }

    /// A sender whose chunks the next `/stream` response sends.
    pub(crate) fn stream_chunks(&self) -> mpsc::Sender<Bytes> {
        let (sender, receiver) = mpsc::channel(4);
        *self.handler.stream.lock().unwrap() = Some(receiver);
        sender
    }

    /// A client trusting this server's CA, with no client certificate.
    pub(crate) fn client(&self) -> TestClient {
        TestClient::new(self.addr(), self.client_config(None, &[b"http/1.1"]))
    }

    /// A client configuration trusting this server's CA, offering `alpn`, presenting
    /// `identity` (certificate PEM, key PEM) if given.
    pub(crate) fn client_config(
        &self,
        identity: Option<(&str, &str)>,
        alpn: &[&[u8]],
    ) -> Arc<ClientConfig> {
        client_config(
            self.server.pki().ca_certificate_pem(),
            identity,
            alpn,
            &[&rustls::version::TLS13, &rustls::version::TLS12],
        )
    }
}

/// Opens TLS connections to a test server and sends requests over them.
pub(crate) struct TestClient {
    addr: SocketAddr,
    config: Arc<ClientConfig>,
}

/// A response with its body read in full.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl TestClient {
    pub(crate) fn new(addr: SocketAddr, config: Arc<ClientConfig>) -> Self {
        Self { addr, config }
    }

    /// Completes a TLS handshake.
    pub(crate) async fn tls(&self) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let name = ServerName::IpAddress(self.addr.ip().into());
        TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
    }

    /// An HTTP/1.1 connection.
    pub(crate) async fn http1(&self) -> hyper::client::conn::http1::SendRequest<Body> {
        let io = TokioIo::new(self.tls().await.unwrap());
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(connection);
        sender
    }

    /// An HTTP/2 connection (the configuration must offer ALPN `h2`).
    pub(crate) async fn http2(&self) -> hyper::client::conn::http2::SendRequest<Body> {
        let tls = self.tls().await.unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(connection);
        sender
    }

    /// Sends one request on a new HTTP/1.1 connection and reads the whole answer.
    pub(crate) async fn send(&self, request: Request<Body>) -> Answer {
        let mut sender = self.http1().await;
        let response = sender.send_request(request).await.unwrap();
        read_answer(response).await
    }

    /// `GET path`, with `token` as bearer token if given.
    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        self.send(get(path, token)).await
    }
}

/// A `GET path` request, with `token` as bearer token if given.
pub(crate) fn get(path: &str, token: Option<&str>) -> Request<Body> {
    request("GET", path, token, full_body(""))
}

/// A request for `path` with `body`, with `token` as bearer token if given.
pub(crate) fn request(method: &str, path: &str, token: Option<&str>, body: Body) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, "127.0.0.1");
    if let Some(token) = token {
        builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    builder.body(body).unwrap()
}

/// Reads a whole response.
pub(crate) async fn read_answer(response: Response<Incoming>) -> Answer {
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(10), body.collect())
        .await
        .expect("response body within 10 s")
        .unwrap()
        .to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}
