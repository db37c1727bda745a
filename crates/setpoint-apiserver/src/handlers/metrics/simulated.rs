//! Synthetic usage for simulated nodes (labelled `setpoint.dev/simulated=true`, see the agent's
//! `simulated` module): they run no processes and publish no reachable agent (their
//! `InternalIP`s are made up), so instead of asking an agent the API server makes their report
//! up from the pods bound to them — each running container uses exactly what it requests
//! (its limits where it requests nothing, else nothing), and the node uses the sum. Plausible
//! and steady, and clearly not measured: the `window` is a nominal 10 s.

use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use super::agent::{AgentReport, ContainerUsage, NodeUsage, PodUsage};

/// The label simulated nodes carry (value `true`).
pub(super) const SIMULATED_LABEL: &str = "setpoint.dev/simulated";
/// The window synthetic reports claim.
const NOMINAL_WINDOW_MILLIS: u64 = 10_000;

/// Whether `node` is a simulated node.
pub(super) fn is_simulated(node: &Value) -> bool {
    node["metadata"]["labels"][SIMULATED_LABEL] == "true"
}

/// The report a simulated node's agent would give for `pods` (the pods bound to it).
pub(super) fn synthetic_report(pods: &[&Value]) -> AgentReport {
    let timestamp = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut node = NodeUsage {
        timestamp: timestamp.clone(),
        window_millis: NOMINAL_WINDOW_MILLIS,
        cpu_nano_cores: 0,
        memory_working_set_bytes: 0,
    };
    let mut usages = Vec::new();
    for pod in pods {
        if pod["status"]["phase"] != "Running" || !pod["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let containers: Vec<ContainerUsage> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let amount = |name: &str, parse: fn(&str) -> Option<u64>| {
                    ["requests", "limits"]
                        .iter()
                        .find_map(|kind| c["resources"][kind][name].as_str().and_then(parse))
                        .unwrap_or(0)
                };
                ContainerUsage {
                    name: c["name"].as_str().unwrap_or_default().to_owned(),
                    cpu_nano_cores: amount("cpu", nano_cores),
                    memory_working_set_bytes: amount("memory", bytes),
                }
            })
            .collect();
        for c in &containers {
            node.cpu_nano_cores = node.cpu_nano_cores.saturating_add(c.cpu_nano_cores);
            node.memory_working_set_bytes = node
                .memory_working_set_bytes
                .saturating_add(c.memory_working_set_bytes);
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        usages.push(PodUsage {
            namespace: text(&pod["metadata"]["namespace"]),
            name: text(&pod["metadata"]["name"]),
            uid: text(&pod["metadata"]["uid"]),
            timestamp: timestamp.clone(),
            window_millis: NOMINAL_WINDOW_MILLIS,
            containers,
        });
    }
    AgentReport {
        node: Some(node),
        pods: usages,
    }
}

/// CPU quantity in nanocores (rounded up); `None` if it is not a quantity or is negative.
fn nano_cores(quantity: &str) -> Option<u64> {
    u64::try_from(setpoint_core::quantity::scaled_value(quantity, 9)?).ok()
}

/// Memory quantity in bytes (rounded up); `None` if it is not a quantity or is negative.
fn bytes(quantity: &str) -> Option<u64> {
    u64::try_from(setpoint_core::quantity::scaled_value(quantity, 0)?).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quantities_should_parse_with_every_kind_of_suffix() {
        assert_eq!(nano_cores("250m"), Some(250_000_000));
        assert_eq!(nano_cores("2"), Some(2_000_000_000));
        assert_eq!(nano_cores("0.5"), Some(500_000_000));
        assert_eq!(bytes("64Mi"), Some(64 << 20));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("12x"), None);
        assert_eq!(bytes("-1"), None);
    }

    #[test]
    fn a_simulated_node_should_use_what_its_running_pods_request() {
        let pod = |name: &str, phase: &str, resources: Value| {
            json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
                "spec": {"containers": [{"name": "c", "resources": resources}]},
                "status": {"phase": phase},
            })
        };
        let a = pod(
            "a",
            "Running",
            json!({"requests": {"cpu": "250m", "memory": "64Mi"}}),
        );
        let b = pod("b", "Running", json!({"limits": {"cpu": "1"}}));
        let pending = pod("p", "Pending", json!({"requests": {"cpu": "4"}}));
        let report = synthetic_report(&[&a, &b, &pending]);
        let node = report.node.expect("node usage");
        assert_eq!(node.cpu_nano_cores, 1_250_000_000);
        assert_eq!(node.memory_working_set_bytes, 64 << 20);
        let names: Vec<&str> = report.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(report.pods[0].uid, "u-a");
        assert_eq!(report.pods[1].containers[0].memory_working_set_bytes, 0);
        assert!(is_simulated(
            &json!({"metadata": {"labels": {SIMULATED_LABEL: "true"}}})
        ));
        assert!(!is_simulated(&json!({"metadata": {}})));
    }
}
