//! The failover client against plain-HTTP stand-ins for API servers on loopback: a dead first
//! server (its port refuses connections) is skipped for reads and writes alike, the server that
//! answered is used first afterwards, and an error answer is returned as it is, not retried.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use setpoint_runtime::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A one-trick API server: answers every request with `status` and a ConfigMap (or a Status
/// for errors); counts the requests.
async fn stand_in(status: u16) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut read = 0;
                loop {
                    let n = socket.read(&mut buf[read..]).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    read += n;
                    let text = String::from_utf8_lossy(&buf[..read]).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if read < end + 4 + length {
                        continue;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = if status == 200 {
                        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","resourceVersion":"7"}}"#.to_owned()
                    } else {
                        format!(
                            r#"{{"apiVersion":"v1","kind":"Status","status":"Failure","message":"no","reason":"InternalError","code":{status}}}"#
                        )
                    };
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                    read = 0;
                }
            });
        }
    });
    (url, count)
}

/// A loopback URL nobody listens on.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

fn failover(servers: &[&str]) -> Client {
    let uris: Vec<http::Uri> = servers.iter().map(|s| s.parse().unwrap()).collect();
    let config = kube::Config::new(uris[0].clone());
    Client::with_failover(config, &uris).unwrap()
}

#[tokio::test]
async fn a_dead_server_should_be_skipped_for_reads_and_unsent_writes() {
    let dead = dead_url();
    let (live, count) = stand_in(200).await;
    let client = failover(&[&dead, &live]);
    let api = client.namespaced_api::<ConfigMap>("default");
    let got = api.get("c").await.unwrap();
    assert_eq!(got.metadata.resource_version.as_deref(), Some("7"));
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("c".into());
    api.create(&Default::default(), &cm).await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_error_answer_should_be_returned_not_retried_elsewhere() {
    let (failing, failing_count) = stand_in(500).await;
    let (live, live_count) = stand_in(200).await;
    let client = failover(&[&failing, &live]);
    let api = client.namespaced_api::<ConfigMap>("default");
    let err = api
        .get("c")
        .await
        .expect_err("the first server answers 500");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err}"
    );
    assert_eq!(failing_count.load(Ordering::SeqCst), 1);
    assert_eq!(live_count.load(Ordering::SeqCst), 0);
}

#[test]
fn a_failover_client_needs_a_server() {
    let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    assert!(Client::with_failover(config, &[]).is_err());
}
