//! The election loop: acquire the Lease, run the leader's work while renewing it, and stop that
//! work when the Lease is lost.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, timeout_at, Instant};

use super::candidate::{Attempt, Candidate};
use super::config::{LeaderElectionConfig, LeaseLock};
use super::state::{LeaderElectionMetrics, Shared, Stepped};
use super::token::{LeadershipState, LeadershipToken};
use super::LeaderElectionError;
use crate::Client;

/// How a call to [`LeaderElection::run`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum ElectionEnd<T> {
    /// [`LeaderElection::stop`] was called before this process became leader; the work never
    /// ran.
    NeverLed,
    /// The leader's work returned this value (on its own, or after [`LeaderElection::stop`]),
    /// and the Lease was released if `release_on_cancel` is set.
    Finished(T),
    /// Leadership was lost: the work was told through its [`LeadershipToken`], then dropped when
    /// the Lease could be taken over. Holds the work's value if it returned before that.
    Lost(Option<T>),
}

/// Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics. Cheap to
/// clone; clones share one election (so one clone can [`run`](Self::run) while another watches
/// or [`stop`](Self::stop)s it).
///
/// ```no_run
/// use setpoint_runtime::{Client, LeaderElection, LeaderElectionConfig, LeaseLock};
/// # async fn example(client: Client) -> Result<(), setpoint_runtime::LeaderElectionError> {
/// let election = LeaderElection::new(
///     client,
///     LeaseLock::new("kube-system", "my-controller"),
///     LeaderElectionConfig::default(),
/// )?;
/// let end = election
///     .run(|leading| async move {
///         tokio::select! {
///             _ = leading.lost() => {}                      // stop the controllers
///             _ = std::future::pending::<()>() => {}        // run the controllers
///         }
///     })
///     .await?;
/// # let _ = end;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    api: kube::Api<Lease>,
    lock: LeaseLock,
    config: LeaderElectionConfig,
    shared: Shared,
    /// Set once [`LeaderElection::stop`] is called; never cleared.
    stop: watch::Sender<bool>,
    /// Whether a `run` is in progress (at most one at a time).
    running: AtomicBool,
}

/// How the leading phase ended.
enum Leading<T> {
    /// The work returned.
    Finished(T),
    /// The Lease was lost; the work may finish until `grace_until`, after which it is dropped.
    Lost { grace_until: Instant },
}

impl LeaderElection {
    /// An election for `lock`, through `client`. Fails if `config` does not
    /// [`validate`](LeaderElectionConfig::validate) or the lock has no name.
    pub fn new(
        client: Client,
        lock: LeaseLock,
        config: LeaderElectionConfig,
    ) -> Result<LeaderElection, LeaderElectionError> {
        config.validate()?;
        if lock.name.is_empty() || lock.namespace.is_empty() {
            return Err(LeaderElectionError::IncompleteLock);
        }
        Ok(LeaderElection {
            inner: Arc::new(Inner {
                api: client.namespaced_api(&lock.namespace),
                lock,
                config,
                shared: Shared::new(),
                stop: watch::channel(false).0,
                running: AtomicBool::new(false),
            }),
        })
    }

    /// This candidate's identity, as written into the Lease.
    pub fn identity(&self) -> &str {
        &self.inner.config.identity
    }

    /// Whether this process currently holds the Lease and runs the leader's work.
    pub fn is_leader(&self) -> bool {
        self.inner.shared.is_leading()
    }

    /// A channel whose value is `true` while this process leads ([`is_leader`](Self::is_leader)).
    pub fn watch_leadership(&self) -> watch::Receiver<bool> {
        self.inner.shared.subscribe()
    }

    /// The holder the Lease named when this candidate last read or wrote it.
    pub fn leader(&self) -> Option<String> {
        self.inner.shared.holder()
    }

    /// A snapshot of this election's metrics.
    pub fn metrics(&self) -> LeaderElectionMetrics {
        self.inner.shared.metrics()
    }

    /// Asks the election to stop, for good: a candidate stops trying to acquire (and
    /// [`run`](Self::run) returns [`ElectionEnd::NeverLed`]); a leader's token turns
    /// [`LeadershipState::SteppingDown`] and, once its work returns, the Lease is released.
    pub fn stop(&self) {
        self.inner.stop.send_replace(true);
    }

