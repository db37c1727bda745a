//! Hostile requests, generated: every verb on a spread of resources and subresources, with
//! every query parameter the API reads set to its type's extremes (0, negative, max, overflow,
//! empty, garbage) and every kind of body malformed or mutated at a random place.
//!
//! Asserts for each request: an answer within a deadline (no hang), never a 5xx for client
//! input, every error a `Status` whose `code` is the HTTP status; and every so often, and at
//! the end, that the API still serves ordinary requests.
//!
//! The run is seeded and prints its seed. `SETPOINT_FUZZ_CASES` sets how many requests (the
//! test command runs a short pass), `SETPOINT_FUZZ_SEED` replays a run:
//!
//! ```text
//! SETPOINT_FUZZ_CASES=200000 cargo test --release -p setpoint-apiserver --test api_errors fuzz -- --nocapture
//! ```

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

use setpoint_apiserver::Api;

/// Requests in the short pass the test command runs.
const DEFAULT_CASES: u64 = 1500;
/// How long one request may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// One generated request, printed when it fails.
#[derive(Debug)]
struct Case {
    method: &'static str,
    uri: String,
    content_type: &'static str,
    body: Vec<u8>,
}

/// What a resource looks like to the generator: its collection path, a valid object and
/// the subresources it serves.
struct Resource {
    collection: &'static str,
    object: fn(&str) -> Value,
    subresources: &'static [&'static str],
}

