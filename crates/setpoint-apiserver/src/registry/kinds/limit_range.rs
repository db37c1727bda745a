//! core/v1 LimitRange: per namespace, the bounds and defaults of the compute resources a pod,
//! container or claim may ask for. Validated as kube-apiserver's `ValidateLimitRange` does in
//! the part clients meet: each `spec.limits[i]` has a type no other entry has, its quantities
//! parse and are not negative, a `Pod` entry has no defaults, and per resource
//! `min ≤ defaultRequest ≤ default ≤ max`, `1 ≤ maxLimitRequestRatio ≤ max/min`. Its table
//! is `NAME CREATED AT`, as kube-apiserver prints it. A `Container` entry's `max` defaults its
//! `default`, and `default` its `defaultRequest`. The ranges are enforced on pods and claims
//! by LimitRanger admission (`admission/builtin/limit_range.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::LimitRange;
use serde_json::Value;
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        short_names: &["limits"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(LimitRanges), |_| vec![])]
}

#[derive(Debug)]
struct LimitRanges;

#[async_trait]
impl Strategy for LimitRanges {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<LimitRange>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<LimitRange>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        default_items(object);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let limits = object["spec"]["limits"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut types = BTreeSet::new();
        for (i, limit) in limits.iter().enumerate() {
            let path = format!("spec.limits[{i}]");
            let kind = limit["type"].as_str().unwrap_or_default();
            if !types.insert(kind) {
                causes.push(Cause::duplicate(format!("{path}.type"), &limit["type"]));
            }
            validate_item(limit, kind, &path, &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column {
                kind: "date".into(),
                ..Column::new("Created At", 0)
            },
        ]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o), o["metadata"]["creationTimestamp"].clone()]
    }
}

/// The bound maps of a limit, in the order they are checked.
const BOUNDS: [&str; 5] = [
    "max",
    "min",
    "default",
    "defaultRequest",
    "maxLimitRequestRatio",
];

