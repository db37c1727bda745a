//! What the two admission webhook configuration kinds (`admissionregistration.k8s.io/v1`
//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration) share: the defaults and
//! the validation of their `webhooks` list, with kube-apiserver's field paths and messages.
//! The webhooks are called by `admission/`; this file only decides what may be stored.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use setpoint_core::{Cause, LabelSelector};

use super::defaults::default;

/// Which of the two kinds a webhook belongs to (the mutating one has `reinvocationPolicy`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WebhookKind {
    Validating,
    Mutating,
}

/// The most match conditions a webhook may have.
pub(crate) const MAX_MATCH_CONDITIONS: usize = 64;

/// Applies kube-apiserver's v1 defaults to every webhook of a configuration.
pub(crate) fn apply_defaults(object: &mut Value, kind: WebhookKind) {
    let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for webhook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        default(webhook, "failurePolicy", json!("Fail"));
        default(webhook, "matchPolicy", json!("Equivalent"));
        default(webhook, "namespaceSelector", json!({}));
        default(webhook, "objectSelector", json!({}));
        default(webhook, "timeoutSeconds", json!(10));
        if kind == WebhookKind::Mutating {
            default(webhook, "reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = webhook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                default(rule, "scope", json!("*"));
            }
        }
        if let Some(service) = webhook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            default(service, "port", json!(443));
        }
    }
}

/// Every problem with the `webhooks` of a configuration.
pub(crate) fn validate(object: &Value, kind: WebhookKind) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(webhooks) = object["webhooks"].as_array() else {
        return causes;
    };
    let mut names = BTreeSet::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        let path = format!("webhooks[{i}]");
        let name = webhook["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(Cause::required(format!("{path}.name")));
        } else {
            if !is_fully_qualified(name) {
                causes.push(Cause::invalid(
                    format!("{path}.name"),
                    &json!(name),
                    "should be a domain with at least three segments separated by dots",
                ));
            }
            if !names.insert(name) {
                causes.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("{path}.name"),
                    format!("{path}.name: Duplicate value: {name:?}"),
                ));
            }
        }
        validate_webhook(webhook, &path, kind, &mut causes);
    }
    causes
}