const RESOURCES: &[Resource] = &[
    Resource {
        collection: "/api/v1/namespaces/fz/configmaps",
        object: |n| json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":n},"data":{"k":"v"}}),
        subresources: &[],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/secrets",
        object: |n| json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":n},"stringData":{"k":"v"},"type":"Opaque"}),
        subresources: &[],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/pods",
        object: |n| {
            json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":n,"labels":{"app":"a"}},
                "spec":{"terminationGracePeriodSeconds":30,"activeDeadlineSeconds":100,
                    "containers":[{"name":"c","image":"busybox","command":["sleep","1"],
                        "ports":[{"containerPort":80}],
                        "resources":{"requests":{"cpu":"100m","memory":"1Mi"}},
                        "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1,"timeoutSeconds":1}}]}})
        },
        subresources: &[
            "status",
            "log",
            "binding",
            "eviction",
            "ephemeralcontainers",
            "exec",
            "nosuch",
        ],
    },
    Resource {
        collection: "/apis/apps/v1/namespaces/fz/deployments",
        object: |n| {
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":n},
                "spec":{"replicas":1,"revisionHistoryLimit":3,"progressDeadlineSeconds":60,"minReadySeconds":0,
                    "selector":{"matchLabels":{"app":n}},
                    "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},
                    "template":{"metadata":{"labels":{"app":n}},
                        "spec":{"containers":[{"name":"c","image":"busybox","command":["sleep","1"]}]}}}})
        },
        subresources: &["status", "scale"],
    },
    Resource {
        collection: "/apis/apps/v1/namespaces/fz/replicasets",
        object: |n| {
            json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":n},
                "spec":{"replicas":2,"selector":{"matchLabels":{"app":n}},
                    "template":{"metadata":{"labels":{"app":n}},
                        "spec":{"containers":[{"name":"c","image":"busybox"}]}}}})
        },
        subresources: &["status", "scale"],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/services",
        object: |n| json!({"apiVersion":"v1","kind":"Service","metadata":{"name":n},"spec":{"ports":[{"port":80,"targetPort":8080}],"selector":{"app":"a"}}}),
        subresources: &["status"],
    },
    Resource {
        collection: "/api/v1/namespaces",
        object: |n| json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":n}}),
        subresources: &["status", "finalize"],
    },
    Resource {
        collection: "/api/v1/nodes",
        object: |n| json!({"apiVersion":"v1","kind":"Node","metadata":{"name":n},"spec":{"unschedulable":false}}),
        subresources: &["status"],
    },
    Resource {
        collection: "/apis/coordination.k8s.io/v1/namespaces/fz/leases",
        object: |n| json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":n},"spec":{"holderIdentity":"x","leaseDurationSeconds":15}}),
        subresources: &[],
    },
    Resource {
        collection: "/apis/autoscaling/v2/namespaces/fz/horizontalpodautoscalers",
        object: |n| {
            json!({"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":n},
                "spec":{"minReplicas":1,"maxReplicas":5,
                    "scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},
                    "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50}}}]}})
        },
        subresources: &["status"],
    },
    Resource {
        collection: "/api/v1/namespaces/fz/events",
        object: |n| json!({"apiVersion":"v1","kind":"Event","metadata":{"name":n},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m","count":1}),
        subresources: &[],
    },
    Resource {
        collection: "/apis/fuzz.setpoint.dev/v1/namespaces/fz/widgets",
        object: |n| json!({"apiVersion":"fuzz.setpoint.dev/v1","kind":"Widget","metadata":{"name":n},"spec":{"size":3,"l":[1,2,3],"s":"x"}}),
        subresources: &["status", "scale"],
    },
];

/// The CRD behind the `widgets` resource: a schema with bounds, defaults and a CEL rule.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.fuzz.setpoint.dev"},
        "spec": {"group": "fuzz.setpoint.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [{"rule": "self.l.all(x, x >= 0)", "message": "no negatives"}],
                        "properties": {
                            "size": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
                            "l": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
                            "s": {"type": "string", "maxLength": 20}}},
                    "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    })
}

/// Query parameters the API reads, any of which a request may carry.
const PARAMS: &[&str] = &[
    "resourceVersion",
    "resourceVersionMatch",
    "limit",
    "continue",
    "labelSelector",
    "fieldSelector",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "watch",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
    "pretty",
    "container",
    "follow",
    "previous",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "limitBytes",
    "timestamps",
    "insecureSkipTLSVerifyBackend",
    "timeout",
];

/// Values at the edges of every type a parameter can have, already URL-encoded.
const EXTREMES: &[&str] = &[
    "0",
    "1",
    "-1",
    "-9223372036854775808",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "99999999999999999999999999",
    "1e308",
    "NaN",
    "",
    "true",
    "false",
    "garbage",
    "%00",
    "%FF%FE",
    "All",
    "Strict",
    "Exact",
    "NotOlderThan",
    "Foreground",
    "Orphan",
    "a%20in%20()",
    "a%20notin%20(b,",
    "a%3D%3D%3D",
    "metadata.name%3Dx",
    "spec.unschedulable%3Dfalse",
    "status.phase!%3DRunning",
    "x,y,z%3D",
    "2006-01-02T15:04:05Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "1s",
    "-5m",
    "99999999h",
];

/// Integers at the edges, for the many parameters that are numbers.
const INTEGER_EXTREMES: &[&str] = &[
    "0",
    "-1",
    "-9223372036854775808",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "2147483648",
    "-2147483649",
];

/// JSON values at the edges of every type a field can have.
fn extreme_value(rng: &mut SmallRng) -> Value {
    match rng.gen_range(0..22) {
        0 => json!(0),
        1 => json!(-1),
        2 => json!(i64::MAX),
        3 => json!(i64::MIN),
        4 => json!(u64::MAX),
        5 => json!(1e308),
        6 => json!(-1.5),
        7 => json!(""),
        8 => json!("garbage"),
        9 => json!("9223372036854775808"),
        10 => json!(true),
        11 => Value::Null,
        12 => json!([]),
        13 => json!({}),
        14 => json!("x".repeat(rng.gen_range(64..5000))),
        15 => {
            let mut v = json!(1);
            for _ in 0..rng.gen_range(2..60) {
                v = json!([v]);
            }
            v
        }
        16 => json!({"a/b": "c", "": "", "x": {"y": [null]}}),
        17 => json!(["", "a", "a/b", "-x", "UPPER", "ü"]),
        18 => json!("-1s"),
        19 => json!("ü\u{0}"),
        20 => json!("1.5Ei"),
        _ => json!({"$patch": "delete"}),
    }
}

/// Replaces (or removes) one node of `value`, chosen by a random walk from the root.
fn mutate(rng: &mut SmallRng, value: &mut Value) {
    let replace = |rng: &mut SmallRng, v: &mut Value| {
        *v = if v.is_number() && rng.gen_bool(0.6) {
            // Keep the type, go to its edges: what gets past decoding into arithmetic.
            pick(
                rng,
                &[
                    json!(i64::MAX),
                    json!(i64::MIN),
                    json!(-1),
                    json!(0),
                    json!(u64::MAX),
                    json!(i32::MAX),
                    json!(1e300),
                ],
            )
            .clone()
        } else {
            extreme_value(rng)
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() && rng.gen_bool(0.75) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.gen_range(0..keys.len())];
            if rng.gen_bool(0.1) {
                map.remove(key);
            } else if let Some(child) = map.get_mut(key) {
                mutate(rng, child);
            }
        }
        Value::Array(items) if !items.is_empty() && rng.gen_bool(0.75) => {
            let i = rng.gen_range(0..items.len());
            mutate(rng, &mut items[i]);
        }
        _ => replace(rng, value),
    }
}

fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

/// Ordinary values of a parameter, so that requests also get past the first check.
fn ordinary(param: &str) -> &'static [&'static str] {
    match param {
        "resourceVersion" => &["0", "1", "5"],
        "resourceVersionMatch" => &["NotOlderThan", "Exact"],
        "limit" | "tailLines" | "limitBytes" | "sinceSeconds" | "timeoutSeconds"
        | "gracePeriodSeconds" => &["0", "1", "10", "500"],
        "labelSelector" => &["app%3Da", "app", "!app", "app%20in%20(a,b)"],
        "fieldSelector" => &["metadata.name%3Da", "metadata.namespace!%3Dx"],
        "dryRun" => &["All"],
        "fieldManager" => &["kubectl", "m"],
        "fieldValidation" => &["Strict", "Warn", "Ignore"],
        "propagationPolicy" => &["Background", "Foreground", "Orphan"],
        "sinceTime" => &["2024-01-01T00:00:00Z"],
        "container" => &["c"],
        _ => &["true", "false", "1"],
    }
}