/// One entry of `spec.limits`: its quantities, then how they relate, resource by resource.
fn validate_item(limit: &Value, kind: &str, path: &str, causes: &mut Vec<Cause>) {
    if kind == "Pod" {
        for bound in ["default", "defaultRequest"] {
            if limit[bound].as_object().is_some_and(|m| !m.is_empty()) {
                causes.push(Cause::forbidden(
                    format!("{path}.{bound}"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
    }
    // bound → resource → (the quantity as written, its value).
    let mut values: BTreeMap<&str, BTreeMap<&str, (&Value, f64)>> = BTreeMap::new();
    let mut resources = BTreeSet::new();
    for bound in BOUNDS {
        for (resource, written) in limit[bound].as_object().into_iter().flatten() {
            let at = format!("{path}.{bound}[{resource}]");
            match written.as_str().and_then(parse_quantity) {
                None => causes.push(Cause::invalid(
                    at,
                    written,
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )),
                Some(v) if v < 0.0 => causes.push(Cause::invalid(
                    at,
                    written,
                    "must be greater than or equal to 0",
                )),
                Some(v) => {
                    values
                        .entry(bound)
                        .or_default()
                        .insert(resource.as_str(), (written, v));
                    resources.insert(resource.as_str());
                }
            }
        }
    }
    let get = |bound: &str, resource: &str| values.get(bound).and_then(|m| m.get(resource)).copied();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    for resource in resources {
        let max = get("max", resource);
        let min = get("min", resource);
        let default = get("default", resource);
        let request = get("defaultRequest", resource);
        let ratio = get("maxLimitRequestRatio", resource);
        let at = |bound: &str| format!("{path}.{bound}[{resource}]");
        // (field, value shown, lower bound, upper bound, message)
        let mut order = |field: &str, shown: &Value, low: (&str, Option<(&Value, f64)>), high: (&str, Option<(&Value, f64)>)| {
            if let (Some((lw, lv)), Some((hw, hv))) = (low.1, high.1) {
                if lv > hv {
                    causes.push(Cause::invalid(
                        at(field),
                        shown,
                        &format!("{} value {} is greater than {} value {}", low.0, text(lw), high.0, text(hw)),
                    ));
                }
            }
        };
        if let (Some((mw, _)), Some(_)) = (min, max) {
            order("min", mw, ("min", min), ("max", max));
        }
        if let Some((rw, _)) = request {
            order("defaultRequest", rw, ("min", min), ("default request", request));
            order("defaultRequest", rw, ("default request", request), ("max", max));
            order("defaultRequest", rw, ("default request", request), ("default limit", default));
        }
        if let Some((dw, _)) = default {
            order("default", dw, ("min", min), ("default", default));
            order("default", dw, ("default", default), ("max", max));
        }
        if let Some((rw, rv)) = ratio {
            if rv < 1.0 {
                causes.push(Cause::invalid(
                    at("maxLimitRequestRatio"),
                    rw,
                    &format!("ratio {} is less than 1", text(rw)),
                ));
            }
            if let (Some((_, lo)), Some((_, hi))) = (min, max) {
                let limit = hi / lo;
                if lo > 0.0 && rv > limit {
                    causes.push(Cause::invalid(
                        at("maxLimitRequestRatio"),
                        rw,
                        &format!("ratio {} is greater than max/min = {limit:.6}", text(rw)),
                    ));
                }
            }
        }
    }
}

/// The value of a Kubernetes quantity (`500m`, `1.5Gi`, `2e3`, `128974848`), to a thousandth
/// (rounded up), or `None` if it is not one.
fn parse_quantity(text: &str) -> Option<f64> {
    // A thousandth of a whole: exact for every quantity whose milli-value fits 2^53.
    setpoint_core::quantity::milli_value(text).map(|milli| milli as f64 / 1000.0)
}

/// A `Container` entry's defaults, as kube-apiserver defaults them: a `max` without a
/// `default` is the default limit, a default limit without a `defaultRequest` is the default
/// request.
fn default_items(object: &mut Value) {
    let limits = object["spec"]["limits"].as_array_mut();
    for item in limits.into_iter().flatten() {
        if item["type"].as_str() != Some("Container") {
            continue;
        }
        for (from, to) in [("max", "default"), ("default", "defaultRequest")] {
            let source = item[from].as_object().cloned().unwrap_or_default();
            for (resource, quantity) in source {
                if item[to].get(&resource).is_none() {
                    if !item[to].is_object() {
                        item[to] = serde_json::json!({});
                    }
                    item[to][resource] = quantity;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(spec: Value) -> Vec<Cause> {
        let object = json!({"metadata": {"name": "l", "namespace": "d"}, "spec": spec});
        futures::executor::block_on(LimitRanges.validate(&object, None))
    }

    #[test]
    fn a_container_entry_should_default_its_limit_from_max_and_its_request_from_the_limit() {
        let mut o = serde_json::json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}, "default": {"memory": "512Mi"}},
            {"type": "Pod", "max": {"cpu": "2"}}
        ]}});
        default_items(&mut o);
        let c = &o["spec"]["limits"][0];
        assert_eq!(c["default"], serde_json::json!({"cpu": "1", "memory": "512Mi"}));
        assert_eq!(c["defaultRequest"], serde_json::json!({"cpu": "1", "memory": "512Mi"}));
        assert!(o["spec"]["limits"][1]["default"].is_null(), "only containers have defaults");
    }

    #[test]
    fn quantities_should_parse_with_every_suffix() {
        for (text, want) in [
            ("1", 1.0),
            ("500m", 0.5),
            ("1.5", 1.5),
            ("2k", 2000.0),
            ("1Ki", 1024.0),
            ("1Gi", 1073741824.0),
            ("2e3", 2000.0),
            ("+1", 1.0),
            ("-1", -1.0),
        ] {
            assert_eq!(parse_quantity(text), Some(want), "{text}");
        }
        for bad in ["", "m", "1x", "1..2", "Gi", "1e"] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn ordered_bounds_should_be_valid() {
        let causes = validate(json!({"limits": [
            {"type": "Container", "min": {"cpu": "100m"}, "defaultRequest": {"cpu": "200m"},
             "default": {"cpu": "500m"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "4"}},
            {"type": "Pod", "max": {"memory": "1Gi"}},
            {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]}));
        assert!(causes.is_empty(), "{causes:?}");
    }

    #[test]
    fn min_above_max_and_out_of_range_defaults_should_be_invalid() {
        let causes = validate(json!({"limits": [{"type": "Container",
            "min": {"cpu": "2"}, "max": {"cpu": "1"},
            "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "2Gi"}}]}));
        let messages: Vec<_> = causes.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(
            messages,
            vec![
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[0].defaultRequest[memory]: Invalid value: \"2Gi\": default request value 2Gi is greater than default limit value 1Gi",
            ]
        );
    }

    #[test]
    fn ratios_pod_defaults_duplicates_and_bad_quantities_should_be_invalid() {
        let causes = validate(json!({"limits": [
            {"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "2"},
             "maxLimitRequestRatio": {"cpu": "3", "memory": "500m"}},
            {"type": "Pod", "default": {"cpu": "1"}, "max": {"cpu": "lots"}},
            {"type": "Container", "min": {"cpu": "-1"}}]}));
        let fields: Vec<_> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            fields,
            vec![
                ("spec.limits[0].maxLimitRequestRatio[cpu]", "FieldValueInvalid"),
                ("spec.limits[0].maxLimitRequestRatio[memory]", "FieldValueInvalid"),
                ("spec.limits[1].default", "FieldValueForbidden"),
                ("spec.limits[1].max[cpu]", "FieldValueInvalid"),
                ("spec.limits[2].type", "FieldValueDuplicate"),
                ("spec.limits[2].min[cpu]", "FieldValueInvalid"),
            ]
        );
        assert!(causes[0].message.ends_with("ratio 3 is greater than max/min = 2.000000"));
        assert!(causes[1].message.ends_with("ratio 500m is less than 1"));
    }
}
