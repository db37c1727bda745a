//! Forwarding in the kernel (`forwarding: Kernel`), as k3s's ServiceLB and kube-proxy do it:
//! an nftables table of the balancer's own DNATs the balancer's address and each eligible
//! port to the port's healthy backends, spread by `numgen inc` (round robin). Bytes then never
//! cross the balancer's process; the kernel's connection tracking keeps each connection on the
//! backend it started with. The user-space listeners stay open: what the table does not take
//! (ports that are not eligible, a port whose backends all fail their checks, the time before
//! the table exists) reaches them as before.
//!
//! A port is eligible when the balancer picks round robin (least connections needs the
//! counts only user space has) and its address and backends are IPv4. A loopback address in
//! front of backends elsewhere (the default pool and pods on the node agent's bridge) needs
//! more: the kernel sends no packet from 127.0.0.0/8 out of another interface unless that
//! interface has `route_localnet`. So, as kube-proxy does for NodePorts on localhost, the
//! balancer turns `route_localnet` on for the interface the backend is routed through and
//! masquerades what it DNATs from a loopback source there (the backend sees the interface's
//! address); and, before turning it on anywhere, makes sure the guard table
//! [`GUARD_TABLE`] drops what arrives from outside addressed to 127.0.0.0/8 (the hole of
//! CVE-2020-8558: with `route_localnet` on, such packets would reach services bound to
//! localhost). The guard stays when balancers stop (it drops only martians). If the interface
//! cannot be found or set, the port is left to user space.
//! What the kernel cannot do that user space does: retry a refused connection on another
//! backend. A backend that dies is taken out when its health checks fail (`fall` × interval).
//!
//! The table is replaced whole in one `nft -f` transaction when what it should hold changes
//! (checked after each configuration change and every reload tick, so health changes show
//! within 250 ms) and deleted when the balancer stops. Its name comes from the configuration
//! file's path, so a restarted balancer takes over its predecessor's table and the supervisor
//! can delete a killed balancer's ([`remove_table`]). Without root or `nft`, the first failure
//! is logged and the balancer forwards in user space.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use super::backends::Backend;
use crate::lb::config::{digest, Algorithm, BalancerConfig, Forwarding, Protocol};

/// The balancer's kernel forwarding: its table and what it last programmed.
pub(super) struct Kernel {
    table: String,
    /// The ruleset last applied (`None`: no table of ours exists).
    programmed: Option<String>,
    /// Why the kernel path is off for good in this process (nft missing, not root).
    unavailable: Option<String>,
    /// Per backend address outside lo: whether a loopback address may be DNATed to it (its
    /// interface has `route_localnet`, the guard exists).
    localnet: HashMap<Ipv4Addr, bool>,
}

/// One port the kernel forwards: its protocol and number, and the healthy backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KernelPort {
    pub(super) protocol: Protocol,
    pub(super) port: u16,
    pub(super) backends: Vec<SocketAddr>,
}

impl Kernel {
    /// The kernel path of the balancer of configuration file `config`.
    pub(super) fn new(config: &Path) -> Kernel {
        Kernel {
            table: table_name(config),
            programmed: None,
            unavailable: None,
            localnet: HashMap::new(),
        }
    }

    /// Makes the table forward what `config` lets the kernel forward, with the backends'
    /// current health. Returns the ports it forwards (`TCP/80`), for the state file.
    pub(super) fn sync(
        &mut self,
        config: &BalancerConfig,
        backends: &HashMap<(Protocol, SocketAddr), Arc<Backend>>,
    ) -> Vec<String> {
        if config.forwarding != Forwarding::Kernel || self.unavailable.is_some() {
            self.remove();
            return Vec::new();
        }
        let mut localnet = std::mem::take(&mut self.localnet);
        let ports = eligible_ports(
            config,
            |protocol, addr| {
                backends
                    .get(&(protocol, addr))
                    .is_none_or(|b| b.is_healthy())
            },
            |ip| *localnet.entry(ip).or_insert_with(|| allow_localnet(ip)),
        );
        self.localnet = localnet;
        let IpAddr::V4(address) = config.address else {
            self.remove();
            return Vec::new();
        };
        if ports.is_empty() {
            self.remove();
            return Vec::new();
        }
        let ruleset = render(&self.table, address, &ports);
        if self.programmed.as_deref() != Some(ruleset.as_str()) {
            match nft(&ruleset) {
                Ok(()) => {
                    tracing::info!(table = %self.table, ports = ports.len(), "forwarding in the kernel");
                    self.programmed = Some(ruleset);
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot forward in the kernel (needs root and nft): forwarding in user space");
                    self.unavailable = Some(error);
                    self.remove();
                    return Vec::new();
                }
            }
        }
        ports
            .iter()
            .map(|p| format!("{}/{}", p.protocol, p.port))
            .collect()
    }

