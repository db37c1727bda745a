//! The deterministic part of the hostile-request pass.

use serde_json::{json, Value};

use super::resources::RESOURCES;
use super::values::{EXTREMES, INTEGER_EXTREMES, PARAMS};
use super::Case;

/// Paths to every leaf of `value` (a leaf: not a non-empty object or array).
pub(super) fn leaves(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) if !map.is_empty() => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => {
            out.push(at.clone());
            return;
        }
    };
    for (key, child) in children {
        at.push(key);
        leaves(child, at, out);
        at.pop();
    }
}

pub(super) fn set_at(value: &mut Value, path: &[String], to: Value) {
    let mut node = value;
    for key in path {
        node = match node {
            Value::Array(items) => &mut items[key.parse::<usize>().unwrap_or(0)],
            other => &mut other[key.as_str()],
        };
    }
    *node = to;
}

/// The deterministic part: every query parameter of every request shape at every extreme,
/// and every leaf of every kind's object at the edges of its type, written and then deleted
/// (the delete of a scheduled pod is graceful, which does arithmetic on what was stored).
pub(super) fn systematic() -> Vec<Case> {
    let mut cases = Vec::new();
    let shapes: [(&'static str, bool); 6] = [
        ("GET", false),
        ("GET", true),
        ("POST", true),
        ("PUT", false),
        ("PATCH", false),
        ("DELETE", false),
    ];
    let values: Vec<&str> = INTEGER_EXTREMES.iter().chain(EXTREMES).copied().collect();
    for (r, resource) in RESOURCES.iter().enumerate() {
        for (s, (method, collection)) in shapes.iter().enumerate() {
            for (p, param) in PARAMS.iter().enumerate() {
                // Each parameter meets every value on one resource and shape or another.
                if (r + s + p) % RESOURCES.len() != 0 && (p + r) % 4 != 0 {
                    continue;
                }
                for value in &values {
                    let path = if *collection {
                        resource.collection.to_owned()
                    } else {
                        format!("{}/seed", resource.collection)
                    };
                    let watch = if *method == "GET" && *collection && p % 2 == 0 {
                        "watch=1&"
                    } else {
                        ""
                    };
                    let body = match *method {
                        "POST" | "PUT" => {
                            serde_json::to_vec(&(resource.object)("seed")).unwrap_or_default()
                        }
                        "PATCH" => b"{}".to_vec(),
                        _ => Vec::new(),
                    };
                    let content_type = if *method == "PATCH" {
                        "application/merge-patch+json"
                    } else {
                        "application/json"
                    };
                    cases.push(Case {
                        method,
                        uri: format!("{path}?{watch}{param}={value}"),
                        content_type,
                        body,
                    });
                }
            }
        }
        let object = (resource.object)("x");
        let mut paths = Vec::new();
        leaves(&object, &mut Vec::new(), &mut paths);
        let typed = [
            json!(i64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(u64::MAX),
            json!(1e300),
            json!(""),
            json!("x".repeat(300)),
            json!({}),
        ];
        for path in paths {
            for (t, to) in typed.iter().enumerate() {
                let mut mutated = object.clone();
                if mutated["kind"] == "Pod" {
                    mutated["spec"]["nodeName"] = json!("local");
                }
                set_at(&mut mutated, &path, to.clone());
                let name = format!("m{}-{t}", cases.len());
                mutated["metadata"]["name"] = json!(name);
                cases.push(Case {
                    method: "POST",
                    uri: resource.collection.to_owned(),
                    content_type: "application/json",
                    body: serde_json::to_vec(&mutated).unwrap_or_default(),
                });
                cases.push(Case {
                    method: "DELETE",
                    uri: format!("{}/{name}", resource.collection),
                    content_type: "application/json",
                    body: Vec::new(),
                });
                cases.push(Case {
                    method: "PATCH",
                    uri: format!("{}/seed", resource.collection),
                    content_type: "application/merge-patch+json",
                    body: serde_json::to_vec(&{
                        let mut patch = mutated.clone();
                        patch["metadata"]["name"] = json!("seed");
                        patch
                    })
                    .unwrap_or_default(),
                });
            }
        }
    }
    cases
}