    /// Campaigns for the Lease until this process leads, then runs `lead` with a
    /// [`LeadershipToken`] while renewing the Lease every retry period.
    ///
    /// - If the work returns, the Lease is released (with `release_on_cancel`) and `run` returns
    ///   [`ElectionEnd::Finished`].
    /// - If the Lease is not renewed within the renew deadline, or another candidate is seen
    ///   holding it, the token turns [`LeadershipState::Lost`] at once; the work is then dropped
    ///   when another candidate could take over (right away, after one last poll, if one
    ///   already has) and `run` returns [`ElectionEnd::Lost`]. The work is polled on this
    ///   task, so it cannot outlive the leadership.
    ///
    /// One `run` at a time per election ([`LeaderElectionError::AlreadyRunning`] otherwise); a
    /// new `run` after [`ElectionEnd::Lost`] campaigns again. Not cancel-safe: dropping the
    /// `run` future drops the work and stops renewing without releasing, so the Lease then
    /// expires after the lease duration.
    pub async fn run<F, Fut, T>(&self, lead: F) -> Result<ElectionEnd<T>, LeaderElectionError>
    where
        F: FnOnce(LeadershipToken) -> Fut,
        Fut: Future<Output = T>,
    {
        let _running = RunningGuard::claim(&self.inner)?;
        let inner = &*self.inner;
        let config = &inner.config;
        let mut candidate = Candidate::new(inner.api.clone(), inner.lock.clone(), config.clone());
        let mut stop = inner.stop.subscribe();

        // Campaign. A request in flight is never abandoned for a stop: it might have taken the
        // Lease, and we must know.
        let mut renewed_at = loop {
            if *stop.borrow_and_update() {
                return Ok(ElectionEnd::NeverLed);
            }
            let started = Instant::now();
            let attempt = candidate
                .try_acquire_or_renew(&inner.shared, started + config.request_timeout())
                .await;
            if attempt == Attempt::Holding {
                break started;
            }
            tokio::select! {
                _ = sleep(config.jittered_retry_period()) => {}
                _ = stop.changed() => {}
            }
        };
        tracing::info!(lease = %inner.lock.name, identity = %config.identity, "became leader");
        inner.shared.started_leading();

        let (token_tx, token) = LeadershipToken::new();
        let work = lead(token);
        tokio::pin!(work);
        let leading = {
            let renewal = keep_renewing(&mut candidate, inner, &mut renewed_at, &token_tx, stop);
            tokio::pin!(renewal);
            tokio::select! {
                out = &mut work => Leading::Finished(out),
                lost = &mut renewal => lost,
            }
        };
        match leading {
            Leading::Finished(out) => {
                // Tasks the work left behind holding a token must stop before the release.
                token_tx.send_if_modified(|state| {
                    let leading = *state == LeadershipState::Leading;
                    if leading {
                        *state = LeadershipState::SteppingDown;
                    }
                    leading
                });
                if config.release_on_cancel {
                    candidate.release(&inner.shared).await;
                }
                inner.shared.stopped_leading(Stepped::Down);
                tracing::info!(lease = %inner.lock.name, identity = %config.identity, "stopped leading");
                Ok(ElectionEnd::Finished(out))
            }
            Leading::Lost { grace_until } => {
                inner.shared.stopped_leading(Stepped::Lost);
                // Polled at least once more, so work that stops on the token can return.
                let out = timeout_at(grace_until, work).await.ok();
                Ok(ElectionEnd::Lost(out))
            }
        }
    }
}

/// Renews the Lease every retry period until leadership is lost; returns how. On a stop
/// request, turns the token to stepping down and goes on renewing (the work decides when it is
/// done). `renewed_at` is when the last successful renewal was sent.
async fn keep_renewing<T>(
    candidate: &mut Candidate,
    inner: &Inner,
    renewed_at: &mut Instant,
    token: &watch::Sender<LeadershipState>,
    mut stop: watch::Receiver<bool>,
) -> Leading<T> {
    let config = &inner.config;
    let mut next = *renewed_at + config.retry_period;
    let mut stopping = false;
    loop {
        let deadline = *renewed_at + config.renew_deadline;
        if Instant::now() >= deadline {
            tracing::warn!(lease = %inner.lock.name, identity = %config.identity,
                "leader election lost: the lease was not renewed within the renew deadline");
            token.send_replace(LeadershipState::Lost);
            return Leading::Lost {
                grace_until: *renewed_at + config.lease_duration,
            };
        }
        tokio::select! {
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow_and_update() {
                    stopping = true;
                    token.send_replace(LeadershipState::SteppingDown);
                }
                continue;
            }
            _ = sleep_until(next.min(deadline)) => {}
        }
        if Instant::now() >= deadline {
            continue;
        }
        let started = Instant::now();
        match candidate
            .try_acquire_or_renew(&inner.shared, deadline)
            .await
        {
            Attempt::Holding => *renewed_at = started,
            Attempt::HeldBy(other) => {
                tracing::warn!(lease = %inner.lock.name, identity = %config.identity, holder = %other,
                    "leader election lost: another candidate holds the lease");
                token.send_replace(LeadershipState::Lost);
                return Leading::Lost {
                    grace_until: Instant::now(),
                };
            }
            Attempt::Failed => {}
        }
        next = started + config.retry_period;
    }
}

/// Marks an election as running for as long as it lives; when it goes (also when `run` is
/// dropped mid-way), this process no longer leads.
struct RunningGuard<'a>(&'a Inner);

impl<'a> RunningGuard<'a> {
    fn claim(inner: &'a Inner) -> Result<RunningGuard<'a>, LeaderElectionError> {
        inner
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| LeaderElectionError::AlreadyRunning)?;
        Ok(RunningGuard(inner))
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        if self.0.shared.is_leading() {
            self.0.shared.stopped_leading(Stepped::Down);
        }
        self.0.running.store(false, Ordering::Release);
    }
}

#[cfg(test)]
#[path = "election_tests.rs"]
mod tests;
