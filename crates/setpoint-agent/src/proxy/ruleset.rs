//! The nftables program for a set of Service ports, as `nft -f` text (pure functions; the
//! layout is in `docs/design/services.md`).
//!
//! One `ip` table per agent. Dispatch is one verdict-map lookup (`service-ips`: cluster IP .
//! protocol . port → `goto svc-<id>`; `service-nodeports`: protocol . port → `goto ext-<id>`
//! for local destinations); each Service port's chain marks hairpin traffic for masquerade
//! and DNATs with one `numgen random` rule. ClientIP affinity Services get a chain and a
//! dynamic timeout set per endpoint. Service ports without endpoints are in
//! `no-endpoint-*` maps checked by the filter chains, which reject; anything still addressed
//! to the Service CIDR after DNAT is rejected too, so it never leaves the host.
//!
//! [`Programmed`] is everything one sync owns per Service port; [`full`] writes a table from
//! scratch, [`incremental`] the transaction turning one [`Programmed`] into another.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::model::{Backend, ServicePortRule};

/// The mark bit asking postrouting to masquerade (kube-proxy's 0x4000).
const MASQUERADE_MARK: &str = "0x4000";

/// Per-Service-port objects of the table, keyed by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Programmed {
    /// Chain name → its rules, in order.
    chains: BTreeMap<String, Vec<String>>,
    /// Affinity set name → its definition (between the braces).
    sets: BTreeMap<String, String>,
    /// (map name, element text).
    elements: BTreeSet<(&'static str, String)>,
}

impl Programmed {
    /// The objects for `rules`.
    pub(crate) fn of(rules: &[ServicePortRule]) -> Programmed {
        let mut out = Programmed::default();
        for rule in rules {
            out.add(rule);
        }
        out
    }

    /// How many chains (for logs and benchmarks).
    pub(crate) fn chain_count(&self) -> usize {
        self.chains.len()
    }

    fn add(&mut self, rule: &ServicePortRule) {
        let proto = rule.protocol.name();
        let svc = format!("svc-{}", rule.id);
        if rule.backends.is_empty() {
            for ip in &rule.cluster_ips {
                self.elements.insert((
                    "no-endpoint-services",
                    format!("{ip} . {proto} . {} : goto reject-chain", rule.port),
                ));
            }
        } else {
            for ip in &rule.cluster_ips {
                self.elements.insert((
                    "service-ips",
                    format!("{ip} . {proto} . {} : goto {svc}", rule.port),
                ));
            }
            let rules = match rule.affinity_timeout {
                None => dnat_rules(&rule.backends, proto),
                Some(timeout) => self.affinity(rule, timeout),
            };
            self.chains.insert(svc.clone(), rules);
        }
        let Some(node_port) = rule.node_port else {
            return;
        };
        let ext = format!("ext-{}", rule.id);
        let (target, rules) = match &rule.local_backends {
            None if rule.backends.is_empty() => (None, Vec::new()),
            None => (
                Some(&ext),
                vec!["jump mark-for-masquerade".to_owned(), format!("goto {svc}")],
            ),
            Some(local) if local.is_empty() => (None, Vec::new()),
            Some(local) => (Some(&ext), dnat_rules(local, proto)),
        };
        match target {
            Some(ext) => {
                self.elements.insert((
                    "service-nodeports",
                    format!("{proto} . {node_port} : goto {ext}"),
                ));
                self.chains.insert(ext.clone(), rules);
            }
            None => {
                self.elements.insert((
                    "no-endpoint-nodeports",
                    format!("{proto} . {node_port} : goto reject-chain"),
                ));
            }
        }
    }

