//! The backends of a balancer and how one is picked. A [`Backend`] is shared by every port
//! that forwards to it and survives reloads (its health and open connections carry over); a
//! [`Group`] is one port's backends with its picking state, replaced whole on a reload.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::lb::config::{Algorithm, HealthCheck};

/// One backend address and what the balancer knows of it.
#[derive(Debug)]
pub(crate) struct Backend {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Whether it is picked. New backends start healthy (they are ready endpoints).
    healthy: AtomicBool,
    /// Failed checks in a row (0 after a pass).
    fails: AtomicU32,
    /// Passed checks in a row (0 after a failure).
    passes: AtomicU32,
    /// Connections (TCP) or sessions (UDP) open to it now.
    active: AtomicUsize,
}

impl Backend {
    /// A healthy backend at `addr`.
    pub(crate) fn new(addr: SocketAddr) -> Backend {
        Backend {
            addr,
            healthy: AtomicBool::new(true),
            fails: AtomicU32::new(0),
            passes: AtomicU32::new(0),
            active: AtomicUsize::new(0),
        }
    }

    /// Whether it is picked.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Records a health check's result under `check`'s thresholds.
    pub(crate) fn record_check(&self, passed: bool, check: &HealthCheck) {
        if passed {
            self.fails.store(0, Ordering::Relaxed);
            let passes = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
            if passes >= check.rise.max(1) && !self.healthy.swap(true, Ordering::Relaxed) {
                tracing::info!(backend = %self.addr, "backend passes its health checks again");
            }
        } else {
            self.passes.store(0, Ordering::Relaxed);
            let fails = self.fails.fetch_add(1, Ordering::Relaxed) + 1;
            if fails >= check.fall.max(1) && self.healthy.swap(false, Ordering::Relaxed) {
                tracing::warn!(backend = %self.addr, "backend fails its health checks: skipped");
            }
        }
    }

    /// A client's connection to it failed: skipped until a check passes.
    pub(crate) fn record_refused(&self) {
        self.passes.store(0, Ordering::Relaxed);
        if self.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(backend = %self.addr, "backend refused a connection: skipped");
        }
    }

    /// Counts an open connection until the guard is dropped.
    pub(crate) fn open(self: &Arc<Self>) -> ActiveGuard {
        self.active.fetch_add(1, Ordering::Relaxed);
        ActiveGuard(Arc::clone(self))
    }

    fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

/// An open connection to a backend; closes its count when dropped.
#[derive(Debug)]
pub(crate) struct ActiveGuard(Arc<Backend>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One port's backends and its turn counter.
#[derive(Debug)]
pub(crate) struct Group {
    backends: Vec<Arc<Backend>>,
    algorithm: Algorithm,
    /// Where the next round-robin turn starts.
    next: AtomicUsize,
}

impl Group {
    /// The group of `backends`, picked by `algorithm`.
    pub(crate) fn new(backends: Vec<Arc<Backend>>, algorithm: Algorithm) -> Group {
        Group {
            backends,
            algorithm,
            next: AtomicUsize::new(0),
        }
    }

    /// How many backends it has.
    pub(crate) fn len(&self) -> usize {
        self.backends.len()
    }

    /// The backend for the next connection, not one of `tried`: among the healthy ones, in
    /// turn or the least loaded; when none is healthy, among all (a check may be stale, and a
    /// refused connection costs the client no more than no backend at all).
    pub(crate) fn pick(&self, tried: &[SocketAddr]) -> Option<Arc<Backend>> {
        let untried = |b: &&Arc<Backend>| !tried.contains(&b.addr);
        let healthy: Vec<&Arc<Backend>> = self
            .backends
            .iter()
            .filter(untried)
            .filter(|b| b.is_healthy())
            .collect();
        let candidates = if healthy.is_empty() {
            self.backends.iter().filter(untried).collect()
        } else {
            healthy
        };
        if candidates.is_empty() {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % candidates.len();
        let turn = candidates[start..].iter().chain(&candidates[..start]);
        let chosen = match self.algorithm {
            Algorithm::RoundRobin => candidates.get(start).copied(),
            // The first of the least loaded, counted from this turn: ties rotate.
            Algorithm::LeastConnections => turn.min_by_key(|b| b.active()).copied(),
        };
        chosen.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(algorithm: Algorithm) -> Group {
        Group::new(
            (1..=3)
                .map(|i| Arc::new(Backend::new(([10, 0, 0, i], 80).into())))
                .collect(),
            algorithm,
        )
    }

    fn last_octets(g: &Group, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| match g.pick(&[]).expect("a backend").addr.ip() {
                std::net::IpAddr::V4(ip) => ip.octets()[3],
                std::net::IpAddr::V6(_) => 0,
            })
            .collect()
    }

    #[test]
    fn round_robin_should_take_turns_and_skip_unhealthy_backends() {
        let g = group(Algorithm::RoundRobin);
        assert_eq!(last_octets(&g, 6), [1, 2, 3, 1, 2, 3]);
        let check = HealthCheck::default();
        g.backends[1].record_check(false, &check);
        assert!(g.backends[1].is_healthy(), "one failure is below `fall`");
        g.backends[1].record_check(false, &check);
        assert!(!g.backends[1].is_healthy());
        assert!(!last_octets(&g, 6).contains(&2));
        g.backends[1].record_check(true, &check);
        assert!(last_octets(&g, 6).contains(&2), "back after `rise` passes");
    }

    #[test]
    fn least_connections_should_pick_the_least_loaded() {
        let g = group(Algorithm::LeastConnections);
        let _a = g.backends[0].open();
        let _b = g.backends[2].open();
        assert_eq!(last_octets(&g, 3), [2, 2, 2]);
    }

    #[test]
    fn a_pick_should_fall_back_to_unhealthy_backends_and_skip_tried_ones() {
        let g = group(Algorithm::RoundRobin);
        for b in &g.backends {
            b.record_refused();
        }
        let tried = [g.backends[0].addr, g.backends[1].addr];
        assert_eq!(g.pick(&tried).map(|b| b.addr), Some(g.backends[2].addr));
        let all: Vec<SocketAddr> = g.backends.iter().map(|b| b.addr).collect();
        assert!(g.pick(&all).is_none());
    }
}
