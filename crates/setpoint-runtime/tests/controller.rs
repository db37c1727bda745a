//! Controllers against a real in-process API server: convergence, owner-triggered drift repair,
//! watches, retries with backoff, panics, timeouts, requeues, predicates, resync, the
//! concurrency bound, graceful shutdown and the cache-sync timeout.
//!
//! The server's store runs on its own thread, so these tests run in real time, poll with
//! generous deadlines and never assert on how long something took. (The same behaviours are
//! tested with paused time, without a server, in `src/controller/workers_tests.rs`.)

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, ControllerHandle, InformerFactory, ObjectKey,
    Predicate, Reconciler,
};
use setpoint_testenv::TestEnv;
use setpoint_testenv::{eventually, Running};
use tokio::sync::{Notify, Semaphore};
use tokio::time::{sleep, Instant};

const NS: &str = "default";

/// Starts `controller` with `reconciler` and context `context`; returns the running loop and
/// the handle that reads its metrics.
fn start<K, R, C>(
    controller: Controller<K>,
    reconciler: R,
    context: C,
) -> (Running<ControllerError>, ControllerHandle)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    let handle = controller.handle();
    let running = Running::spawn(move |shutdown| {
        controller.run(reconciler, Arc::new(context), shutdown.cancelled_owned())
    });
    (running, handle)
}

/// How many times each object was reconciled.
#[derive(Default)]
struct Counts(Mutex<HashMap<String, usize>>);

impl Counts {
    /// Records a call for `name`; returns its number (1 for the first).
    fn record(&self, name: &str) -> usize {
        let mut counts = self.0.lock();
        let n = counts.entry(name.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    fn of(&self, name: &str) -> usize {
        self.0.lock().get(name).copied().unwrap_or(0)
    }
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    }
}

async fn create_configmap(api: &Api<ConfigMap>, name: &str) {
    api.create(&PostParams::default(), &configmap(name, &[("k", "v")]))
        .await
        .expect("create configmap");
}

/// A controller over every ConfigMap that counts reconciles and runs `behave` on each.
fn counting<F, Fut>(
    counts: &Arc<Counts>,
    behave: F,
) -> impl Reconciler<ConfigMap, (), Error = String>
where
    F: Fn(String, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Action, String>> + Send + 'static,
{
    let counts = Arc::clone(counts);
    move |cm: Arc<ConfigMap>, _: Arc<()>| {
        let name = cm.name_any();
        let n = counts.record(&name);
        behave(name, n)
    }
}

// --- convergence, owns, watches -------------------------------------------------------------

struct MirrorContext {
    client: Client,
}

/// Keeps `<name>-mirror` a copy of every ConfigMap's data, controlled by the source.
async fn mirror(cm: Arc<ConfigMap>, ctx: Arc<MirrorContext>) -> Result<Action, kube::Error> {
    let name = cm.name_any();
    if name.ends_with("-mirror") {
        return Ok(Action::await_change());
    }
    let namespace = cm.namespace().unwrap_or_else(|| NS.to_owned());
    let api = ctx.client.namespaced_api::<ConfigMap>(&namespace);
    let mirror_name = format!("{name}-mirror");
    match api.get_opt(&mirror_name).await? {
        None => {
            let desired = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(mirror_name),
                    namespace: Some(namespace),
                    owner_references: cm.controller_owner_ref(&()).map(|r| vec![r]),
                    ..Default::default()
                },
                data: cm.data.clone(),
                ..Default::default()
            };
            api.create(&PostParams::default(), &desired).await?;
        }
        Some(existing) if existing.data == cm.data => {}
        Some(mut existing) => {
            existing.data = cm.data.clone();
            api.replace(&mirror_name, &PostParams::default(), &existing)
                .await?;
        }
    }
    Ok(Action::await_change())
}

/// The mirror's data, if it exists and is controlled by `owner`.
async fn mirror_data(api: &Api<ConfigMap>, owner: &str) -> Option<BTreeMap<String, String>> {
    let mirror = api
        .get_opt(&format!("{owner}-mirror"))
        .await
        .expect("get mirror")?;
    let owned = mirror
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.kind == "ConfigMap" && r.name == owner);
    owned.then(|| mirror.data.unwrap_or_default())
}

