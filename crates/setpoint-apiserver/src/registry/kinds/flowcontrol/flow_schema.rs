//! FlowSchema (cluster-scoped): which requests go to which priority level. Matching
//! precedence defaults to 1000 and lies in 1..=10000; the priority level is named; each rule
//! has subjects and resource or non-resource rules, each complete. The `status` subresource
//! holds conditions; the row shows whether the priority level is missing (`MISSINGPL`, `?`
//! until a loop says).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use serde_json::{json, Value};
use setpoint_core::Cause;

use super::count;
use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::{object_meta, one_of, required};
use crate::registry::ResourceDef;

pub(super) fn resource() -> ResourceDef {
    Identity {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "FlowSchema",
        plural: "flowschemas",
        singular: "flowschema",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(FlowSchemas), |g| vec![status(g)])
}

/// The highest matching precedence.
const MAX_PRECEDENCE: i64 = 10_000;

const SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];

#[derive(Debug)]
struct FlowSchemas;

#[async_trait]
impl Strategy for FlowSchemas {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<FlowSchema>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<FlowSchema>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            if spec.get("matchingPrecedence").and_then(Value::as_i64).is_none_or(|p| p == 0) {
                spec.insert("matchingPrecedence".into(), json!(1000));
            }
            default(spec, "priorityLevelConfiguration", json!({}));
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        required(object, "/spec/priorityLevelConfiguration/name", &mut causes);
        let precedence = &spec["matchingPrecedence"];
        if precedence.as_i64().is_some_and(|p| !(1..=MAX_PRECEDENCE).contains(&p)) {
            causes.push(Cause::invalid(
                "spec.matchingPrecedence",
                precedence,
                &format!("must be between 1 and {MAX_PRECEDENCE}, inclusive"),
            ));
        }
        one_of(object, "/spec/distinguisherMethod/type", &["ByNamespace", "ByUser"], &mut causes);
        for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
            validate_rule(rule, &format!("spec.rules[{i}]"), &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("PriorityLevel", 0),
            Column::integer("MatchingPrecedence", 0),
            Column::new("DistinguisherMethod", 0),
            Column::new("Age", 0),
            Column::new("MissingPL", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let dangling = o["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Dangling")
            .and_then(|c| c["status"].as_str())
            .unwrap_or("?");
        vec![
            name_cell(o),
            json!(spec["priorityLevelConfiguration"]["name"].as_str().unwrap_or_default()),
            int_cell(&spec["matchingPrecedence"]),
            json!(spec["distinguisherMethod"]["type"].as_str().unwrap_or("<none>")),
            age_cell(o, now),
            json!(dangling),
        ]
    }
}

/// The problems of one rule at `at`: subjects, and complete resource or non-resource rules.
fn validate_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let subjects = rule["subjects"].as_array().map(Vec::as_slice).unwrap_or_default();
    if subjects.is_empty() {
        causes.push(Cause::required(format!("{at}.subjects")));
    }
    for (j, subject) in subjects.iter().enumerate() {
        let s = format!("{at}.subjects[{j}]");
        let kind = subject["kind"].as_str().unwrap_or_default();
        if !SUBJECT_KINDS.contains(&kind) {
            causes.push(Cause::not_supported(format!("{s}.kind"), &subject["kind"], SUBJECT_KINDS));
            continue;
        }
        let (field, inner): (&str, &[&str]) = match kind {
            "User" => ("user", &["name"]),
            "Group" => ("group", &["name"]),
            _ => ("serviceAccount", &["namespace", "name"]),
        };
        if subject[field].is_null() {
            causes.push(Cause::required(format!("{s}.{field}")));
        }
        for name in inner {
            if !subject[field].is_null() && subject[field][*name].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{s}.{field}.{name}")));
            }
        }
    }
    let (resource_rules, other_rules) = (&rule["resourceRules"], &rule["nonResourceRules"]);
    if count(resource_rules) + count(other_rules) == 0 {
        causes.push(Cause::new(
            "FieldValueRequired",
            at,
            format!("{at}: Required value: at least one of resourceRules and nonResourceRules has to be non-empty"),
        ));
    }
    for (j, r) in resource_rules.as_array().into_iter().flatten().enumerate() {
        let p = format!("{at}.resourceRules[{j}]");
        for field in ["verbs", "apiGroups", "resources"] {
            if count(&r[field]) == 0 {
                causes.push(Cause::required(format!("{p}.{field}")));
            }
        }
        if count(&r["namespaces"]) == 0 && r["clusterScope"] != json!(true) {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{p}.namespaces"),
                format!("{p}.namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"),
            ));
        }
    }
    for (j, r) in other_rules.as_array().into_iter().flatten().enumerate() {
        for field in ["verbs", "nonResourceURLs"] {
            if count(&r[field]) == 0 {
                causes.push(Cause::required(format!("{at}.nonResourceRules[{j}].{field}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        let mut o = json!({"metadata": {"name": "f"}, "spec": spec});
        FlowSchemas.apply_defaults(&mut o);
        futures::executor::block_on(FlowSchemas.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn precedence_should_default_and_rules_be_complete() {
        let mut o = json!({"spec": {}});
        FlowSchemas.apply_defaults(&mut o);
        assert_eq!(o["spec"]["matchingPrecedence"], 1000);
        let good = json!({"priorityLevelConfiguration": {"name": "global-default"}, "rules": [{
            "subjects": [{"kind": "User", "user": {"name": "alice"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true}]}]});
        assert!(fields(good).is_empty());
        let bad = json!({"matchingPrecedence": 20000, "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}],
            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}, {"subjects": []}]});
        assert_eq!(
            fields(bad),
            [
                "spec.priorityLevelConfiguration.name",
                "spec.matchingPrecedence",
                "spec.rules[0].subjects[0].serviceAccount.namespace",
                "spec.rules[0].resourceRules[0].namespaces",
                "spec.rules[1].subjects",
                "spec.rules[1]"
            ]
        );
    }
}
