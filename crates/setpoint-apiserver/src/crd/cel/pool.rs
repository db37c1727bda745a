//! Where CEL rules run: on tokio's blocking threads, at most as many evaluations at once as
//! the machine has CPUs. A costly evaluation (up to [`super::limits::RUNTIME_BUDGET`] per
//! request) never holds an async worker, so `/readyz`, watches, the controllers and the node
//! agent in the same process keep going while it runs, and a burst of such requests waits
//! for a slot instead of taking every core.

use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

fn slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
            Arc::new(Semaphore::new(cpus.max(1)))
        })
        .clone()
}

/// Runs `f` on a blocking thread once a slot is free. `None` if the runtime is shutting down
/// and the work was cancelled; a panic in `f` resumes in the caller.
///
/// Cancel-safe: dropping the future before `f` starts frees the slot and `f` never runs;
/// dropping it later lets `f` finish on its thread, then frees the slot.
pub(crate) async fn run<T, F>(f: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    // The semaphore is never closed, so acquiring only waits.
    let permit = slots().acquire_owned().await.ok();
    let task = tokio::task::spawn_blocking(move || {
        let _slot = permit;
        f()
    });
    match task.await {
        Ok(value) => Some(value),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn work_should_run_off_the_async_thread() {
        // Regression (issue 14.5): CEL rules ran on the async worker threads, so one costly
        // evaluation stalled every other task of a single-threaded runtime.
        let release = Arc::new(AtomicBool::new(false));
        let held = Arc::clone(&release);
        let slow = tokio::spawn(run(move || {
            while !held.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            7
        }));
        // The single runtime thread is free: a timer fires while the work spins.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!slow.is_finished());
        release.store(true, Ordering::Release);
        assert_eq!(slow.await.unwrap(), Some(7));
    }
}
