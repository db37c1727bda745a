//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas of a
//! controller exactly one acts at a time. Use it around whatever must not run twice: usually
//! every controller of a process.
//!
//! Semantics are client-go's (`tools/leaderelection`): candidates read the Lease every retry
//! period; one whose record has not changed for its `leaseDurationSeconds` — measured on the
//! reader's own clock from when it *saw* the record change, never by comparing timestamps
//! across machines — is expired and may be taken, by an update conditional on the
//! `resourceVersion` read, so of two racing candidates exactly one wins. The leader renews every
//! retry period; if it has not renewed within the renew deadline it gives up leadership, before
//! the lease duration lets anyone else in. On a graceful stop it clears the holder so a standby
//! takes over at once.
//!
//! What this module promises beyond client-go:
//! - losing the Lease stops the leader's work: [`LeaderElection::run`] polls the work itself,
//!   tells it through [`LeadershipToken::lost`], and drops it no later than the moment another
//!   candidate could take over;
//! - a leader that sees another holder in the Lease gives up at once instead of retrying until
//!   its renew deadline;
//! - the renew deadline is counted from the last *successful* renewal (client-go counts it from
//!   the start of each renewal round), so the leader stops at most `renew_deadline` after it
//!   last proved it held the Lease.
//!
//! Submodules: `config` (lock, timings, validation), `record` (the Lease record and expiry),
//! `candidate` (one candidate's reads and writes), `election` (the loop), `token` (what the
//! work receives), `state` (what observers see: leadership channel and metrics).

mod candidate;
mod config;
mod election;
mod record;
mod state;
mod token;

use std::time::Duration;

pub use config::{LeaderElectionConfig, LeaseLock};
pub use election::{ElectionEnd, LeaderElection};
pub use state::LeaderElectionMetrics;
pub use token::{LeadershipState, LeadershipToken};

/// Why a leader election could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The identity is empty.
    #[error("leader election identity must not be empty")]
    EmptyIdentity,
    /// The lock has no name or no namespace.
    #[error("leader election lock needs a namespace and a name")]
    IncompleteLock,
    /// The retry period is zero.
    #[error("leader election retry period must be greater than zero")]
    ZeroRetryPeriod,
    /// The lease duration is zero, not a whole number of seconds, or too large for the Lease.
    #[error(
        "leader election lease duration must be a positive whole number of seconds, got {0:?}"
    )]
    LeaseDurationNotWholeSeconds(Duration),
    /// The lease duration does not exceed the renew deadline, so another candidate could take
    /// over while the leader still believes it leads.
    #[error(
        "leader election lease duration ({lease_duration:?}) must be greater than the renew deadline ({renew_deadline:?})"
    )]
    RenewDeadlineNotBeforeLeaseEnd {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// The renew deadline leaves no room for a jittered retry.
    #[error(
        "leader election renew deadline ({renew_deadline:?}) must be greater than 1.2 × the retry period ({retry_period:?})"
    )]
    RenewDeadlineTooShort {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
    /// [`LeaderElection::run`] was called while another call on the same election runs.
    #[error("this leader election is already running")]
    AlreadyRunning,
}
