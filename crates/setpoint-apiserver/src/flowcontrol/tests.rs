//! API Priority and Fairness against a real [`Api`] (in-memory store), with seats held
//! directly so that queues fill deterministically: a flood is refused with `429` while another
//! flow is served; exempt users never queue; the max-in-flight fallback.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use serde_json::json;
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

use super::*;
use crate::server::Handler;

async fn api() -> Arc<Api> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    Api::new(Arc::new(store)).await.unwrap()
}

fn get(uri: &str) -> Request<Bytes> {
    Request::builder().uri(uri).body(Bytes::new()).unwrap()
}

async fn as_user(api: &Arc<Api>, name: &str, uri: &str) -> Response<Body> {
    Handler::handle(&**api, get(uri), User::new(name, [])).await
}

async fn admin_create(api: &Api, uri: &str, body: serde_json::Value) {
    let request = Request::builder()
        .method("POST")
        .uri(uri)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap();
    let response = api.handle(request).await;
    assert_eq!(response.status(), StatusCode::CREATED, "creating at {uri}");
}

async fn until(mut ready: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached within 30 s");
}

const PODS: &str = "/api/v1/namespaces/default/configmaps";

/// A level of one seat with 8 queues of 2, and a FlowSchema sending `flood` and `victim-*`
/// to it, one flow per user.
async fn tight_level(api: &Arc<Api>) -> Arc<queueset::Level> {
    let mut settings = FlowControlSettings::for_cores(1);
    settings.max_requests_inflight = 1;
    settings.max_mutating_requests_inflight = 0;
    api.set_flow_control(settings);
    admin_create(
        api,
        "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": {"name": "tight"},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                        "limitResponse": {"type": "Queue", "queuing": {"queues": 8, "handSize": 1, "queueLengthLimit": 2}}}}}),
    )
    .await;
    admin_create(
        api,
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": "flooders"},
               "spec": {"priorityLevelConfiguration": {"name": "tight"}, "matchingPrecedence": 50,
                        "distinguisherMethod": {"type": "ByUser"},
                        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}}),
    )
    .await;
    let fc = state(api);
    let mut level = None;
    // Both compiled: the level and the schema sending requests to it.
    until(|| {
        let config = current_config(api, &fc);
        level = config.levels.get("tight").cloned();
        level.is_some() && config.schemas.iter().any(|s| s.name == "flooders")
    })
    .await;
    level.unwrap()
}

