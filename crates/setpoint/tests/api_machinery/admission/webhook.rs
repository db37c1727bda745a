//! A webhook server for the admission tests: HTTPS on a free loopback port with a certificate
//! from a test CA (what the configurations' `caBundle` trusts), one thread per connection
//! (connections are kept alive, as the API server reuses them). Each path behaves one way:
//!
//! - `/allow`: allows;
//! - `/deny`: denies objects whose name starts with `bad` (code 403, `<kind> <name> is not
//!   welcome`);
//! - `/label`: allows, patching in the label `admitted: "yes"`;
//! - `/warn`: allows with a warning;
//! - `/slow`: answers after 5 s;
//! - `/garbage`: answers something that is not a review.
//!
//! Every review received is recorded with its path.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use setpoint_testenv::tls::TestCa;

/// The warning `/warn` returns.
pub(super) const WARNING: &str = "configmaps here are watched closely";

type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// What the server answers to a review posted to a path.
pub(crate) type Answer = fn(&str, &Value) -> String;

/// A running webhook server; stopped when dropped.
pub(crate) struct Webhooks {
    address: SocketAddr,
    ca_pem: String,
    received: Received,
    stop: Arc<AtomicBool>,
}

impl Webhooks {
    pub(super) fn start() -> Webhooks {
        Webhooks::start_with(answer)
    }

    /// A server whose answer to a review posted to a path is `answer(path, review)`.
    pub(crate) fn start_with(answer: Answer) -> Webhooks {
        let ca = TestCa::new();
        // Also valid for the Service the tests put in front of it (`hook` in `default`).
        let identity = ca.server_identity(&["127.0.0.1", "hook.default.svc"]);
        let chain =
            vec![CertificateDer::from_pem_slice(identity.certificate_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let received: Received = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (received, stop) = (received.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let (config, received) = (config.clone(), received.clone());
                    std::thread::spawn(move || serve(stream, config, received, answer));
                }
            });
        }
        Webhooks {
            address,
            ca_pem: ca.certificate_pem().to_owned(),
            received,
            stop,
        }
    }

    /// The port it listens on.
    pub(super) fn port(&self) -> u16 {
        self.address.port()
    }

    /// The URL of `path` on this server.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.address)
    }

    /// The CA bundle (base64 of the CA's PEM) for configurations.
    pub(crate) fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The `request`s of the reviews received on `path`, in order.
    pub(crate) fn requests(&self, path: &str) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r["request"].clone())
            .collect()
    }
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

fn serve(stream: TcpStream, config: Arc<rustls::ServerConfig>, received: Received, answer: Answer) {
    let Ok(connection) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut reader = BufReader::new(rustls::StreamOwned::new(connection, stream));
    loop {
        let mut path = String::new();
        let mut length = 0_usize;
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(target) = line.split_whitespace().nth(1) {
            path = target.split('?').next().unwrap_or_default().to_owned();
        }
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
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        received
            .lock()
            .unwrap()
            .push((path.clone(), review.clone()));
        let answer = answer(&path, &review);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            answer.len()
        );
        let stream = reader.get_mut();
        if stream.write_all(head.as_bytes()).is_err()
            || stream.write_all(answer.as_bytes()).is_err()
            || stream.flush().is_err()
        {
            return;
        }
    }
}

fn answer(path: &str, review: &Value) -> String {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let object = if request["object"].is_null() {
        &request["oldObject"]
    } else {
        &request["object"]
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let kind = request["kind"]["kind"]
        .as_str()
        .unwrap_or("object")
        .to_lowercase();
    let response = match path {
        "/deny" if name.starts_with("bad") => json!({
            "uid": uid, "allowed": false,
            "status": {"code": 403, "message": format!("{kind} {name} is not welcome")},
        }),
        "/label" => {
            let patch = if object["metadata"]["labels"].is_object() {
                json!([{"op": "add", "path": "/metadata/labels/admitted", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"admitted": "yes"}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "/warn" => json!({"uid": uid, "allowed": true, "warnings": [WARNING]}),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(5));
            json!({"uid": uid, "allowed": true})
        }
        "/garbage" => return "this is not a review".to_owned(),
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
        .to_string()
}
