//! `metrics.k8s.io/v1beta1` objects as metrics-server serves them: `PodMetrics` and
//! `NodeMetrics` (`timestamp`, `window` as a Go duration, usage as quantities — CPU in
//! nanocores or a shorter exact form, memory in the largest exact binary unit), and their
//! lists.

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Map, Value};

use super::agent::{NodeUsage, PodUsage};

/// The group's `apiVersion`.
pub(super) const API_VERSION: &str = "metrics.k8s.io/v1beta1";

/// A `PodMetrics` for a pod with `labels`.
pub(super) fn pod_metrics(usage: &PodUsage, labels: &Map<String, Value>) -> Value {
    let containers: Vec<Value> = usage
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "usage": {
                    "cpu": cpu_quantity(c.cpu_nano_cores),
                    "memory": memory_quantity(c.memory_working_set_bytes),
                },
            })
        })
        .collect();
    let mut metadata = json!({
        "name": usage.name,
        "namespace": usage.namespace,
        "creationTimestamp": now(),
    });
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels.clone());
    }
    json!({
        "kind": "PodMetrics",
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "timestamp": usage.timestamp,
        "window": go_duration(usage.window_millis),
        "containers": containers,
    })
}

/// A `NodeMetrics` for node `name` with `labels`.
pub(super) fn node_metrics(name: &str, usage: &NodeUsage, labels: &Map<String, Value>) -> Value {
    let mut metadata = json!({"name": name, "creationTimestamp": now()});
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels.clone());
    }
    json!({
        "kind": "NodeMetrics",
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "timestamp": usage.timestamp,
        "window": go_duration(usage.window_millis),
        "usage": {
            "cpu": cpu_quantity(usage.cpu_nano_cores),
            "memory": memory_quantity(usage.memory_working_set_bytes),
        },
    })
}

/// A `<kind>List` of `items`.
pub(super) fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{kind}List"),
        "apiVersion": API_VERSION,
        "metadata": {},
        "items": items,
    })
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Nanocores as a quantity in its shortest exact decimal form: `2`, `250m`, `1500u`,
/// `236550207n`.
pub(super) fn cpu_quantity(nano_cores: u64) -> String {
    if nano_cores == 0 {
        return "0".to_owned();
    }
    for (divisor, suffix) in [(1_000_000_000, ""), (1_000_000, "m"), (1_000, "u")] {
        if nano_cores.is_multiple_of(divisor) {
            return format!("{}{suffix}", nano_cores / divisor);
        }
    }
    format!("{nano_cores}n")
}

/// Bytes as a quantity in the largest binary unit that divides them exactly (`4Ki`, `3Mi`),
/// or plain bytes.
pub(super) fn memory_quantity(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    let mut value = bytes;
    let mut unit = 0;
    while value.is_multiple_of(1024) && unit < 6 {
        value /= 1024;
        unit += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][unit];
    format!("{value}{suffix}")
}

/// Milliseconds as Go's `time.Duration` prints them (`metav1.Duration`'s JSON form): `0s`,
/// `606ms`, `10.5s`, `1m0.25s`, `2h0m0s`.
pub(super) fn go_duration(millis: u64) -> String {
    if millis == 0 {
        return "0s".to_owned();
    }
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let whole = millis / 1000;
    let fraction = millis % 1000;
    let seconds = if fraction == 0 {
        format!("{}", whole % 60)
    } else {
        let digits = format!("{fraction:03}");
        format!("{}.{}", whole % 60, digits.trim_end_matches('0'))
    };
    let (hours, minutes) = (whole / 3600, (whole / 60) % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::ContainerUsage;
    use super::*;

    #[test]
    fn cpu_should_print_in_its_shortest_exact_form() {
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(cpu_quantity(250_000_000), "250m");
        assert_eq!(cpu_quantity(1_500_000), "1500u");
        assert_eq!(cpu_quantity(236_550_207), "236550207n");
    }

    #[test]
    fn memory_should_print_in_the_largest_exact_binary_unit() {
        assert_eq!(memory_quantity(0), "0");
        assert_eq!(memory_quantity(1_454_080), "1420Ki");
        assert_eq!(memory_quantity(3 * 1024 * 1024), "3Mi");
        assert_eq!(memory_quantity(1000), "1000");
    }

    #[test]
    fn durations_should_print_as_go_does() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(606), "606ms");
        assert_eq!(go_duration(10_000), "10s");
        assert_eq!(go_duration(10_500), "10.5s");
        assert_eq!(go_duration(60_250), "1m0.25s");
        assert_eq!(go_duration(7_200_000), "2h0m0s");
    }

    #[test]
    fn pod_metrics_should_have_the_v1beta1_shape() {
        let usage = PodUsage {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            window_millis: 10_000,
            containers: vec![ContainerUsage {
                name: "c".into(),
                cpu_nano_cores: 250_000_000,
                memory_working_set_bytes: 4096,
            }],
        };
        let mut labels = Map::new();
        labels.insert("app".into(), json!("web"));
        let object = pod_metrics(&usage, &labels);
        assert_eq!(object["kind"], "PodMetrics");
        assert_eq!(object["apiVersion"], "metrics.k8s.io/v1beta1");
        assert_eq!(object["metadata"]["namespace"], "ns");
        assert_eq!(object["metadata"]["labels"]["app"], "web");
        assert_eq!(object["window"], "10s");
        assert_eq!(
            object["containers"],
            json!([{"name": "c", "usage": {"cpu": "250m", "memory": "4Ki"}}])
        );
    }
}
