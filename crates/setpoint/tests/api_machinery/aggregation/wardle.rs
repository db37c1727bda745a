//! A test aggregated API server for `wardle.example.com/v1`: HTTPS on a free loopback port
//! with a certificate from a test CA for `127.0.0.1` and `wardle.default.svc`, optionally
//! asking for a client certificate of a given CA (the front-proxy CA Setpoint publishes).
//! One thread per connection, HTTP/1.1 with keep-alive. It serves:
//!
//! - `GET /apis/wardle.example.com/v1`: its `APIResourceList` (`flunders`, namespaced);
//!   `/apis` is 404 (no aggregated discovery), so Setpoint falls back to the list;
//! - `GET /apis/wardle.example.com/v1/namespaces/{ns}/flunders[/{name}]`: a list of two
//!   flunders or one of them; with `watch=1`, a chunked stream of one `ADDED` event, then a
//!   second one 1.5 s later, then the end;
//! - `GET /apis/wardle.example.com/v1/echo`: what identified the request (`X-Remote-User`,
//!   `X-Remote-Group`s, whether `Authorization` came, the client certificate's CN);
//! - `GET /openapi/v3/apis/wardle.example.com/v1` and `GET /openapi/v2`: OpenAPI documents
//!   with the flunder's schema;
//! - `GET /apis/metrics.k8s.io/v1beta1`: a list with one resource, `wardlemetrics`, for a
//!   test where it stands in for a real metrics-server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use setpoint_testenv::tls::TestCa;

/// A running wardle server; stopped when dropped (or by [`Wardle::stop`]).
pub(crate) struct Wardle {
    address: SocketAddr,
    ca_pem: String,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
}

impl Wardle {
    /// Starts a server; with `client_ca_pem`, it asks clients for a certificate of that CA
    /// (and accepts clients without one).
    pub(crate) fn start(client_ca_pem: Option<&str>) -> Wardle {
        let ca = TestCa::new();
        let identity = ca.server_identity(&["127.0.0.1", "wardle.default.svc"]);
        let chain =
            vec![CertificateDer::from_pem_slice(identity.certificate_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca_pem {
            Some(pem) => {
                let roots = setpoint_testenv::tls::root_store(pem);
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .allow_unauthenticated()
                .build()
                .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        {
            let (stop, connections) = (stop.clone(), connections.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    connections.fetch_add(1, Ordering::AcqRel);
                    let Ok(stream) = stream else { continue };
                    let (config, stop) = (config.clone(), stop.clone());
                    std::thread::spawn(move || serve(stream, config, stop));
                }
            });
        }
        Wardle {
            address,
            ca_pem: ca.certificate_pem().to_owned(),
            stop,
            connections,
        }
    }

    /// How many connections it has accepted.
    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::Acquire)
    }

    pub(crate) fn port(&self) -> u16 {
        self.address.port()
    }

    /// Base64 of the CA that issued its certificate, for `caBundle`.
    pub(crate) fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// Stops listening (open connections end with their current request).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.address);
    }
}

impl Drop for Wardle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn flunder(name: &str) -> Value {
    json!({"apiVersion": "wardle.example.com/v1", "kind": "Flunder",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"reference": name}})
}

/// The schema of a flunder, in its OpenAPI documents.
fn flunder_schema() -> Value {
    json!({"description": "A flunder is the test object of the wardle server.", "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "description": "What the flunder is.",
                "properties": {"reference": {"type": "string", "description": "What it refers to."}}}},
        "x-kubernetes-group-version-kind": [{"group": "wardle.example.com", "kind": "Flunder", "version": "v1"}]})
}

