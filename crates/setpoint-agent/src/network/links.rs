//! Links, addresses, routes and rules, programmed by running iproute2's `ip -batch -` (one
//! process for many commands: ≈ 5 ms each, research §9), and the sysctls pod networking needs.
//!
//! Fencing (research §2.1): traffic routed from the pods (arriving on the agent's bridge) may
//! go only to this host and to destinations with a specific route that is not through an
//! uplink (a device holding a default route, `eth0`): three policy rules for `iif <bridge>` —
//! (1) a table of the agent's own with an `unreachable` route for every main-table route
//! through an uplink (its connected subnets), (2) the main table with its default route
//! suppressed (`suppress_prefixlength 0`: other agents' bridges, the Service range route),
//! (3) `unreachable` for everything else. So no pod packet leaves by `eth0`.

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use setpoint_core::cidr::Ipv4Cidr;

/// The rule priorities of the fence (rules are told apart per agent by `iif <bridge>`).
const RULE_PRIORITIES: [u32; 3] = [3100, 3101, 3102];

/// Why a network command failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {message}")]
pub(crate) struct LinkError {
    /// What was being done.
    pub(crate) what: String,
    /// What went wrong (the command's error output).
    pub(crate) message: String,
}

/// The `ip` program: the first of the usual places that exists, else `ip` on the `PATH`.
pub(crate) fn ip_program() -> PathBuf {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("ip"))
}

