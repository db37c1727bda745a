//! The handle a leader's work receives: it says when leadership ends.

use tokio::sync::watch;

/// Where this process's leadership stands, as seen through a [`LeadershipToken`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeadershipState {
    /// This process holds the Lease and keeps renewing it.
    Leading,
    /// Leadership is being given up on purpose — the election was asked to stop, or the
    /// leader's work returned: the Lease is held and renewed until the work has returned, then
    /// released. The work should wind down.
    SteppingDown,
    /// The Lease could not be renewed in time, or another candidate holds it. The work must stop
    /// at once; it is dropped when the Lease may be taken over.
    Lost,
}

/// Given to the leader's work when this process becomes leader. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LeadershipToken {
    state: watch::Receiver<LeadershipState>,
}

impl LeadershipToken {
    /// A token and the sender that moves it along.
    pub(crate) fn new() -> (watch::Sender<LeadershipState>, LeadershipToken) {
        let (tx, state) = watch::channel(LeadershipState::Leading);
        (tx, LeadershipToken { state })
    }

    /// Where leadership stands now.
    pub fn state(&self) -> LeadershipState {
        *self.state.borrow()
    }

    /// Whether this process leads and has not been asked to step down.
    pub fn is_leading(&self) -> bool {
        self.state() == LeadershipState::Leading
    }

    /// Resolves once this process must stop acting as leader: the Lease was lost, or the
    /// election was asked to stop ([`LeadershipState::SteppingDown`]). Returns at once if that
    /// already happened. Cancel-safe.
    pub async fn lost(&self) {
        let mut state = self.state.clone();
        // An error means the election is gone, which also ends leadership.
        let _ = state.wait_for(|s| *s != LeadershipState::Leading).await;
    }
}
