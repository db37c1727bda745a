//! `Table` output for `kubectl get podmetrics|nodemetrics`, with metrics-server's columns:
//! `Name`, `cpu`, `memory` (a pod's summed over its containers) and `Window`.

use serde_json::{json, Value};

use super::objects::{cpu_quantity, memory_quantity};
use crate::handlers::response::partial_metadata;

/// One metrics object with its usage totals.
pub(super) struct Item {
    /// The `PodMetrics` or `NodeMetrics`.
    pub(super) object: Value,
    /// CPU in nanocores (a pod's summed over its containers).
    pub(super) cpu_nano_cores: u64,
    /// Memory in bytes (likewise).
    pub(super) memory_bytes: u64,
}

/// A `meta.k8s.io` `Table` of `items`; rows carry the objects' metadata (`includeObject`
/// `Metadata`, kubectl's default), the whole objects (`Object`) or nothing (`None`).
pub(super) fn table(items: &[Item], v1beta1: bool, include: &str) -> Value {
    let column = |name: &str, format: &str, description: &str| json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0});
    let columns = [
        column("Name", "name", "Name of the resource"),
        column("cpu", "quantity", ""),
        column("memory", "quantity", ""),
        column("Window", "duration", ""),
    ];
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            let cells = json!([
                item.object["metadata"]["name"],
                cpu_quantity(item.cpu_nano_cores),
                memory_quantity(item.memory_bytes),
                item.object["window"],
            ]);
            let mut row = json!({"cells": cells});
            match include {
                "None" => {}
                "Object" => row["object"] = item.object.clone(),
                _ => row["object"] = partial_metadata(&item.object, v1beta1),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_should_hold_name_usage_and_window() {
        let item = Item {
            object: json!({"metadata": {"name": "p", "namespace": "ns"}, "window": "10s"}),
            cpu_nano_cores: 250_000_000,
            memory_bytes: 64 << 20,
        };
        let t = table(&[item], false, "Metadata");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["columnDefinitions"][3]["name"], "Window");
        assert_eq!(t["rows"][0]["cells"], json!(["p", "250m", "64Mi", "10s"]));
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "ns");
    }
}
