//! Leader election against a real in-process API server, in real time with short timings
//! (lease 2 s, renew deadline 1.5 s, retry 0.4 s): one leader at a time, hand-over on release,
//! and a leader that cannot renew — or finds another holder — stops its work.
//!
//! The server's store runs on its own thread, so these tests poll with generous deadlines and
//! never assert on how long something took.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use setpoint_runtime::{
    Client, ElectionEnd, LeaderElection, LeaderElectionConfig, LeaderElectionError,
    LeadershipState, LeaseLock,
};
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;
use tokio::time::{sleep, Instant};

const NAMESPACE: &str = "default";
const LEASE: &str = "test-controller";

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(400),
        release_on_cancel: true,
    }
}

fn election(client: Client, identity: &str) -> LeaderElection {
    LeaderElection::new(client, LeaseLock::new(NAMESPACE, LEASE), config(identity))
        .expect("valid config")
}

/// Runs `election` with work that waits for the token to say leadership ended, and records
/// that it saw it.
fn campaign(
    election: &LeaderElection,
    saw_end: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Result<ElectionEnd<LeadershipState>, LeaderElectionError>> {
    let election = election.clone();
    tokio::spawn(async move {
        election
            .run(|leading| async move {
                leading.lost().await;
                saw_end.store(true, Ordering::SeqCst);
                leading.state()
            })
            .await
    })
}

async fn lease(client: &Client) -> Lease {
    client
        .namespaced_api::<Lease>(NAMESPACE)
        .get(LEASE)
        .await
        .expect("lease exists")
}

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_should_let_exactly_one_candidate_lead_at_a_time() {
    let env = TestEnv::start().await.expect("test env");
    let a = election(env.client(), "a");
    let b = election(env.client(), "b");
    let run_a = campaign(&a, Arc::default());
    let run_b = campaign(&b, Arc::default());

    eventually("someone leads", || async { a.is_leader() || b.is_leader() }).await;
    // Sample both for several lease durations: never two leaders.
    let until = Instant::now() + Duration::from_secs(5);
    let mut samples = 0;
    while Instant::now() < until {
        assert!(!(a.is_leader() && b.is_leader()), "two leaders at once");
        samples += 1;
        sleep(Duration::from_millis(10)).await;
    }
    assert!(samples > 50);
    assert!(a.is_leader() != b.is_leader(), "one leader after 5 s");

    let (leader, follower) = if a.is_leader() { (&a, &b) } else { (&b, &a) };
    let lease = lease(&env.client()).await;
    let spec = lease.spec.as_ref().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(leader.identity()));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    assert_eq!(follower.leader().as_deref(), Some(leader.identity()));
    assert!(leader.metrics().leading);
    assert_eq!(leader.metrics().acquisitions, 1);
    assert!(!follower.metrics().leading);

    a.stop();
    b.stop();
    run_a.await.expect("join a").expect("run a");
    run_b.await.expect("join b").expect("run b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_should_release_the_lease_when_the_leader_stops() {
    let env = TestEnv::start().await.expect("test env");
    let a = election(env.client(), "a");
    let saw_end = Arc::new(AtomicBool::new(false));
    let run_a = campaign(&a, saw_end.clone());
    eventually("a leads", || async { a.is_leader() }).await;
    let transitions_before = lease(&env.client())
        .await
        .spec
        .and_then(|s| s.lease_transitions);
    assert_eq!(transitions_before, Some(0));

    a.stop();
    let end = run_a.await.expect("join").expect("run");
    assert_eq!(end, ElectionEnd::Finished(LeadershipState::SteppingDown));
    assert!(saw_end.load(Ordering::SeqCst));
    assert!(!a.is_leader());
    let released = lease(&env.client()).await;
    assert_eq!(holder(&released), None);
    assert_eq!(
        released
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds),
        Some(1)
    );
    assert_eq!(a.metrics().losses, 0);

    // A stopped election stays stopped.
    let again = a.run(|_| async {}).await.expect("run");
    assert_eq!(again, ElectionEnd::NeverLed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_should_hand_over_to_the_standby_when_the_leader_releases() {
    let env = TestEnv::start().await.expect("test env");
    let a = election(env.client(), "a");
    let run_a = campaign(&a, Arc::default());
    eventually("a leads", || async { a.is_leader() }).await;

    let b = election(env.client(), "b");
    let run_b = campaign(&b, Arc::default());
    eventually("b has seen a's lease", || async {
        b.leader().as_deref() == Some("a")
    })
    .await;
    assert!(!b.is_leader());

    a.stop();
    run_a.await.expect("join a").expect("run a");
    eventually("b leads", || async { b.is_leader() }).await;
    let lease = lease(&env.client()).await;
    assert_eq!(holder(&lease).as_deref(), Some("b"));
    // Created by a (0), released by a, taken by b: one change of holder.
    assert_eq!(lease.spec.and_then(|s| s.lease_transitions), Some(1));

    b.stop();
    run_b.await.expect("join b").expect("run b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_should_stop_the_work_at_once_when_another_holder_takes_the_lease() {
    let env = TestEnv::start().await.expect("test env");
    let a = election(env.client(), "a");
    let saw_end = Arc::new(AtomicBool::new(false));
    let run_a = campaign(&a, saw_end.clone());
    eventually("a leads", || async { a.is_leader() }).await;

    // Behind a's back, someone else writes themselves into the Lease for a long time.
    let leases = env.client().namespaced_api::<Lease>(NAMESPACE);
    let mut taken = leases.get(LEASE).await.expect("lease");
    loop {
        if let Some(spec) = taken.spec.as_mut() {
            spec.holder_identity = Some("intruder".into());
            spec.lease_duration_seconds = Some(3600);
        }
        match leases.replace(LEASE, &PostParams::default(), &taken).await {
            Ok(_) => break,
            // a renewed in between: read again and retry.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                taken = leases.get(LEASE).await.expect("lease");
            }
            Err(e) => panic!("taking the lease: {e}"),
        }
    }

    let end = run_a.await.expect("join").expect("run");
    assert_eq!(end, ElectionEnd::Lost(Some(LeadershipState::Lost)));
    assert!(saw_end.load(Ordering::SeqCst), "the work was told");
    assert!(!a.is_leader());
    assert_eq!(a.metrics().losses, 1);
    assert_eq!(a.leader().as_deref(), Some("intruder"));
    assert_eq!(
        holder(&leases.get(LEASE).await.expect("lease")).as_deref(),
        Some("intruder"),
        "a losing does not release someone else's lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_should_give_up_when_renewals_stop_getting_through() {
    let env = TestEnv::start().await.expect("test env");
    // a's client can be cut off: its requests then hang (and time out).
    let cut = Arc::new(AtomicBool::new(false));
    let api = env.api().clone();
    let cut_in_handler = cut.clone();
    let flaky = Client::in_process(move |request| {
        let api = api.clone();
        let cut = cut_in_handler.clone();
        async move {
            if cut.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            api.handle(request).await
        }
    });
    let a = election(flaky, "a");
    let a_saw_end = Arc::new(AtomicBool::new(false));
    let run_a = campaign(&a, a_saw_end.clone());
    eventually("a leads", || async { a.is_leader() }).await;
    let b = election(env.client(), "b");
    let run_b = campaign(&b, Arc::default());
    eventually("b has seen a's lease", || async {
        b.leader().as_deref() == Some("a")
    })
    .await;

    cut.store(true, Ordering::SeqCst);
    // Until a gives up, b must not lead; after, b takes over.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !b.is_leader() {
        assert!(Instant::now() < deadline, "b never took over");
        assert!(!(a.is_leader() && b.is_leader()), "two leaders at once");
        sleep(Duration::from_millis(10)).await;
    }
    assert!(!a.is_leader());

    let end = run_a.await.expect("join").expect("run");
    // The work returned as soon as it was told, well within the grace period.
    assert_eq!(end, ElectionEnd::Lost(Some(LeadershipState::Lost)));
    assert!(a_saw_end.load(Ordering::SeqCst));
    assert_eq!(a.metrics().losses, 1);
    assert_eq!(holder(&lease(&env.client()).await).as_deref(), Some("b"));

    b.stop();
    run_b.await.expect("join b").expect("run b");
}

#[tokio::test]
async fn election_should_refuse_inconsistent_timings_and_a_second_run() {
    let env = TestEnv::start().await.expect("test env");
    let bad = LeaderElectionConfig {
        renew_deadline: Duration::from_secs(2),
        ..config("a")
    };
    let err = LeaderElection::new(env.client(), LeaseLock::new(NAMESPACE, LEASE), bad)
        .expect_err("deadline == lease duration");
    assert!(matches!(
        err,
        LeaderElectionError::RenewDeadlineNotBeforeLeaseEnd { .. }
    ));
    let err = LeaderElection::new(env.client(), LeaseLock::new("", LEASE), config("a"))
        .expect_err("no namespace");
    assert!(matches!(err, LeaderElectionError::IncompleteLock));

    let a = election(env.client(), "a");
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel();
    let first = {
        let a = a.clone();
        tokio::spawn(async move {
            a.run(|leading| async move {
                let _ = entered_tx.send(());
                leading.lost().await;
            })
            .await
        })
    };
    entered_rx.await.expect("first run leads");
    let second = a.run(|_| async {}).await;
    assert!(matches!(second, Err(LeaderElectionError::AlreadyRunning)));
    a.stop();
    first.await.expect("join").expect("first run");
}