/// Polls the mirror of `owner` until its data is `want`.
async fn eventually_mirror(api: &Api<ConfigMap>, owner: &str, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while mirror_data(api, owner).await.as_ref() != Some(&want) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {owner}-mirror = {want:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_controller_should_converge_follow_edits_and_repair_drift() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    api.create(&PostParams::default(), &configmap("x", &[("a", "1")]))
        .await
        .expect("create x");
    let factory = InformerFactory::new(env.client());
    let controller = Controller::<ConfigMap>::new(&factory).owns::<ConfigMap>();
    let context = MirrorContext {
        client: env.client(),
    };
    let (running, handle) = start(controller, mirror, context);

    eventually_mirror(&api, "x", &[("a", "1")]).await;

    let mut x = api.get("x").await.expect("get x");
    x.data = Some([("a".to_owned(), "2".to_owned())].into());
    api.replace("x", &PostParams::default(), &x)
        .await
        .expect("edit x");
    eventually_mirror(&api, "x", &[("a", "2")]).await;

    // Drift: only the owner mapping can bring the mirror back (x itself did not change).
    api.delete("x-mirror", &DeleteParams::default())
        .await
        .expect("delete the mirror");
    eventually_mirror(&api, "x", &[("a", "2")]).await;

    let m = handle.metrics();
    assert_eq!(m.reconcile_error_total, 0);
    assert_eq!(handle.name(), "configmaps");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_should_enqueue_the_keys_the_mapper_returns() {
    let env = TestEnv::start().await.expect("test env");
    let configmaps = env.client().namespaced_api::<ConfigMap>(NS);
    let secrets = env.client().namespaced_api::<Secret>(NS);
    create_configmap(&configmaps, "target").await;
    let factory = InformerFactory::new(env.client());
    let controller = Controller::<ConfigMap>::new(&factory).watches(|s: &Secret| {
        s.labels()
            .get("for")
            .map(|name| ObjectKey::namespaced(NS, name.clone()))
    });
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, _| async { Ok(Action::await_change()) });
    let (running, _) = start(controller, reconciler, ());
    eventually("target is reconciled once", || async {
        counts.of("target") == 1
    })
    .await;

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            labels: Some([("for".to_owned(), "target".to_owned())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    eventually("the secret triggers target", || async {
        counts.of("target") == 2
    })
    .await;
    running.stop().await;
}

// --- outcomes: errors, panics, timeouts, requeues --------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_should_be_retried_with_backoff_until_success() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, n| async move {
        if n <= 3 {
            Err(format!("attempt {n} fails"))
        } else {
            Ok(Action::await_change())
        }
    });
    let (running, handle) = start(Controller::<ConfigMap>::new(&factory), reconciler, ());
    create_configmap(&api, "flaky").await;

    eventually("flaky succeeds", || async {
        handle.metrics().reconcile_success_total >= 1
    })
    .await;
    sleep(Duration::from_millis(500)).await; // time for any (wrong) further retry
    assert_eq!(
        counts.of("flaky"),
        4,
        "three failures, one success, no more"
    );
    let m = handle.metrics();
    assert_eq!((m.reconcile_error_total, m.reconcile_success_total), (3, 1));
    assert!(
        handle.queue_metrics().retries_total >= 3,
        "retried through the queue's backoff"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_should_be_retried_without_stopping_other_keys() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |name, n| async move {
        if name == "boom" && n <= 2 {
            panic!("reconcile of {name} exploded (attempt {n})");
        }
        Ok(Action::await_change())
    });
    // One worker: had the panic killed it, nothing else would be reconciled.
    let (running, handle) = start(
        Controller::<ConfigMap>::new(&factory).concurrency(1),
        reconciler,
        (),
    );
    create_configmap(&api, "boom").await;
    for i in 0..5 {
        create_configmap(&api, &format!("ok-{i}")).await;
    }
    eventually("every key is reconciled successfully", || async {
        counts.of("boom") == 3 && (0..5).all(|i| counts.of(&format!("ok-{i}")) == 1)
    })
    .await;
    let m = handle.metrics();
    assert_eq!(
        (m.reconcile_panics_total, m.reconcile_success_total),
        (2, 6)
    );
    running.stop().await;
}

