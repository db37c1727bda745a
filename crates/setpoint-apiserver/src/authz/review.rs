//! The access reviews, answered by the real authorizer chain (kube's
//! `pkg/registry/authorization`): SelfSubjectAccessReview (may I?), SubjectAccessReview and
//! LocalSubjectAccessReview (may this user?), and SelfSubjectRulesReview (what may I do in this
//! namespace? — `kubectl auth can-i --list`), whose rules come from RBAC.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::{Attributes, Authorizer, Chain, Decision};
use crate::auth::User;

/// The status answering the review `object` of `kind` asked by `asker` in `namespace` (a
/// LocalSubjectAccessReview's), or `None` if `kind` is not an access review.
pub(crate) fn answer(
    chain: &Chain,
    kind: &str,
    object: &Value,
    asker: &User,
    namespace: Option<&str>,
) -> Option<Result<Value, ApiError>> {
    let spec = &object["spec"];
    Some(match kind {
        "SelfSubjectAccessReview" => Ok(access(chain, spec, asker)),
        "SubjectAccessReview" => Ok(access(chain, spec, &subject(spec))),
        "LocalSubjectAccessReview" => {
            let asked = spec["resourceAttributes"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let namespace = namespace.unwrap_or_default();
            if asked != namespace {
                Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {namespace}"
                )))
            } else {
                Ok(access(chain, spec, &subject(spec)))
            }
        }
        "SelfSubjectRulesReview" => Ok(rules(
            chain,
            asker,
            spec["namespace"].as_str().unwrap_or_default(),
        )),
        _ => return None,
    })
}

/// The user a SubjectAccessReview's spec names.
fn subject(spec: &Value) -> User {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let extra: BTreeMap<String, Vec<String>> = spec["extra"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), strings(v)))
        .collect();
    User {
        name: spec["user"].as_str().unwrap_or_default().to_owned(),
        uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
        // A review names the groups to check exactly: none are added.
        groups: strings(&spec["groups"]),
        extra,
    }
}

/// The attributes a review's spec asks about, for `user`.
fn attributes(spec: &Value, user: &User) -> Attributes {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let r = &spec["resourceAttributes"];
    if r.is_object() {
        return Attributes {
            user: user.clone(),
            verb: text(&r["verb"]),
            resource_request: true,
            namespace: text(&r["namespace"]),
            api_group: text(&r["group"]),
            api_version: text(&r["version"]),
            resource: text(&r["resource"]),
            subresource: text(&r["subresource"]),
            name: text(&r["name"]),
            path: String::new(),
        };
    }
    let n = &spec["nonResourceAttributes"];
    Attributes::non_resource(user, &text(&n["verb"]), &text(&n["path"]))
}

/// An access review's status: `allowed`, `denied` (only when an authorizer denied outright)
/// and the `reason` given.
fn access(chain: &Chain, spec: &Value, user: &User) -> Value {
    let decision = chain.authorize(&attributes(spec, user));
    let mut status = json!({"allowed": decision.allowed()});
    if matches!(decision, Decision::Deny(_)) {
        status["denied"] = json!(true);
    }
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    status
}

/// A rules review's status: the RBAC rules of `user` in `namespace`, resource and
/// non-resource apart; roles not found make it `incomplete` with an `evaluationError`.
fn rules(chain: &Chain, user: &User, namespace: &str) -> Value {
    let (rules, errors) = chain.rbac().rules_for(user, namespace);
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    let (urls, resources): (Vec<PolicyRule>, Vec<PolicyRule>) = rules
        .into_iter()
        .partition(|r| !list(&r.non_resource_urls).is_empty());
    let resource_rules: Vec<Value> = resources
        .iter()
        .map(|r| {
            let mut rule = json!({"verbs": r.verbs, "apiGroups": list(&r.api_groups), "resources": list(&r.resources)});
            if !list(&r.resource_names).is_empty() {
                rule["resourceNames"] = json!(list(&r.resource_names));
            }
            rule
        })
        .collect();
    let non_resource_rules: Vec<Value> = urls
        .iter()
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": list(&r.non_resource_urls)}))
        .collect();
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": !errors.is_empty(),
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    status
}
