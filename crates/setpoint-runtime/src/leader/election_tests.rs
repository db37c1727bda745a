//! The election loop's timing, on paused time. The real API server cannot run on paused time
//! (its store has an OS thread), so these tests serve the one Lease from memory with the API
//! server's update rule (a stale `resourceVersion` is `409`); the behaviour against the real
//! server is in `tests/leader_election.rs`. Here the exact instants are checked: the leader
//! gives up exactly at the renew deadline after its last successful renewal, its work is dropped
//! exactly when the Lease could be taken over, and a standby never starts before then.

use std::future::pending;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use parking_lot::Mutex;
use tokio::time::Duration;

use super::*;
use crate::LeaderElectionConfig;

/// One Lease, served from memory; every successful write is logged with its instant.
#[derive(Default)]
struct LeaseServer {
    lease: Mutex<Option<Lease>>,
    writes: Mutex<Vec<(Instant, Option<String>)>>,
}

fn status(code: u16, reason: &str) -> http::Response<Full<Bytes>> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code, "reason": reason, "message": reason,
    });
    http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

fn ok(lease: &Lease) -> http::Response<Full<Bytes>> {
    let body = serde_json::to_vec(lease).expect("serializable");
    http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

impl LeaseServer {
    fn handle(&self, request: http::Request<Bytes>) -> http::Response<Full<Bytes>> {
        let mut stored = self.lease.lock();
        match *request.method() {
            http::Method::GET => match stored.as_ref() {
                Some(lease) => ok(lease),
                None => status(404, "NotFound"),
            },
            http::Method::POST | http::Method::PUT => {
                let mut lease: Lease = serde_json::from_slice(request.body()).expect("a lease");
                let current_version = stored
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                let creating = request.method() == http::Method::POST;
                if creating && stored.is_some() {
                    return status(409, "AlreadyExists");
                }
                if !creating && lease.metadata.resource_version != current_version {
                    return status(409, "Conflict");
                }
                let next: u64 = current_version.and_then(|v| v.parse().ok()).unwrap_or(0) + 1;
                lease.metadata.resource_version = Some(next.to_string());
                let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
                self.writes.lock().push((Instant::now(), holder));
                *stored = Some(lease.clone());
                ok(&lease)
            }
            _ => status(405, "MethodNotAllowed"),
        }
    }

    /// When `identity` last wrote the Lease.
    fn last_write_by(&self, identity: &str) -> Option<Instant> {
        self.writes
            .lock()
            .iter()
            .rev()
            .find(|(_, holder)| holder.as_deref() == Some(identity))
            .map(|(at, _)| *at)
    }

    /// When `identity` first wrote the Lease.
    fn first_write_by(&self, identity: &str) -> Option<Instant> {
        self.writes
            .lock()
            .iter()
            .find(|(_, holder)| holder.as_deref() == Some(identity))
            .map(|(at, _)| *at)
    }
}

/// A client of `server` whose requests hang while `cut` is set.
fn client(server: &Arc<LeaseServer>, cut: &Arc<AtomicBool>) -> Client {
    let (server, cut) = (server.clone(), cut.clone());
    Client::in_process(move |request| {
        let (server, cut) = (server.clone(), cut.clone());
        async move {
            if cut.load(Ordering::SeqCst) {
                pending::<()>().await;
            }
            server.handle(request)
        }
    })
}

fn election(client: Client, identity: &str) -> LeaderElection {
    let config = LeaderElectionConfig {
        identity: identity.to_owned(),
        ..LeaderElectionConfig::default()
    };
    LeaderElection::new(client, LeaseLock::new("ns", "lock"), config).expect("valid")
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[tokio::test(start_paused = true)]
async fn leader_should_stop_at_the_renew_deadline_and_drop_its_work_at_lease_expiry() {
    let server = Arc::new(LeaseServer::default());
    let cut = Arc::new(AtomicBool::new(false));
    let a = election(client(&server, &cut), "a");
    let lost_at = Arc::new(Mutex::new(None));
    let run = {
        let (a, lost_at) = (a.clone(), lost_at.clone());
        tokio::spawn(async move {
            let end = a
                .run(|leading| async move {
                    leading.lost().await;
                    *lost_at.lock() = Some(Instant::now());
                    pending::<()>().await // ignores the token: must be dropped
                })
                .await;
            (end, Instant::now())
        })
    };
    // Lead for a while (several renewals), then cut the leader off mid-period.
    tokio::time::sleep(secs(7)).await;
    assert!(a.is_leader());
    assert!(server.writes.lock().len() >= 3, "renewed every 2 s");
    cut.store(true, Ordering::SeqCst);

    let (end, ended_at) = run.await.expect("join");
    assert!(matches!(end, Ok(ElectionEnd::Lost(None))), "{end:?}");
    let last_renewal = server.last_write_by("a").expect("a wrote");
    let lost_at = lost_at.lock().expect("the work was told");
    assert_eq!(
        lost_at - last_renewal,
        secs(10),
        "renew deadline after the last renewal"
    );
    assert_eq!(
        ended_at - last_renewal,
        secs(15),
        "work dropped at lease expiry"
    );
    assert!(!a.is_leader());
    assert_eq!(a.metrics().losses, 1);
}

#[tokio::test(start_paused = true)]
async fn standby_should_take_over_only_after_the_cut_off_leader_stopped() {
    let server = Arc::new(LeaseServer::default());
    let (cut_a, cut_b) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let a = election(client(&server, &cut_a), "a");
    let b = election(client(&server, &cut_b), "b");
    let a_lost_at = Arc::new(Mutex::new(None));
    let run_a = {
        let (a, lost_at) = (a.clone(), a_lost_at.clone());
        tokio::spawn(async move {
            a.run(|leading| async move {
                leading.lost().await;
                *lost_at.lock() = Some(Instant::now());
            })
            .await
        })
    };
    tokio::time::sleep(secs(1)).await;
    assert!(a.is_leader());
    let run_b = {
        let b = b.clone();
        tokio::spawn(async move { b.run(|leading| async move { leading.lost().await }).await })
    };
    tokio::time::sleep(secs(10)).await;
    assert!(!b.is_leader(), "a renews, so b waits");
    cut_a.store(true, Ordering::SeqCst);

    let end = run_a.await.expect("join a").expect("run a");
    assert_eq!(end, ElectionEnd::Lost(Some(())));
    let a_lost_at = a_lost_at.lock().expect("a was told");
    while !b.is_leader() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b_took_over = server.first_write_by("b").expect("b wrote");
    let a_last = server.last_write_by("a").expect("a wrote");
    assert!(b_took_over >= a_last + secs(15), "b waited out the lease");
    assert!(b_took_over > a_lost_at, "a had stopped before b started");
    let transitions = server
        .lease
        .lock()
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.lease_transitions);
    assert_eq!(transitions, Some(1));
    b.stop();
    assert_eq!(
        run_b.await.expect("join b").expect("run b"),
        ElectionEnd::Finished(())
    );
}

#[tokio::test(start_paused = true)]
async fn leader_should_keep_renewing_while_its_work_winds_down() {
    let server = Arc::new(LeaseServer::default());
    let a = election(client(&server, &Arc::default()), "a");
    let run = {
        let a = a.clone();
        tokio::spawn(async move {
            a.run(|leading| async move {
                leading.lost().await;
                assert_eq!(leading.state(), LeadershipState::SteppingDown);
                // A slow shutdown, longer than the lease.
                tokio::time::sleep(secs(60)).await;
            })
            .await
        })
    };
    tokio::time::sleep(secs(1)).await;
    a.stop();
    tokio::time::sleep(secs(30)).await;
    assert!(a.is_leader(), "still leading while the work winds down");
    let renewed = server.last_write_by("a").expect("a wrote");
    assert!(Instant::now() - renewed <= secs(2), "and still renewing");
    assert_eq!(
        run.await.expect("join").expect("run"),
        ElectionEnd::Finished(())
    );
    let holder = server
        .lease
        .lock()
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone());
    assert_eq!(holder, None, "released");
}
