//! The plain limits used when API Priority and Fairness is off
//! (`--enable-priority-and-fairness=false`), as kube-apiserver's max-in-flight filter: at most
//! `--max-requests-inflight` reads and `--max-mutating-requests-inflight` writes execute at
//! once; one more is refused at once with `429`. `system:masters` and long-running requests
//! are not limited.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The two pools.
#[derive(Debug)]
pub(crate) struct Inflight {
    reads: Arc<Semaphore>,
    writes: Arc<Semaphore>,
}

impl Inflight {
    pub(crate) fn new(reads: usize, writes: usize) -> Inflight {
        Inflight {
            reads: Arc::new(Semaphore::new(reads.max(1))),
            writes: Arc::new(Semaphore::new(writes.max(1))),
        }
    }

    /// A slot for a request (a write if `mutating`), or `None` if its pool is exhausted.
    pub(crate) fn try_take(&self, mutating: bool) -> Option<OwnedSemaphorePermit> {
        let pool = if mutating { &self.writes } else { &self.reads };
        pool.clone().try_acquire_owned().ok()
    }
}