fn queue_of(user: &str) -> Vec<usize> {
    queueset::deal(flow_hash("flooders", user), 8, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_should_get_429_with_retry_after_while_another_flow_is_served() {
    let api = api().await;
    let level = tight_level(&api).await;
    let victim = (0..100)
        .map(|i| format!("victim-{i}"))
        .find(|v| queue_of(v) != queue_of("flood"))
        .unwrap();
    // The level's one seat is taken, in the flood's queue.
    let held = level
        .acquire(flow_hash("flooders", "flood"), 1, Duration::from_secs(60))
        .await
        .unwrap();
    let mut flood = Vec::new();
    for _ in 0..2 {
        let api = api.clone();
        flood.push(tokio::spawn(async move {
            as_user(&api, "flood", PODS).await.status()
        }));
    }
    until(|| level.figures().0 == 2).await;
    let refused = as_user(&api, "flood", PODS).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert!(refused.headers().contains_key(SCHEMA_HEADER));
    assert!(refused.headers().contains_key(LEVEL_HEADER));
    let served = {
        let api = api.clone();
        let victim = victim.clone();
        tokio::spawn(async move { as_user(&api, &victim, PODS).await })
    };
    until(|| level.figures().0 == 3).await;
    // A queued request whose wait (a quarter of its 40 ms timeout) runs out gets 429 too.
    let timed_out = as_user(&api, "victim-timeout", &format!("{PODS}?timeout=40ms")).await;
    assert_eq!(timed_out.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(held);
    let served = served.await.unwrap();
    assert_ne!(served.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(served.headers().contains_key(SCHEMA_HEADER));
    // Its body holds the seat until it is gone.
    drop(served);
    for f in flood {
        assert_ne!(f.await.unwrap(), StatusCode::TOO_MANY_REQUESTS);
    }
    let figures = api.flow_control_figures();
    assert!(figures.rejected.iter().any(|(l, s, reason, n)| l == "tight"
        && s == "flooders"
        && reason == "queue-full"
        && *n == 1));
    assert!(figures
        .waits
        .iter()
        .any(|(l, _, executed, h)| l == "tight" && *executed && h.count >= 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_users_should_never_queue() {
    let api = api().await;
    let level = tight_level(&api).await;
    let _held = level
        .acquire(flow_hash("flooders", "flood"), 1, Duration::from_secs(60))
        .await
        .unwrap();
    for _ in 0..20 {
        let response = Handler::handle(
            &*api,
            get(PODS),
            User::new("setpoint-admin", ["system:masters".to_owned()]),
        )
        .await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    let figures = api.flow_control_figures();
    assert!(figures
        .inqueue
        .iter()
        .all(|(l, _, n)| l != "exempt" || *n == 0));
    assert!(figures
        .waits
        .iter()
        .any(|(l, s, executed, h)| l == "exempt" && s == "exempt" && *executed && h.count >= 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_apf_the_max_inflight_limit_should_refuse_at_once_except_masters() {
    let api = api().await;
    let mut settings = FlowControlSettings::for_cores(1);
    settings.enabled = false;
    settings.max_requests_inflight = 1;
    api.set_flow_control(settings);
    let pool = state(&api).inflight.read().clone();
    let held = pool.try_take(false).unwrap();
    let refused = as_user(&api, "alice", PODS).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(!refused.headers().contains_key(SCHEMA_HEADER));
    let admin = Handler::handle(
        &*api,
        get(PODS),
        User::new("setpoint-admin", ["system:masters".to_owned()]),
    )
    .await;
    assert_eq!(admin.status(), StatusCode::OK);
    drop(held);
    assert_ne!(
        as_user(&api, "alice", PODS).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[test]
fn go_durations_should_parse_and_bound_the_wait() {
    assert_eq!(humantime_like("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(humantime_like("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(humantime_like("x"), None);
    let request = get("/api/v1/pods?timeout=40s");
    assert_eq!(
        wait_limit(&request, Duration::from_secs(60)),
        Duration::from_secs(10)
    );
    assert_eq!(
        wait_limit(&get("/api/v1/pods"), Duration::from_secs(60)),
        Duration::from_secs(15)
    );
    assert_eq!(
        wait_limit(&get("/api/v1/pods"), Duration::ZERO),
        DEFAULT_WAIT
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seats_should_be_held_until_the_response_body_is_gone() {
    let api = api().await;
    let level = tight_level(&api).await;
    // (Refused by RBAC: these users have no grants. A refusal's body holds the seat as well.)
    let unread = as_user(&api, "victim-0", PODS).await;
    assert_eq!(unread.status(), StatusCode::FORBIDDEN);
    assert_eq!(level.figures(), (0, 1), "the unread body holds the seat");
    let next = {
        let api = api.clone();
        tokio::spawn(async move { as_user(&api, "victim-1", PODS).await.status() })
    };
    until(|| level.figures() == (1, 1)).await;
    drop(unread);
    assert_eq!(next.await.unwrap(), StatusCode::FORBIDDEN);
    until(|| level.figures() == (0, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_work_should_run_on_the_low_priority_pool() {
    let (name, nice) = wide::run(async {
        let tid = rustix::thread::gettid();
        (
            std::thread::current().name().map(str::to_owned),
            rustix::process::getpriority_process(Some(tid)).unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(name.as_deref(), Some("setpoint-wide"));
    assert_eq!(nice, 10);
    // A LIST of more than a seat's worth of objects is served through it, whole.
    let api = api().await;
    for i in 0..(OBJECTS_PER_SEAT + 20) {
        admin_create(
            &api,
            PODS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}")}}),
        )
        .await;
    }
    let response = as_user(&api, "reader", PODS).await;
    assert_eq!(
        response.status(),
        StatusCode::FORBIDDEN,
        "no RBAC grant: refused before the pool"
    );
    let response = Handler::handle(
        &*api,
        get(PODS),
        User::new("setpoint-admin", ["system:masters".to_owned()]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        OBJECTS_PER_SEAT + 20
    );
}