fn query(rng: &mut SmallRng) -> String {
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
const NAMES: &[&str] = &[
    "a", "b", "c", "d", "e", "seed", "seed", "local", "UPPER", "a..b", "-x", "%2E%2E", "%00",
];

fn name(rng: &mut SmallRng) -> String {
    if rng.gen_bool(0.05) {
        return "n".repeat(rng.gen_range(60..300));
    }
    (*pick(rng, NAMES)).to_owned()
}

/// A body for a write: usually a valid object with one mutation, sometimes garbage.
fn body(rng: &mut SmallRng, resource: &Resource, name: &str) -> (&'static str, Vec<u8>) {
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

fn patch_body(rng: &mut SmallRng, resource: &Resource, name: &str) -> (&'static str, Vec<u8>) {
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

fn delete_body(rng: &mut SmallRng) -> (&'static str, Vec<u8>) {
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

fn case(rng: &mut SmallRng) -> Case {
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

/// Paths to every leaf of `value` (a leaf: not a non-empty object or array).
fn leaves(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
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

fn set_at(value: &mut Value, path: &[String], to: Value) {
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
fn systematic() -> Vec<Case> {
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

/// Sends `case`; a watch's stream is dropped unread (it may run for as long as it was asked).
async fn send(api: &Arc<Api>, case: &Case) -> Result<(u16, Value), String> {
    let request = Request::builder()
        .method(case.method)
        .uri(&case.uri)
        .header("content-type", case.content_type)
        .header("accept", "application/json")
        .body(Bytes::from(case.body.clone()))
        .map_err(|e| format!("the generator built a bad request: {e}"))?;
    // On a task of its own, so that a panic is reported as one failure among the others.
    let api = api.clone();
    let response = tokio::time::timeout(
        DEADLINE,
        tokio::spawn(async move { api.handle(request).await }),
    )
    .await
    .map_err(|_| "no answer within the deadline".to_owned())?
    .map_err(|e| format!("the handler failed: {e}"))?;
    let status = response.status().as_u16();
    if status == 200 && case.uri.contains("watch=") {
        return Ok((status, Value::Null));
    }
    let bytes = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .map_err(|_| "the body did not end within the deadline".to_owned())?
        .map_err(|e| format!("the body failed: {e}"))?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// The ordinary requests a healthy API answers.
async fn assert_healthy(api: &Api, after: u64) {
    let (create, _) = super::call(
        api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":format!("health-{after}")}})
            .to_string(),
    )
    .await;
    assert_eq!(
        create.as_u16(),
        201,
        "after {after} requests, a create failed"
    );
    let (list, body) = super::call(
        api,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        "",
    )
    .await;
    assert_eq!(
        list.as_u16(),
        200,
        "after {after} requests, a list failed: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_hostile_requests_should_get_a_status_and_never_a_5xx() {
    let seed = std::env::var("SETPOINT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let cases = std::env::var("SETPOINT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    println!("fuzz: {cases} requests, SETPOINT_FUZZ_SEED={seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let api = super::api().await;
    let (status, body) = super::call(
        &api,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fz"}}"#,
    )
    .await;
    assert_eq!(status.as_u16(), 201, "{body}");
    let crd = widget_crd().to_string();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, body) = super::call(&api, "POST", crds, "application/json", &crd).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    super::eventually_served(&api, "/apis/fuzz.setpoint.dev/v1/namespaces/fz/widgets").await;
    // Objects the requests can find: one of each resource, named "seed".
    for resource in RESOURCES {
        let object = (resource.object)("seed").to_string();
        if resource.collection.ends_with("/namespaces") {
            continue; // "fz" is the namespace's seed
        }
        let (status, body) = super::call(
            &api,
            "POST",
            resource.collection,
            "application/json",
            &object,
        )
        .await;
        assert_eq!(status.as_u16(), 201, "{}: {body}", resource.collection);
    }

    let mut codes = std::collections::BTreeMap::<u16, u64>::new();
    let fixed = systematic();
    let total = fixed.len() as u64 + cases;
    println!("fuzz: {} systematic requests first", fixed.len());
    let mut fixed = fixed.into_iter();
    // Failures by kind (method, status, resource path without names), with the first example.
    let mut failures = std::collections::BTreeMap::<String, (u64, String)>::new();
    for i in 0..total {
        let case = fixed.next().unwrap_or_else(|| case(&mut rng));
        let mut fail = |kind: String, shown: String| {
            failures.entry(kind).or_insert((0, shown)).0 += 1;
        };
        let resource_of = |uri: &str| {
            let path = uri.split('?').next().unwrap_or_default();
            let parts: Vec<&str> = path.split('/').collect();
            let resource = RESOURCES
                .iter()
                .filter(|r| path.starts_with(r.collection))
                .max_by_key(|r| r.collection.len())
                .map_or(path, |r| r.collection);
            let sub = if parts.len() > resource.split('/').count() + 1 {
                parts.last().copied().unwrap_or_default()
            } else {
                ""
            };
            format!("{resource}/{sub}")
        };
        let (status, body) = match send(&api, &case).await {
            Ok(answer) => answer,
            Err(problem) => {
                let problem_kind: String =
                    problem.chars().filter(|c| !c.is_ascii_digit()).collect();
                fail(
                    format!("{} {} {problem_kind}", case.method, resource_of(&case.uri)),
                    format!("request {i}: {problem}: {} {}", case.method, case.uri),
                );
                continue;
            }
        };
        *codes.entry(status).or_default() += 1;
        let shown = || {
            format!(
                "request {i} (seed {seed}): {} {} [{}] {} → {status} {body}",
                case.method,
                case.uri,
                case.content_type,
                String::from_utf8_lossy(&case.body[..case.body.len().min(300)])
            )
        };
        // kube-apiserver's one 5xx for a client's choice: a resourceVersion newer than the
        // store's, after waiting for it (504 Timeout, cause ResourceVersionTooLarge).
        let too_new =
            status == 504 && body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge";
        // This API has no node agents to reach (no credentials), as it says.
        let no_nodes = status == 503 && case.uri.contains("/log");
        let kind = |what: &str| format!("{} {} {what}", case.method, resource_of(&case.uri));
        if status >= 500 && !too_new && !no_nodes {
            fail(kind(&format!("answered {status}")), shown());
        } else if status >= 400 {
            if body["kind"] != "Status" || body["code"] != status {
                fail(kind("an error that is not a Status with its code"), shown());
            } else if body["reason"].as_str().is_none_or(str::is_empty) {
                fail(kind("a Status without a reason"), shown());
            }
        }
        if i % 250 == 249 {
            assert_healthy(&api, i + 1).await;
        }
    }
    assert_healthy(&api, total + 1).await;
    println!("fuzz: answers by status code: {codes:?}");
    for (kind, (count, example)) in &failures {
        println!("fuzz: FAILED {count}× {kind}\n    e.g. {example}");
    }
    assert!(
        failures.is_empty(),
        "{} kinds of failure (seed {seed}), listed above",
        failures.len()
    );
}
