//! A loop a test runs in the background — a controller, a set of built-in loops, an operator —
//! and stops at the end: [`Running::spawn`] starts it with a [`CancellationToken`] that asks it
//! to stop, [`Running::stop`] asks and checks that it ended cleanly (no panic, no error, within
//! [`DEADLINE`](crate::DEADLINE)). Dropping a `Running` without `stop` (a failing test) only
//! asks it to stop.

use std::fmt::Debug;
use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A loop running as a tokio task until it is asked to stop.
pub struct Running<E> {
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), E>>>,
}

impl<E: Debug + Send + 'static> Running<E> {
    /// Spawns `run(token)` on the current tokio runtime; the loop must return once `token` is
    /// cancelled. A loop that ends by a future (a controller's `run(.., shutdown)`) gets
    /// `token.cancelled_owned()`.
    pub fn spawn<F, Fut>(run: F) -> Running<E>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(shutdown.clone()));
        Running {
            shutdown,
            task: Some(task),
        }
    }

    /// Asks the loop to stop, without waiting for it.
    pub fn ask_to_stop(&self) {
        self.shutdown.cancel();
    }

    /// Whether the loop has ended.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Asks the loop to stop and waits for it; panics if it panicked, returned an error, or
    /// did not end within [`DEADLINE`](crate::DEADLINE). Not cancel-safe (the loop is then
    /// only asked to stop).
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let Some(task) = self.task.take() else {
            return;
        };
        match tokio::time::timeout(crate::DEADLINE, task).await {
            Err(_) => panic!("the loop did not stop within {:?}", crate::DEADLINE),
            Ok(Err(e)) => panic!("the loop panicked: {e}"),
            Ok(Ok(Err(e))) => panic!("the loop ended with an error: {e:?}"),
            Ok(Ok(Ok(()))) => {}
        }
    }
}

impl<E> Drop for Running<E> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
