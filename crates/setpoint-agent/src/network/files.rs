//! The files the agent writes for each pod and bind-mounts over the container's `/etc/hosts`,
//! `/etc/hostname` and `/etc/resolv.conf`, with the kubelet's content:
//! - `hosts`: the managed header, the localhost and IPv6 lines, then the pod's address with
//!   its hostname (and `<hostname>.<subdomain>.<namespace>.svc.<domain>` first when
//!   `subdomain` is set), then `hostAliases`; a host-network pod gets the node's own hosts file
//!   with its `hostAliases` appended;
//! - `hostname`: `spec.hostname` or the pod's name (the FQDN with `setHostnameAsFQDN`);
//! - `resolv.conf` by `dnsPolicy`: `ClusterFirst` (the cluster resolver, the namespace's
//!   search list before the node's, `ndots:5`; a host-network pod gets `Default` instead),
//!   `ClusterFirstWithHostNet` (`ClusterFirst` for host-network pods too), `Default` (the
//!   node's `resolv.conf`), `None` (only `dnsConfig`); `dnsConfig` merged on top (nameservers
//!   and searches appended without duplicates, options replaced by name). At most 3
//!   nameservers and 32 search domains are kept, as the kubelet does.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The cluster's DNS domain.
pub(crate) const CLUSTER_DOMAIN: &str = "cluster.local";
/// The most nameservers a resolver reads.
const MAX_NAMESERVERS: usize = 3;
/// The most search domains kept.
const MAX_SEARCHES: usize = 32;

/// The pod's hostname: `spec.hostname` or its name, at most 63 characters.
pub(crate) fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let name = spec
        .and_then(|s| s.hostname.clone())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    let mut short: String = name.chars().take(63).collect();
    while short.ends_with(['-', '.']) {
        short.pop();
    }
    short
}

/// `<hostname>.<subdomain>.<namespace>.svc.<domain>` when the pod has a subdomain.
pub(crate) fn fqdn(pod: &Pod) -> Option<String> {
    let subdomain = pod.spec.as_ref()?.subdomain.as_deref()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!(
        "{}.{subdomain}.{namespace}.svc.{CLUSTER_DOMAIN}",
        hostname(pod)
    ))
}

/// What the pod's UTS hostname is: the FQDN with `setHostnameAsFQDN`, else the hostname.
pub(crate) fn uts_hostname(pod: &Pod) -> String {
    let as_fqdn = pod
        .spec
        .as_ref()
        .and_then(|s| s.set_hostname_as_fqdn)
        .unwrap_or(false);
    match fqdn(pod) {
        Some(f) if as_fqdn => f,
        _ => hostname(pod),
    }
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// The pod's `/etc/hosts`; `node_hosts` is the node's own (for host-network pods).
pub(crate) fn hosts(pod: &Pod, pod_ip: IpAddr, node_hosts: &str) -> String {
    let mut out = String::new();
    if host_network(pod) {
        out.push_str("# Kubernetes-managed hosts file (host network).\n");
        out.push_str(node_hosts);
        if !node_hosts.is_empty() && !node_hosts.ends_with('\n') {
            out.push('\n');
        }
    } else {
        out.push_str("# Kubernetes-managed hosts file.\n");
        out.push_str("127.0.0.1\tlocalhost\n");
        out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
        out.push_str("fe00::0\tip6-localnet\n");
        out.push_str("fe00::0\tip6-mcastprefix\n");
        out.push_str("fe00::1\tip6-allnodes\n");
        out.push_str("fe00::2\tip6-allrouters\n");
        match fqdn(pod) {
            Some(fqdn) => out.push_str(&format!("{pod_ip}\t{fqdn}\t{}\n", hostname(pod))),
            None => out.push_str(&format!("{pod_ip}\t{}\n", hostname(pod))),
        }
    }
    let aliases = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_aliases.clone())
        .unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in aliases {
            let names = alias.hostnames.unwrap_or_default();
            if names.is_empty() {
                continue;
            }
            out.push_str(&format!("{}\t{}\n", alias.ip, names.join("\t")));
        }
    }
    out
}

