//! The `/metrics` endpoint end to end: components registered with a `Metrics` registry are
//! scraped over real HTTP from 127.0.0.1, in the Prometheus text format, with the values
//! they hold at scrape time.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use setpoint_runtime::{InformerFactory, Metrics, WorkQueue};
use setpoint_testenv::TestEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Serves `metrics` on a free port of 127.0.0.1 until the returned sender is dropped.
async fn serve(metrics: &Metrics) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("the bound address");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(metrics.clone().serve(listener, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// `GET path` over a fresh connection: the status line, the headers (lower-cased) and the
/// body.
async fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (
        status.to_owned(),
        headers.to_ascii_lowercase(),
        body.to_owned(),
    )
}

#[tokio::test]
async fn scrape_should_show_a_work_queues_adds_and_depth_as_they_are_now() {
    let metrics = Metrics::new();
    let queue = WorkQueue::<String>::new();
    metrics.add_queue("configmaps", {
        let queue = queue.clone();
        move || queue.metrics()
    });
    let (addr, _stop) = serve(&metrics).await;

    for key in ["default/a", "default/b", "default/a", "default/c"] {
        queue.add(key.to_owned());
    }
    let claim = queue.next().await.expect("a key");
    claim.done();

    let (status, headers, body) = get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{headers}"
    );
    let labels = r#"{name="configmaps",controller="configmaps"}"#;
    for line in [
        "# TYPE workqueue_adds_total counter".to_owned(),
        format!("workqueue_adds_total{labels} 3"),
        format!("workqueue_depth{labels} 2"),
        format!("workqueue_work_duration_seconds_count{labels} 1"),
        format!("workqueue_queue_duration_seconds_count{labels} 1"),
        "workqueue_queue_duration_seconds_bucket{name=\"configmaps\",controller=\"configmaps\",le=\"+Inf\"} 1"
            .to_owned(),
    ] {
        assert!(body.lines().any(|l| l == line), "{line:?} in\n{body}");
    }

    // The next scrape reads the queue again.
    queue.add("default/d".to_owned());
    let (_, _, body) = get(addr, "/metrics").await;
    assert!(
        body.lines()
            .any(|l| l == format!("workqueue_adds_total{labels} 4")),
        "{body}"
    );
}

#[tokio::test]
async fn scrape_of_another_path_should_be_not_found() {
    let metrics = Metrics::new();
    let (addr, _stop) = serve(&metrics).await;
    let (status, _, _) = get(addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

#[tokio::test]
async fn scrape_should_show_an_informers_cache_against_a_real_api_server() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>("default");
    for name in ["one", "two"] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm)
            .await
            .expect("create a configmap");
    }
    let factory = InformerFactory::new(env.client());
    let informer = factory.informer::<ConfigMap>();
    let metrics = Metrics::new();
    metrics.add_informers({
        let factory = factory.clone();
        move || factory.metrics()
    });
    let (addr, _stop) = serve(&metrics).await;

    let (_, _, before) = get(addr, "/metrics").await;
    assert!(
        before
            .lines()
            .any(|l| l == r#"setpoint_informer_synced{resource="configmaps"} 0"#),
        "not started yet:\n{before}"
    );

    factory.start();
    factory.wait_for_sync().await;
    let objects = informer.store().len();
    let (_, _, after) = get(addr, "/metrics").await;
    for line in [
        r#"setpoint_informer_synced{resource="configmaps"} 1"#.to_owned(),
        format!(r#"setpoint_informer_objects{{resource="configmaps"}} {objects}"#),
        r#"setpoint_informer_lists_total{resource="configmaps"} 1"#.to_owned(),
    ] {
        assert!(after.lines().any(|l| l == line), "{line:?} in\n{after}");
    }
    assert!(objects >= 2, "the two configmaps are cached");
    factory.shut_down();
}