    /// Deletes the table, if this balancer made one.
    pub(super) fn remove(&mut self) {
        if self.programmed.take().is_some() {
            let _ = nft(&format!("delete table ip {}\n", self.table));
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The ports of `config` the kernel may forward, each with its backends that `healthy` passes;
/// a port with none is left to user space.
pub(super) fn eligible_ports(
    config: &BalancerConfig,
    healthy: impl Fn(Protocol, SocketAddr) -> bool,
    mut localnet: impl FnMut(Ipv4Addr) -> bool,
) -> Vec<KernelPort> {
    let IpAddr::V4(address) = config.address else {
        return Vec::new();
    };
    if config.algorithm != Algorithm::RoundRobin {
        return Vec::new();
    }
    let mut out = Vec::new();
    for port in &config.ports {
        let all_v4 = port.backends.iter().all(SocketAddr::is_ipv4);
        let routable = !address.is_loopback()
            || port.backends.iter().all(|b| match b.ip() {
                IpAddr::V4(ip) => ip.is_loopback() || localnet(ip),
                IpAddr::V6(_) => false,
            });
        if !all_v4 || !routable {
            continue;
        }
        let mut backends: Vec<SocketAddr> = port
            .backends
            .iter()
            .copied()
            .filter(|b| healthy(port.protocol, *b))
            .collect();
        backends.sort();
        backends.dedup();
        if !backends.is_empty() {
            out.push(KernelPort {
                protocol: port.protocol,
                port: port.port,
                backends,
            });
        }
    }
    out
}

/// The `nft -f` transaction replacing table `table` with one forwarding `ports` of `address`.
pub(super) fn render(table: &str, address: Ipv4Addr, ports: &[KernelPort]) -> String {
    let t = format!("ip {table}");
    let mut s = String::new();
    // Create-then-delete makes the delete safe when the table does not exist yet.
    let _ = writeln!(s, "add table {t}");
    let _ = writeln!(s, "delete table {t}");
    let _ = writeln!(s, "add table {t}");
    let _ = writeln!(s, "add chain {t} ports");
    for port in ports {
        let proto = match port.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        };
        let target = match port.backends.as_slice() {
            [one] => format!("to {}:{}", one.ip(), one.port()),
            many => {
                let map: Vec<String> = many
                    .iter()
                    .enumerate()
                    .map(|(i, b)| format!("{i} : {} . {}", b.ip(), b.port()))
                    .collect();
                format!(
                    "ip to numgen inc mod {} map {{ {} }}",
                    many.len(),
                    map.join(", ")
                )
            }
        };
        let _ = writeln!(
            s,
            "add rule {t} ports {proto} dport {} dnat {target}",
            port.port
        );
    }
    // A loopback source DNATed out of another interface takes that interface's address (the
    // backend could not answer 127.0.0.1).
    let elsewhere = ports
        .iter()
        .flat_map(|p| &p.backends)
        .any(|b| !b.ip().is_loopback());
    if address.is_loopback() && elsewhere {
        let _ = writeln!(
            s,
            "add chain {t} postrouting {{ type nat hook postrouting priority 100 ; policy accept ; }}"
        );
        let _ = writeln!(
            s,
            "add rule {t} postrouting ip saddr 127.0.0.0/8 oifname != \"lo\" ct original ip daddr {address} masquerade"
        );
    }
    // Before the node agent's Service chains (-100), so the balancer's address is ours.
    for (chain, hook) in [("output", "output"), ("prerouting", "prerouting")] {
        let _ = writeln!(
            s,
            "add chain {t} {chain} {{ type nat hook {hook} priority -110 ; policy accept ; }}"
        );
        let _ = writeln!(s, "add rule {t} {chain} ip daddr {address} jump ports");
    }
    s
}

/// The table of the balancer of configuration file `config` (stable across restarts: the
/// [`digest`] of the path).
pub fn table_name(config: &Path) -> String {
    // The low 48 bits of the configuration digest: 12 hex digits keep the name short.
    let digest = digest(config.as_os_str().as_encoded_bytes());
    format!("setpoint-lb-{}", &digest[digest.len() - 12..])
}

/// Deletes the table of the balancer of configuration file `config`, if there is one (a
/// balancer killed with SIGKILL leaves it behind). Quiet when there is none or no `nft`.
pub fn remove_table(config: &Path) {
    let table = table_name(config);
    let _ = nft(&format!("add table ip {table}\ndelete table ip {table}\n"));
}

/// The table dropping packets that arrive from outside addressed to 127.0.0.0/8, made before
/// any interface gets `route_localnet`.
pub const GUARD_TABLE: &str = "setpoint-localnet-guard";

/// The guard's ruleset (idempotent: the chain is flushed and filled again).
fn guard_ruleset() -> String {
    let t = format!("ip {GUARD_TABLE}");
    format!(
        "add table {t}\n\
         add chain {t} prerouting {{ type filter hook prerouting priority -300 ; policy accept ; }}\n\
         flush chain {t} prerouting\n\
         add rule {t} prerouting iifname != \"lo\" ip daddr 127.0.0.0/8 drop\n"
    )
}

/// Lets a loopback address be DNATed to `backend` (outside lo): the guard made, then
/// `route_localnet` on the interface `backend` is routed through. False when either fails.
fn allow_localnet(backend: Ipv4Addr) -> bool {
    let Some(device) = route_device(backend) else {
        tracing::info!(%backend, "no route to the backend: its port is forwarded in user space");
        return false;
    };
    if let Err(error) = nft(&guard_ruleset()) {
        tracing::warn!(%error, "cannot make the localnet guard: ports with backends outside lo are forwarded in user space");
        return false;
    }
    let path = format!("/proc/sys/net/ipv4/conf/{device}/route_localnet");
    match std::fs::write(&path, "1") {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%path, %error, "cannot turn route_localnet on: the port is forwarded in user space");
            false
        }
    }
}

