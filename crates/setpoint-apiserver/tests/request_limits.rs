//! What the server does with requests it will not or cannot serve: bodies over 3 MiB get
//! kube-apiserver's 413 `Status` whether or not their length is declared, a request target over
//! 64 KiB gets 414, a request that takes longer than the request timeout to send its body or
//! get its answer gets kube-apiserver's 504 `Status` (a streamed answer is not cut), a
//! panicking handler gets a 500 `Status`, garbage gets no answer but no harm; the server goes
//! on serving.

use crate::common;

use std::time::{Duration, Instant};

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

const TIMEOUT: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}
"#;

/// `/echo?q=xxx…`, `len` bytes long.
fn long_target(len: usize) -> String {
    let mut target = "/echo?q=".to_owned();
    target.push_str(&"x".repeat(len - target.len()));
    target
}

#[tokio::test]
async fn a_long_url_should_be_served_or_get_414_never_a_dropped_connection() {
    // Regression (issue 14.6): over HTTP/2 a request whose headers passed 16 KiB (a long URL)
    // lost its whole connection without an answer.
    let server = TestServer::start().await;
    let token = server.token();
    let h2 = common::TestClient::new(server.addr(), server.client_config(None, &[b"h2"]));
    let mut connection = h2.http2().await;
    for _ in 0..2 {
        let long = request("GET", &long_target(60_000), Some(&token), full_body(""));
        let response = connection.send_request(long).await;
        let answer = common::read_answer(response.expect("an answer to a 60 KB URL")).await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    let answer = server
        .client()
        .send(request(
            "GET",
            &long_target(60_000),
            Some(&token),
            full_body(""),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::OK);

    // Past 64 KiB (hyper's limit; the `http` crate cannot represent longer ones) HTTP/1.1 gets
    // a 414.
    let mut tls = server.client().tls().await.unwrap();
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n",
        long_target(100_000)
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer))
        .await
        .expect("answered within 10 s")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 414"), "{answer}");
    server.server.shutdown().await.unwrap();
}

/// A server whose request timeout is `timeout`.
async fn server_with_request_timeout(timeout: Duration) -> TestServer {
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    TestServer::start_in(data_dir, |config| config.request_timeout = timeout).await
}

#[tokio::test]
async fn a_body_sent_slowly_should_get_504_after_the_request_timeout() {
    // Regression (issue 14.6): a client sending its body one byte per second held its request
    // (and a task) for as long as it liked.
    let server = server_with_request_timeout(Duration::from_secs(2)).await;
    let token = server.token();
    let mut tls = server.client().tls().await.unwrap();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 1000\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    let started = Instant::now();
    let (mut reader, mut writer) = tokio::io::split(tls);
    let trickle = tokio::spawn(async move {
        for _ in 0..30 {
            if writer.write_all(b"x").await.is_err() || writer.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer))
        .await
        .expect("answered and closed within 10 s")
        .ok();
    let elapsed = started.elapsed();
    trickle.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(answer.ends_with(TIMEOUT), "{answer}");
    assert!(elapsed >= Duration::from_millis(1900), "{elapsed:?}");
    assert_eq!(
        server.client().get("/version", Some(&token)).await.status,
        StatusCode::OK
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_slow_answer_should_get_504_but_a_stream_should_outlive_the_request_timeout() {
    // Regression (issue 14.6): requests had no time limit. Watches and followed logs must keep
    // theirs open, though.
    let server = server_with_request_timeout(Duration::from_secs(1)).await;
    let token = server.token();
    let started = Instant::now();
    let answer = server.client().get("/slow", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.body, TIMEOUT);
    let h2 = common::TestClient::new(server.addr(), server.client_config(None, &[b"h2"]));
    let response = h2
        .http2()
        .await
        .send_request(common::get("/slow", Some(&token)))
        .await
        .unwrap();
    let answer = common::read_answer(response).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.body, TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(10));

    let chunks = server.stream_chunks();
    let mut sender = server.client().http1().await;
    let response = sender
        .send_request(common::get("/stream", Some(&token)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let producer = tokio::spawn(async move {
        for i in 0..3 {
            tokio::time::sleep(Duration::from_millis(800)).await;
            chunks
                .send(Bytes::from(format!("chunk {i}\n")))
                .await
                .unwrap();
        }
    });
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        http_body_util::BodyExt::collect(response.into_body()),
    )
    .await
    .expect("the stream ends")
    .expect("the stream is not cut")
    .to_bytes();
    producer.await.unwrap();
    assert_eq!(&body[..], b"chunk 0\nchunk 1\nchunk 2\n");
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_timeout_shorter_than_the_servers_should_apply() {
    // kube-apiserver honours `?timeout=` (kubectl's `--request-timeout`) below its own.
    let server = TestServer::start().await;
    let token = server.token();
    let started = Instant::now();
    let answer = server.client().get("/slow?timeout=1s", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.body, TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(10));
    let answer = server
        .client()
        .get("/echo?timeout=soon", Some(&token))
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer.body.contains(
            r#"invalid timeout specified in the request URL - time: invalid duration \"soon\""#
        ),
        "{}",
        answer.body
    );
    let answer = server.client().get("/echo?timeout=32s", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::OK);
    server.server.shutdown().await.unwrap();
}