/// Sets its flag when dropped: shows a reconcile future was cancelled.
struct OnDrop(Arc<AtomicBool>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_over_the_timeout_should_be_cancelled_counted_and_retried() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let dropped = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&dropped);
    let reconciler = counting(&counts, move |_, n| {
        let guard = OnDrop(Arc::clone(&d));
        async move {
            if n == 1 {
                sleep(Duration::from_secs(3_600)).await;
            }
            std::mem::forget(guard); // finished: not a cancellation
            Ok(Action::await_change())
        }
    });
    let controller =
        Controller::<ConfigMap>::new(&factory).reconcile_timeout(Duration::from_millis(300));
    let (running, handle) = start(controller, reconciler, ());
    create_configmap(&api, "slow").await;

    eventually("slow succeeds on its retry", || async {
        counts.of("slow") == 2
    })
    .await;
    eventually("the success is counted", || async {
        handle.metrics().reconcile_success_total == 1
    })
    .await;
    assert!(
        dropped.load(Ordering::SeqCst),
        "the first attempt was dropped"
    );
    assert_eq!(handle.metrics().reconcile_timeouts_total, 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_should_reconcile_again_without_any_change() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, _| async {
        Ok(Action::requeue(Duration::from_millis(50)))
    });
    let (running, handle) = start(Controller::<ConfigMap>::new(&factory), reconciler, ());
    create_configmap(&api, "poll").await;
    eventually("poll is reconciled four times", || async {
        counts.of("poll") >= 4
    })
    .await;
    assert!(handle.metrics().reconcile_requeue_after_total >= 4);
    running.stop().await;
}

// --- triggers: predicates, resync ------------------------------------------------------------

fn deployment(name: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [("app".to_owned(), name.to_owned())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("example:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_predicate_should_filter_status_and_metadata_only_updates() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    let reconciler = move |d: Arc<Deployment>, _: Arc<()>| {
        c.record(&d.name_any());
        async { Ok::<_, String>(Action::await_change()) }
    };
    // One worker and a FIFO queue: a key enqueued before another is reconciled first.
    let controller = Controller::<Deployment>::new(&factory)
        .predicate(Predicate::generation_changed())
        .concurrency(1);
    let (running, _) = start(controller, reconciler, ());
    for name in ["web", "probe"] {
        api.create(&PostParams::default(), &deployment(name))
            .await
            .expect("create deployment");
    }
    eventually("both are reconciled once", || async {
        counts.of("web") == 1 && counts.of("probe") == 1
    })
    .await;

    let pp = PatchParams::default();
    let labels = Patch::Merge(json!({"metadata": {"labels": {"tier": "frontend"}}}));
    let web = api.patch("web", &pp, &labels).await.expect("label web");
    let status = Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1}}));
    let web_after = api
        .patch_status("web", &pp, &status)
        .await
        .expect("status of web");
    assert_eq!(
        web.metadata.generation, web_after.metadata.generation,
        "neither write bumped the generation"
    );
    // A spec change on the probe, after web's writes: once it is reconciled, any reconcile
    // those writes triggered would have started.
    let scale = Patch::Merge(json!({"spec": {"replicas": 2}}));
    api.patch("probe", &pp, &scale).await.expect("scale probe");
    eventually("the probe's spec change is reconciled", || async {
        counts.of("probe") == 2
    })
    .await;
    assert_eq!(
        counts.of("web"),
        1,
        "status/label-only updates were filtered"
    );

    api.patch("web", &pp, &scale).await.expect("scale web");
    eventually("web's spec change is reconciled", || async {
        counts.of("web") == 2
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_should_reconcile_cached_objects_periodically_despite_predicates() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, _| async { Ok(Action::await_change()) });
    // ConfigMaps have no generation: without the resync, only the add would pass.
    let controller = Controller::<ConfigMap>::new(&factory)
        .predicate(Predicate::generation_changed())
        .resync(Duration::from_millis(200));
    let (running, _) = start(controller, reconciler, ());
    create_configmap(&api, "quiet").await;
    eventually("quiet is reconciled by resyncs", || async {
        counts.of("quiet") >= 3
    })
    .await;
    running.stop().await;
}

// --- limits: concurrency, shutdown, cache sync -----------------------------------------------

