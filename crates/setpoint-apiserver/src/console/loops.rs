//! The Loops view's data: the controllers' series of the `/metrics` exposition (the SDK's
//! `workqueue_*` and `controller_runtime_*` families, labelled `controller`), gathered per
//! controller. Counters are sent as they are (the page takes rates between two polls) and the
//! reconcile-time histogram as its cumulative buckets (the page takes p99 from their change).

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// One controller's figures.
#[derive(Default)]
struct Loop {
    depth: f64,
    adds: f64,
    retries: f64,
    reconciles: f64,
    errors: f64,
    active_workers: f64,
    /// `le` → cumulative count.
    buckets: Vec<(f64, f64)>,
    time_sum: f64,
}

/// A sample line `name{a="b",…} value`: the name, the labels, the value.
fn sample(line: &str) -> Option<(&str, BTreeMap<String, String>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, labels_of(rest.strip_suffix('}')?)),
        None => (head, BTreeMap::new()),
    };
    Some((name, labels, value))
}

/// `a="b",c="d"` (values may hold escaped quotes and commas).
fn labels_of(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_owned(), value);
        rest = &after[end..];
    }
    labels
}

/// The controllers of `exposition`, as the page reads them.
pub(super) fn from_exposition(exposition: &str) -> Value {
    let mut loops: BTreeMap<String, Loop> = BTreeMap::new();
    for (name, labels, value) in exposition.lines().filter_map(sample) {
        let Some(controller) = labels.get("controller") else {
            continue;
        };
        let entry = loops.entry(controller.clone()).or_default();
        match name {
            "workqueue_depth" => entry.depth = value,
            "workqueue_adds_total" => entry.adds = value,
            "workqueue_retries_total" => entry.retries = value,
            "controller_runtime_reconcile_total" => entry.reconciles += value,
            "controller_runtime_reconcile_errors_total" => entry.errors = value,
            "controller_runtime_active_workers" => entry.active_workers = value,
            "controller_runtime_reconcile_time_seconds_sum" => entry.time_sum = value,
            "controller_runtime_reconcile_time_seconds_bucket" => {
                let le = match labels.get("le").map(String::as_str) {
                    Some("+Inf") => f64::INFINITY,
                    Some(le) => le.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                entry.buckets.push((le, value));
            }
            _ => {}
        }
    }
    let controllers: Vec<Value> = loops
        .into_iter()
        .map(|(name, l)| {
            let mut buckets = l.buckets;
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            let buckets: Vec<Value> = buckets
                .into_iter()
                .map(|(le, count)| {
                    // JSON has no infinity: the last bucket's bound is null.
                    json!([le.is_finite().then_some(le), count])
                })
                .collect();
            json!({
                "name": name,
                "depth": l.depth,
                "adds": l.adds,
                "retries": l.retries,
                "reconciles": l.reconciles,
                "errors": l.errors,
                "activeWorkers": l.active_workers,
                "reconcileSecondsSum": l.time_sum,
                "reconcileBuckets": buckets,
            })
        })
        .collect();
    json!({ "controllers": controllers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_should_be_gathered_per_controller() {
        let text = r#"# HELP workqueue_depth Current depth
workqueue_depth{name="web",controller="web"} 3
workqueue_adds_total{name="web",controller="web"} 10
workqueue_retries_total{name="web",controller="web"} 2
controller_runtime_reconcile_total{controller="web",result="success"} 5
controller_runtime_reconcile_total{controller="web",result="error"} 1
controller_runtime_reconcile_errors_total{controller="web"} 1
controller_runtime_reconcile_time_seconds_bucket{controller="web",le="0.1"} 4
controller_runtime_reconcile_time_seconds_bucket{controller="web",le="+Inf"} 6
workqueue_depth{name="odd \"one\", really",controller="b,c"} 1
apiserver_request_total{verb="GET"} 7
"#;
        let value = from_exposition(text);
        let controllers = value["controllers"].as_array().unwrap();
        assert_eq!(controllers.len(), 2);
        assert_eq!(controllers[0]["name"], "b,c");
        assert_eq!(controllers[0]["depth"], 1.0);
        let web = &controllers[1];
        assert_eq!(web["name"], "web");
        assert_eq!(web["depth"], 3.0);
        assert_eq!(web["adds"], 10.0);
        assert_eq!(web["retries"], 2.0);
        assert_eq!(web["reconciles"], 6.0);
        assert_eq!(web["errors"], 1.0);
        assert_eq!(web["reconcileBuckets"], json!([[0.1, 4.0], [null, 6.0]]));
    }
}
