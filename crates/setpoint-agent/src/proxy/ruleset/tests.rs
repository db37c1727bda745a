//! Golden rulesets, incremental transactions, and (as root with `nft`) the kernel's verdict
//! on them in a throwaway network namespace.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use super::*;
use crate::proxy::model::{Backend, Protocol, ServicePortRule};

fn backend(last: u8, port: u16) -> Backend {
    Backend {
        ip: Ipv4Addr::new(10, 244, 0, last),
        port,
    }
}

fn rule(id: &str, ip: u8, backends: Vec<Backend>) -> ServicePortRule {
    ServicePortRule {
        id: id.to_owned(),
        cluster_ips: vec![Ipv4Addr::new(10, 96, 0, ip)],
        port: 80,
        protocol: Protocol::Tcp,
        node_port: None,
        backends,
        local_backends: None,
        affinity_timeout: None,
    }
}

/// A Service with two endpoints and a NodePort, one without endpoints, one with affinity.
fn sample() -> Vec<ServicePortRule> {
    let mut web = rule(
        "default/web/tcp/80",
        10,
        vec![backend(2, 8080), backend(3, 8080)],
    );
    web.node_port = Some(30080);
    let empty = rule("default/empty/udp/80", 11, Vec::new());
    let empty = ServicePortRule {
        protocol: Protocol::Udp,
        ..empty
    };
    let mut sticky = rule("default/sticky/tcp/80", 12, vec![backend(4, 9000)]);
    sticky.affinity_timeout = Some(60);
    vec![web, empty, sticky]
}

const GOLDEN: &str = "\
add table ip setpoint-n1
delete table ip setpoint-n1
add table ip setpoint-n1
add map ip setpoint-n1 service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip setpoint-n1 service-nodeports { type inet_proto . inet_service : verdict ; }
add map ip setpoint-n1 no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip setpoint-n1 no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }
add chain ip setpoint-n1 reject-chain
add rule ip setpoint-n1 reject-chain reject
add chain ip setpoint-n1 mark-for-masquerade
add rule ip setpoint-n1 mark-for-masquerade meta mark set meta mark | 0x4000
add chain ip setpoint-n1 services
add rule ip setpoint-n1 services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip setpoint-n1 services fib daddr type local meta l4proto . th dport vmap @service-nodeports
add chain ip setpoint-n1 endpoints-check
add rule ip setpoint-n1 endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add rule ip setpoint-n1 endpoints-check fib daddr type local meta l4proto . th dport vmap @no-endpoint-nodeports
add chain ip setpoint-n1 nat-prerouting { type nat hook prerouting priority -100 ; policy accept ; }
add rule ip setpoint-n1 nat-prerouting jump services
add chain ip setpoint-n1 nat-output { type nat hook output priority -100 ; policy accept ; }
add rule ip setpoint-n1 nat-output jump services
add chain ip setpoint-n1 nat-postrouting { type nat hook postrouting priority 100 ; policy accept ; }
add rule ip setpoint-n1 nat-postrouting meta mark & 0x4000 == 0x4000 masquerade fully-random
add chain ip setpoint-n1 filter-input { type filter hook input priority -110 ; policy accept ; }
add rule ip setpoint-n1 filter-input ct state new jump endpoints-check
add chain ip setpoint-n1 filter-forward { type filter hook forward priority -110 ; policy accept ; }
add rule ip setpoint-n1 filter-forward ct state new jump endpoints-check
add chain ip setpoint-n1 filter-output { type filter hook output priority -110 ; policy accept ; }
add rule ip setpoint-n1 filter-output ct state new jump endpoints-check
add chain ip setpoint-n1 filter-forward-post-dnat { type filter hook forward priority -90 ; policy accept ; }
add rule ip setpoint-n1 filter-forward-post-dnat ip daddr 10.96.0.0/12 reject
add chain ip setpoint-n1 filter-output-post-dnat { type filter hook output priority -90 ; policy accept ; }
add rule ip setpoint-n1 filter-output-post-dnat ip daddr 10.96.0.0/12 reject
add set ip setpoint-n1 aff-default/sticky/tcp/80/10.244.0.4/9000 { type ipv4_addr ; flags dynamic,timeout ; timeout 60s ; }
add chain ip setpoint-n1 ep-default/sticky/tcp/80/10.244.0.4/9000
add chain ip setpoint-n1 ext-default/web/tcp/80
add chain ip setpoint-n1 svc-default/sticky/tcp/80
add chain ip setpoint-n1 svc-default/web/tcp/80
add rule ip setpoint-n1 ep-default/sticky/tcp/80/10.244.0.4/9000 ip saddr 10.244.0.4 jump mark-for-masquerade
add rule ip setpoint-n1 ep-default/sticky/tcp/80/10.244.0.4/9000 update @aff-default/sticky/tcp/80/10.244.0.4/9000 { ip saddr }
add rule ip setpoint-n1 ep-default/sticky/tcp/80/10.244.0.4/9000 meta l4proto tcp dnat to 10.244.0.4:9000
add rule ip setpoint-n1 ext-default/web/tcp/80 jump mark-for-masquerade
add rule ip setpoint-n1 ext-default/web/tcp/80 goto svc-default/web/tcp/80
add rule ip setpoint-n1 svc-default/sticky/tcp/80 ip saddr @aff-default/sticky/tcp/80/10.244.0.4/9000 goto ep-default/sticky/tcp/80/10.244.0.4/9000
add rule ip setpoint-n1 svc-default/sticky/tcp/80 numgen random mod 1 vmap { 0 : goto ep-default/sticky/tcp/80/10.244.0.4/9000 }
add rule ip setpoint-n1 svc-default/web/tcp/80 ip saddr { 10.244.0.2, 10.244.0.3 } jump mark-for-masquerade
add rule ip setpoint-n1 svc-default/web/tcp/80 meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.0.2 . 8080, 1 : 10.244.0.3 . 8080 }
add element ip setpoint-n1 no-endpoint-services { 10.96.0.11 . udp . 80 : goto reject-chain }
add element ip setpoint-n1 service-ips { 10.96.0.10 . tcp . 80 : goto svc-default/web/tcp/80 }
add element ip setpoint-n1 service-ips { 10.96.0.12 . tcp . 80 : goto svc-default/sticky/tcp/80 }
add element ip setpoint-n1 service-nodeports { tcp . 30080 : goto ext-default/web/tcp/80 }
";

