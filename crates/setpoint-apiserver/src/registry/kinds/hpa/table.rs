//! The `kubectl get hpa` cells: `REFERENCE` (`Kind/name`) and `TARGETS` (like `cpu: 12%/50%`),
//! as kubectl's HPA printer writes them.

use serde_json::Value;

/// One metric's `current/target` text, as kubectl's HPA printer writes it.
fn metric_text(spec: &Value, current: Option<&Value>) -> String {
    let unknown = "<unknown>".to_owned();
    let (source, name) = match spec["type"].as_str().unwrap_or_default() {
        "Resource" => ("resource", spec["resource"]["name"].as_str()),
        "ContainerResource" => (
            "containerResource",
            spec["containerResource"]["name"].as_str(),
        ),
        "Pods" => ("pods", None),
        "Object" => ("object", None),
        "External" => ("external", None),
        _ => return "<unknown type>".into(),
    };
    let target = &spec[source]["target"];
    let cur = current.map(|c| &c[source]["current"]);
    let text = match target["type"].as_str() {
        Some("Utilization") => format!(
            "{}/{}%",
            cur.and_then(|c| c["averageUtilization"].as_i64())
                .map_or(unknown, |u| format!("{u}%")),
            target["averageUtilization"].as_i64().unwrap_or(0)
        ),
        Some("AverageValue") => format!(
            "{}/{} (avg)",
            cur.and_then(|c| c["averageValue"].as_str())
                .map_or(unknown, str::to_owned),
            target["averageValue"].as_str().unwrap_or_default()
        ),
        _ => format!(
            "{}/{}",
            cur.and_then(|c| c["value"].as_str())
                .map_or(unknown, str::to_owned),
            target["value"].as_str().unwrap_or_default()
        ),
    };
    match name {
        Some(n) => format!("{n}: {text}"),
        None => text,
    }
}

/// The TARGETS cell: each metric's `current/target` (the first two, then `+ N more...`).
pub(super) fn targets(object: &Value) -> String {
    let specs = object["spec"]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let currents = object["status"]["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown: Vec<String> = specs
        .iter()
        .take(2)
        .enumerate()
        .map(|(i, s)| {
            let current = currents.get(i).filter(|c| c["type"] == s["type"]);
            metric_text(s, current)
        })
        .collect();
    let mut out = shown.join(", ");
    if specs.len() > 2 {
        out.push_str(&format!(" + {} more...", specs.len() - 2));
    }
    out
}

/// The REFERENCE cell: `Kind/name`.
pub(super) fn reference(object: &Value) -> String {
    let t = &object["spec"]["scaleTargetRef"];
    format!(
        "{}/{}",
        t["kind"].as_str().unwrap_or_default(),
        t["name"].as_str().unwrap_or_default()
    )
}

