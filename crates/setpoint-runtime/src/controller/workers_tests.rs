//! The workers against a real [`WorkQueue`] and an in-memory lookup, with paused time: what
//! each reconcile outcome does to its key, panics, timeouts, concurrency and shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::*;
use crate::controller::metrics::ControllerHandle;
use crate::{Backoff, RateLimit};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::namespaced("ns", name)
}

/// The objects the lookup finds: here an object is just its key's name.
fn lookup(names: &[&str]) -> Lookup<String> {
    let objects: HashMap<ObjectKey, Arc<String>> = names
        .iter()
        .map(|n| (key(n), Arc::new((*n).to_owned())))
        .collect();
    Arc::new(move |k: &ObjectKey| objects.get(k).cloned())
}

/// Backoff only (no bucket), so delays are exactly 5, 10, 20 ms….
fn queue() -> WorkQueue<ObjectKey> {
    WorkQueue::with_rate_limit(RateLimit {
        backoff: Backoff::default(),
        bucket: None,
    })
}

fn pool<R: Reconciler<String, ()>>(
    queue: &WorkQueue<ObjectKey>,
    names: &[&str],
    reconciler: R,
    timeout: Duration,
) -> (Pool<String, R, ()>, ControllerHandle) {
    let shared = Shared::new("test", 2);
    shared.set_queue(queue);
    let handle = ControllerHandle::new(Arc::clone(&shared));
    let pool = Pool {
        queue: queue.clone(),
        lookup: lookup(names),
        reconciler: Arc::new(reconciler),
        context: Arc::new(()),
        timeout,
        shared,
    };
    (pool, handle)
}

/// Calls of each object, with the (paused) time of each call.
#[derive(Default)]
struct Calls(Mutex<Vec<(String, Instant)>>);

impl Calls {
    fn record(&self, name: &str) -> usize {
        let mut calls = self.0.lock();
        calls.push((name.to_owned(), Instant::now()));
        calls.iter().filter(|(n, _)| n == name).count()
    }

    fn of(&self, name: &str) -> Vec<Instant> {
        self.0
            .lock()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| *at)
            .collect()
    }
}

/// Runs `pool` with `workers` workers until `stop` fires.
fn spawn_pool<R: Reconciler<String, ()>>(
    pool: Pool<String, R, ()>,
    workers: usize,
    drain: Drain,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(pool.run(workers, drain, async {
        let _ = stopped.await;
    }));
    (stop, task)
}

#[tokio::test(start_paused = true)]
async fn errors_should_be_retried_with_growing_backoff_until_success() {
    let calls = Arc::new(Calls::default());
    let c = Arc::clone(&calls);
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        let n = c.record(&o);
        async move {
            if n <= 3 {
                Err(format!("attempt {n} failed"))
            } else {
                Ok(Action::await_change())
            }
        }
    };
    let q = queue();
    let (pool, handle) = pool(&q, &["a"], reconciler, Duration::from_secs(60));
    q.add(key("a"));
    let (stop, task) = spawn_pool(pool, 2, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    let at = calls.of("a");
    assert_eq!(at.len(), 4, "three failures, one success, then nothing");
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [ms(5), ms(10), ms(20)], "backoff doubles from 5 ms");
    let m = handle.metrics();
    assert_eq!((m.reconcile_error_total, m.reconcile_success_total), (3, 1));
    // A later failure starts the backoff over: success cleared it.
    assert_eq!(q.metrics().delayed, 0);
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

#[tokio::test(start_paused = true)]
async fn a_panic_should_be_retried_and_not_stop_other_keys() {
    let calls = Arc::new(Calls::default());
    let c = Arc::clone(&calls);
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        let n = c.record(&o);
        async move {
            if o.as_str() == "bad" && n == 1 {
                panic!("reconcile of bad exploded");
            }
            Ok::<_, String>(Action::await_change())
        }
    };
    let q = queue();
    let (pool, handle) = pool(
        &q,
        &["bad", "good1", "good2"],
        reconciler,
        Duration::from_secs(60),
    );
    q.add(key("bad"));
    q.add(key("good1"));
    // One worker: a dead worker would leave good1 and good2 unprocessed.
    let (stop, task) = spawn_pool(pool, 1, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(1)).await;
    q.add(key("good2"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls.of("bad").len(), 2, "retried after the panic");
    assert_eq!(calls.of("good1").len(), 1);
    assert_eq!(calls.of("good2").len(), 1, "the worker survived");
    let m = handle.metrics();
    assert_eq!(
        (m.reconcile_panics_total, m.reconcile_success_total),
        (1, 3)
    );
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_exceeding_the_timeout_should_be_cancelled_counted_and_retried() {
    let calls = Arc::new(Calls::default());
    let finished = Arc::new(AtomicUsize::new(0));
    let (c, f) = (Arc::clone(&calls), Arc::clone(&finished));
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        let n = c.record(&o);
        let f = Arc::clone(&f);
        async move {
            if n == 1 {
                tokio::time::sleep(Duration::from_secs(600)).await;
            }
            f.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(Action::await_change())
        }
    };
    let q = queue();
    let (pool, handle) = pool(&q, &["slow"], reconciler, Duration::from_secs(1));
    q.add(key("slow"));
    let (stop, task) = spawn_pool(pool, 1, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(1_200)).await;
    assert_eq!(calls.of("slow").len(), 2, "retried after the timeout");
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the first attempt was cancelled, never finished"
    );
    let m = handle.metrics();
    assert_eq!(
        (m.reconcile_timeouts_total, m.reconcile_success_total),
        (1, 1)
    );
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