    /// The service chain of a ClientIP Service (adding its endpoint chains and sets): known
    /// clients go to their endpoint, new ones are spread and remembered.
    fn affinity(&mut self, rule: &ServicePortRule, timeout: i32) -> Vec<String> {
        let proto = rule.protocol.name();
        let mut svc_rules = Vec::new();
        let mut verdicts = Vec::new();
        for (i, backend) in rule.backends.iter().enumerate() {
            let suffix = format!("{}/{}/{}", rule.id, backend.ip, backend.port);
            let (ep, set) = (format!("ep-{suffix}"), format!("aff-{suffix}"));
            self.sets.insert(
                set.clone(),
                format!("type ipv4_addr ; flags dynamic,timeout ; timeout {timeout}s ;"),
            );
            self.chains.insert(
                ep.clone(),
                vec![
                    format!("ip saddr {} jump mark-for-masquerade", backend.ip),
                    format!("update @{set} {{ ip saddr }}"),
                    format!(
                        "meta l4proto {proto} dnat to {}:{}",
                        backend.ip, backend.port
                    ),
                ],
            );
            svc_rules.push(format!("ip saddr @{set} goto {ep}"));
            verdicts.push(format!("{i} : goto {ep}"));
        }
        svc_rules.push(format!(
            "numgen random mod {} vmap {{ {} }}",
            rule.backends.len(),
            verdicts.join(", ")
        ));
        svc_rules
    }
}

/// Hairpin mark and one DNAT spreading over `backends` (not empty).
fn dnat_rules(backends: &[Backend], proto: &str) -> Vec<String> {
    let sources: BTreeSet<_> = backends.iter().map(|b| b.ip).collect();
    let sources: Vec<String> = sources.iter().map(ToString::to_string).collect();
    let hairpin = format!(
        "ip saddr {{ {} }} jump mark-for-masquerade",
        sources.join(", ")
    );
    let dnat = match backends {
        [one] => format!("meta l4proto {proto} dnat to {}:{}", one.ip, one.port),
        many => {
            let map: Vec<String> = many
                .iter()
                .enumerate()
                .map(|(i, b)| format!("{i} : {} . {}", b.ip, b.port))
                .collect();
            format!(
                "meta l4proto {proto} dnat ip to numgen random mod {} map {{ {} }}",
                many.len(),
                map.join(", ")
            )
        }
    };
    vec![hairpin, dnat]
}

/// The table's fixed part: maps, dispatch and hook chains, the reject and masquerade chains.
/// `service_cidr` is guarded: what is still addressed to it after DNAT is rejected.
fn base(table: &str, service_cidr: &str) -> String {
    let t = format!("ip {table}");
    let mut s = String::new();
    let mut line = |text: String| {
        s.push_str(&text);
        s.push('\n');
    };
    line(format!("add table {t}"));
    for (map, key) in [
        ("service-ips", "ipv4_addr . inet_proto . inet_service"),
        ("service-nodeports", "inet_proto . inet_service"),
        (
            "no-endpoint-services",
            "ipv4_addr . inet_proto . inet_service",
        ),
        ("no-endpoint-nodeports", "inet_proto . inet_service"),
    ] {
        line(format!("add map {t} {map} {{ type {key} : verdict ; }}"));
    }
    line(format!("add chain {t} reject-chain"));
    line(format!("add rule {t} reject-chain reject"));
    line(format!("add chain {t} mark-for-masquerade"));
    line(format!(
        "add rule {t} mark-for-masquerade meta mark set meta mark | {MASQUERADE_MARK}"
    ));
    line(format!("add chain {t} services"));
    line(format!(
        "add rule {t} services ip daddr . meta l4proto . th dport vmap @service-ips"
    ));
    line(format!(
        "add rule {t} services fib daddr type local meta l4proto . th dport vmap @service-nodeports"
    ));
    line(format!("add chain {t} endpoints-check"));
    line(format!(
        "add rule {t} endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services"
    ));
    line(format!(
        "add rule {t} endpoints-check fib daddr type local meta l4proto . th dport vmap @no-endpoint-nodeports"
    ));
    for (chain, hook, priority) in [
        ("nat-prerouting", "prerouting", -100),
        ("nat-output", "output", -100),
    ] {
        line(format!(
            "add chain {t} {chain} {{ type nat hook {hook} priority {priority} ; policy accept ; }}"
        ));
        line(format!("add rule {t} {chain} jump services"));
    }
    line(format!(
        "add chain {t} nat-postrouting {{ type nat hook postrouting priority 100 ; policy accept ; }}"
    ));
    line(format!(
        "add rule {t} nat-postrouting meta mark & {MASQUERADE_MARK} == {MASQUERADE_MARK} masquerade fully-random"
    ));
    for (chain, hook) in [
        ("filter-input", "input"),
        ("filter-forward", "forward"),
        ("filter-output", "output"),
    ] {
        line(format!(
            "add chain {t} {chain} {{ type filter hook {hook} priority -110 ; policy accept ; }}"
        ));
        line(format!(
            "add rule {t} {chain} ct state new jump endpoints-check"
        ));
    }
    for (chain, hook) in [
        ("filter-forward-post-dnat", "forward"),
        ("filter-output-post-dnat", "output"),
    ] {
        line(format!(
            "add chain {t} {chain} {{ type filter hook {hook} priority -90 ; policy accept ; }}"
        ));
        line(format!(
            "add rule {t} {chain} ip daddr {service_cidr} reject"
        ));
    }
    s
}

