//! The rules both Service loops (EndpointSlice and legacy Endpoints) apply to a pod: whether it
//! is an endpoint of a Service at all, its conditions (ready / serving / terminating), the
//! address of one family, its hostname, and the Service's ports as resolved against the pod's
//! containers (a named `targetPort` may resolve to different numbers on different pods).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::pod_state;

/// One Service port as resolved for one pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ResolvedPort {
    /// The Service port's name (`""` for a single unnamed port).
    pub name: String,
    /// The number on the pod.
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The Service port's `appProtocol`.
    pub app_protocol: Option<String>,
}

/// A pod's conditions as an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conditions {
    /// Ready to receive new traffic (never while terminating, unless the Service publishes
    /// not-ready addresses).
    pub ready: bool,
    /// Passing readiness (terminating or not).
    pub serving: bool,
    /// Being deleted.
    pub terminating: bool,
}

/// The selector of a Service that has one (a missing or empty selector means the Service's
/// endpoints are the user's).
pub(crate) fn selector(service: &Service) -> Option<&BTreeMap<String, String>> {
    service
        .spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// Whether the Service's selector matches the pod's labels.
pub(crate) fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Whether the Service publishes not-ready addresses (every endpoint counts as ready).
pub(crate) fn publishes_not_ready(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// Whether the Service has a cluster IP (neither unset nor `None`).
pub(crate) fn has_cluster_ip(service: &Service) -> bool {
    !matches!(
        service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()),
        None | Some("" | "None")
    )
}

/// The pod's IP addresses, primary first.
pub(crate) fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let mut ips: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if ips.is_empty() {
        ips.extend(status.pod_ip.clone().filter(|ip| !ip.is_empty()));
    }
    ips
}

/// Whether the pod is an endpoint at all: it has an IP, has not finished, and (unless
/// `include_terminating`) is not being deleted.
pub(crate) fn is_candidate(pod: &Pod, include_terminating: bool) -> bool {
    !pod_ips(pod).is_empty()
        && !pod_state::is_finished(pod)
        && (include_terminating || !pod_state::is_terminating(pod))
}

/// Whether the pod's `Ready` condition is `True`.
fn is_pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's conditions as an endpoint of `service`.
pub(crate) fn conditions(pod: &Pod, service: &Service) -> Conditions {
    let publish = publishes_not_ready(service);
    let serving = publish || is_pod_ready(pod);
    let terminating = pod_state::is_terminating(pod);
    Conditions {
        ready: publish || (serving && !terminating),
        serving,
        terminating,
    }
}

/// The pod's addresses of `family` (`IPv4` / `IPv6`).
pub(crate) fn addresses_of(pod: &Pod, family: &str) -> Vec<String> {
    pod_ips(pod)
        .into_iter()
        .filter(|ip| ip.contains(':') == (family == "IPv6"))
        .collect()
}

/// The hostname the pod publishes for `service`: its `hostname` when its `subdomain` names the
/// Service (of its namespace).
pub(crate) fn hostname(pod: &Pod, service: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == service.metadata.name.as_deref()
        && pod.metadata.namespace == service.metadata.namespace)
        .then(|| hostname.to_owned())
}

/// The number a Service port's `targetPort` means on the pod: a number as is (the port itself
/// when unset), a name looked up among the ports of the same protocol of the containers and
/// the sidecars (init containers with `restartPolicy: Always`).
fn target_port(port: &ServicePort, pod: &Pod) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// The Service's ports as resolved for the pod, sorted; ports a pod cannot resolve (a name no
/// container declares) are left out for that pod.
pub(crate) fn resolved_ports(service: &Service, pod: &Pod) -> Vec<ResolvedPort> {
    let mut ports: Vec<ResolvedPort> = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(ResolvedPort {
                name: p.name.clone().unwrap_or_default(),
                port: target_port(p, pod)?,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
                app_protocol: p.app_protocol.clone(),
            })
        })
        .collect();
    ports.sort();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    fn service(v: serde_json::Value) -> Service {
        serde_json::from_value(v).expect("service")
    }

    #[test]
    fn named_ports_should_resolve_per_pod_and_unknown_names_be_left_out() {
        let svc = service(json!({"metadata": {"name": "s"}, "spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": "web"},
            {"name": "raw", "port": 81, "targetPort": 9000, "protocol": "UDP"},
            {"name": "plain", "port": 82}]}}));
        let a = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "c", "ports": [{"name": "web", "containerPort": 8080}]}]}}));
        let b = pod(json!({"metadata": {"name": "b"}, "spec": {"containers": [
            {"name": "c", "ports": [{"name": "other", "containerPort": 1}]}]}}));
        let ports = |p: &Pod| -> Vec<(String, i32)> {
            resolved_ports(&svc, p)
                .into_iter()
                .map(|p| (p.name, p.port))
                .collect()
        };
        assert_eq!(
            ports(&a),
            vec![
                ("http".into(), 8080),
                ("plain".into(), 82),
                ("raw".into(), 9000)
            ]
        );
        assert_eq!(ports(&b), vec![("plain".into(), 82), ("raw".into(), 9000)]);
    }

    #[test]
    fn conditions_should_follow_readiness_termination_and_publishing() {
        let svc = service(json!({"metadata": {"name": "s"}, "spec": {}}));
        let publishing =
            service(json!({"metadata": {"name": "s"}, "spec": {"publishNotReadyAddresses": true}}));
        let ready = pod(
            json!({"metadata": {"name": "a"}, "status": {"podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let mut leaving = ready.clone();
        leaving.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let unready = pod(json!({"metadata": {"name": "b"}, "status": {"podIP": "10.0.0.2"}}));
        let c = |p: &Pod, s: &Service| {
            let c = conditions(p, s);
            (c.ready, c.serving, c.terminating)
        };
        assert_eq!(c(&ready, &svc), (true, true, false));
        assert_eq!(c(&leaving, &svc), (false, true, true));
        assert_eq!(c(&unready, &svc), (false, false, false));
        assert_eq!(c(&unready, &publishing), (true, true, false));
        assert_eq!(c(&leaving, &publishing), (true, true, true));
        assert!(!is_candidate(&leaving, false));
        assert!(is_candidate(&leaving, true));
        assert_eq!(addresses_of(&ready, "IPv4"), vec!["10.0.0.1".to_owned()]);
        assert!(addresses_of(&ready, "IPv6").is_empty());
    }
}
