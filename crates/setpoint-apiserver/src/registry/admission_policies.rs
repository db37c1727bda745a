//! What the two admission policy kinds (`admissionregistration.k8s.io/v1`
//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding) need checked before they
//! are stored: their defaults and validation, with kube-apiserver's field paths and
//! messages. The policies are enforced by `admission/`; the rules of `matchConstraints` and
//! `matchResources` share the webhooks' rule validation.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use setpoint_core::{Cause, LabelSelector};

use super::defaults::default;

/// Reasons a validation may give.
const REASONS: [&str; 4] = [
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
];

/// Defaults of a ValidatingAdmissionPolicy: `failurePolicy: Fail` and its match constraints'.
pub(crate) fn policy_defaults(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    default(spec, "failurePolicy", json!("Fail"));
    if let Some(constraints) = spec.get_mut("matchConstraints") {
        match_resources_defaults(constraints);
    }
}

/// Defaults of a ValidatingAdmissionPolicyBinding: its match resources', if it has some.
pub(crate) fn binding_defaults(object: &mut Value) {
    if let Some(resources) = object
        .get_mut("spec")
        .and_then(|s| s.get_mut("matchResources"))
    {
        match_resources_defaults(resources);
    }
}

fn match_resources_defaults(resources: &mut Value) {
    let Some(map) = resources.as_object_mut() else {
        return;
    };
    default(map, "matchPolicy", json!("Equivalent"));
    default(map, "namespaceSelector", json!({}));
    default(map, "objectSelector", json!({}));
    for list in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = map.get_mut(list).and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                default(rule, "scope", json!("*"));
            }
        }
    }
}