fn validate_webhook(webhook: &Value, path: &str, kind: WebhookKind, causes: &mut Vec<Cause>) {
    for (i, rule) in webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        validate_rule(rule, &format!("{path}.rules[{i}]"), causes);
    }
    one_of(
        webhook,
        path,
        "failurePolicy",
        &["Fail", "Ignore"],
        false,
        causes,
    );
    one_of(
        webhook,
        path,
        "matchPolicy",
        &["Equivalent", "Exact"],
        false,
        causes,
    );
    one_of(
        webhook,
        path,
        "sideEffects",
        &["None", "NoneOnDryRun"],
        true,
        causes,
    );
    if kind == WebhookKind::Mutating {
        one_of(
            webhook,
            path,
            "reinvocationPolicy",
            &["IfNeeded", "Never"],
            false,
            causes,
        );
    }
    if let Some(t) = webhook["timeoutSeconds"].as_i64() {
        if !(1..=30).contains(&t) {
            causes.push(Cause::invalid(
                format!("{path}.timeoutSeconds"),
                &json!(t),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        let value = &webhook[selector];
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
    validate_review_versions(webhook, path, causes);
    validate_client_config(
        &webhook["clientConfig"],
        &format!("{path}.clientConfig"),
        causes,
    );
    validate_match_conditions(webhook, path, causes);
}

/// `field` of `object`, when set, is one of `allowed`; `required` when it must be set.
fn one_of(
    object: &Value,
    path: &str,
    field: &str,
    allowed: &[&str],
    required: bool,
    causes: &mut Vec<Cause>,
) {
    match object[field].as_str() {
        None if required => causes.push(Cause::required(format!("{path}.{field}"))),
        None => {}
        Some(v) if allowed.contains(&v) => {}
        Some(v) => causes.push(Cause::not_supported(
            format!("{path}.{field}"),
            &json!(v),
            allowed,
        )),
    }
}

pub(crate) fn validate_rule(rule: &Value, path: &str, causes: &mut Vec<Cause>) {
    const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    let list = |field: &str| -> Vec<&str> {
        rule[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    let operations = list("operations");
    if operations.is_empty() {
        causes.push(Cause::required(format!("{path}.operations")));
    }
    for (i, op) in operations.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            causes.push(Cause::not_supported(
                format!("{path}.operations[{i}]"),
                &json!(op),
                &OPERATIONS,
            ));
        }
    }
    if operations.len() > 1 && operations.contains(&"*") {
        causes.push(Cause::invalid(
            format!("{path}.operations"),
            &rule["operations"],
            "if '*' is present, must not specify other operations",
        ));
    }
    for field in ["apiGroups", "apiVersions"] {
        let values = list(field);
        if values.is_empty() {
            causes.push(Cause::required(format!("{path}.{field}")));
        }
        if values.len() > 1 && values.contains(&"*") {
            causes.push(Cause::invalid(
                format!("{path}.{field}"),
                &rule[field],
                &format!("if '*' is present, must not specify other {field}"),
            ));
        }
        if field == "apiVersions" && values.iter().any(|v| v.is_empty()) {
            causes.push(Cause::required(format!("{path}.apiVersions")));
        }
    }
    let resources = list("resources");
    if resources.is_empty() {
        causes.push(Cause::required(format!("{path}.resources")));
    }
    validate_resources(&resources, &format!("{path}.resources"), causes);
    if let Some(scope) = rule["scope"].as_str() {
        if !["*", "Cluster", "Namespaced"].contains(&scope) {
            causes.push(Cause::not_supported(
                format!("{path}.scope"),
                &json!(scope),
                &["*", "Cluster", "Namespaced"],
            ));
        }
    }
}

/// Resources are `res`, `res/sub`, `*`, `*/sub`, `res/*` or `*/*`; `*` and `*/*` stand alone.
fn validate_resources(resources: &[&str], path: &str, causes: &mut Vec<Cause>) {
    let mut seen = BTreeSet::new();
    let mut subresource_wild = BTreeSet::new();
    for (i, r) in resources.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if r.is_empty() {
            causes.push(Cause::required(field));
            continue;
        }
        let (resource, sub) = match r.split_once('/') {
            Some((res, sub)) => (res, Some(sub)),
            None => (*r, None),
        };
        if sub.is_some_and(|s| s.contains('/')) {
            causes.push(Cause::invalid(
                field.clone(),
                &json!(r),
                "must have at most one '/'",
            ));
        }
        if resource.is_empty() || sub.is_some_and(str::is_empty) {
            causes.push(Cause::invalid(
                field.clone(),
                &json!(r),
                "must not have an empty resource or subresource",
            ));
        }
        if !seen.insert(*r) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                field.clone(),
                format!("{field}: Duplicate value: {r:?}"),
            ));
        }
        if sub == Some("*") {
            subresource_wild.insert(resource);
        }
    }
    if resources.len() > 1 && (seen.contains("*") || seen.contains("*/*")) {
        causes.push(Cause::invalid(
            path.to_owned(),
            &json!(resources),
            "if '*' or '*/*' is present, must not specify other resources",
        ));
    }
    for r in resources {
        if let Some((res, sub)) = r.split_once('/') {
            if sub != "*"
                && (subresource_wild.contains(res)
                    || (res != "*" && seen.contains(&*format!("*/{sub}"))))
            {
                causes.push(Cause::invalid(
                    path.to_owned(),
                    &json!(r),
                    "is covered by a wildcard in the same list",
                ));
            }
        }
    }
}

fn validate_review_versions(webhook: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = format!("{path}.admissionReviewVersions");
    let versions: Vec<&str> = webhook["admissionReviewVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if versions.is_empty() {
        causes.push(Cause::required(field));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(*v) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("{field}[{i}]"),
                format!("{field}[{i}]: Duplicate value: {v:?}"),
            ));
        }
    }
    if !versions.iter().any(|v| *v == "v1" || *v == "v1beta1") {
        causes.push(Cause::invalid(
            field,
            &json!(versions),
            "must include at least one of v1, v1beta1",
        ));
    }
}

