//! Node ports for services: every port of a `NodePort` service, and of a `LoadBalancer`
//! service unless `allocateLoadBalancerNodePorts` is false, gets a port of the node-port range
//! (30000–32767, kube-apiserver's default) on create and on an update that makes it need one;
//! a port asked for must be in the range and not used by another service. An update that
//! leaves a port's `nodePort` out keeps the one it had (matched by name, port and protocol),
//! as kube-apiserver does, so `kubectl apply` of the original manifest does not move it.
//! A `LoadBalancer` service with `externalTrafficPolicy: Local` also gets a
//! `healthCheckNodePort`. Which ports are taken is read from the other services, read
//! consistently ([`Peers`]); the pick is random, as for cluster IPs (`cluster_ip.rs`).

use std::collections::BTreeSet;

use rand::Rng;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::strategy::Peers;

/// The lowest node port.
const FIRST: i64 = 30000;
/// The highest node port.
const LAST: i64 = 32767;

/// Whether `spec` asks for node ports.
pub(super) fn wants_node_ports(spec: &Value) -> bool {
    match spec["type"].as_str() {
        Some("NodePort") => true,
        Some("LoadBalancer") => spec["allocateLoadBalancerNodePorts"] != json!(false),
        _ => false,
    }
}

/// Whether `spec` needs a health-check node port.
fn wants_health_check_port(spec: &Value) -> bool {
    spec["type"] == "LoadBalancer" && spec["externalTrafficPolicy"] == "Local"
}

/// Fills in (or checks) the node ports of `service`, created (`old` none) or updated from
/// `old`.
pub(super) async fn assign(
    peers: &dyn Peers,
    service: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let spec = &service["spec"];
    let wants_ports = wants_node_ports(spec);
    let wants_health = wants_health_check_port(spec);
    if !wants_ports && !wants_health {
        // Node ports on a service that may not have them are refused by [`validate`].
        return Ok(());
    }
    let (namespace, name) = identity(service);
    let mut taken = BTreeSet::new();
    for other in peers.objects().await? {
        if identity(&other) == (namespace.clone(), name.clone()) {
            continue;
        }
        taken.extend(node_ports(&other["spec"]));
    }
    let invalid = |field: String, value: &Value, detail: &str| {
        ApiError::invalid("Service", "", &name, vec![Cause::invalid(field, value, detail)])
    };
    let old_ports: Vec<Value> = old
        .and_then(|o| o["spec"]["ports"].as_array().cloned())
        .unwrap_or_default();
    let Some(ports) = service["spec"]["ports"].as_array_mut() else {
        return Ok(());
    };
    // Ports this service uses, by number, with the protocols using each (one number may serve
    // TCP and UDP of the same service).
    let mut own: Vec<(i64, String)> = Vec::new();
    for (i, port) in ports.iter_mut().enumerate() {
        let protocol = port["protocol"].as_str().unwrap_or("TCP").to_owned();
        let field = format!("spec.ports[{i}].nodePort");
        let asked = match &port["nodePort"] {
            Value::Null => None,
            v => match v.as_i64() {
                Some(0) => None,
                Some(n) => Some(n),
                None => return Err(invalid(field, v, "must be an integer")),
            },
        };
        let chosen = match asked {
            Some(n) => {
                let value = json!(n);
                if !(FIRST..=LAST).contains(&n) {
                    return Err(invalid(
                        field,
                        &value,
                        &format!("provided port is not in the valid range. The range of valid ports is {FIRST}-{LAST}"),
                    ));
                }
                // `taken` holds the other services' ports; this one may use a number twice,
                // for two protocols.
                if taken.contains(&n) || own.iter().any(|(p, proto)| *p == n && *proto == protocol)
                {
                    return Err(invalid(field, &value, "provided port is already allocated"));
                }
                n
            }
            None if !wants_ports => continue,
            None => match kept(&old_ports, port) {
                Some(n) if !taken.contains(&n) => n,
                _ => {
                    let used: BTreeSet<i64> =
                        taken.iter().copied().chain(own.iter().map(|(p, _)| *p)).collect();
                    pick(&used).ok_or_else(|| {
                        ApiError::internal("failed to allocate a nodePort: range is full")
                    })?
                }
            },
        };
        if let Some(map) = port.as_object_mut() {
            map.insert("nodePort".into(), json!(chosen));
        }
        own.push((chosen, protocol));
    }
    if wants_health {
        let current = service["spec"]["healthCheckNodePort"].as_i64().filter(|n| *n != 0);
        let kept = old.and_then(|o| o["spec"]["healthCheckNodePort"].as_i64());
        let port = match current.or(kept) {
            Some(n) => n,
            None => {
                let used: BTreeSet<i64> =
                    taken.iter().copied().chain(own.iter().map(|(p, _)| *p)).collect();
                pick(&used).ok_or_else(|| {
                    ApiError::internal("failed to allocate a healthCheckNodePort: range is full")
                })?
            }
        };
        if let Some(spec) = service["spec"].as_object_mut() {
            spec.insert("healthCheckNodePort".into(), json!(port));
        }
    }
    Ok(())
}

/// The node port an updated port keeps: the old port's with the same name, port and
/// protocol, else the same port and protocol.
fn kept(old_ports: &[Value], port: &Value) -> Option<i64> {
    let same = |o: &&Value, by_name: bool| {
        o["port"] == port["port"]
            && o["protocol"].as_str().unwrap_or("TCP") == port["protocol"].as_str().unwrap_or("TCP")
            && (!by_name || o["name"] == port["name"])
    };
    old_ports
        .iter()
        .find(|o| same(o, true))
        .or_else(|| old_ports.iter().find(|o| same(o, false)))
        .and_then(|o| o["nodePort"].as_i64())
}

