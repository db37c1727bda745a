//! The balancer process's data plane (`setpoint lb-proxy --config FILE`): listens on the
//! configured address for each port (TCP, and UDP with a session per client) and forwards to
//! the port's backends, picked round robin or by least connections among those passing their
//! active TCP health checks. The configuration file is re-read every 250 ms and on SIGHUP;
//! a changed one is applied in place — ports added and removed, backends swapped (their
//! health and connection counts carry over), everything rebound when the address changes —
//! without touching connections in flight. After each change the process writes its
//! [`ProxyState`] beside the file: what it applied and which listeners it holds (a listener
//! that cannot be opened is retried on every tick).
//!
//! With `forwarding: Kernel`, the ports the kernel can forward are DNATed by an nftables table
//! of the balancer's own ([`kernel`]), kept in step with the backends' health; the listeners
//! stay for the rest.
//!
//! [`run`] is the whole process; tests and benchmarks run it in-process.

mod backends;
mod health;
pub mod kernel;
mod tcp;
mod udp;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use self::backends::{Backend, Group};
use self::health::HealthTargets;
use crate::lb::config::{
    digest, state_path, write_atomically, BalancerConfig, PortConfig, Protocol, ProxyState,
};

/// How often the configuration file is re-read.
const RELOAD_POLL: Duration = Duration::from_millis(250);

/// A value the serving tasks read and a reload replaces.
pub(super) type Shared<T> = Arc<RwLock<Arc<T>>>;

/// Why the balancer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The configuration file could not be read.
    #[error("reading the balancer configuration {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is not a balancer configuration.
    #[error("parsing the balancer configuration {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Runs the balancer of the configuration file `config` until `shutdown` resolves (or the
/// future is dropped: every listener and connection stops with it). Fails only when the
/// file cannot be read or parsed at start; later, a bad file is logged and the running
/// configuration kept.
pub async fn run(config: &Path, shutdown: impl Future<Output = ()>) -> Result<(), ProxyError> {
    // First: SIGHUP must not end the process once its state file says it runs.
    let mut hangup = hangup_signals();
    let bytes = std::fs::read(config).map_err(|source| ProxyError::Read {
        path: config.to_owned(),
        source,
    })?;
    let first = BalancerConfig::from_bytes(&bytes).map_err(|source| ProxyError::Parse {
        path: config.to_owned(),
        source,
    })?;
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let mut balancer = Balancer::new(config, stop.clone());
    balancer.apply(first, digest(&bytes));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(RELOAD_POLL) => {}
            () = next_hangup(&mut hangup) => {}
        }
        balancer.tick();
    }
    stop.cancel();
    Ok(())
}

/// A listening port.
struct Listener {
    /// Stops accepting (connections in flight go on).
    stop: CancellationToken,
    /// The backends it forwards to.
    group: Shared<Group>,
}

/// The balancer's running state.
struct Balancer {
    config: PathBuf,
    /// Cancelled when the process stops.
    shutdown: CancellationToken,
    /// The configuration applied, and the digest of its bytes.
    current: Option<(BalancerConfig, String)>,
    /// Open listeners by protocol and port.
    listeners: HashMap<(Protocol, u16), Listener>,
    /// Every backend by protocol and address (shared between ports, kept across reloads).
    backends: HashMap<(Protocol, SocketAddr), Arc<Backend>>,
    /// Why listeners could not be opened, by protocol and port.
    errors: BTreeMap<(Protocol, u16), String>,
    /// What the health checker checks.
    health: HealthTargets,
    /// The kernel forwarding table.
    kernel: kernel::Kernel,
    /// The ports the kernel forwards now.
    kernel_ports: Vec<String>,
}

impl Balancer {
    fn new(config: &Path, shutdown: CancellationToken) -> Balancer {
        let health = HealthTargets::default();
        tokio::spawn(health::check_forever(health.clone(), shutdown.clone()));
        Balancer {
            config: config.to_owned(),
            shutdown,
            current: None,
            listeners: HashMap::new(),
            backends: HashMap::new(),
            errors: BTreeMap::new(),
            health,
            kernel: kernel::Kernel::new(config),
            kernel_ports: Vec::new(),
        }
    }

