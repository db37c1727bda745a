//! One candidate's reads and writes of the Lease: client-go's `tryAcquireOrRenew` and `release`.
//!
//! Every write is an update carrying the `resourceVersion` last read, so when two candidates
//! race for an expired Lease the server lets exactly one win and answers the other `409
//! Conflict`. Each request is bounded by a timeout; a request that fails or times out is simply
//! an attempt that did not succeed — the caller decides what that means.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use tokio::time::{timeout_at, Instant};

use super::config::{LeaderElectionConfig, LeaseLock};
use super::record::{claimed_spec, released_spec, Holder, Observation};
use super::state::Shared;
use crate::micro_time::micro_time_now;

/// How one attempt to acquire or renew ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The Lease names us, freshly written.
    Holding,
    /// Another candidate holds the Lease and its record has not expired.
    HeldBy(String),
    /// The request failed, timed out or lost a race; nothing is known to have changed.
    Failed,
}

/// A candidate's view of the Lease and the means to write it.
pub(crate) struct Candidate {
    api: kube::Api<Lease>,
    lock: LeaseLock,
    config: LeaderElectionConfig,
    /// The Lease as last read or written; `None` before the first successful read.
    observed: Option<Observation>,
}

impl Candidate {
    pub(crate) fn new(
        api: kube::Api<Lease>,
        lock: LeaseLock,
        config: LeaderElectionConfig,
    ) -> Candidate {
        Candidate {
            api,
            lock,
            config,
            observed: None,
        }
    }

    /// Tries once to take the Lease or, if we hold it, to renew it. Gives up on any request at
    /// `deadline` (and after the configured request timeout). Cancel-safe: dropping it leaves
    /// the observation as it was before the request in flight.
    pub(crate) async fn try_acquire_or_renew(
        &mut self,
        shared: &Shared,
        deadline: Instant,
    ) -> Attempt {
        let now = Instant::now();
        let request_deadline = deadline.min(now + self.config.request_timeout());
        let identity = self.config.identity.clone();

        // Fast path: we hold an unexpired Lease, so write the renewal over what we last wrote.
        if let Some(seen) = self.observed.as_ref() {
            if seen.holder(&identity, now) == Holder::Us && now < seen.expires_at() {
                let renewed = self.claim(seen.lease());
                match timeout_at(request_deadline, self.replace(&renewed)).await {
                    Ok(Ok(written)) => return self.wrote(shared, written, now),
                    Ok(Err(error)) => {
                        tracing::debug!(lease = %self.lock.name, %error, "lease renewal failed, rereading the lease");
                    }
                    Err(_) => {
                        tracing::debug!(lease = %self.lock.name, "lease renewal timed out");
                        return Attempt::Failed;
                    }
                }
                shared.slow_path();
            }
        }

        // Slow path: read the Lease, create it if absent, take it if free or expired.
        let current = match timeout_at(request_deadline, self.api.get_opt(&self.lock.name)).await {
            Ok(Ok(current)) => current,
            Ok(Err(error)) => {
                tracing::debug!(lease = %self.lock.name, %error, "reading the lease failed");
                return Attempt::Failed;
            }
            Err(_) => return Attempt::Failed,
        };
        let Some(current) = current else {
            let fresh = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lock.name.clone()),
                    namespace: Some(self.lock.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(claimed_spec(
                    None,
                    &identity,
                    self.config.lease_duration_seconds(),
                    micro_time_now(),
                )),
            };
            return match timeout_at(
                request_deadline,
                self.api.create(&PostParams::default(), &fresh),
            )
            .await
            {
                Ok(Ok(written)) => self.wrote(shared, written, now),
                Ok(Err(error)) => {
                    tracing::debug!(lease = %self.lock.name, %error, "creating the lease failed");
                    Attempt::Failed
                }
                Err(_) => Attempt::Failed,
            };
        };

        let seen = Observation::observe(self.observed.as_ref(), current, Instant::now());
        shared.observed(seen.holder_identity(), seen.transitions());
        let holder = seen.holder(&identity, Instant::now());
        let claimed = self.claim(seen.lease());
        self.observed = Some(seen);
        if let Holder::Other(other) = holder {
            return Attempt::HeldBy(other);
        }
        match timeout_at(request_deadline, self.replace(&claimed)).await {
            Ok(Ok(written)) => self.wrote(shared, written, now),
            Ok(Err(error)) => {
                tracing::debug!(lease = %self.lock.name, %error, "taking the lease failed");
                Attempt::Failed
            }
            Err(_) => Attempt::Failed,
        }
    }

    /// Steps down: if the Lease still names us, clears the holder so another candidate can
    /// take it at once. Best effort — failures are logged, and the Lease then simply expires.
    pub(crate) async fn release(&mut self, shared: &Shared) {
        let deadline = Instant::now() + self.config.request_timeout();
        let current = match timeout_at(deadline, self.api.get_opt(&self.lock.name)).await {
            Ok(Ok(Some(current))) => current,
            Ok(Ok(None)) => return,
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.lock.name, %error, "releasing the lease: read failed; it will expire instead");
                return;
            }
            Err(_) => {
                tracing::warn!(lease = %self.lock.name, "releasing the lease: read timed out; it will expire instead");
                return;
            }
        };
        let names_us = current
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.config.identity.as_str());
        if !names_us {
            return;
        }
        let mut released = current.clone();
        released.spec = current
            .spec
            .as_ref()
            .map(|spec| released_spec(spec, micro_time_now()));
        match timeout_at(deadline, self.replace(&released)).await {
            Ok(Ok(written)) => {
                let seen = Observation::observe(self.observed.as_ref(), written, Instant::now());
                shared.observed(seen.holder_identity(), seen.transitions());
                self.observed = Some(seen);
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.lock.name, %error, "releasing the lease failed; it will expire instead");
            }
            Err(_) => {
                tracing::warn!(lease = %self.lock.name, "releasing the lease timed out; it will expire instead");
            }
        }
    }

    /// `lease` with a record naming us, renewed now.
    fn claim(&self, lease: &Lease) -> Lease {
        Lease {
            metadata: lease.metadata.clone(),
            spec: Some(claimed_spec(
                lease.spec.as_ref(),
                &self.config.identity,
                self.config.lease_duration_seconds(),
                micro_time_now(),
            )),
        }
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.lock.name, &PostParams::default(), lease)
            .await
    }

    /// Records a successful write of `written`, sent at `sent_at`.
    fn wrote(&mut self, shared: &Shared, written: Lease, sent_at: Instant) -> Attempt {
        let seen = Observation::observe(self.observed.as_ref(), written, sent_at);
        shared.observed(seen.holder_identity(), seen.transitions());
        self.observed = Some(seen);
        Attempt::Holding
    }
}
