//! Streaming responses (watches, logs) reach the client chunk by chunk, as the handler
//! produces them: chunked over HTTP/1.1, DATA frames over HTTP/2.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::{get, TestClient, TestServer};
use http::StatusCode;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

/// Sends three chunks one at a time, checking each arrives before the next is sent, then ends
/// the stream and checks the body ends.
async fn check_chunk_by_chunk(chunks: tokio::sync::mpsc::Sender<Bytes>, mut body: Incoming) {
    for i in 0..3 {
        let sent = Bytes::from(format!("{{\"type\":\"ADDED\",\"n\":{i}}}\n"));
        chunks.send(sent.clone()).await.unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .unwrap_or_else(|_| panic!("chunk {i} did not arrive before the next was sent"))
            .expect("a frame")
            .unwrap();
        assert_eq!(frame.into_data().unwrap(), sent);
    }
    drop(chunks);
    // HTTP/2 may end the stream with an empty DATA frame.
    loop {
        let end = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("the body ends");
        match end {
            None => break,
            Some(Ok(frame)) if frame.data_ref().is_some_and(Bytes::is_empty) => continue,
            other => panic!("unexpected frame after the end: {other:?}"),
        }
    }
}

#[tokio::test]
async fn http1_streaming_bodies_should_be_chunked_and_flushed_per_chunk() {
    let server = TestServer::start().await;
    let chunks = server.stream_chunks();
    let mut sender = server.client().http1().await;
    let response = sender
        .send_request(get("/stream", Some(&server.token())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[http::header::TRANSFER_ENCODING],
        "chunked"
    );
    assert!(!response
        .headers()
        .contains_key(http::header::CONTENT_LENGTH));
    check_chunk_by_chunk(chunks, response.into_body()).await;
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn http2_streaming_bodies_should_be_flushed_per_chunk() {
    let server = TestServer::start().await;
    let chunks = server.stream_chunks();
    let client = TestClient::new(server.addr(), server.client_config(None, &[b"h2"]));
    let mut sender = client.http2().await;
    let mut request = get("/stream", Some(&server.token()));
    *request.uri_mut() = format!("https://{}/stream", server.addr()).parse().unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), http::Version::HTTP_2);
    check_chunk_by_chunk(chunks, response.into_body()).await;
    server.server.shutdown().await.unwrap();
}