/// Every node port `spec` holds (its ports' and its health-check port).
fn node_ports(spec: &Value) -> impl Iterator<Item = i64> + '_ {
    spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_i64())
        .chain(spec["healthCheckNodePort"].as_i64())
        .filter(|n| *n != 0)
}

fn identity(service: &Value) -> (String, String) {
    let meta = &service["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_owned(),
        meta["name"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A random free port of the range.
fn pick(taken: &BTreeSet<i64>) -> Option<i64> {
    let mut rng = rand::thread_rng();
    for _ in 0..64 {
        let port = rng.gen_range(FIRST..=LAST);
        if !taken.contains(&port) {
            return Some(port);
        }
    }
    (FIRST..=LAST).find(|p| !taken.contains(p))
}

/// Node ports on a service that may not have them: kube-apiserver's refusal.
pub(super) fn validate(spec: &Value, causes: &mut Vec<Cause>) {
    if wants_node_ports(spec) || spec["type"] == "LoadBalancer" {
        return;
    }
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    for (i, port) in spec["ports"].as_array().into_iter().flatten().enumerate() {
        if port["nodePort"].as_i64().is_some_and(|n| n != 0) {
            causes.push(Cause::forbidden(
                format!("spec.ports[{i}].nodePort"),
                &format!("may not be used when `type` is '{kind}'"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Others(Vec<Value>);

    #[async_trait::async_trait]
    impl Peers for Others {
        async fn objects(&self) -> Result<Vec<Value>, ApiError> {
            Ok(self.0.clone())
        }
    }

    fn service(name: &str, kind: &str, ports: Value) -> Value {
        json!({"metadata": {"namespace": "default", "name": name},
               "spec": {"type": kind, "ports": ports}})
    }

    #[tokio::test]
    async fn node_port_services_should_get_free_ports_in_the_range() {
        let other = service("a", "NodePort", json!([{"port": 80, "nodePort": 30080}]));
        let peers = Others(vec![other]);
        let mut svc = service(
            "b",
            "NodePort",
            json!([{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]),
        );
        assign(&peers, &mut svc, None).await.unwrap();
        let ports: Vec<i64> = node_ports(&svc["spec"]).collect();
        assert_eq!(ports.len(), 2);
        assert!(ports.iter().all(|p| (FIRST..=LAST).contains(p) && *p != 30080));
        assert_ne!(ports[0], ports[1]);
    }

    #[tokio::test]
    async fn asked_ports_should_be_checked_and_kept_on_update() {
        let peers = Others(vec![service("a", "NodePort", json!([{"port": 80, "nodePort": 30080}]))]);
        let mut taken = service("b", "NodePort", json!([{"port": 80, "nodePort": 30080}]));
        let e = assign(&peers, &mut taken, None).await.unwrap_err();
        assert!(e.to_string().contains("provided port is already allocated"), "{e}");
        let mut outside = service("b", "NodePort", json!([{"port": 80, "nodePort": 80}]));
        let e = assign(&peers, &mut outside, None).await.unwrap_err();
        assert!(e.to_string().contains("The range of valid ports is 30000-32767"), "{e}");
        // An update leaving the node port out keeps the old one.
        let old = service("b", "NodePort", json!([{"port": 81, "protocol": "TCP", "nodePort": 31000}]));
        let mut new = service("b", "NodePort", json!([{"port": 81, "protocol": "TCP"}]));
        let peers = Others(vec![old.clone()]);
        assign(&peers, &mut new, Some(&old)).await.unwrap();
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 31000);
        // A ClusterIP service gets none, and may not ask for one.
        let mut plain = service("c", "ClusterIP", json!([{"port": 80}]));
        assign(&peers, &mut plain, None).await.unwrap();
        assert!(plain["spec"]["ports"][0]["nodePort"].is_null());
        let mut causes = Vec::new();
        validate(&service("c", "ClusterIP", json!([{"port": 80, "nodePort": 30001}]))["spec"], &mut causes);
        assert_eq!(causes.len(), 1);
    }

    #[tokio::test]
    async fn extreme_node_ports_should_be_refused_and_zero_should_mean_allocate() {
        let peers = Others(vec![]);
        for bad in [
            json!(-1),
            json!(29999),
            json!(32768),
            json!(65536),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!("30080"),
            json!(true),
            json!([30080]),
        ] {
            let mut svc = service("x", "NodePort", json!([{"port": 80, "nodePort": bad.clone()}]));
            let e = assign(&peers, &mut svc, None).await.unwrap_err();
            assert_eq!(e.code(), 422, "{bad}: {e}");
        }
        let mut zero = service("x", "NodePort", json!([{"port": 80, "nodePort": 0}]));
        assign(&peers, &mut zero, None).await.unwrap();
        let port = zero["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!((FIRST..=LAST).contains(&port), "{port}");
    }

    #[tokio::test]
    async fn local_load_balancers_should_get_a_health_check_port() {
        let mut lb = service("lb", "LoadBalancer", json!([{"port": 80}]));
        lb["spec"]["externalTrafficPolicy"] = json!("Local");
        assign(&Others(vec![]), &mut lb, None).await.unwrap();
        let health = lb["spec"]["healthCheckNodePort"].as_i64().unwrap();
        assert!((FIRST..=LAST).contains(&health));
        assert_ne!(Some(health), lb["spec"]["ports"][0]["nodePort"].as_i64());
    }
}
