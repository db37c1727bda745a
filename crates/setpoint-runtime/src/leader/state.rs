//! What the rest of the process can see of an election while it runs: whether this process
//! leads (a watch channel), who holds the Lease as last seen, and the election's metrics.

use parking_lot::Mutex;
use tokio::sync::watch;

/// A snapshot of an election's metrics, named after client-go's leader-election metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionMetrics {
    /// Whether this process currently leads (`leader_election_master_status`, 1 or 0).
    pub leading: bool,
    /// How many times this process became leader.
    pub acquisitions: u64,
    /// How many times this process lost leadership without choosing to (renewal failed or
    /// another candidate took the Lease).
    pub losses: u64,
    /// Renewals that could not be written over the last-seen Lease and had to read it again
    /// (`leader_election_slowpath_total`).
    pub slow_path_total: u64,
    /// The Lease's `leaseTransitions` as last seen: how often its holder changed, by anyone.
    pub lease_transitions: Option<i32>,
}

/// Election state shared between the running election and its observers.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `true` while this process holds the Lease and acts as leader.
    leading: watch::Sender<bool>,
    /// The holder named by the Lease as last seen (`None`: no holder or never read).
    holder: Mutex<Option<String>>,
    /// Counters behind [`LeaderElectionMetrics`]; `leading` there is read from the channel.
    counters: Mutex<LeaderElectionMetrics>,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            leading: watch::channel(false).0,
            holder: Mutex::new(None),
            counters: Mutex::new(LeaderElectionMetrics::default()),
        }
    }

    pub(crate) fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    pub(crate) fn holder(&self) -> Option<String> {
        self.holder.lock().clone()
    }

    pub(crate) fn metrics(&self) -> LeaderElectionMetrics {
        let mut snapshot = self.counters.lock().clone();
        snapshot.leading = self.is_leading();
        snapshot
    }

    /// Records what the Lease said when last read or written.
    pub(crate) fn observed(&self, holder: Option<&str>, transitions: i32) {
        *self.holder.lock() = holder.map(str::to_owned);
        self.counters.lock().lease_transitions = Some(transitions);
    }

    pub(crate) fn slow_path(&self) {
        self.counters.lock().slow_path_total += 1;
    }

    /// This process became leader.
    pub(crate) fn started_leading(&self) {
        self.counters.lock().acquisitions += 1;
        self.leading.send_replace(true);
    }

    /// This process stopped leading; `lost` if it did not choose to.
    pub(crate) fn stopped_leading(&self, how: Stepped) {
        if how == Stepped::Lost {
            self.counters.lock().losses += 1;
        }
        self.leading.send_replace(false);
    }
}

/// How leadership ended, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stepped {
    /// Given up on purpose.
    Down,
    /// Taken away.
    Lost,
}