fn validate_client_config(config: &Value, path: &str, causes: &mut Vec<Cause>) {
    let url = config["url"].as_str();
    let service = config["service"].as_object();
    match (url, service) {
        (Some(_), Some(_)) => causes.push(Cause::new(
            "FieldValueRequired",
            path.to_owned(),
            format!("{path}: Required value: exactly one of url or service is required"),
        )),
        (None, None) => causes.push(Cause::new(
            "FieldValueRequired",
            path.to_owned(),
            format!("{path}: Required value: exactly one of url or service is required"),
        )),
        (Some(url), None) => {
            if let Some(problem) = url_problem(url) {
                causes.push(Cause::invalid(format!("{path}.url"), &json!(url), problem));
            }
        }
        (None, Some(service)) => validate_service(service, &format!("{path}.service"), causes),
    }
    if let Some(ca) = config["caBundle"].as_str() {
        if !ca.is_empty() && base64_decode(ca).is_none() {
            causes.push(Cause::invalid(
                format!("{path}.caBundle"),
                &json!("<bytes>"),
                "must be base64 encoded",
            ));
        }
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// Why a webhook URL is unusable (kube-apiserver's `ValidateWebhookURL`), if it is.
fn url_problem(url: &str) -> Option<&'static str> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Some("'https' is the only allowed URL scheme");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Some("host must be specified");
    }
    if authority.contains('@') {
        return Some("user information is not permitted in the URL");
    }
    if url.contains('#') {
        return Some("fragments are not permitted in the URL");
    }
    if url.contains('?') {
        return Some("query parameters are not permitted in the URL");
    }
    None
}

