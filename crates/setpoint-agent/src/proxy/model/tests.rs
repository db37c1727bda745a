//! Which endpoints each Service port gets.

use std::sync::Arc;

use serde_json::json;

use super::*;

pub(crate) fn service(value: serde_json::Value) -> Arc<Service> {
    Arc::new(serde_json::from_value(value).expect("a Service"))
}

pub(crate) fn slice(value: serde_json::Value) -> Arc<EndpointSlice> {
    Arc::new(serde_json::from_value(value).expect("an EndpointSlice"))
}

/// `web` in `default`: ClusterIP 10.96.0.10, port 80/TCP named http → 8080, NodePort 30080.
pub(crate) fn web(extra: serde_json::Value) -> Arc<Service> {
    let mut spec = json!({
        "type": "NodePort",
        "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    service(json!({"metadata": {"namespace": "default", "name": "web"}, "spec": spec}))
}

/// A slice of `web` with `endpoints` as (ip, ready, serving, terminating, node).
pub(crate) fn web_slice(
    name: &str,
    endpoints: &[(&str, bool, bool, bool, &str)],
) -> Arc<EndpointSlice> {
    let endpoints: Vec<_> = endpoints
        .iter()
        .map(|(ip, ready, serving, terminating, node)| {
            json!({
                "addresses": [ip],
                "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
                "nodeName": node,
            })
        })
        .collect();
    slice(json!({
        "metadata": {"namespace": "default", "name": name, "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
}

fn ips(backends: &[Backend]) -> Vec<String> {
    backends
        .iter()
        .map(|b| format!("{}:{}", b.ip, b.port))
        .collect()
}

#[test]
fn ready_endpoints_of_every_slice_count() {
    let rules = service_rules(
        &[web(json!({}))],
        &[
            web_slice(
                "web-a",
                &[
                    ("10.244.0.3", true, true, false, "n1"),
                    ("10.244.0.4", false, false, false, "n1"),
                ],
            ),
            web_slice("web-b", &[("10.244.0.2", true, true, false, "n2")]),
        ],
        "n1",
    );
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(rule.id, "default/web/tcp/80");
    assert_eq!(rule.cluster_ips, [Ipv4Addr::new(10, 96, 0, 10)]);
    assert_eq!(rule.node_port, Some(30080));
    assert_eq!(ips(&rule.backends), ["10.244.0.2:8080", "10.244.0.3:8080"]);
    assert_eq!(rule.local_backends, None);
    assert_eq!(rule.affinity_timeout, None);
}

#[test]
fn serving_terminating_endpoints_are_the_fallback_when_none_is_ready() {
    let slices = [web_slice(
        "web-a",
        &[
            ("10.244.0.3", false, true, true, "n1"),
            ("10.244.0.4", false, false, true, "n1"),
        ],
    )];
    let rules = service_rules(&[web(json!({}))], &slices, "n1");
    assert_eq!(ips(&rules[0].backends), ["10.244.0.3:8080"]);
    // With a ready endpoint, terminating ones are not used.
    let slices = [web_slice(
        "web-a",
        &[
            ("10.244.0.3", false, true, true, "n1"),
            ("10.244.0.5", true, true, false, "n1"),
        ],
    )];
    let rules = service_rules(&[web(json!({}))], &slices, "n1");
    assert_eq!(ips(&rules[0].backends), ["10.244.0.5:8080"]);
}

#[test]
fn local_traffic_policies_keep_this_nodes_endpoints() {
    let slices = [web_slice(
        "web-a",
        &[
            ("10.244.0.3", true, true, false, "n1"),
            ("10.244.1.3", true, true, false, "n2"),
        ],
    )];
    let rules = service_rules(
        &[web(json!({"externalTrafficPolicy": "Local"}))],
        &slices,
        "n1",
    );
    assert_eq!(
        ips(&rules[0].backends),
        ["10.244.0.3:8080", "10.244.1.3:8080"]
    );
    assert_eq!(
        rules[0].local_backends.as_deref().map(ips),
        Some(vec!["10.244.0.3:8080".to_owned()])
    );
    let rules = service_rules(
        &[web(json!({"internalTrafficPolicy": "Local"}))],
        &slices,
        "n2",
    );
    assert_eq!(ips(&rules[0].backends), ["10.244.1.3:8080"]);
}

#[test]
fn client_ip_affinity_carries_its_timeout() {
    let rules = service_rules(
        &[web(json!({"sessionAffinity": "ClientIP"}))],
        &[] as &[Arc<EndpointSlice>],
        "n1",
    );
    assert_eq!(rules[0].affinity_timeout, Some(DEFAULT_AFFINITY_TIMEOUT));
    let rules = service_rules(
        &[web(
            json!({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}),
        )],
        &[] as &[Arc<EndpointSlice>],
        "n1",
    );
    assert_eq!(rules[0].affinity_timeout, Some(60));
    assert!(rules[0].backends.is_empty());
}

#[test]
fn headless_external_name_and_foreign_slices_get_no_rules() {
    let headless = web(json!({"clusterIP": "None", "clusterIPs": ["None"]}));
    let external = service(json!({"metadata": {"namespace": "default", "name": "ext"},
        "spec": {"type": "ExternalName", "externalName": "example.org"}}));
    assert!(service_rules(&[headless, external], &[] as &[Arc<EndpointSlice>], "n1").is_empty());
    // A slice of another Service, or with another port name, is not web's.
    let mut other = (*web_slice("x", &[("10.244.0.9", true, true, false, "n1")])).clone();
    other.metadata.labels = Some([(SERVICE_NAME_LABEL.to_owned(), "api".to_owned())].into());
    let mut renamed = (*web_slice("y", &[("10.244.0.8", true, true, false, "n1")])).clone();
    if let Some(port) = renamed.ports.as_mut().and_then(|p| p.first_mut()) {
        port.name = Some("metrics".to_owned());
    }
    let rules = service_rules(
        &[web(json!({}))],
        &[Arc::new(other), Arc::new(renamed)],
        "n1",
    );
    assert!(rules[0].backends.is_empty());
}