    /// Re-reads the file: applies it when it changed, else retries listeners that failed.
    fn tick(&mut self) {
        let bytes = match std::fs::read(&self.config) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(config = %self.config.display(), %error, "cannot re-read the configuration");
                return;
            }
        };
        let new_digest = digest(&bytes);
        if self.current.as_ref().is_some_and(|(_, d)| *d == new_digest) {
            if !self.errors.is_empty() {
                if let Some((config, d)) = self.current.clone() {
                    self.apply(config, d);
                }
            } else {
                self.sync_kernel();
            }
            return;
        }
        match BalancerConfig::from_bytes(&bytes) {
            Ok(config) => self.apply(config, new_digest),
            Err(error) => {
                tracing::warn!(config = %self.config.display(), %error, "bad configuration: the running one is kept");
            }
        }
    }

    /// Makes the listeners and backends those of `config`, then writes the state file.
    fn apply(&mut self, config: BalancerConfig, digest: String) {
        let before = self.state(self.current.as_ref().map(|(_, d)| d.as_str()));
        if self
            .current
            .as_ref()
            .is_some_and(|(c, _)| c.address != config.address)
        {
            for (_, listener) in self.listeners.drain() {
                listener.stop.cancel();
            }
        }
        let mut backends = HashMap::new();
        for port in &config.ports {
            for addr in &port.backends {
                let backend = self
                    .backends
                    .get(&(port.protocol, *addr))
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Backend::new(*addr)));
                backends.insert((port.protocol, *addr), backend);
            }
        }
        self.backends = backends;
        self.errors.clear();
        let mut wanted = HashMap::new();
        for port in &config.ports {
            let group = Arc::new(Group::new(
                port.backends
                    .iter()
                    .filter_map(|a| self.backends.get(&(port.protocol, *a)).cloned())
                    .collect(),
                config.algorithm,
            ));
            wanted.insert((port.protocol, port.port), ());
            if let Some(listener) = self.listeners.get(&(port.protocol, port.port)) {
                *listener.group.write() = group;
            } else if let Err(error) = self.listen(config.address, port, group) {
                self.errors.insert((port.protocol, port.port), error);
            }
        }
        self.listeners.retain(|key, listener| {
            let keep = wanted.contains_key(key);
            if !keep {
                listener.stop.cancel();
            }
            keep
        });
        let tcp: Vec<Arc<Backend>> = self
            .backends
            .iter()
            .filter(|((protocol, _), _)| *protocol == Protocol::Tcp)
            .map(|(_, b)| Arc::clone(b))
            .collect();
        self.health.set(config.health_check, tcp);
        self.kernel_ports = self.kernel.sync(&config, &self.backends);
        self.current = Some((config, digest.clone()));
        let after = self.state(Some(&digest));
        if after != before {
            self.write_state(&after);
        }
    }

    /// Brings the kernel's table in step with the backends' health (a no-op when nothing
    /// changed); reports a change in the state file.
    fn sync_kernel(&mut self) {
        let Some((config, digest)) = &self.current else {
            return;
        };
        let ports = self.kernel.sync(config, &self.backends);
        if ports != self.kernel_ports {
            self.kernel_ports = ports;
            let digest = digest.clone();
            let state = self.state(Some(&digest));
            self.write_state(&state);
        }
    }

    /// Opens the listener of `port` on `address`, serving `group`.
    fn listen(
        &mut self,
        address: IpAddr,
        port: &PortConfig,
        group: Arc<Group>,
    ) -> Result<(), String> {
        let at = SocketAddr::new(address, port.port);
        let group: Shared<Group> = Arc::new(RwLock::new(group));
        let stop = self.shutdown.child_token();
        match port.protocol {
            Protocol::Tcp => {
                let listener = tcp::bind(at).map_err(|e| format!("TCP/{}: {e}", port.port))?;
                tokio::spawn(tcp::serve(
                    listener,
                    group.clone(),
                    stop.clone(),
                    self.shutdown.clone(),
                ));
            }
            Protocol::Udp => {
                let socket = std::net::UdpSocket::bind(at)
                    .and_then(|s| {
                        s.set_nonblocking(true)?;
                        tokio::net::UdpSocket::from_std(s)
                    })
                    .map_err(|e| format!("UDP/{}: {e}", port.port))?;
                tokio::spawn(udp::serve(
                    socket,
                    group.clone(),
                    stop.clone(),
                    self.shutdown.clone(),
                ));
            }
        }
        tracing::info!(%at, protocol = %port.protocol, backends = port.backends.len(), "listening");
        self.listeners
            .insert((port.protocol, port.port), Listener { stop, group });
        Ok(())
    }

    /// The state to report, for the configuration of digest `applied`.
    fn state(&self, applied: Option<&str>) -> ProxyState {
        let mut listening: Vec<String> = self
            .listeners
            .keys()
            .map(|(protocol, port)| format!("{protocol}/{port}"))
            .collect();
        listening.sort();
        ProxyState {
            pid: std::process::id(),
            applied: applied.unwrap_or_default().to_owned(),
            listening,
            errors: self.errors.values().cloned().collect(),
            kernel: self.kernel_ports.clone(),
        }
    }

    fn write_state(&self, state: &ProxyState) {
        let bytes = serde_json::to_vec_pretty(state).unwrap_or_default();
        if let Err(error) = write_atomically(&state_path(&self.config), &bytes) {
            tracing::warn!(%error, "cannot write the balancer's state file");
        }
    }
}

/// SIGHUP, when it can be listened for.
fn hangup_signals() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

/// The next SIGHUP (never, without a listener).
async fn next_hangup(hangup: &mut Option<tokio::signal::unix::Signal>) {
    match hangup {
        Some(signal) => {
            if signal.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}
