//! The TLS the server speaks: 1.2 and 1.3 with ALPN `h2` or `http/1.1`, never 1.1 or older.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use crate::common;

use std::time::Duration;

use common::{get, read_answer, TestClient, TestServer};
use http::StatusCode;
use setpoint_testenv::tls::client_config;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A ClientHello with legacy version `version` and no `supported_versions` extension, offering
/// one TLS 1.2 cipher suite (ECDHE-ECDSA-AES128-GCM-SHA256) with what it needs (P-256,
/// ECDSA-SHA256), so that its version is the only thing a TLS 1.2 server could object to.
fn client_hello(version: [u8; 2]) -> Vec<u8> {
    let mut body = version.to_vec();
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // session id: none
    body.extend_from_slice(&[0x00, 0x02, 0xc0, 0x2b]); // cipher suites
    body.extend_from_slice(&[0x01, 0x00]); // compression: null
    let extensions: &[u8] = &[
        0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x17, // supported groups: secp256r1
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00, // EC point formats: uncompressed
        0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03, // signature algorithms: ECDSA-SHA256
    ];
    body.extend_from_slice(&u16::try_from(extensions.len()).unwrap().to_be_bytes());
    body.extend_from_slice(extensions);
    let mut handshake = vec![0x01, 0, 0, u8::try_from(body.len()).unwrap()];
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01, 0, u8::try_from(handshake.len()).unwrap()];
    record.extend_from_slice(&handshake);
    record
}

/// Sends `hello` and returns the first record the server answers with (at most 7 bytes).
async fn first_reply(server: &TestServer, hello: &[u8]) -> Vec<u8> {
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(hello).await.unwrap();
    let mut reply = vec![0; 7];
    let mut read = 0;
    while read < reply.len() {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut reply[read..]))
            .await
            .expect("the server answers within 10 s")
            .unwrap();
        if n == 0 {
            break;
        }
        read += n;
    }
    reply.truncate(read);
    reply
}

#[tokio::test]
async fn a_tls_1_1_client_should_be_refused_with_a_protocol_version_alert() {
    let server = TestServer::start().await;
    for version in [[0x03, 0x01], [0x03, 0x02]] {
        let reply = first_reply(&server, &client_hello(version)).await;
        // A fatal (2) protocol_version (70) alert record (content type 21).
        assert_eq!(reply.len(), 7, "reply: {reply:?}");
        assert_eq!(
            (reply[0], reply[5], reply[6]),
            (21, 2, 70),
            "reply: {reply:?}"
        );
    }
    // The same hello claiming TLS 1.2 gets a handshake record (a ServerHello) instead.
    let reply = first_reply(&server, &client_hello([0x03, 0x03])).await;
    assert_eq!(reply.first(), Some(&22), "reply: {reply:?}");
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn tls_1_2_and_1_3_clients_should_negotiate_http1_or_h2_by_alpn() {
    let server = TestServer::start().await;
    let token = server.token();
    let ca = server.server.pki().ca_certificate_pem().to_owned();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
            let config = client_config(&ca, None, &[alpn], &[version]);
            let client = TestClient::new(server.addr(), config);
            let tls = client.tls().await.unwrap();
            let session = tls.get_ref().1;
            assert_eq!(session.protocol_version(), Some(version.version));
            assert_eq!(session.alpn_protocol(), Some(alpn));
            drop(tls);

            let answer = if alpn == b"h2" {
                let mut sender = client.http2().await;
                let mut request = get("/version", Some(&token));
                *request.uri_mut() = format!("https://{}/version", server.addr())
                    .parse()
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert_eq!(response.version(), http::Version::HTTP_2);
                read_answer(response).await
            } else {
                client.get("/version", Some(&token)).await
            };
            assert_eq!(answer.status, StatusCode::OK, "{version:?} {alpn:?}");
            assert_eq!(answer.body, common::VERSION_JSON);
        }
    }
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_serving_certificate_should_be_valid_for_localhost_and_loopback_addresses() {
    let server = TestServer::start().await;
    let config = server.client_config(None, &[b"http/1.1"]);
    for name in ["localhost", "127.0.0.1"] {
        let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from(name)
            .unwrap()
            .to_owned();
        tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .unwrap();
    }
    server.server.shutdown().await.unwrap();
}