#[tokio::test(start_paused = true)]
async fn requeue_after_should_reconcile_again_after_the_delay() {
    let calls = Arc::new(Calls::default());
    let c = Arc::clone(&calls);
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        c.record(&o);
        async move { Ok::<_, String>(Action::requeue(Duration::from_secs(60))) }
    };
    let q = queue();
    let (pool, handle) = pool(&q, &["a"], reconciler, Duration::from_secs(60));
    q.add(key("a"));
    let (stop, task) = spawn_pool(pool, 1, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls.of("a").len(), 1);
    assert_eq!(q.metrics().delayed, 1, "the requeue is a delayed key");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let at = calls.of("a");
    assert_eq!(at.len(), 3, "requeued every 60 s");
    assert_eq!(at[1] - at[0], Duration::from_secs(60));
    assert_eq!(handle.metrics().reconcile_requeue_after_total, 3);
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

#[tokio::test(start_paused = true)]
async fn requeue_after_should_clear_failures_left_by_earlier_errors() {
    // Drives one pool step by step, checking the key's failure count at each claim.
    let results = Arc::new(Mutex::new(vec![
        Err("e1".to_owned()),
        Err("e2".to_owned()),
        Ok(Action::requeue(ms(100))),
        Err("e3".to_owned()),
    ]));
    let r = Arc::clone(&results);
    let reconciler = move |_: Arc<String>, _: Arc<()>| {
        let result = r.lock().remove(0);
        async move { result }
    };
    let q = queue();
    let (pool, _handle) = pool(&q, &["a"], reconciler, Duration::from_secs(60));
    q.add(key("a"));
    let mut failures = Vec::new();
    for _ in 0..4 {
        let claim = q.next().await.expect("claim");
        failures.push(claim.failures());
        pool.process(claim).await;
    }
    assert_eq!(failures, [0, 1, 2, 0], "the requeue cleared two failures");
}

