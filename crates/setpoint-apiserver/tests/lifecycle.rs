//! Starting, stopping and restarting the server: a restart keeps every credential and rewrites
//! the kubeconfig for the new address; shutdown lets requests in flight finish within the
//! grace period, cuts off the rest, and leaves nothing listening.

use crate::common;

use std::time::{Duration, Instant};

use common::{get, TestServer};
use http::StatusCode;
use http_body_util::BodyExt as _;

fn server_line(kubeconfig: &str) -> &str {
    kubeconfig
        .lines()
        .find(|line| line.trim_start().starts_with("server:"))
        .expect("a server line")
}

async fn assert_not_listening(addr: std::net::SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "{addr} still accepts connections"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_restart_should_keep_credentials_and_point_the_kubeconfig_at_the_new_port() {
    let first = TestServer::start().await;
    let old_client = first.client();
    let token = first.token();
    let ca = first.server.pki().ca_certificate_pem().to_owned();
    let first_addr = first.addr();
    let kubeconfig_path = first.server.kubeconfig_path().to_owned();
    let before = std::fs::read_to_string(&kubeconfig_path).unwrap();
    assert!(server_line(&before).contains(&first_addr.to_string()));
    let TestServer {
        server, data_dir, ..
    } = first;
    server.shutdown().await.unwrap();
    assert_not_listening(first_addr).await;

    let second = TestServer::start_in(data_dir, |_| {}).await;
    assert_eq!(second.token(), token);
    assert_eq!(second.server.pki().ca_certificate_pem(), ca);
    assert_eq!(second.server.kubeconfig_path(), kubeconfig_path);
    let after = std::fs::read_to_string(&kubeconfig_path).unwrap();
    assert!(server_line(&after).contains(&second.addr().to_string()));
    // A client set up for the first run still trusts the second one.
    let client = common::TestClient::new(second.addr(), second.client_config(None, &[b"http/1.1"]));
    assert_eq!(
        client.get("/version", Some(&token)).await.status,
        StatusCode::OK
    );
    drop(old_client);
    second.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_should_let_a_request_in_flight_finish() {
    let server = TestServer::start_in(tempfile::tempdir().unwrap(), |config| {
        config.shutdown_grace = Duration::from_secs(30);
    })
    .await;
    let addr = server.addr();
    let chunks = server.stream_chunks();
    let mut sender = server.client().http1().await;
    let response = sender
        .send_request(get("/stream", Some(&server.token())))
        .await
        .unwrap();
    let mut body = response.into_body();

    let started = Instant::now();
    let shutdown = tokio::spawn(server.server.shutdown());
    assert_not_listening(addr).await;
    chunks.send("last words\n".into()).await.unwrap();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "last words\n");
    drop(chunks);
    assert!(body.frame().await.is_none());
    shutdown.await.unwrap().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown waited for the grace period although nothing was open"
    );
}

#[tokio::test]
async fn shutdown_should_cut_off_streams_still_open_after_the_grace_period() {
    let server = TestServer::start_in(tempfile::tempdir().unwrap(), |config| {
        config.shutdown_grace = Duration::from_millis(200);
    })
    .await;
    let _chunks = server.stream_chunks(); // never sends, never ends
    let mut sender = server.client().http1().await;
    let response = sender
        .send_request(get("/stream", Some(&server.token())))
        .await
        .unwrap();

    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), server.server.shutdown())
        .await
        .expect("shutdown within 10 s")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    let rest = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .expect("the stream ends once the server is down");
    assert!(rest.is_err(), "an unfinished stream must end in an error");
}

#[tokio::test]
async fn cancelling_the_token_or_dropping_the_server_should_stop_it() {
    let data_dir = tempfile::tempdir().unwrap();
    let config =
        setpoint_apiserver::TransportConfig::new(data_dir.path(), "127.0.0.1:0".parse().unwrap());
    let handler = std::sync::Arc::new(common::TestHandler::default());
    let token = tokio_util::sync::CancellationToken::new();
    let server = setpoint_apiserver::serve(config.clone(), handler.clone(), token.clone())
        .await
        .unwrap();
    let addr = server.local_addr();
    token.cancel();
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("stopped within 10 s")
        .unwrap();
    assert_not_listening(addr).await;

    let server =
        setpoint_apiserver::serve(config, handler, tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
    let addr = server.local_addr();
    drop(server);
    assert_not_listening(addr).await;
}