fn serve(stream: TcpStream, config: Arc<rustls::ServerConfig>, stop: Arc<AtomicBool>) {
    let Ok(connection) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut reader = BufReader::new(rustls::StreamOwned::new(connection, stream));
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || stop.load(Ordering::Acquire) {
            return;
        }
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let (path, query) = (path.to_owned(), query.to_owned());
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut length = 0_usize;
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                }
                headers.push((name, value));
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let header = |name: &str| -> Vec<String> {
            headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .collect()
        };
        let client_cn = reader
            .get_ref()
            .conn
            .peer_certificates()
            .and_then(|certs| certs.first().cloned())
            .map(|c| common_name(&c));
        let flunders = "/apis/wardle.example.com/v1/namespaces/default/flunders";
        let answer = match path.as_str() {
            "/apis/wardle.example.com/v1" => Some(json!({"kind": "APIResourceList",
                "apiVersion": "v1", "groupVersion": "wardle.example.com/v1",
                "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": true,
                    "kind": "Flunder", "verbs": ["get", "list", "watch"], "shortNames": ["fl"]}]})),
            "/apis/wardle.example.com/v1/echo" => Some(json!({
                "user": header("x-remote-user"), "groups": header("x-remote-group"),
                "authorization": !header("authorization").is_empty(),
                "impersonation": !header("impersonate-user").is_empty(),
                "clientCertificate": client_cn})),
            "/apis/metrics.k8s.io/v1beta1" => Some(json!({"kind": "APIResourceList",
                "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
                "resources": [{"name": "wardlemetrics", "singularName": "wardlemetric",
                    "namespaced": true, "kind": "WardleMetric", "verbs": ["get", "list"]}]})),
            "/openapi/v3/apis/wardle.example.com/v1" => Some(json!({"openapi": "3.0.0",
                "info": {"title": "wardle", "version": "v1"}, "paths": {
                    "/apis/wardle.example.com/v1/namespaces/{namespace}/flunders/{name}": {"get": {
                        "x-kubernetes-action": "get",
                        "x-kubernetes-group-version-kind": {"group": "wardle.example.com", "version": "v1", "kind": "Flunder"},
                        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
                            {"$ref": "#/components/schemas/com.example.wardle.v1.Flunder"}}}}}}}},
                "components": {"schemas": {"com.example.wardle.v1.Flunder": flunder_schema()}}})),
            "/openapi/v2" => Some(json!({"swagger": "2.0",
                "info": {"title": "wardle", "version": "v1"}, "paths": {},
                "definitions": {"com.example.wardle.v1.Flunder": flunder_schema()}})),
            p if p == flunders && query.contains("watch=1") => {
                let stream = reader.get_mut();
                let _ = watch(stream);
                return;
            }
            p if p == flunders => Some(json!({"apiVersion": "wardle.example.com/v1",
                "kind": "FlunderList", "metadata": {"resourceVersion": "1"},
                "items": [flunder("f1"), flunder("f2")]})),
            p => p
                .strip_prefix(flunders)
                .and_then(|rest| rest.strip_prefix('/'))
                .filter(|name| ["f1", "f2"].contains(name))
                .map(flunder),
        };
        let (status, body) = match answer {
            Some(v) => ("200 OK", v.to_string()),
            None => (
                "404 Not Found",
                json!({"kind": "Status", "apiVersion": "v1",
                "status": "Failure", "reason": "NotFound", "code": 404})
                .to_string(),
            ),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let stream = reader.get_mut();
        if stream.write_all(head.as_bytes()).is_err()
            || stream.write_all(body.as_bytes()).is_err()
            || stream.flush().is_err()
        {
            return;
        }
    }
}

/// A watch: one event, another 1.5 s later, then the end of the chunked stream.
fn watch(stream: &mut impl Write) -> std::io::Result<()> {
    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
    let mut chunk = |event: Value| -> std::io::Result<()> {
        let line = format!("{event}\n");
        write!(stream, "{:x}\r\n{line}\r\n", line.len())?;
        stream.flush()
    };
    chunk(json!({"type": "ADDED", "object": flunder("f1")}))?;
    std::thread::sleep(Duration::from_millis(1500));
    chunk(json!({"type": "ADDED", "object": flunder("f2")}))?;
    stream.write_all(b"0\r\n\r\n")?;
    stream.flush()
}

/// The subject CN of a DER certificate (a crude scan for the CN attribute's value).
fn common_name(cert: &CertificateDer<'_>) -> String {
    // OID 2.5.4.3 (commonName) then a string tag and length.
    let der = cert.as_ref();
    let oid = [0x06, 0x03, 0x55, 0x04, 0x03];
    let mut found = String::new();
    for i in 0..der.len().saturating_sub(oid.len() + 2) {
        if der[i..i + oid.len()] == oid {
            let len = der[i + oid.len() + 1] as usize;
            let start = i + oid.len() + 2;
            if let Some(value) = der.get(start..start + len) {
                found = String::from_utf8_lossy(value).into_owned();
            }
        }
    }
    found
}
