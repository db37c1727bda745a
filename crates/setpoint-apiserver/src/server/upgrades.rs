//! Connections taken over after `101 Switching Protocols` (`pods/exec`, `attach`,
//! `portforward`): once hyper hands an upgraded connection to the handler, the connection is
//! no longer the transport's, so neither the request timeout nor the accept loop's connection
//! set sees it. The transport gives every request an [`Upgrades`] (a request extension); a
//! handler runs the work on an upgraded connection through [`Upgrades::spawn`], and the
//! transport, shutting down, lets those tasks run for the same grace period as open
//! connections, then stops them.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The tasks serving upgraded connections. Cheap to clone; every clone is the same set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Upgrades {
    /// Every task spawned; closed when shutdown begins, so waiting on it ends.
    tracker: TaskTracker,
    /// Cancelled when the grace period is over: every task then ends at once.
    stop: CancellationToken,
}

impl Upgrades {
    /// Runs `task` until it ends or the server's shutdown grace period is over.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// How many tasks are running.
    pub(crate) fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Waits until `deadline` for every task to end, then stops the rest and waits for them.
    pub(crate) async fn shut_down(&self, deadline: tokio::time::Instant) {
        self.tracker.close();
        if tokio::time::timeout_at(deadline, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                open = self.tracker.len(),
                "closing upgraded connections (exec, attach, port-forward) still open after the grace period"
            );
        }
        self.stop.cancel();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn shut_down_should_wait_for_short_tasks_and_stop_long_ones() {
        let upgrades = Upgrades::default();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        upgrades.spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let _ = done_tx.send(());
        });
        upgrades.spawn(std::future::pending());
        assert_eq!(upgrades.len(), 2);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
        tokio::time::timeout(Duration::from_secs(30), upgrades.shut_down(deadline))
            .await
            .expect("the never-ending task is stopped after the grace period");
        assert!(done_rx.await.is_ok(), "the short task ran to its end");
        assert_eq!(upgrades.len(), 0);
    }
}