/// The interface the kernel routes `ip` through (`ip -4 route get`), unless it is lo.
fn route_device(ip: Ipv4Addr) -> Option<String> {
    let out = Command::new("ip")
        .args(["-4", "-o", "route", "get", &ip.to_string()])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    let device = words.windows(2).find(|w| w[0] == "dev").map(|w| w[1])?;
    // An interface name goes into a /proc path: nothing but what names are made of.
    let safe = !device.is_empty()
        && device
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (safe && device != "lo").then(|| device.to_owned())
}

/// Runs `nft -f -` with `ruleset`; the error is nft's message.
fn nft(ruleset: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running nft: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(ruleset.as_bytes())
            .map_err(|e| format!("writing to nft: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for nft: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::config::{HealthCheck, PortConfig};

    fn config(address: &str, algorithm: Algorithm, backends: &[&str]) -> BalancerConfig {
        BalancerConfig {
            address: address.parse().expect("ip"),
            algorithm,
            health_check: HealthCheck::default(),
            forwarding: Forwarding::Kernel,
            ports: vec![
                PortConfig {
                    name: String::new(),
                    protocol: Protocol::Tcp,
                    port: 80,
                    backends: backends.iter().map(|b| b.parse().expect("addr")).collect(),
                },
                PortConfig {
                    name: String::new(),
                    protocol: Protocol::Udp,
                    port: 53,
                    backends: vec!["127.0.0.1:5353".parse().expect("addr")],
                },
            ],
        }
    }

    #[test]
    fn ports_should_be_eligible_only_when_the_kernel_can_forward_them() {
        let all = |_, _| true;
        let no_localnet = |_| -> bool { panic!("loopback backends need no route_localnet") };
        let ok = config("127.0.5.1", Algorithm::RoundRobin, &["127.0.0.1:8080"]);
        assert_eq!(eligible_ports(&ok, all, no_localnet).len(), 2);
        // Loopback address, a pod backend: only where route_localnet could be turned on.
        let pod = config("127.0.5.1", Algorithm::RoundRobin, &["10.244.0.5:8080"]);
        let mut asked = Vec::new();
        let ports = eligible_ports(&pod, all, |ip| {
            asked.push(ip);
            false
        });
        assert_eq!(asked, [Ipv4Addr::new(10, 244, 0, 5)]);
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].protocol, Protocol::Udp);
        assert_eq!(eligible_ports(&pod, all, |_| true).len(), 2);
        // A routable address may forward to pods without it.
        let routable = config("192.0.2.10", Algorithm::RoundRobin, &["10.244.0.5:8080"]);
        assert_eq!(eligible_ports(&routable, all, no_localnet).len(), 2);
        // Least connections needs user space's counts.
        let least = config(
            "127.0.5.1",
            Algorithm::LeastConnections,
            &["127.0.0.1:8080"],
        );
        assert!(eligible_ports(&least, all, no_localnet).is_empty());
        // Unhealthy backends are left out; a port with none is left to user space.
        let two = config(
            "127.0.5.1",
            Algorithm::RoundRobin,
            &["127.0.0.1:8081", "127.0.0.1:8080"],
        );
        let sick: SocketAddr = "127.0.0.1:8081".parse().expect("addr");
        let ports = eligible_ports(&two, |_, b| b != sick, no_localnet);
        assert_eq!(
            ports[0].backends,
            vec!["127.0.0.1:8080".parse().expect("addr")]
        );
        let none = eligible_ports(&two, |p, _| p == Protocol::Udp, no_localnet);
        assert_eq!(none.len(), 1);
    }

    #[test]
    fn the_ruleset_should_replace_the_table_and_spread_round_robin() {
        let two = config(
            "127.0.5.1",
            Algorithm::RoundRobin,
            &["127.0.0.1:8081", "127.0.0.1:8080"],
        );
        let ports = eligible_ports(&two, |_, _| true, |_| false);
        let text = render("setpoint-lb-x", Ipv4Addr::new(127, 0, 5, 1), &ports);
        let expected = "\
add table ip setpoint-lb-x
delete table ip setpoint-lb-x
add table ip setpoint-lb-x
add chain ip setpoint-lb-x ports
add rule ip setpoint-lb-x ports tcp dport 80 dnat ip to numgen inc mod 2 map { 0 : 127.0.0.1 . 8080, 1 : 127.0.0.1 . 8081 }
add rule ip setpoint-lb-x ports udp dport 53 dnat to 127.0.0.1:5353
add chain ip setpoint-lb-x output { type nat hook output priority -110 ; policy accept ; }
add rule ip setpoint-lb-x output ip daddr 127.0.5.1 jump ports
add chain ip setpoint-lb-x prerouting { type nat hook prerouting priority -110 ; policy accept ; }
add rule ip setpoint-lb-x prerouting ip daddr 127.0.5.1 jump ports
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_loopback_address_in_front_of_pods_should_masquerade_what_it_sends_them() {
        let pod = config("127.0.5.1", Algorithm::RoundRobin, &["10.244.0.5:8080"]);
        let ports = eligible_ports(&pod, |_, _| true, |_| true);
        let text = render("t", Ipv4Addr::new(127, 0, 5, 1), &ports);
        assert!(text.contains("add chain ip t postrouting { type nat hook postrouting priority 100 ; policy accept ; }\n"), "{text}");
        assert!(text.contains("add rule ip t postrouting ip saddr 127.0.0.0/8 oifname != \"lo\" ct original ip daddr 127.0.5.1 masquerade\n"), "{text}");
        let routable = config("192.0.2.10", Algorithm::RoundRobin, &["10.244.0.5:8080"]);
        let ports = eligible_ports(&routable, |_, _| true, |_| true);
        let text = render("t", Ipv4Addr::new(192, 0, 2, 10), &ports);
        assert!(!text.contains("masquerade"), "{text}");
        assert!(guard_ruleset().contains("iifname != \"lo\" ip daddr 127.0.0.0/8 drop"));
    }

    #[test]
    fn table_names_should_be_stable_and_differ_by_config_path() {
        let a = table_name(Path::new("/data/providers/lb/default/web/balancer.json"));
        assert_eq!(
            a,
            table_name(Path::new("/data/providers/lb/default/web/balancer.json"))
        );
        assert_ne!(
            a,
            table_name(Path::new("/data/providers/lb/default/web2/balancer.json"))
        );
        assert!(a.starts_with("setpoint-lb-") && a.len() <= 32, "{a}");
    }
}
