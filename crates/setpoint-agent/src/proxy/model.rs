//! What the Service proxy programs, computed from Services and EndpointSlices alone (a pure
//! function, so rules can be tested without a kernel): one [`ServicePortRule`] per IPv4
//! Service port, with the endpoints kube-proxy would send its traffic to.
//!
//! Which endpoints count (kube-proxy's `CategorizeEndpoints`): the ready ones; when none is
//! ready, the serving-and-terminating ones (so connections drain to pods on their way out).
//! `internalTrafficPolicy: Local` keeps only this node's endpoints for cluster traffic,
//! `externalTrafficPolicy: Local` only this node's for NodePort traffic. Headless and
//! ExternalName Services get no rules.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

/// The label tying an EndpointSlice to its Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// kube's default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub(crate) const DEFAULT_AFFINITY_TIMEOUT: i32 = 10_800;

/// A transport protocol the proxy forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The protocol of a Service or EndpointSlice port (`TCP` when unset).
    pub(crate) fn parse(value: Option<&str>) -> Option<Protocol> {
        match value.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The lower-case name (nftables' keyword, DNS SRV labels).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// An endpoint address and port traffic is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Backend {
    /// The endpoint's IPv4 address.
    pub(crate) ip: Ipv4Addr,
    /// The endpoint's port (the Service's target port, resolved by the slice).
    pub(crate) port: u16,
}

/// One Service port as the proxy programs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServicePortRule {
    /// `namespace/name/protocol/port`: unique, stable, used in chain names.
    pub(crate) id: String,
    /// The Service's IPv4 cluster IPs.
    pub(crate) cluster_ips: Vec<Ipv4Addr>,
    /// The Service port.
    pub(crate) port: u16,
    /// Its protocol.
    pub(crate) protocol: Protocol,
    /// The NodePort, for `NodePort` and `LoadBalancer` Services.
    pub(crate) node_port: Option<u16>,
    /// Where cluster traffic goes (sorted; empty: rejected).
    pub(crate) backends: Vec<Backend>,
    /// Where NodePort traffic goes when `externalTrafficPolicy: Local` narrows it (`None`:
    /// as cluster traffic, masqueraded).
    pub(crate) local_backends: Option<Vec<Backend>>,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub(crate) affinity_timeout: Option<i32>,
}

/// The rules for every Service port, sorted by id. `node` is this agent's node name (for the
/// `Local` traffic policies).
pub(crate) fn service_rules(
    services: &[impl AsRef<Service>],
    slices: &[impl AsRef<EndpointSlice>],
    node: &str,
) -> Vec<ServicePortRule> {
    let mut rules = Vec::new();
    for service in services {
        let service = service.as_ref();
        let (Some(namespace), Some(name)) = (
            service.metadata.namespace.as_deref(),
            service.metadata.name.as_deref(),
        ) else {
            continue;
        };
        let Some(spec) = &service.spec else { continue };
        if spec.type_.as_deref() == Some("ExternalName") {
            continue;
        }
        let cluster_ips: Vec<Ipv4Addr> = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|ip| ip.parse().ok())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if cluster_ips.is_empty() {
            // Headless (`None`) or IPv6-only: nothing this IPv4 proxy programs.
            continue;
        }
        let own: Vec<&EndpointSlice> = slices
            .iter()
            .map(AsRef::as_ref)
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(namespace)
                    && s.address_type == "IPv4"
                    && s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(SERVICE_NAME_LABEL))
                        .map(String::as_str)
                        == Some(name)
            })
            .collect();
        let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
        let external_local = spec.external_traffic_policy.as_deref() == Some("Local");
        let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
        });
        for port in spec.ports.iter().flatten() {
            let Some(protocol) = Protocol::parse(port.protocol.as_deref()) else {
                continue;
            };
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            let candidates = endpoints_for_port(&own, port, protocol);
            let backends = choose(&candidates, internal_local.then_some(node));
            let node_port = port.node_port.and_then(|p| u16::try_from(p).ok());
            let local_backends =
                (external_local && node_port.is_some()).then(|| choose(&candidates, Some(node)));
            rules.push(ServicePortRule {
                id: format!("{namespace}/{name}/{}/{number}", protocol.name()),
                cluster_ips: cluster_ips.clone(),
                port: number,
                protocol,
                node_port,
                backends,
                local_backends,
                affinity_timeout,
            });
        }
    }
    rules.sort_by(|a, b| a.id.cmp(&b.id));
    rules
}

/// A slice endpoint with the port it serves the Service port on.
struct Candidate<'a> {
    endpoint: &'a Endpoint,
    backend: Backend,
}

/// Every endpoint address of the slices serving `port` (matched by port name and protocol).
fn endpoints_for_port<'a>(
    slices: &[&'a EndpointSlice],
    port: &ServicePort,
    protocol: Protocol,
) -> Vec<Candidate<'a>> {
    let wanted = port.name.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for slice in slices {
        let Some(target) = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == wanted
                && Protocol::parse(p.protocol.as_deref()) == Some(protocol)
        }) else {
            continue;
        };
        let Some(target) = target.port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        for endpoint in &slice.endpoints {
            for address in &endpoint.addresses {
                if let Ok(ip) = address.parse() {
                    out.push(Candidate {
                        endpoint,
                        backend: Backend { ip, port: target },
                    });
                }
            }
        }
    }
    out
}

/// The endpoints kube-proxy uses: ready ones, else serving-and-terminating ones; only
/// `local_to`'s when given. Sorted, without duplicates.
fn choose(candidates: &[Candidate<'_>], local_to: Option<&str>) -> Vec<Backend> {
    let local = |c: &&Candidate<'_>| {
        local_to.is_none_or(|node| c.endpoint.node_name.as_deref() == Some(node))
    };
    let conditions = |c: &Candidate<'_>| {
        let cond = c.endpoint.conditions.as_ref();
        let ready = cond.and_then(|c| c.ready).unwrap_or(true);
        let serving = cond.and_then(|c| c.serving).unwrap_or(ready);
        let terminating = cond.and_then(|c| c.terminating).unwrap_or(false);
        (ready, serving, terminating)
    };
    let mut ready: BTreeSet<Backend> = candidates
        .iter()
        .filter(local)
        .filter(|c| conditions(c).0)
        .map(|c| c.backend)
        .collect();
    if ready.is_empty() {
        ready = candidates
            .iter()
            .filter(local)
            .filter(|c| {
                let (_, serving, terminating) = conditions(c);
                serving && terminating
            })
            .map(|c| c.backend)
            .collect();
    }
    ready.into_iter().collect()
}

#[cfg(test)]
pub(crate) mod tests;