/// Every problem with a ValidatingAdmissionPolicy's spec.
pub(crate) fn validate_policy(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    if let Some(kind) = spec["paramKind"].as_object() {
        for field in ["apiVersion", "kind"] {
            if kind
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(Cause::required(format!("spec.paramKind.{field}")));
            }
        }
    }
    match spec.get("matchConstraints").filter(|c| c.is_object()) {
        None => causes.push(Cause::required("spec.matchConstraints")),
        Some(constraints) => {
            if constraints["resourceRules"]
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                causes.push(Cause::required("spec.matchConstraints.resourceRules"));
            }
            match_resources(constraints, "spec.matchConstraints", &mut causes);
        }
    }
    let validations = spec["validations"].as_array().map_or(0, Vec::len);
    let audits = spec["auditAnnotations"].as_array().map_or(0, Vec::len);
    if validations == 0 && audits == 0 {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.validations",
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.validations[{i}]");
        expression(&v["expression"], &format!("{path}.expression"), &mut causes);
        if let Some(m) = v["messageExpression"].as_str().filter(|m| !m.is_empty()) {
            if let Err(e) = cel::Program::compile(m) {
                causes.push(Cause::invalid(
                    format!("{path}.messageExpression"),
                    &json!(m),
                    &format!("compilation failed: {e}"),
                ));
            }
        }
        if let Some(m) = v["message"].as_str() {
            if m.contains('\n') {
                causes.push(Cause::invalid(
                    format!("{path}.message"),
                    &json!(m),
                    "message must not contain line breaks",
                ));
            }
        }
        if let Some(r) = v["reason"].as_str() {
            if !REASONS.contains(&r) {
                causes.push(Cause::not_supported(
                    format!("{path}.reason"),
                    &json!(r),
                    &REASONS,
                ));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (i, v) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.variables[{i}]");
        match v["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(Cause::required(format!("{path}.name"))),
            Some(name) => {
                if !is_identifier(name) {
                    causes.push(Cause::invalid(
                        format!("{path}.name"),
                        &json!(name),
                        "name is not a valid CEL identifier",
                    ));
                }
                if !names.insert(name) {
                    causes.push(Cause::duplicate(format!("{path}.name"), &json!(name)));
                }
            }
        }
        expression(&v["expression"], &format!("{path}.expression"), &mut causes);
    }
    if let Some(p) = spec["failurePolicy"].as_str() {
        if !["Fail", "Ignore"].contains(&p) {
            causes.push(Cause::not_supported(
                "spec.failurePolicy",
                &json!(p),
                &["Fail", "Ignore"],
            ));
        }
    }
    match_conditions(spec, &mut causes);
    causes
}

/// Every problem with a ValidatingAdmissionPolicyBinding's spec.
pub(crate) fn validate_binding(object: &Value) -> Vec<Cause> {
    const ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
    let mut causes = Vec::new();
    let spec = &object["spec"];
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.policyName"));
    }
    let actions: Vec<&str> = spec["validationActions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if actions.is_empty() {
        causes.push(Cause::required("spec.validationActions"));
    }
    let mut seen = BTreeSet::new();
    for (i, a) in actions.iter().enumerate() {
        let path = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(a) {
            causes.push(Cause::not_supported(path.clone(), &json!(a), &ACTIONS));
        }
        if !seen.insert(*a) {
            causes.push(Cause::duplicate(path, &json!(a)));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        causes.push(Cause::invalid(
            "spec.validationActions",
            &json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if let Some(param_ref) = spec["paramRef"].as_object() {
        let name = param_ref
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let selector = param_ref.get("selector").filter(|s| !s.is_null());
        match (name, selector) {
            (Some(_), Some(_)) => causes.push(Cause::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            )),
            (None, None) => causes.push(Cause::required("spec.paramRef")),
            (None, Some(selector)) => {
                if let Err(e) = LabelSelector::from_structured(selector) {
                    causes.push(Cause::invalid(
                        "spec.paramRef.selector",
                        selector,
                        &e.to_string(),
                    ));
                }
            }
            (Some(_), None) => {}
        }
        match param_ref
            .get("parameterNotFoundAction")
            .and_then(Value::as_str)
        {
            None => causes.push(Cause::required("spec.paramRef.parameterNotFoundAction")),
            Some("Allow" | "Deny") => {}
            Some(other) => causes.push(Cause::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                &json!(other),
                &["Allow", "Deny"],
            )),
        }
    }
    if let Some(resources) = spec.get("matchResources").filter(|r| r.is_object()) {
        match_resources(resources, "spec.matchResources", &mut causes);
    }
    causes
}

/// `matchConstraints` / `matchResources`: rules (as the webhooks'), selectors, match policy.
fn match_resources(resources: &Value, path: &str, causes: &mut Vec<Cause>) {
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in resources[list].as_array().into_iter().flatten().enumerate() {
            super::webhooks::validate_rule(rule, &format!("{path}.{list}[{i}]"), causes);
        }
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        let value = &resources[selector];
        if !value.is_null() {
            if let Err(e) = LabelSelector::from_structured(value) {
                causes.push(Cause::invalid(
                    format!("{path}.{selector}"),
                    value,
                    &e.to_string(),
                ));
            }
        }
    }
    if let Some(p) = resources["matchPolicy"].as_str() {
        if !["Equivalent", "Exact"].contains(&p) {
            causes.push(Cause::not_supported(
                format!("{path}.matchPolicy"),
                &json!(p),
                &["Equivalent", "Exact"],
            ));
        }
    }
}

fn match_conditions(spec: &Value, causes: &mut Vec<Cause>) {
    super::webhooks::validate_match_conditions(spec, "spec", causes);
}

/// A required CEL expression that compiles.
fn expression(value: &Value, path: &str, causes: &mut Vec<Cause>) {
    match value.as_str().filter(|e| !e.trim().is_empty()) {
        None => causes.push(Cause::required(path.to_owned())),
        Some(e) => {
            if let Err(error) = cel::Program::compile(e) {
                causes.push(Cause::invalid(
                    path.to_owned(),
                    &json!(e),
                    &format!("compilation failed: {error}"),
                ));
            }
        }
    }
}

/// A CEL identifier: a letter or `_`, then letters, digits or `_`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    fn policy() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                "apiVersions": ["v1"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}],
        }})
    }

    #[test]
    fn policies_should_get_defaults_and_need_rules_and_validations() {
        let mut p = policy();
        policy_defaults(&mut p);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            p["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        assert!(validate_policy(&p).is_empty(), "{:?}", validate_policy(&p));
        let bad = json!({"spec": {"validations": [{"expression": "object.", "reason": "Teapot"}],
            "variables": [{"name": "1x", "expression": "true"}]}});
        assert_eq!(
            fields(&validate_policy(&bad)),
            [
                "spec.matchConstraints",
                "spec.validations[0].expression",
                "spec.validations[0].reason",
                "spec.variables[0].name"
            ]
        );
    }

    #[test]
    fn bindings_should_name_a_policy_and_sensible_actions() {
        let good = json!({"spec": {"policyName": "p", "validationActions": ["Deny"],
            "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}});
        assert!(validate_binding(&good).is_empty());
        let bad = json!({"spec": {"validationActions": ["Deny", "Warn", "Deny"],
            "paramRef": {"name": "a", "selector": {}}}});
        assert_eq!(
            fields(&validate_binding(&bad)),
            [
                "spec.policyName",
                "spec.validationActions[2]",
                "spec.validationActions",
                "spec.paramRef.name",
                "spec.paramRef.parameterNotFoundAction"
            ]
        );
    }
}