#[test]
fn a_full_sync_writes_the_whole_table() {
    let text = full("setpoint-n1", "10.96.0.0/12", &Programmed::of(&sample()));
    assert_eq!(text, GOLDEN, "got:\n{text}");
}

#[test]
fn nothing_changed_means_an_empty_transaction() {
    let now = Programmed::of(&sample());
    assert_eq!(incremental("t", &now, &now.clone()), "");
}

#[test]
fn an_endpoint_change_rewrites_one_chain_only() {
    let old = Programmed::of(&sample());
    let mut rules = sample();
    rules[0].backends.push(backend(5, 8080));
    let text = incremental("t", &old, &Programmed::of(&rules));
    assert_eq!(
        text,
        "flush chain ip t svc-default/web/tcp/80\n\
         add rule ip t svc-default/web/tcp/80 ip saddr { 10.244.0.2, 10.244.0.3, 10.244.0.5 } jump mark-for-masquerade\n\
         add rule ip t svc-default/web/tcp/80 meta l4proto tcp dnat ip to numgen random mod 3 map { 0 : 10.244.0.2 . 8080, 1 : 10.244.0.3 . 8080, 2 : 10.244.0.5 . 8080 }\n"
    );
}

#[test]
fn losing_every_endpoint_moves_the_service_to_the_reject_map() {
    let old = Programmed::of(&sample());
    let mut rules = sample();
    rules[0].backends.clear();
    let text = incremental("t", &old, &Programmed::of(&rules));
    assert_eq!(
        text,
        "delete element ip t service-ips { 10.96.0.10 . tcp . 80 }\n\
         delete element ip t service-nodeports { tcp . 30080 }\n\
         flush chain ip t ext-default/web/tcp/80\n\
         flush chain ip t svc-default/web/tcp/80\n\
         add element ip t no-endpoint-nodeports { tcp . 30080 : goto reject-chain }\n\
         add element ip t no-endpoint-services { 10.96.0.10 . tcp . 80 : goto reject-chain }\n\
         delete chain ip t ext-default/web/tcp/80\n\
         delete chain ip t svc-default/web/tcp/80\n"
    );
}

#[test]
fn removing_an_affinity_service_removes_its_sets_last() {
    let old = Programmed::of(&sample());
    let rules: Vec<_> = sample()
        .into_iter()
        .filter(|r| !r.id.contains("sticky"))
        .collect();
    let text = incremental("t", &old, &Programmed::of(&rules));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"delete element ip t service-ips { 10.96.0.12 . tcp . 80 }")
    );
    assert_eq!(
        lines.last(),
        Some(&"delete set ip t aff-default/sticky/tcp/80/10.244.0.4/9000")
    );
    assert_eq!(lines.len(), 6, "{text}");
}

#[test]
fn table_names_are_per_node_and_safe() {
    let root = std::path::Path::new("/var/lib/setpoint/agent");
    let name = table_name("node-1.example", root);
    assert!(name.starts_with("setpoint-node-1.example-"), "{name}");
    assert_eq!(name, table_name("node-1.example", root));
    assert_ne!(
        name,
        table_name("node-1.example", std::path::Path::new("/tmp/other"))
    );
    assert!(table_name("a b", root).starts_with("setpoint-a-b-"));
}

/// Runs `script` with `nft` in a new network namespace; `None` when that is not possible
/// here (not root, no `nft`, no `unshare`).
pub(crate) fn nft_in_netns(script: &str) -> Option<std::process::Output> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("script.sh");
    std::fs::write(&path, script).ok()?;
    let output = Command::new("unshare")
        .args(["-n", "sh"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(output)
}

fn have_nft() -> bool {
    Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_kernel_accepts_a_full_sync_then_incremental_ones() {
    if !have_nft() {
        eprintln!("skipped: no nft binary");
        return;
    }
    let first = Programmed::of(&sample());
    let mut rules = sample();
    rules[0].backends.push(backend(5, 8080));
    rules[2].backends.push(backend(6, 9000));
    rules[1].backends.push(backend(7, 53));
    let second = Programmed::of(&rules);
    let third = Programmed::of(&rules[..1]);
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        full("setpoint-n1", "10.96.0.0/12", &first),
        incremental("setpoint-n1", &first, &second),
        incremental("setpoint-n1", &second, &third),
    ];
    let mut script = String::from("set -e\n");
    for (i, text) in files.iter().enumerate() {
        let path = dir.path().join(format!("{i}.nft"));
        std::fs::write(&path, text).expect("write");
        script.push_str(&format!("nft -f {}\n", path.display()));
    }
    script.push_str("nft list table ip setpoint-n1\n");
    let Some(output) = nft_in_netns(&script) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "nft failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("10.244.0.5 . 8080"), "{stdout}");
    assert!(!stdout.contains("sticky"), "{stdout}");
    assert!(!stdout.contains("10.96.0.11"), "{stdout}");
}
