//! The balancer's configuration file: what one balancer process (`setpoint lb-proxy --config
//! FILE`) listens on and forwards to. The loop writes it (atomically: a temporary file renamed
//! over it); the process re-reads it every 250 ms and on SIGHUP, and answers with a state file
//! beside it ([`ProxyState`]) saying which configuration it runs and what it could bind.
//! Serialized deterministically (fields in order, backends sorted), so the loop compares bytes.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One balancer: an address and what each of its ports forwards to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BalancerConfig {
    /// The address every port listens on (the Service's ingress IP).
    pub address: IpAddr,
    /// How a connection (or a UDP client's session) picks its backend.
    #[serde(default)]
    pub algorithm: Algorithm,
    /// The active health checks of TCP backends.
    #[serde(default)]
    pub health_check: HealthCheck,
    /// Whether the kernel forwards the ports it can (absent: user space only).
    #[serde(default, skip_serializing_if = "Forwarding::is_userspace")]
    pub forwarding: Forwarding,
    /// The ports, each a listener.
    pub ports: Vec<PortConfig>,
}

/// One listening port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PortConfig {
    /// The Service port's name (for logs).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The port listened on.
    pub port: u16,
    /// Where connections go (the Service's ready endpoints for this port), sorted.
    pub backends: Vec<SocketAddr>,
}

/// A transport protocol.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// Connections, each spliced to one backend.
    #[serde(rename = "TCP")]
    Tcp,
    /// Datagrams, a session per client address.
    #[serde(rename = "UDP")]
    Udp,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        })
    }
}

/// How a backend is picked.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// Each healthy backend in turn.
    #[default]
    RoundRobin,
    /// The healthy backend with the fewest open connections (ties in turn).
    LeastConnections,
}

/// Who moves the bytes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Forwarding {
    /// The balancer process copies every connection (and UDP session) itself.
    #[default]
    Userspace,
    /// An nftables table of the balancer's DNATs what the kernel can forward (round robin over
    /// healthy IPv4 backends; loopback addresses to loopback backends only), needing root and
    /// `nft`; the rest, and everything when that fails, in user space as above. See
    /// `lb::proxy::kernel`.
    Kernel,
}

impl Forwarding {
    /// Whether this is [`Forwarding::Userspace`] (the default, left out of the file).
    pub fn is_userspace(&self) -> bool {
        *self == Forwarding::Userspace
    }

    /// Parses `kernel` or `userspace` (the `--lb-forwarding` values).
    pub fn parse(value: &str) -> Result<Forwarding, String> {
        match value {
            "kernel" => Ok(Forwarding::Kernel),
            "userspace" => Ok(Forwarding::Userspace),
            other => Err(format!(
                "unknown forwarding {other:?}: use `kernel` (nftables where it can, else user space) or `userspace`"
            )),
        }
    }
}

/// Active TCP health checks: every `intervalMillis` each TCP backend is connected to; one that
/// fails `fall` checks in a row is skipped until it passes `rise` in a row. A backend also
/// fails at once when a client's connection to it is refused.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// Time between checks, milliseconds.
    pub interval_millis: u64,
    /// Limit on one check's connect, milliseconds.
    pub timeout_millis: u64,
    /// Failed checks in a row that make a backend unhealthy.
    pub fall: u32,
    /// Passed checks in a row that make it healthy again.
    pub rise: u32,
}

impl Default for HealthCheck {
    fn default() -> HealthCheck {
        HealthCheck {
            interval_millis: 1_000,
            timeout_millis: 1_000,
            fall: 2,
            rise: 1,
        }
    }
}

impl HealthCheck {
    /// The interval as a duration (at least 10 ms).
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_millis.max(10))
    }

    /// The timeout as a duration (at least 10 ms).
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_millis.max(10))
    }
}

impl BalancerConfig {
    /// The configuration as written to its file: pretty JSON, ports sorted by protocol and
    /// port, backends sorted, so equal configurations are equal bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut normal = self.clone();
        normal.ports.sort_by_key(|p| (p.protocol, p.port));
        for port in &mut normal.ports {
            port.backends.sort();
            port.backends.dedup();
        }
        let mut bytes = serde_json::to_vec_pretty(&normal).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Parses a configuration file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<BalancerConfig, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// What a balancer process reports, in [`state_path`] of its configuration: the configuration
/// it has applied and the listeners it holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyState {
    /// The process.
    pub pid: u32,
    /// [`digest`] of the configuration file bytes it applied.
    pub applied: String,
    /// The listeners it holds, as `TCP/80`.
    pub listening: Vec<String>,
    /// Why a listener could not be opened (an address not on this machine, a port in use, a
    /// port below 1024 without the privilege), one line each.
    pub errors: Vec<String>,
    /// The ports the kernel forwards now, as `TCP/80` (`forwarding: Kernel`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<String>,
}

/// Where the balancer of configuration file `config` writes its [`ProxyState`].
pub fn state_path(config: &Path) -> PathBuf {
    let mut name = config.as_os_str().to_owned();
    name.push(".state");
    PathBuf::from(name)
}

/// A stable digest of a configuration file's bytes (64-bit FNV-1a, hex): the same in the loop
/// and the balancer, whatever built them.
pub fn digest(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, renamed over it).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_configurations_should_serialize_to_equal_bytes_whatever_the_order() {
        let port = |port, backends: &[&str]| PortConfig {
            name: String::new(),
            protocol: Protocol::Tcp,
            port,
            backends: backends.iter().map(|b| b.parse().expect("addr")).collect(),
        };
        let a = BalancerConfig {
            address: "127.0.100.1".parse().expect("ip"),
            algorithm: Algorithm::RoundRobin,
            health_check: HealthCheck::default(),
            forwarding: Forwarding::Userspace,
            ports: vec![port(80, &["10.0.0.2:80", "10.0.0.1:80"]), port(443, &[])],
        };
        let mut b = a.clone();
        b.ports.reverse();
        b.ports[1].backends.reverse();
        assert_eq!(a.to_bytes(), b.to_bytes());
        let back = BalancerConfig::from_bytes(&a.to_bytes()).expect("parses");
        assert_eq!(back.ports[0].backends[0].to_string(), "10.0.0.1:80");
        assert_ne!(digest(&a.to_bytes()), digest(b"{}"));
    }
}
