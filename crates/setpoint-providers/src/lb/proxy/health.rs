//! Active health checks: every interval, each TCP backend is connected to (and the
//! connection closed); the result goes to [`Backend::record_check`], which turns a backend
//! unhealthy after `fall` failures in a row and healthy again after `rise` passes. UDP
//! backends are not checked (nothing answers a bare datagram in general).

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::backends::Backend;
use crate::lb::config::HealthCheck;

/// The checks' settings and the backends they check; replaced on each reload.
#[derive(Clone, Default)]
pub(super) struct HealthTargets(Arc<Mutex<(HealthCheck, Vec<Arc<Backend>>)>>);

impl HealthTargets {
    /// Checks `backends` with `check` from the next round on.
    pub(super) fn set(&self, check: HealthCheck, backends: Vec<Arc<Backend>>) {
        *self.0.lock() = (check, backends);
    }

    fn snapshot(&self) -> (HealthCheck, Vec<Arc<Backend>>) {
        self.0.lock().clone()
    }
}

/// Checks the targets every interval until `stop`.
pub(super) async fn check_forever(targets: HealthTargets, stop: CancellationToken) {
    loop {
        let (check, _) = targets.snapshot();
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(check.interval()) => {}
        }
        let (check, backends) = targets.snapshot();
        let rounds = backends.iter().map(|backend| async move {
            let passed = matches!(
                tokio::time::timeout(check.timeout(), TcpStream::connect(backend.addr)).await,
                Ok(Ok(_))
            );
            backend.record_check(passed, &check);
        });
        tokio::select! {
            () = stop.cancelled() => return,
            _ = futures::future::join_all(rounds) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backend_should_fail_its_checks_while_closed_and_pass_once_it_listens() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let backend = Arc::new(Backend::new(addr));
        let targets = HealthTargets::default();
        let check = HealthCheck {
            interval_millis: 20,
            timeout_millis: 200,
            fall: 2,
            rise: 2,
        };
        targets.set(check, vec![Arc::clone(&backend)]);
        let stop = CancellationToken::new();
        tokio::spawn(check_forever(targets, stop.clone()));
        let until = |healthy: bool| {
            let backend = Arc::clone(&backend);
            async move {
                while backend.is_healthy() != healthy {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), until(false))
            .await
            .expect("marked unhealthy");
        let _back = std::net::TcpListener::bind(addr).expect("rebind");
        tokio::time::timeout(Duration::from_secs(20), until(true))
            .await
            .expect("healthy again");
        stop.cancel();
    }
}
