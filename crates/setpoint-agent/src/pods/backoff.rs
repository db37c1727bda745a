//! Crash-loop back-off, as the kubelet keeps it per container: the first restart after a
//! failure is immediate; each later one waits 10 s, doubling up to 5 min after the exit; a
//! container that has not been restarted for 10 minutes starts over at "immediate".
//!
//! Time is `tokio::time`, so tests run with paused time.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The first delay.
pub(crate) const INITIAL: Duration = Duration::from_secs(10);
/// The longest delay.
pub(crate) const MAX: Duration = Duration::from_secs(300);

/// Back-off per container name.
#[derive(Debug, Default)]
pub(crate) struct CrashBackoff {
    /// Per container: the delay the next restart waits after an exit, and when the container
    /// was last restarted. An entry exists once a container has been restarted.
    entries: HashMap<String, Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_restart: Instant,
}

impl Entry {
    /// An entry not renewed for twice the longest delay is forgotten.
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_restart) > 2 * MAX
    }
}

impl CrashBackoff {
    /// When `container`, which exited at `exited`, may be restarted: `None` for now, else the
    /// instant and the delay that applies.
    pub(crate) fn restart_at(
        &self,
        container: &str,
        exited: Instant,
    ) -> Option<(Instant, Duration)> {
        let now = Instant::now();
        let entry = self.entries.get(container).filter(|e| !e.expired(now))?;
        let at = exited + entry.delay;
        (now < at).then_some((at, entry.delay))
    }

    /// Records that `container` is restarted now: the next restart waits longer.
    pub(crate) fn restarted(&mut self, container: &str) {
        let now = Instant::now();
        let delay = match self.entries.get(container) {
            Some(entry) if !entry.expired(now) => (entry.delay * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(
            container.to_owned(),
            Entry {
                delay,
                last_restart: now,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn backoff_should_restart_at_once_then_wait_10s_doubling_to_5min() {
        let mut backoff = CrashBackoff::default();
        assert_eq!(backoff.restart_at("c", Instant::now()), None);
        backoff.restarted("c");
        let mut waits = Vec::new();
        for _ in 0..7 {
            let exited = Instant::now();
            let (at, delay) = backoff.restart_at("c", exited).expect("backing off");
            assert_eq!(at, exited + delay);
            waits.push(delay.as_secs());
            tokio::time::advance(delay).await;
            assert_eq!(backoff.restart_at("c", exited), None);
            backoff.restarted("c");
        }
        assert_eq!(waits, vec![10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff.restart_at("other", Instant::now()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_should_start_over_after_10_minutes_without_restart() {
        let mut backoff = CrashBackoff::default();
        backoff.restarted("c");
        backoff.restarted("c");
        tokio::time::advance(Duration::from_secs(601)).await;
        assert_eq!(backoff.restart_at("c", Instant::now()), None);
        backoff.restarted("c");
        let (_, delay) = backoff
            .restart_at("c", Instant::now())
            .expect("backing off");
        assert_eq!(delay, INITIAL);
    }
}
