//! The userspace fallback (no root or no `nft`): a TCP listener per NodePort on 127.0.0.1
//! and the node's address, each connection spliced to an endpoint chosen round robin (or the
//! client's remembered endpoint for `sessionAffinity: ClientIP`). ClusterIPs are not local
//! addresses without root, so they stay unreachable in this mode; UDP is not forwarded.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::model::{Backend, Protocol, ServicePortRule};

/// Where one NodePort's connections go.
#[derive(Debug, Default)]
struct Target {
    backends: Vec<Backend>,
    affinity: Option<Duration>,
    next: AtomicUsize,
    clients: Mutex<HashMap<IpAddr, (Backend, Instant)>>,
}

impl Target {
    /// The endpoint for a connection from `client`.
    fn pick(&self, client: IpAddr) -> Option<Backend> {
        if self.backends.is_empty() {
            return None;
        }
        if let Some(timeout) = self.affinity {
            let now = Instant::now();
            let mut clients = self.clients.lock();
            if let Some((backend, seen)) = clients.get(&client).copied() {
                if now.duration_since(seen) < timeout && self.backends.contains(&backend) {
                    clients.insert(client, (backend, now));
                    return Some(backend);
                }
            }
            let backend = self.round_robin();
            clients.insert(client, (backend, now));
            return Some(backend);
        }
        Some(self.round_robin())
    }

    fn round_robin(&self) -> Backend {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.backends[i % self.backends.len()]
    }
}

/// One NodePort's listeners and their current target.
struct Forwarder {
    target: Arc<Mutex<Arc<Target>>>,
    tasks: Vec<JoinHandle<()>>,
}

/// The NodePort listeners of the userspace mode.
pub(crate) struct UserspaceProxy {
    /// Why this mode (for the Node condition).
    pub(crate) why: &'static str,
    addresses: Vec<IpAddr>,
    forwarders: BTreeMap<u16, Forwarder>,
    shutdown: CancellationToken,
}

impl UserspaceProxy {
    /// Listeners will bind 127.0.0.1 and `node_ip` (when it is another address).
    pub(crate) fn new(
        node_ip: IpAddr,
        why: &'static str,
        shutdown: CancellationToken,
    ) -> UserspaceProxy {
        let mut addresses = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        if !node_ip.is_loopback() && !node_ip.is_unspecified() {
            addresses.push(node_ip);
        }
        UserspaceProxy {
            why,
            addresses,
            forwarders: BTreeMap::new(),
            shutdown,
        }
    }

    /// Brings the listeners in line with `rules`: new NodePorts get listeners, gone ones are
    /// closed, the others get their new endpoints.
    pub(crate) async fn sync(&mut self, rules: &[ServicePortRule]) {
        let mut wanted: BTreeMap<u16, Target> = BTreeMap::new();
        for rule in rules.iter().filter(|r| r.protocol == Protocol::Tcp) {
            let Some(node_port) = rule.node_port else {
                continue;
            };
            wanted.insert(
                node_port,
                Target {
                    backends: rule
                        .local_backends
                        .clone()
                        .unwrap_or_else(|| rule.backends.clone()),
                    affinity: rule
                        .affinity_timeout
                        .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0))),
                    ..Target::default()
                },
            );
        }
        let gone: Vec<u16> = self
            .forwarders
            .keys()
            .filter(|p| !wanted.contains_key(p))
            .copied()
            .collect();
        for port in gone {
            if let Some(forwarder) = self.forwarders.remove(&port) {
                forwarder.tasks.iter().for_each(JoinHandle::abort);
            }
        }
        for (port, target) in wanted {
            if let Some(forwarder) = self.forwarders.get(&port) {
                let mut current = forwarder.target.lock();
                if current.backends != target.backends || current.affinity != target.affinity {
                    *current = Arc::new(target);
                }
                continue;
            }
            let shared = Arc::new(Mutex::new(Arc::new(target)));
            let mut tasks = Vec::new();
            for address in &self.addresses {
                let at = SocketAddr::new(*address, port);
                match TcpListener::bind(at).await {
                    Ok(listener) => tasks.push(tokio::spawn(accept_loop(
                        listener,
                        shared.clone(),
                        self.shutdown.clone(),
                    ))),
                    Err(e) => tracing::warn!(%at, error = %e, "cannot listen for a NodePort"),
                }
            }
            self.forwarders.insert(
                port,
                Forwarder {
                    target: shared,
                    tasks,
                },
            );
        }
    }

    /// Closes every listener.
    pub(crate) fn stop(&mut self) {
        for forwarder in std::mem::take(&mut self.forwarders).into_values() {
            forwarder.tasks.iter().for_each(JoinHandle::abort);
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: Arc<Mutex<Arc<Target>>>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((client, peer)) = accepted else {
            continue;
        };
        let current = target.lock().clone();
        let Some(backend) = current.pick(peer.ip()) else {
            // No endpoint: close at once (the kernel mode rejects).
            continue;
        };
        tokio::spawn(splice(client, backend));
    }
}

async fn splice(mut client: TcpStream, backend: Backend) {
    let at = SocketAddr::new(IpAddr::V4(backend.ip), backend.port);
    match TcpStream::connect(at).await {
        Ok(mut server) => {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        Err(e) => tracing::debug!(%at, error = %e, "NodePort endpoint refused"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(affinity: Option<Duration>) -> Target {
        Target {
            backends: vec![
                Backend {
                    ip: Ipv4Addr::new(10, 0, 0, 1),
                    port: 80,
                },
                Backend {
                    ip: Ipv4Addr::new(10, 0, 0, 2),
                    port: 80,
                },
            ],
            affinity,
            ..Target::default()
        }
    }

    #[test]
    fn without_affinity_connections_take_turns() {
        let t = target(None);
        let client = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let picks: Vec<_> = (0..4)
            .filter_map(|_| t.pick(client))
            .map(|b| b.ip)
            .collect();
        assert_eq!(picks[0], picks[2]);
        assert_ne!(picks[0], picks[1]);
    }

    #[test]
    fn client_ip_affinity_keeps_a_client_on_its_endpoint() {
        let t = target(Some(Duration::from_secs(60)));
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let first = t.pick(a);
        let other = t.pick(b);
        assert_ne!(first, other);
        assert!((0..5).all(|_| t.pick(a) == first));
    }

    #[test]
    fn no_endpoints_no_pick() {
        let t = Target::default();
        assert_eq!(t.pick(IpAddr::V4(Ipv4Addr::LOCALHOST)), None);
    }
}
