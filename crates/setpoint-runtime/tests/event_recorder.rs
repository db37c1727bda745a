//! The event recorder against a real in-process API server: one publish is one Event with every
//! field set, identical publishes become one Event with a series count, a hot loop of distinct
//! events about one object is cut at the spam burst, and a full queue drops instead of blocking.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use setpoint_runtime::{EventDetails, EventRecorder, EventRecorderConfig, Reporter};
use setpoint_testenv::TestEnv;

fn reporter() -> Reporter {
    Reporter::new("example.com/widgets", "widgets-0")
}

async fn configmap(env: &TestEnv, name: &str) -> ConfigMap {
    env.client()
        .namespaced_api::<ConfigMap>("default")
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create configmap")
}

async fn events(env: &TestEnv, namespace: &str) -> Vec<Event> {
    env.client()
        .namespaced_api::<Event>(namespace)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
}

#[tokio::test]
async fn recorder_should_create_one_event_per_publish() {
    let env = TestEnv::start().await.expect("test env");
    let cm = configmap(&env, "cm").await;
    let recorder = EventRecorder::new(env.client(), reporter());

    recorder.publish_for(
        &cm,
        EventDetails::warning("SyncFailed", "Reconcile").with_note("upstream unreachable"),
    );
    recorder.flush().await;

    let events = events(&env, "default").await;
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    let name = event.metadata.name.as_deref().expect("name");
    assert!(name.starts_with("cm."), "{name}");
    let regarding = event.regarding.as_ref().expect("regarding");
    assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(regarding.name.as_deref(), Some("cm"));
    assert_eq!(regarding.uid, cm.metadata.uid);
    assert_eq!(event.reason.as_deref(), Some("SyncFailed"));
    assert_eq!(event.action.as_deref(), Some("Reconcile"));
    assert_eq!(event.note.as_deref(), Some("upstream unreachable"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("example.com/widgets")
    );
    assert_eq!(event.reporting_instance.as_deref(), Some("widgets-0"));
    assert!(event.event_time.is_some());
    assert!(event.series.is_none());
    let metrics = recorder.metrics();
    assert_eq!((metrics.published, metrics.created), (1, 1));
}

#[tokio::test]
async fn recorder_should_fold_identical_events_into_one_series() {
    let env = TestEnv::start().await.expect("test env");
    let cm = configmap(&env, "cm").await;
    let recorder = EventRecorder::new(env.client(), reporter());

    for _ in 0..50 {
        recorder.publish_for(&cm, EventDetails::normal("Synced", "Reconcile"));
    }
    recorder.flush().await;

    let events = events(&env, "default").await;
    assert_eq!(events.len(), 1, "{events:?}");
    let series = events[0].series.as_ref().expect("series");
    assert_eq!(series.count, 50);
    assert!(series.last_observed_time >= *events[0].event_time.as_ref().expect("event time"));
    let metrics = recorder.metrics();
    assert_eq!(metrics.created, 1);
    assert_eq!(metrics.aggregated, 49);
    assert!(metrics.series_updates >= 1);

    // A different note is a different Event.
    recorder.publish_for(
        &cm,
        EventDetails::normal("Synced", "Reconcile").with_note("changed"),
    );
    recorder.flush().await;
    assert_eq!(self::events(&env, "default").await.len(), 2);
}

#[tokio::test]
async fn recorder_should_cut_a_flood_about_one_object_at_the_spam_burst() {
    let env = TestEnv::start().await.expect("test env");
    let hot = configmap(&env, "hot").await;
    let calm = configmap(&env, "calm").await;
    let recorder = EventRecorder::new(env.client(), reporter());

    for i in 0..100 {
        recorder.publish_for(
            &hot,
            EventDetails::warning(format!("Reason{i}"), "Reconcile"),
        );
    }
    recorder.publish_for(&calm, EventDetails::normal("Synced", "Reconcile"));
    recorder.flush().await;

    let events = events(&env, "default").await;
    let about = |name: &str| {
        events
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .count()
    };
    assert_eq!(about("hot"), 25);
    assert_eq!(about("calm"), 1, "other objects keep their own allowance");
    let metrics = recorder.metrics();
    assert_eq!(metrics.dropped_spam, 75);
    assert_eq!(metrics.created, 26);
}

#[tokio::test]
async fn recorder_should_drop_rather_than_block_when_its_queue_is_full() {
    let env = TestEnv::start().await.expect("test env");
    let cm = configmap(&env, "cm").await;
    let recorder = EventRecorder::with_config(
        env.client(),
        reporter(),
        EventRecorderConfig {
            queue_capacity: 3,
            ..EventRecorderConfig::default()
        },
    );
    // On this single-threaded runtime the recorder's task cannot run until we yield, so the
    // queue fills after three.
    for i in 0..10 {
        recorder.publish_for(&cm, EventDetails::normal(format!("Reason{i}"), "Reconcile"));
    }
    let metrics = recorder.metrics();
    assert_eq!(metrics.published, 10);
    assert_eq!(metrics.dropped_queue_full, 7);
    recorder.flush().await;
    assert_eq!(events(&env, "default").await.len(), 3);
}

#[tokio::test]
async fn recorder_should_file_events_about_cluster_scoped_objects_in_default() {
    let env = TestEnv::start().await.expect("test env");
    let namespace = env
        .client()
        .api::<Namespace>()
        .get("kube-public")
        .await
        .expect("namespace");
    let recorder = EventRecorder::new(env.client(), reporter());
    recorder.publish_for(&namespace, EventDetails::normal("Checked", "Audit"));
    recorder.flush().await;
    let events = events(&env, "default").await;
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("kube-public")
    );
}