fn validate_service(service: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for field in ["name", "namespace"] {
        if service
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("{path}.{field}")));
        }
    }
    if let Some(p) = service.get("path").and_then(Value::as_str) {
        if !p.is_empty() && !p.starts_with('/') {
            causes.push(Cause::invalid(
                format!("{path}.path"),
                &json!(p),
                "must start with a '/'",
            ));
        }
    }
    if let Some(port) = service.get("port").and_then(Value::as_i64) {
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(
                format!("{path}.port"),
                &json!(port),
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
}

pub(crate) fn validate_match_conditions(webhook: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(conditions) = webhook["matchConditions"].as_array() else {
        return;
    };
    let field = format!("{path}.matchConditions");
    if conditions.len() > MAX_MATCH_CONDITIONS {
        causes.push(Cause::new(
            "FieldValueTooMany",
            field.clone(),
            format!(
                "{field}: Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                conditions.len()
            ),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match condition["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(Cause::required(format!("{at}.name"))),
            Some(name) => {
                if !names.insert(name) {
                    causes.push(Cause::new(
                        "FieldValueDuplicate",
                        format!("{at}.name"),
                        format!("{at}.name: Duplicate value: {name:?}"),
                    ));
                }
                if !is_qualified_name(name) {
                    causes.push(Cause::invalid(
                        format!("{at}.name"),
                        &json!(name),
                        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                    ));
                }
            }
        }
        match condition["expression"]
            .as_str()
            .filter(|e| !e.trim().is_empty())
        {
            None => causes.push(Cause::required(format!("{at}.expression"))),
            Some(expression) => {
                if let Err(e) = cel::Program::compile(expression) {
                    causes.push(Cause::invalid(
                        format!("{at}.expression"),
                        &json!(expression),
                        &format!("compilation failed: {e}"),
                    ));
                }
            }
        }
    }
}

/// A DNS subdomain with at least three labels (`webhook.example.com`).
fn is_fully_qualified(name: &str) -> bool {
    let labels: Vec<&str> = name.split('.').collect();
    labels.len() >= 3
        && name.len() <= 253
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// A qualified name: an optional DNS subdomain prefix and `/`, then a name part.
fn is_qualified_name(name: &str) -> bool {
    let part = name.rsplit_once('/').map_or(name, |(_, n)| n);
    let bytes = part.as_bytes();
    !part.is_empty()
        && part.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(webhook: Value) -> Value {
        json!({"metadata": {"name": "c"}, "webhooks": [webhook]})
    }

    fn good() -> Value {
        json!({
            "name": "check.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9443/check"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn defaults_should_be_kube_apiservers() {
        let mut o = config(good());
        apply_defaults(&mut o, WebhookKind::Mutating);
        let w = &o["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["namespaceSelector"], json!({}));
        assert_eq!(w["objectSelector"], json!({}));
        assert_eq!(w["timeoutSeconds"], 10);
        assert_eq!(w["reinvocationPolicy"], "Never");
        assert_eq!(w["rules"][0]["scope"], "*");
        assert!(validate(&o, WebhookKind::Mutating).is_empty());
    }

    #[test]
    fn names_should_be_unique_and_fully_qualified() {
        let mut o = config(good());
        o["webhooks"].as_array_mut().unwrap().push(good());
        let mut short = good();
        short["name"] = json!("short");
        o["webhooks"].as_array_mut().unwrap().push(short);
        assert_eq!(
            fields(&validate(&o, WebhookKind::Validating)),
            ["webhooks[1].name", "webhooks[2].name"]
        );
    }

    #[test]
    fn urls_timeouts_side_effects_and_client_configs_should_be_checked() {
        let mut w = good();
        w["clientConfig"]["url"] = json!("http://127.0.0.1/x");
        w["timeoutSeconds"] = json!(31);
        w["sideEffects"] = json!("Some");
        w["admissionReviewVersions"] = json!(["v2"]);
        let causes = validate(&config(w), WebhookKind::Validating);
        assert_eq!(
            fields(&causes),
            [
                "webhooks[0].sideEffects",
                "webhooks[0].timeoutSeconds",
                "webhooks[0].admissionReviewVersions",
                "webhooks[0].clientConfig.url"
            ],
            "{causes:?}"
        );
        let mut w = good();
        w["clientConfig"] = json!({"service": {"namespace": "default"}});
        assert_eq!(
            fields(&validate(&config(w), WebhookKind::Validating)),
            ["webhooks[0].clientConfig.service.name"]
        );
    }

    #[test]
    fn rules_should_refuse_mixed_wildcards_and_unknown_operations() {
        let mut w = good();
        w["rules"] = json!([{"operations": ["CREATE", "*"], "apiGroups": [], "apiVersions": ["v1"],
            "resources": ["*", "pods"], "scope": "Everywhere"}, {"operations": ["PATCH"],
            "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/*", "pods/status"]}]);
        let causes = validate(&config(w), WebhookKind::Validating);
        assert_eq!(
            fields(&causes),
            [
                "webhooks[0].rules[0].operations",
                "webhooks[0].rules[0].apiGroups",
                "webhooks[0].rules[0].resources",
                "webhooks[0].rules[0].scope",
                "webhooks[0].rules[1].operations[0]",
                "webhooks[0].rules[1].resources",
            ],
            "{causes:?}"
        );
    }

    #[test]
    fn match_conditions_should_compile_and_be_at_most_64() {
        let mut w = good();
        w["matchConditions"] = json!([{"name": "a", "expression": "object.metadata.name == 'x'"},
            {"name": "a", "expression": "object.metadata.name =="}]);
        assert_eq!(
            fields(&validate(&config(w), WebhookKind::Validating)),
            [
                "webhooks[0].matchConditions[1].name",
                "webhooks[0].matchConditions[1].expression"
            ]
        );
        let mut w = good();
        let many: Vec<Value> = (0..65)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect();
        w["matchConditions"] = json!(many);
        assert_eq!(
            fields(&validate(&config(w), WebhookKind::Validating)),
            ["webhooks[0].matchConditions"]
        );
    }
}
