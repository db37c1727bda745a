//! Limits: concurrency, graceful shutdown with a reconcile in flight, cache sync timeouts.

use super::*;

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
    // The server does not serve resource.k8s.io ResourceClaims: listing them is a 404.
    let controller =
        Controller::<ResourceClaim>::new(&factory).cache_sync_timeout(Duration::from_millis(1_500));
    let reconciler =
        |_: Arc<ResourceClaim>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    let error = controller
        .run(reconciler, Arc::new(()), std::future::pending())
        .await
        .expect_err("the jobs cache cannot sync");
    let ControllerError::CacheSyncTimeout {
        controller,
        unsynced,
        ..
    } = &error;
    assert_eq!(controller, "resourceclaims");
    assert_eq!(unsynced.len(), 1, "{error}");
    assert_eq!(unsynced[0].informer, "resourceclaims");
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
    let controller = Controller::<ResourceClaim>::new(&factory);
    let reconciler =
        |_: Arc<ResourceClaim>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    controller
        .run(reconciler, Arc::new(()), sleep(Duration::from_millis(200)))
        .await
        .expect("a shutdown is not an error");
}
