//! The random part: requests of every shape with garbage or mutated bodies and parameters.

use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::{json, Value};

use super::resources::{Resource, RESOURCES};
use super::values::{extreme_value, mutate, ordinary, pick, EXTREMES, INTEGER_EXTREMES, PARAMS};
use super::Case;

pub(super) fn query(rng: &mut SmallRng) -> String {
    let n = if rng.gen_bool(0.4) {
        0
    } else {
        rng.gen_range(1..4)
    };
    let mut parts = Vec::new();
    for _ in 0..n {
        let param = *pick(rng, PARAMS);
        let value = match rng.gen_range(0..4) {
            0 | 1 => *pick(rng, ordinary(param)),
            2 => *pick(rng, INTEGER_EXTREMES),
            _ => *pick(rng, EXTREMES),
        };
        parts.push(format!("{param}={value}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

// Not "fz": deleting the namespace every request works in would make the rest 403s.
pub(super) const NAMES: &[&str] = &[
    "a", "b", "c", "d", "e", "seed", "seed", "local", "UPPER", "a..b", "-x", "%2E%2E", "%00",
];

pub(super) fn name(rng: &mut SmallRng) -> String {
    if rng.gen_bool(0.05) {
        return "n".repeat(rng.gen_range(60..300));
    }
    (*pick(rng, NAMES)).to_owned()
}

/// A body for a write: usually a valid object with one mutation, sometimes garbage.
pub(super) fn body(rng: &mut SmallRng, resource: &Resource, name: &str) -> (&'static str, Vec<u8>) {
    const JSON: &str = "application/json";
    match rng.gen_range(0..24) {
        0 => (JSON, b"{not json".to_vec()),
        1 => (JSON, Vec::new()),
        2 => (JSON, b"null".to_vec()),
        3 => (JSON, b"[1,2]".to_vec()),
        4 => (JSON, "[".repeat(5000).into_bytes()),
        5 => (
            JSON,
            br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":1e999}}"#.to_vec(),
        ),
        6 => ("application/yaml", b"a: [b\n\t- : :".to_vec()),
        7 => ("application/vnd.kubernetes.protobuf", {
            let mut garbage = b"k8s\x00".to_vec();
            garbage.extend((0..rng.gen_range(0..200)).map(|_| rng.gen::<u8>()));
            garbage
        }),
        8 => ("text/plain", b"hello".to_vec()),
        _ => {
            let mut object = (resource.object)(name);
            if object["kind"] == "Pod" && rng.gen_bool(0.5) {
                object["spec"]["nodeName"] = json!("local"); // deleted gracefully
            }
            for _ in 0..rng.gen_range(0..3) {
                mutate(rng, &mut object);
            }
            (JSON, serde_json::to_vec(&object).unwrap_or_default())
        }
    }
}

pub(super) fn patch_body(
    rng: &mut SmallRng,
    resource: &Resource,
    name: &str,
) -> (&'static str, Vec<u8>) {
    let ops = [
        "add", "remove", "replace", "move", "copy", "test", "nonsense",
    ];
    let paths = [
        "/metadata/labels/x",
        "/metadata/labels/-",
        "metadata/labels",
        "/metadata/namespace",
        "/metadata/name",
        "/metadata/finalizers/-",
        "/metadata/finalizers/99999999999999999999",
        "/spec/replicas",
        "/spec/containers/0/image",
        "/spec/containers/-1",
        "/spec/template/spec/terminationGracePeriodSeconds",
        "/data/k",
        "",
        "/",
        "/~2/~",
    ];
    match rng.gen_range(0..4) {
        0 => {
            let n = rng.gen_range(0..4);
            let ops: Vec<Value> = (0..n)
                .map(|_| {
                    json!({"op": pick(rng, &ops), "path": pick(rng, &paths),
                        "from": pick(rng, &paths), "value": extreme_value(rng)})
                })
                .collect();
            (
                "application/json-patch+json",
                serde_json::to_vec(&ops).unwrap_or_default(),
            )
        }
        1 | 2 => {
            let mut object = (resource.object)(name);
            mutate(rng, &mut object);
            let content_type = if rng.gen_bool(0.5) {
                "application/merge-patch+json"
            } else {
                "application/strategic-merge-patch+json"
            };
            (
                content_type,
                serde_json::to_vec(&object).unwrap_or_default(),
            )
        }
        _ => {
            let (_, bytes) = body(rng, resource, name);
            let content_type = *pick(
                rng,
                &[
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/json-patch+json",
                    "application/apply-patch+yaml",
                ],
            );
            (content_type, bytes)
        }
    }
}

pub(super) fn delete_body(rng: &mut SmallRng) -> (&'static str, Vec<u8>) {
    match rng.gen_range(0..4) {
        0 => ("application/json", Vec::new()),
        1 => (
            "application/vnd.kubernetes.protobuf",
            b"k8s\x00\x0a\x02\x08".to_vec(),
        ),
        _ => {
            let mut options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "gracePeriodSeconds": 30, "propagationPolicy": "Background",
                "preconditions": {"uid": "u", "resourceVersion": "1"}, "dryRun": ["All"]});
            mutate(rng, &mut options);
            (
                "application/json",
                serde_json::to_vec(&options).unwrap_or_default(),
            )
        }
    }
}

pub(super) fn case(rng: &mut SmallRng) -> Case {
    let resource = pick(rng, RESOURCES);
    let name = name(rng);
    let item = format!("{}/{name}", resource.collection);
    let target = if !resource.subresources.is_empty() && rng.gen_bool(0.3) {
        format!("{item}/{}", pick(rng, resource.subresources))
    } else {
        item
    };
    let (method, path, (content_type, body)) = match rng.gen_range(0..9) {
        0 => ("GET", target, ("application/json", Vec::new())),
        1 => (
            "GET",
            resource.collection.to_owned(),
            ("application/json", Vec::new()),
        ),
        2 => (
            "GET",
            format!("{}?watch=1", resource.collection),
            ("application/json", Vec::new()),
        ),
        3 => (
            "POST",
            resource.collection.to_owned(),
            body(rng, resource, &name),
        ),
        4 => ("POST", target.clone(), body(rng, resource, &name)),
        5 => ("PUT", target, body(rng, resource, &name)),
        6 => ("PATCH", target, patch_body(rng, resource, &name)),
        7 => ("DELETE", target, delete_body(rng)),
        _ => ("DELETE", resource.collection.to_owned(), delete_body(rng)),
    };
    let query = query(rng);
    let uri = if path.contains('?') {
        format!("{path}{}", query.replacen('?', "&", 1))
    } else {
        format!("{path}{query}")
    };
    Case {
        method,
        uri,
        content_type,
        body,
    }
}