/// A parsed `resolv.conf`: what the kubelet reads of the node's and writes for pods.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Resolv {
    /// `nameserver` lines.
    pub(crate) nameservers: Vec<String>,
    /// `search` (and `domain`) domains.
    pub(crate) searches: Vec<String>,
    /// `options`, `name` or `name:value`.
    pub(crate) options: Vec<String>,
}

impl Resolv {
    /// Parses a `resolv.conf`.
    pub(crate) fn parse(text: &str) -> Resolv {
        let mut r = Resolv::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or_default();
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => r.nameservers.extend(words.next().map(str::to_owned)),
                Some("search" | "domain") => {
                    r.searches = words.map(|w| w.trim_end_matches('.').to_owned()).collect();
                }
                Some("options") => r.options.extend(words.map(str::to_owned)),
                _ => {}
            }
        }
        r
    }

    /// The file's text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if !self.searches.is_empty() {
            out.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for ns in &self.nameservers {
            out.push_str(&format!("nameserver {ns}\n"));
        }
        if !self.options.is_empty() {
            out.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        out
    }
}

/// The pod's `resolv.conf` content: `cluster_dns` is the cluster resolver's address (none in
/// host-network mode: `ClusterFirst` then means `Default`, as the kubelet does without
/// `--cluster-dns`), `node` the node's own `resolv.conf`.
pub(crate) fn resolv(pod: &Pod, cluster_dns: Option<IpAddr>, node: &Resolv) -> Resolv {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let cluster_first = match policy {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network(pod),
        _ => false,
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut r = match (policy, cluster_first, cluster_dns) {
        ("None", _, _) => Resolv::default(),
        (_, true, Some(dns)) => {
            let mut searches = vec![
                format!("{namespace}.svc.{CLUSTER_DOMAIN}"),
                format!("svc.{CLUSTER_DOMAIN}"),
                CLUSTER_DOMAIN.to_owned(),
            ];
            for s in &node.searches {
                if !searches.contains(s) {
                    searches.push(s.clone());
                }
            }
            Resolv {
                nameservers: vec![dns.to_string()],
                searches,
                options: vec!["ndots:5".to_owned()],
            }
        }
        _ => node.clone(),
    };
    if let Some(config) = spec.and_then(|s| s.dns_config.as_ref()) {
        for ns in config.nameservers.iter().flatten() {
            if !r.nameservers.contains(ns) {
                r.nameservers.push(ns.clone());
            }
        }
        for s in config.searches.iter().flatten() {
            if !r.searches.contains(s) {
                r.searches.push(s.clone());
            }
        }
        for option in config.options.iter().flatten() {
            let Some(name) = option.name.as_deref() else {
                continue;
            };
            let text = match &option.value {
                Some(v) => format!("{name}:{v}"),
                None => name.to_owned(),
            };
            match r
                .options
                .iter_mut()
                .find(|o| o.split(':').next() == Some(name))
            {
                Some(existing) => *existing = text,
                None => r.options.push(text),
            }
        }
    }
    r.nameservers.truncate(MAX_NAMESERVERS);
    r.searches.truncate(MAX_SEARCHES);
    r
}

/// Where the pod's files live: `<pod dir>/etc/`.
pub(crate) fn dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("etc")
}

/// Writes the pod's `hosts`, `hostname` and `resolv.conf` under `<pod dir>/etc/` (only
/// when changed); returns the mounts that put them at `/etc/…` in the container.
pub(crate) fn write(
    pod: &Pod,
    pod_dir: &Path,
    pod_ip: IpAddr,
    cluster_dns: Option<IpAddr>,
) -> std::io::Result<Vec<crate::volumes::MountSpec>> {
    let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let node_resolv =
        Resolv::parse(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default());
    let dir = dir(pod_dir);
    std::fs::create_dir_all(&dir)?;
    let contents = [
        ("hosts", hosts(pod, pod_ip, &node_hosts)),
        ("hostname", format!("{}\n", uts_hostname(pod))),
        (
            "resolv.conf",
            resolv(pod, cluster_dns, &node_resolv).render(),
        ),
    ];
    let mut mounts = Vec::new();
    for (name, text) in contents {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, &text)?;
            std::fs::rename(&tmp, &path)?;
        }
        mounts.push(crate::volumes::MountSpec {
            source: path,
            target: PathBuf::from("/etc").join(name),
            read_only: false,
        });
    }
    Ok(mounts)
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
