//! What the server does with requests it will not or cannot serve: bodies over 3 MiB get
//! kube-apiserver's 413 `Status` whether or not their length is declared, a panicking handler
//! gets a 500 `Status`, garbage gets no answer but no harm; the server goes on serving.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{request, TestServer};
use http::StatusCode;
use setpoint_apiserver::{full_body, stream_body, DEFAULT_MAX_REQUEST_BODY_BYTES};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

// kube-apiserver's encoder ends every JSON body with a newline (issue 14.11a).
const TOO_LARGE: &str = concat!(
    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}"#,
    "\n"
);
const FOUR_MIB: usize = 4 * 1024 * 1024;

/// `total` bytes in 64 KiB chunks, with no declared length (HTTP/1.1 sends it chunked).
fn chunked(total: usize) -> setpoint_apiserver::Body {
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    let chunks = (0..total / chunk.len()).map(move |_| Ok(chunk.clone()));
    stream_body(futures::stream::iter(chunks))
}

#[tokio::test]
async fn a_body_over_the_limit_should_get_413_whether_or_not_its_length_is_declared() {
    let server = TestServer::start().await;
    let token = server.token();
    for body in [full_body(vec![b'x'; FOUR_MIB]), chunked(FOUR_MIB)] {
        let answer = server
            .client()
            .send(request("POST", "/echo", Some(&token), body))
            .await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.body, TOO_LARGE);
        assert_eq!(
            answer.headers[http::header::CONTENT_TYPE],
            "application/json"
        );
    }
    server.server.shutdown().await.unwrap();
}

/// A client that writes its whole body before reading (as simple clients do) must still get
/// the 413, not a reset connection, and may then reuse the connection.
#[tokio::test]
async fn a_client_sending_an_oversized_body_in_full_should_read_the_413_and_go_on() {
    let server = TestServer::start().await;
    let token = server.token();
    let mut tls = server.client().tls().await.unwrap();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {FOUR_MIB}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&vec![b'x'; FOUR_MIB]).await.unwrap();
    let next = format!(
        "GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    tls.write_all(next.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();

    let mut answers = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answers))
        .await
        .expect("answers within 10 s")
        .unwrap();
    let answers = String::from_utf8_lossy(&answers);
    let first = answers.find("HTTP/1.1 413").expect("a 413 answer");
    let second = answers
        .find("HTTP/1.1 200")
        .expect("a 200 answer on the same connection");
    assert!(first < second, "{answers}");
    assert!(answers.contains(TOO_LARGE), "{answers}");
    assert!(
        answers.ends_with("length=0 authorization=false"),
        "{answers}"
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_at_the_limit_should_reach_the_handler_whole() {
    let server = TestServer::start().await;
    let token = server.token();
    let client = server.client();
    for body in [
        full_body(vec![b'x'; DEFAULT_MAX_REQUEST_BODY_BYTES]),
        chunked(DEFAULT_MAX_REQUEST_BODY_BYTES),
    ] {
        let answer = client
            .send(request("PUT", "/echo", Some(&token), body))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.body, "length=3145728 authorization=false");
    }
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_over_the_limit_should_get_413_over_http2() {
    let server = TestServer::start().await;
    let token = server.token();
    let client = common::TestClient::new(
        server.addr(),
        server.client_config(None, &[b"h2", b"http/1.1"]),
    );
    let mut connection = client.http2().await;
    for body in [full_body(vec![b'x'; FOUR_MIB]), chunked(FOUR_MIB)] {
        let response = connection
            .send_request(request("POST", "/echo", Some(&token), body))
            .await
            .unwrap();
        let answer = common::read_answer(response).await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.body, TOO_LARGE);
    }
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_panicking_handler_should_get_a_500_status_and_the_server_should_go_on() {
    let server = TestServer::start().await;
    let token = server.token();
    let client = server.client();
    let answer = client.get("/panic", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        answer.body.contains(r#""reason":"InternalError""#)
            && answer.body.contains(r#""code":500"#),
        "{}",
        answer.body
    );
    assert_eq!(
        client.get("/version", Some(&token)).await.status,
        StatusCode::OK
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_requests_should_not_harm_the_server() {
    let server = TestServer::start().await;
    let token = server.token();

    // Plaintext HTTP on the TLS port: the handshake fails and the connection is closed.
    let mut plain = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    plain
        .write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut sink = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the server kept a plaintext connection open");
    assert!(!String::from_utf8_lossy(&sink).contains("HTTP/1.1 200"));

    // Garbage after a valid TLS handshake gets a 400 (or a close), never a hang.
    let mut tls = server.client().tls().await.unwrap();
    tls.write_all(b"\x00\x01garbage\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server kept a garbage connection open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );

    // A request head that never ends is cut off rather than buffered without bound.
    let mut tls = server.client().tls().await.unwrap();
    tls.write_all(b"GET /version HTTP/1.1\r\nX-Long: ")
        .await
        .unwrap();
    let filler = vec![b'a'; 64 * 1024];
    let mut refused = false;
    for _ in 0..64 {
        if tls.write_all(&filler).await.is_err() || tls.flush().await.is_err() {
            refused = true;
            break;
        }
    }
    if !refused {
        let mut answer = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the server kept reading an endless header");
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "{answer}"
        );
    }

    let answer = server.client().get("/version", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::OK);
    server.server.shutdown().await.unwrap();
}
