//! Query parameters and values at the edges of their types, and mutations of JSON objects.

use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::{json, Value};

/// Query parameters the API reads, any of which a request may carry.
pub(super) const PARAMS: &[&str] = &[
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
pub(super) const EXTREMES: &[&str] = &[
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
pub(super) const INTEGER_EXTREMES: &[&str] = &[
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
pub(super) fn extreme_value(rng: &mut SmallRng) -> Value {
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
pub(super) fn mutate(rng: &mut SmallRng, value: &mut Value) {
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

pub(super) fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

/// Ordinary values of a parameter, so that requests also get past the first check.
pub(super) fn ordinary(param: &str) -> &'static [&'static str] {
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
