//! What a LoadBalancer Service's balancer should be, from the Service and its EndpointSlices
//! (pure): one port per TCP or UDP Service port (SCTP is not balanced), forwarding to the
//! ready IPv4 endpoints of the slices' port of the same name and protocol — or, when none is
//! ready, to the serving ones that are terminating (kube-proxy's choice).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::lb::config::{Algorithm, BalancerConfig, Forwarding, HealthCheck, PortConfig, Protocol};

/// The label naming a slice's Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The annotation choosing the algorithm: `round-robin` (default) or `least-connections`.
pub const ALGORITHM_ANNOTATION: &str = "setpoint.dev/lb-algorithm";

/// The balancer of `service` on `address`, forwarding to the endpoints of `slices` (the
/// Service's, in any order).
pub(crate) fn balancer(
    service: &Service,
    slices: &[&EndpointSlice],
    address: IpAddr,
) -> BalancerConfig {
    let algorithm = match service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ALGORITHM_ANNOTATION))
        .map(String::as_str)
    {
        Some("least-connections") => Algorithm::LeastConnections,
        _ => Algorithm::RoundRobin,
    };
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|port| {
            let protocol = match port.protocol.as_deref() {
                None | Some("TCP") => Protocol::Tcp,
                Some("UDP") => Protocol::Udp,
                Some(_) => return None,
            };
            let name = port.name.clone().unwrap_or_default();
            Some(PortConfig {
                backends: backends(slices, &name, protocol),
                name,
                protocol,
                port: u16::try_from(port.port).ok()?,
            })
        })
        .collect();
    BalancerConfig {
        address,
        algorithm,
        health_check: HealthCheck::default(),
        forwarding: Forwarding::Userspace,
        ports,
    }
}

/// The endpoints of the slices' port `name`/`protocol`: the ready ones, else the serving and
/// terminating ones.
fn backends(slices: &[&EndpointSlice], name: &str, protocol: Protocol) -> Vec<SocketAddr> {
    let mut ready = BTreeSet::new();
    let mut terminating = BTreeSet::new();
    for slice in slices.iter().filter(|s| s.address_type == "IPv4") {
        let port = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or_default() == name
                && match p.protocol.as_deref() {
                    None | Some("TCP") => protocol == Protocol::Tcp,
                    Some("UDP") => protocol == Protocol::Udp,
                    Some(_) => false,
                }
        });
        let Some(number) = port
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let conditions = endpoint.conditions.clone().unwrap_or_default();
            let set = if conditions.ready != Some(false) {
                &mut ready
            } else if conditions.serving == Some(true) && conditions.terminating == Some(true) {
                &mut terminating
            } else {
                continue;
            };
            for address in &endpoint.addresses {
                if let Ok(ip) = address.parse::<IpAddr>() {
                    set.insert(SocketAddr::new(ip, number));
                }
            }
        }
    }
    if ready.is_empty() {
        terminating.into_iter().collect()
    } else {
        ready.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [
                {"name": "http", "port": 80},
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "sctp", "port": 9, "protocol": "SCTP"},
            ]},
        }))
        .expect("a Service")
    }

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "web-x", "namespace": "default"},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
            "endpoints": endpoints,
        }))
        .expect("a slice")
    }

    #[test]
    fn the_balancer_should_forward_each_port_to_its_ready_endpoints() {
        let s = slice(json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            {"addresses": ["10.0.0.3"]},
        ]));
        let config = balancer(&service(), &[&s], "127.0.100.1".parse().expect("ip"));
        assert_eq!(config.ports.len(), 2, "SCTP is left out");
        let http = &config.ports[0];
        assert_eq!((http.protocol, http.port), (Protocol::Tcp, 80));
        let list: Vec<String> = http.backends.iter().map(ToString::to_string).collect();
        assert_eq!(list, ["10.0.0.1:8080", "10.0.0.3:8080"]);
        assert_eq!(config.ports[1].protocol, Protocol::Udp);
        assert_eq!(config.ports[1].backends[0].port(), 5353);
    }

    #[test]
    fn without_ready_endpoints_the_serving_terminating_ones_should_be_used() {
        let s = slice(json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": false, "serving": true, "terminating": true}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false, "serving": false}},
        ]));
        let config = balancer(&service(), &[&s], "127.0.100.1".parse().expect("ip"));
        let list: Vec<String> = config.ports[0]
            .backends
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(list, ["10.0.0.1:8080"]);
    }
}