/// Runs `program args` with `stdin` as its input; fails with its error output.
pub(crate) fn run_with_input(
    mut command: Command,
    stdin: &str,
    what: &str,
) -> Result<(), LinkError> {
    let fail = |message: String| LinkError {
        what: what.to_owned(),
        message,
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("starting {:?}: {e}", command.get_program())))?;
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin.as_bytes())
            .map_err(|e| fail(format!("writing commands: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("waiting: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(fail(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

/// Runs `ip -batch -` with `commands`; with `force`, goes on after errors and ignores them.
pub(crate) fn ip_batch(commands: &str, force: bool, what: &str) -> Result<(), LinkError> {
    let mut command = Command::new(ip_program());
    if force {
        command.arg("-force");
    }
    command.args(["-batch", "-"]);
    match run_with_input(command, commands, what) {
        Err(_) if force => Ok(()),
        other => other,
    }
}

/// Runs `ip args` and returns its output.
fn ip_output(args: &[&str]) -> Result<String, LinkError> {
    let output = Command::new(ip_program())
        .args(args)
        .output()
        .map_err(|e| LinkError {
            what: format!("ip {}", args.join(" ")),
            message: e.to_string(),
        })?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The alias marking a bridge as the one of the agent whose root directory is `root`.
fn owner_alias(root: &Path) -> String {
    format!("setpoint:{}", root.display())
}

/// Creates (or keeps) the bridge with the gateway address, up, marked as `root`'s; sets the
/// sysctls.
pub(crate) fn ensure_bridge(
    bridge: &str,
    gateway: Ipv4Addr,
    range: Ipv4Cidr,
    root: &Path,
) -> Result<(), LinkError> {
    ip_batch(
        &format!("link add {bridge} type bridge\n"),
        true,
        "creating the bridge",
    )?;
    ip_batch(
        &format!(
            "addr replace {gateway}/{prefix} dev {bridge}\nlink set {bridge} alias \"{alias}\"\nlink set {bridge} up\n",
            prefix = range.prefix(),
            alias = owner_alias(root).replace('"', ""),
        ),
        false,
        &format!("configuring the bridge {bridge}"),
    )?;
    for (path, value) in [
        ("/proc/sys/net/ipv4/ip_forward", "1"),
        ("/proc/sys/net/bridge/bridge-nf-call-iptables", "1"),
    ] {
        if let Err(e) = std::fs::write(path, value) {
            tracing::warn!(path, error = %e, "setting a sysctl for pod networking");
        }
    }
    Ok(())
}

/// Makes sure no other device routes part of `range`: a bridge of an agent that is gone is
/// removed — its root directory deleted, or its owner lock free with none of its pods running
/// (a server killed and its pods stopped, the directory left behind, which the pods' namespace
/// mounts can keep from being deleted; a crashed agent whose pods still run keeps its bridge
/// for its return); anything else is a conflict.
pub(crate) fn claim_range(bridge: &str, range: Ipv4Cidr) -> Result<(), LinkError> {
    let routes = ip_output(&["-4", "route", "show", "table", "main"])?;
    for line in routes.lines() {
        let mut words = line.split_whitespace();
        let Some(prefix) = words.next().and_then(parse_prefix) else {
            continue;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(dev) = words.windows(2).find(|w| w[0] == "dev").map(|w| w[1]) else {
            continue;
        };
        if dev == bridge || !(prefix.covers(&range) || range.covers(&prefix)) {
            continue;
        }
        let alias = std::fs::read_to_string(Path::new("/sys/class/net").join(dev).join("ifalias"))
            .unwrap_or_default();
        let stale = dev.starts_with("spbr")
            && alias.trim().strip_prefix("setpoint:").is_some_and(|root| {
                !Path::new(root).exists()
                    || !(super::owner_alive(Path::new(root))
                        || super::pods_running(Path::new(root)))
            });
        if stale {
            tracing::info!(bridge = dev, "removing the bridge of an agent that is gone");
            remove_fence(dev);
            delete_link(dev);
            continue;
        }
        return Err(LinkError {
            what: format!("claiming the pod range {range}"),
            message: format!("{dev} already routes {prefix} ({})", alias.trim()),
        });
    }
    Ok(())
}

fn parse_prefix(word: &str) -> Option<Ipv4Cidr> {
    word.parse::<Ipv4Cidr>()
        .ok()
        .or_else(|| Ipv4Cidr::new(word.parse().ok()?, 32))
}

/// The bridges marked as the agent's rooted at `root`.
pub(crate) fn bridges_of(root: &Path) -> Vec<String> {
    let want = owner_alias(root).replace('"', "");
    std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with("spbr"))
                .filter(|n| {
                    std::fs::read_to_string(Path::new("/sys/class/net").join(n).join("ifalias"))
                        .is_ok_and(|a| a.trim() == want)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes the bridge and its fence (for `setpoint agent cleanup`).
pub(crate) fn remove_bridge(bridge: &str) {
    remove_fence(bridge);
    delete_link(bridge);
}

/// The routing table of the agent's fence.
pub(crate) fn fence_table(bridge: &str) -> u32 {
    0x5e70_0000 | (super::short_hash(bridge) & 0xffff)
}

/// Installs the fence for traffic routed from the bridge (see the module docs).
pub(crate) fn ensure_fence(bridge: &str) -> Result<(), LinkError> {
    let table = fence_table(bridge);
    remove_fence(bridge);
    let routes = ip_output(&["-4", "route", "show", "table", "main"])?;
    let mut commands = String::new();
    for prefix in uplink_prefixes(&routes) {
        commands.push_str(&format!(
            "route replace unreachable {prefix} table {table}\n"
        ));
    }
    // A table must hold something for its rule to matter; this one is never matched by
    // real traffic (0.0.0.0/32).
    commands.push_str(&format!(
        "route replace unreachable 0.0.0.0/32 table {table}\n"
    ));
    let [p1, p2, p3] = RULE_PRIORITIES;
    commands.push_str(&format!(
        "rule add pref {p1} iif {bridge} lookup {table}\n\
         rule add pref {p2} iif {bridge} lookup main suppress_prefixlength 0\n\
         rule add pref {p3} iif {bridge} unreachable\n"
    ));
    ip_batch(&commands, false, "fencing pod traffic off the uplinks")
}

/// Removes the fence's rules and table.
pub(crate) fn remove_fence(bridge: &str) {
    let table = fence_table(bridge);
    let mut commands = String::new();
    for p in RULE_PRIORITIES {
        commands.push_str(&format!("rule del pref {p} iif {bridge}\n"));
    }
    commands.push_str(&format!("route flush table {table}\n"));
    let _ = ip_batch(&commands, true, "removing the fence");
}

/// The prefixes of main-table routes through an uplink device (one holding a default
/// route), other than the default route itself.
pub(crate) fn uplink_prefixes(routes: &str) -> Vec<String> {
    let dev_of = |line: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .windows(2)
            .find(|w| w[0] == "dev")
            .map(|w| w[1].to_owned())
    };
    let uplinks: Vec<String> = routes
        .lines()
        .filter(|l| l.starts_with("default "))
        .filter_map(dev_of)
        .collect();
    routes
        .lines()
        .filter(|l| !l.starts_with("default "))
        .filter(|l| dev_of(l).is_some_and(|d| uplinks.contains(&d)))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|p| p.parse::<Ipv4Cidr>().is_ok() || p.parse::<Ipv4Addr>().is_ok())
        .map(str::to_owned)
        .collect()
}

/// Deletes a link (gone already is fine).
pub(crate) fn delete_link(name: &str) {
    if std::path::Path::new("/sys/class/net").join(name).exists() {
        let _ = ip_batch(&format!("link del {name}\n"), true, "deleting a link");
    }
}

/// Whether a link of that name exists in the agent's namespace.
pub(crate) fn link_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uplink_routes_should_be_those_through_a_default_routes_device() {
        let routes = "default via 192.0.2.1 dev eth0 \n192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2 \n10.244.0.0/24 dev spbr1 proto kernel scope link src 10.244.0.1 \n10.96.0.0/12 dev spbr1 scope link src 10.244.0.1\n198.51.100.7 via 192.0.2.1 dev eth0\n";
        assert_eq!(
            uplink_prefixes(routes),
            vec!["192.0.2.0/24".to_owned(), "198.51.100.7".to_owned()]
        );
    }
}
