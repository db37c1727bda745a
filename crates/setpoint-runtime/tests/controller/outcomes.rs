//! What a reconcile's outcome does: errors retried with backoff, panics retried without
//! stopping other keys, timeouts cancelled and counted, `requeue_after`.

use super::*;

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