/// Reconciles in flight: the most at once, and how often a key was seen twice at once.
#[derive(Default)]
struct InFlight {
    running: Mutex<HashSet<String>>,
    most: AtomicUsize,
    overlaps: AtomicUsize,
    /// Keys reconciled in the state of their last edit.
    saw_last_edit: Mutex<HashSet<String>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_should_bound_reconciles_and_never_run_a_key_twice_at_once() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let flight = Arc::new(InFlight::default());
    let f = Arc::clone(&flight);
    let reconciler = move |cm: Arc<ConfigMap>, _: Arc<()>| {
        let f = Arc::clone(&f);
        async move {
            let name = cm.name_any();
            {
                let mut running = f.running.lock();
                if !running.insert(name.clone()) {
                    f.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                f.most.fetch_max(running.len(), Ordering::SeqCst);
            }
            sleep(Duration::from_millis(100)).await;
            f.running.lock().remove(&name);
            let round = cm.data.as_ref().and_then(|d| d.get("round"));
            if round.map(String::as_str) == Some("1") {
                f.saw_last_edit.lock().insert(name);
            }
            Ok::<_, String>(Action::await_change())
        }
    };
    let controller = Controller::<ConfigMap>::new(&factory).concurrency(2);
    assert_eq!(controller.handle().metrics().max_concurrent_reconciles, 2);
    let (running, _) = start(controller, reconciler, ());
    let names: Vec<String> = (0..10).map(|i| format!("slow-{i}")).collect();
    for name in &names {
        create_configmap(&api, name).await;
    }
    // Edit every key twice while the first reconciles run (edits of a key still queued are
    // coalesced; edits of a key being reconciled queue it again).
    for round in 0..2 {
        sleep(Duration::from_millis(150)).await;
        for name in &names {
            let data = Patch::Merge(json!({"data": {"round": round.to_string()}}));
            api.patch(name, &PatchParams::default(), &data)
                .await
                .expect("edit");
        }
    }
    eventually("every key's last edit is reconciled", || async {
        flight.saw_last_edit.lock().len() == names.len()
    })
    .await;
    assert_eq!(
        flight.most.load(Ordering::SeqCst),
        2,
        "two at once, never more"
    );
    assert_eq!(
        flight.overlaps.load(Ordering::SeqCst),
        0,
        "never one key twice at once"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_should_wait_for_the_reconcile_in_flight() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let started = Arc::new(Notify::new());
    let release = Arc::new(Semaphore::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let (s, r, f) = (
        Arc::clone(&started),
        Arc::clone(&release),
        Arc::clone(&finished),
    );
    let reconciler = move |_: Arc<ConfigMap>, _: Arc<()>| {
        let (s, r, f) = (Arc::clone(&s), Arc::clone(&r), Arc::clone(&f));
        async move {
            s.notify_one();
            let _permit = r.acquire().await.map_err(|e| e.to_string())?;
            f.store(true, Ordering::SeqCst);
            Ok::<_, String>(Action::await_change())
        }
    };
    let (running, handle) = start(Controller::<ConfigMap>::new(&factory), reconciler, ());
    create_configmap(&api, "held").await;
    started.notified().await;

    running.ask_to_stop();
    sleep(Duration::from_millis(300)).await;
    assert!(
        !running.is_finished(),
        "run must wait for the reconcile in flight"
    );
    release.add_permits(1);
    running.stop().await;
    assert!(finished.load(Ordering::SeqCst), "the reconcile finished");
    assert_eq!(handle.metrics().reconcile_success_total, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_sync_timeout_should_fail_naming_the_informer_and_its_error() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    // The server does not serve batch/v1 Jobs: listing them is a 404.
    let controller =
        Controller::<Job>::new(&factory).cache_sync_timeout(Duration::from_millis(1_500));
    let reconciler = |_: Arc<Job>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    let error = controller
        .run(reconciler, Arc::new(()), std::future::pending())
        .await
        .expect_err("the jobs cache cannot sync");
    let ControllerError::CacheSyncTimeout {
        controller,
        unsynced,
        ..
    } = &error;
    assert_eq!(controller, "jobs");
    assert_eq!(unsynced.len(), 1, "{error}");
    assert_eq!(unsynced[0].informer, "jobs");
    let last_error = unsynced[0]
        .last_error
        .as_deref()
        .expect("a list error was seen");
    assert!(
        last_error.contains("404") || last_error.to_lowercase().contains("not found"),
        "{last_error}"
    );
    assert!(error.to_string().contains(last_error), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_before_the_caches_sync_should_return_ok() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let controller = Controller::<Job>::new(&factory);
    let reconciler = |_: Arc<Job>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    controller
        .run(reconciler, Arc::new(()), sleep(Duration::from_millis(200)))
        .await
        .expect("a shutdown is not an error");
}
