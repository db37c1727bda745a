//! Where wide requests run: LISTs that take more than one seat (over [`OBJECTS_PER_SEAT`]
//! objects) are executed on a small pool of threads of their own, at a lower OS priority
//! (nice [`NICE`]), instead of on the runtime's worker threads with everything else.
//!
//! Seats bound how many requests of a priority level execute at once, but on a small machine
//! a LIST served from the watch cache is so cheap (tens of microseconds) that seats are given
//! back before they are ever short: a flood of LISTs then competes for the CPU itself, and the
//! other users' requests wait in the runtime's run queues, where fairness cannot reach. On
//! this pool, a flood LIST holds its seats while it waits for the CPU the other requests get
//! first; the flooder's further requests then wait in its APF queue, which is what fair
//! queuing is for. The pool has a thread per two cores (at least one).
//!
//! [`OBJECTS_PER_SEAT`]: super::OBJECTS_PER_SEAT

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

/// How much lower the pool's threads run than the rest of the process (Linux `nice`).
const NICE: i32 = 10;

/// The pool, started on first use; `None` if it could not be started (wide requests then run
/// where the others do).
fn pool() -> Option<&'static Handle> {
    static POOL: OnceLock<Option<Runtime>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads((cores / 2).max(1))
            .thread_name("setpoint-wide")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .map_err(|error| {
                tracing::warn!(%error, "wide requests run with the others: their pool could not be started");
            })
            .ok()
    })
    .as_ref()
    .map(Runtime::handle)
}

/// Lowers the calling thread's priority (on Linux a thread is scheduled on its own, so
/// `setpriority` on its id affects that thread only). Raising one's own nice value needs no
/// privilege; a failure leaves the thread at the normal priority.
fn lower_priority() {
    let tid = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(tid), NICE) {
        tracing::debug!(%error, "the wide-request pool runs at the normal priority");
    }
}

/// Runs `work` on the pool and waits for its output; runs it here if there is no pool. Dropping
/// the returned future aborts the work. `None` if the pool cancelled it (it is never shut down,
/// so only while the process exits).
pub(crate) async fn run<F, T>(work: F) -> Option<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let Some(pool) = pool() else {
        return Some(work.await);
    };
    // Unconstrained: on the pool a LIST runs to its end once started (the cache walk's
    // budget yields are for the runtime's workers), so the pool finishes its LISTs one after
    // another and gives their seats back as early as it can, instead of finishing all of them
    // late together.
    let mut task = AbortOnDrop(pool.spawn(tokio::task::unconstrained(work)));
    match (&mut task.0).await {
        Ok(output) => Some(output),
        // The work panicked: so does the request, as it would have here (the transport
        // answers 500).
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => None,
    }
}

/// A spawned task, aborted when its handle is dropped (the request was abandoned).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