#[tokio::test(start_paused = true)]
async fn terminal_errors_should_not_be_retried() {
    let calls = Arc::new(Calls::default());
    let c = Arc::clone(&calls);
    let reconciler = (move |o: Arc<String>, _: Arc<()>| {
        c.record(&o);
        async move { Err::<Action, _>("invalid spec".to_owned()) }
    })
    .terminal_when(|e: &String| e.starts_with("invalid"));
    let q = queue();
    let (pool, handle) = pool(&q, &["a"], reconciler, Duration::from_secs(60));
    q.add(key("a"));
    let (stop, task) = spawn_pool(pool, 1, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    assert_eq!(calls.of("a").len(), 1);
    let m = handle.metrics();
    assert_eq!(
        (m.reconcile_error_total, m.reconcile_terminal_error_total),
        (1, 1)
    );
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

#[tokio::test(start_paused = true)]
async fn a_key_whose_object_is_gone_should_not_be_reconciled() {
    let calls = Arc::new(Calls::default());
    let c = Arc::clone(&calls);
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        c.record(&o);
        async move { Ok::<_, String>(Action::await_change()) }
    };
    let q = queue();
    let (pool, handle) = pool(&q, &["present"], reconciler, Duration::from_secs(60));
    q.add(key("deleted"));
    q.add(key("present"));
    let (stop, task) = spawn_pool(pool, 1, Drain::InFlight);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls.of("deleted").len(), 0);
    assert_eq!(calls.of("present").len(), 1);
    let m = handle.metrics();
    assert_eq!(
        (m.reconcile_not_found_total, m.reconcile_duration.count),
        (1, 1)
    );
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

/// Tracks reconciles in flight: the most at once, and any key seen twice at once.
#[derive(Default)]
struct InFlight {
    running: Mutex<HashSet<String>>,
    most: AtomicUsize,
    overlaps: AtomicUsize,
}

impl InFlight {
    fn enter(&self, name: &str) {
        let mut running = self.running.lock();
        if !running.insert(name.to_owned()) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        self.most.fetch_max(running.len(), Ordering::SeqCst);
    }

    fn exit(&self, name: &str) {
        self.running.lock().remove(name);
    }
}

#[tokio::test(start_paused = true)]
async fn concurrency_should_bound_reconciles_and_never_overlap_a_key() {
    let names: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let flight = Arc::new(InFlight::default());
    let calls = Arc::new(Calls::default());
    let (f, c) = (Arc::clone(&flight), Arc::clone(&calls));
    let reconciler = move |o: Arc<String>, _: Arc<()>| {
        let (f, c) = (Arc::clone(&f), Arc::clone(&c));
        async move {
            f.enter(&o);
            c.record(&o);
            tokio::time::sleep(ms(50)).await;
            f.exit(&o);
            Ok::<_, String>(Action::await_change())
        }
    };
    let q = queue();
    let (pool, handle) = pool(&q, &name_refs, reconciler, Duration::from_secs(60));
    let (stop, task) = spawn_pool(pool, 2, Drain::InFlight);
    // Keep re-adding every key while they run, so a key is often claimed and re-added at once.
    for _ in 0..5 {
        for name in &names {
            q.add(key(name));
        }
        tokio::time::sleep(ms(20)).await;
        assert!(handle.metrics().active_workers <= 2);
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        flight.most.load(Ordering::SeqCst),
        2,
        "two at once, never more"
    );
    assert_eq!(
        flight.overlaps.load(Ordering::SeqCst),
        0,
        "no key twice at once"
    );
    for name in &names {
        assert!(!calls.of(name).is_empty(), "{name} reconciled");
    }
    stop.send(()).expect("running");
    task.await.expect("pool ends");
}

/// A reconciler that blocks on `release` for key "held" and records completions.
fn blocking_reconciler(
    started: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Semaphore>,
    done: Arc<Calls>,
) -> impl Reconciler<String, (), Error = String> {
    move |o: Arc<String>, _: Arc<()>| {
        let (started, release, done) = (
            Arc::clone(&started),
            Arc::clone(&release),
            Arc::clone(&done),
        );
        async move {
            if o.as_str() == "held" {
                started.notify_one();
                let _permit = release.acquire().await.map_err(|e| e.to_string())?;
            }
            done.record(&o);
            Ok(Action::await_change())
        }
    }
}

async fn shut_down_while_one_reconcile_runs(drain: Drain) -> Arc<Calls> {
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let done = Arc::new(Calls::default());
    let reconciler = blocking_reconciler(
        Arc::clone(&started),
        Arc::clone(&release),
        Arc::clone(&done),
    );
    let q = queue();
    let (pool, _handle) = pool(
        &q,
        &["held", "queued"],
        reconciler,
        Duration::from_secs(600),
    );
    q.add(key("held"));
    let (stop, mut task) = spawn_pool(pool, 1, drain);
    started.notified().await;
    q.add(key("queued")); // backlog behind the only worker
    stop.send(()).expect("running");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!task.is_finished(), "run waits for the in-flight reconcile");
    assert!(done.of("held").is_empty());
    release.add_permits(1);
    (&mut task).await.expect("pool ends");
    assert_eq!(done.of("held").len(), 1, "the in-flight reconcile finished");
    let backlog = q.len();
    q.add(key("late"));
    assert!(q.is_shut_down(), "the queue is shut down");
    assert_eq!(q.len(), backlog, "no new work after shutdown");
    done
}

#[tokio::test(start_paused = true)]
async fn shutdown_should_wait_for_in_flight_reconciles_and_drop_the_backlog() {
    let done = shut_down_while_one_reconcile_runs(Drain::InFlight).await;
    assert!(done.of("queued").is_empty(), "backlog dropped");
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_backlog_drain_should_finish_queued_keys_too() {
    let done = shut_down_while_one_reconcile_runs(Drain::Backlog).await;
    assert_eq!(done.of("queued").len(), 1, "backlog drained");
}

#[test]
fn panic_message_should_read_str_and_string_payloads() {
    assert_eq!(panic_message(&"static"), "static");
    assert_eq!(panic_message(&"owned".to_owned()), "owned");
    assert_eq!(panic_message(&42_u8), "(non-string panic payload)");
}