/// The transaction replacing the agent's table (if any) with one programming `now`.
pub(crate) fn full(table: &str, service_cidr: &str, now: &Programmed) -> String {
    let mut s = format!("add table ip {table}\ndelete table ip {table}\n");
    s.push_str(&base(table, service_cidr));
    s.push_str(&incremental(table, &Programmed::default(), now));
    s
}

/// The transaction turning the table's per-Service objects from `old` into `new` (empty when
/// nothing changed). Order matters: references go before what they reference is deleted,
/// and what is referenced exists before references are added.
pub(crate) fn incremental(table: &str, old: &Programmed, new: &Programmed) -> String {
    let t = format!("ip {table}");
    let mut s = String::new();
    for (map, element) in old.elements.difference(&new.elements) {
        let key = element.split(" : ").next().unwrap_or(element);
        let _ = writeln!(s, "delete element {t} {map} {{ {key} }}");
    }
    for (chain, rules) in &old.chains {
        if new.chains.get(chain) != Some(rules) {
            let _ = writeln!(s, "flush chain {t} {chain}");
        }
    }
    for (set, definition) in &new.sets {
        match old.sets.get(set) {
            Some(old_definition) if old_definition == definition => {}
            Some(_) => {
                let _ = writeln!(s, "delete set {t} {set}");
                let _ = writeln!(s, "add set {t} {set} {{ {definition} }}");
            }
            None => {
                let _ = writeln!(s, "add set {t} {set} {{ {definition} }}");
            }
        }
    }
    // Every new chain first: rules jump and go to each other.
    for chain in new.chains.keys() {
        if !old.chains.contains_key(chain) {
            let _ = writeln!(s, "add chain {t} {chain}");
        }
    }
    for (chain, rules) in &new.chains {
        if old.chains.get(chain) == Some(rules) {
            continue;
        }
        for rule in rules {
            let _ = writeln!(s, "add rule {t} {chain} {rule}");
        }
    }
    for (map, element) in new.elements.difference(&old.elements) {
        let _ = writeln!(s, "add element {t} {map} {{ {element} }}");
    }
    for chain in old.chains.keys() {
        if !new.chains.contains_key(chain) {
            let _ = writeln!(s, "delete chain {t} {chain}");
        }
    }
    for set in old.sets.keys() {
        if !new.sets.contains_key(set) {
            let _ = writeln!(s, "delete set {t} {set}");
        }
    }
    s
}

/// The table name of the agent of `node` with root directory `root_dir`: several agents may
/// share a host — even agents of one node name, in tests — so the name carries both.
pub(crate) fn table_name(node: &str, root_dir: &std::path::Path) -> String {
    let clean: String = node
        .chars()
        .take(24)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    // FNV-1a: stable across runs and builds (std's hasher is not).
    let hash = root_dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("setpoint-{clean}-{:08x}", hash & 0xffff_ffff)
}

#[cfg(test)]
mod tests;
