//! ValidatingAdmissionPolicies and their bindings, compiled: match constraints (rules with
//! resource names, exclusions, selectors, match policy), match conditions, variables and
//! validations as CEL expressions, parameter references and validation actions.

use std::collections::BTreeMap;

use serde_json::Value;
use setpoint_core::{LabelSelector, Reason};

use super::configurations::Rule;
use super::matching::{labels_of, Attributes};
use crate::crd::cel::Expression;

/// A CEL expression as written, compiled (or why it does not compile).
pub(crate) type Compiled = (String, Result<Expression, String>);

fn compile(source: &str) -> Compiled {
    (source.to_owned(), Expression::compile(source))
}

/// A rule with the names it is limited to (none: every name).
#[derive(Debug)]
pub(crate) struct NamedRule {
    pub(crate) rule: Rule,
    pub(crate) names: Vec<String>,
}

/// `matchConstraints` of a policy, `matchResources` of a binding.
#[derive(Debug)]
pub(crate) struct MatchResources {
    pub(crate) namespace_selector: LabelSelector,
    pub(crate) object_selector: LabelSelector,
    pub(crate) rules: Vec<NamedRule>,
    pub(crate) exclude: Vec<NamedRule>,
    pub(crate) equivalent: bool,
    /// A binding's `matchResources` without `resourceRules` defers to the policy's.
    pub(crate) any_resource: bool,
}

/// What a request looks like to match resources.
pub(crate) struct Request<'a> {
    pub(crate) attributes: Attributes<'a>,
    /// The served versions of the resource.
    pub(crate) equivalents: &'a [String],
    pub(crate) name: &'a str,
    /// The namespace's labels (a namespace's own; `None` for other cluster-scoped objects).
    pub(crate) namespace_labels: Option<&'a BTreeMap<String, String>>,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old: Option<&'a Value>,
}

impl MatchResources {
    fn compile(v: &Value) -> MatchResources {
        let rules = |list: &Value| -> Vec<NamedRule> {
            list.as_array()
                .into_iter()
                .flatten()
                .map(|r| NamedRule {
                    rule: Rule::from_json(r),
                    names: strings(&r["resourceNames"]),
                })
                .collect()
        };
        MatchResources {
            namespace_selector: selector(&v["namespaceSelector"]),
            object_selector: selector(&v["objectSelector"]),
            any_resource: v["resourceRules"].as_array().is_none_or(Vec::is_empty),
            rules: rules(&v["resourceRules"]),
            exclude: rules(&v["excludeResourceRules"]),
            equivalent: v["matchPolicy"].as_str() != Some("Exact"),
        }
    }

    /// Whether the request is selected.
    pub(crate) fn matches(&self, r: &Request<'_>) -> bool {
        if let Some(labels) = r.namespace_labels {
            if !self.namespace_selector.matches(labels) {
                return false;
            }
        }
        if !self.object_selector.is_everything()
            && ![r.object, r.old]
                .into_iter()
                .flatten()
                .any(|o| self.object_selector.matches(&labels_of(o)))
        {
            return false;
        }
        let covered = |rules: &[NamedRule], equivalent: bool| {
            rules.iter().any(|n| {
                let named = n.names.is_empty() || n.names.iter().any(|x| x == r.name);
                named
                    && (n.rule.matches(&r.attributes)
                        || (equivalent
                            && r.equivalents.iter().any(|version| {
                                n.rule.matches(&Attributes {
                                    version,
                                    ..r.attributes.clone()
                                })
                            })))
            })
        };
        (self.any_resource || covered(&self.rules, self.equivalent))
            && !covered(&self.exclude, self.equivalent)
    }
}

/// One validation.
#[derive(Debug)]
pub(crate) struct Validation {
    pub(crate) expression: Compiled,
    pub(crate) message: Option<String>,
    pub(crate) message_expression: Option<Compiled>,
    pub(crate) reason: Reason,
}

/// A compiled ValidatingAdmissionPolicy.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) name: String,
    /// `paramKind`: API version and kind.
    pub(crate) param_kind: Option<(String, String)>,
    pub(crate) constraints: MatchResources,
    pub(crate) conditions: Vec<(String, Compiled)>,
    pub(crate) variables: Vec<(String, Compiled)>,
    pub(crate) validations: Vec<Validation>,
    /// `failurePolicy: Fail` (else `Ignore`).
    pub(crate) fail: bool,
}

/// Compiles a stored policy.
pub(crate) fn policy_of(v: &Value) -> Vec<Policy> {
    let spec = &v["spec"];
    let named = |list: &Value| -> Vec<(String, Compiled)> {
        list.as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    compile(c["expression"].as_str().unwrap_or_default()),
                )
            })
            .collect()
    };
    let param_kind = spec["paramKind"].as_object().map(|k| {
        let field = |f: &str| {
            k.get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        (field("apiVersion"), field("kind"))
    });
    vec![Policy {
        name: v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        param_kind,
        constraints: MatchResources::compile(&spec["matchConstraints"]),
        conditions: named(&spec["matchConditions"]),
        variables: named(&spec["variables"]),
        validations: spec["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| Validation {
                expression: compile(x["expression"].as_str().unwrap_or_default()),
                message: x["message"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned),
                message_expression: x["messageExpression"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .map(compile),
                reason: match x["reason"].as_str() {
                    Some("Unauthorized") => Reason::Unauthorized,
                    Some("Forbidden") => Reason::Forbidden,
                    Some("RequestEntityTooLarge") => Reason::RequestEntityTooLarge,
                    _ => Reason::Invalid,
                },
            })
            .collect(),
        fail: spec["failurePolicy"].as_str() != Some("Ignore"),
    }]
}

/// `paramRef` of a binding.
#[derive(Debug)]
pub(crate) struct ParamRef {
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) selector: LabelSelector,
    /// `parameterNotFoundAction: Deny` (else `Allow`).
    pub(crate) deny_if_missing: bool,
}

/// A compiled ValidatingAdmissionPolicyBinding.
#[derive(Debug)]
pub(crate) struct Binding {
    pub(crate) name: String,
    pub(crate) policy: String,
    pub(crate) param_ref: Option<ParamRef>,
    pub(crate) resources: Option<MatchResources>,
    pub(crate) deny: bool,
    pub(crate) warn: bool,
}

/// Compiles a stored binding.
pub(crate) fn binding_of(v: &Value) -> Vec<Binding> {
    let spec = &v["spec"];
    let actions = strings(&spec["validationActions"]);
    let param_ref = spec["paramRef"].as_object().map(|p| ParamRef {
        name: p
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        namespace: p
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        selector: p
            .get("selector")
            .map_or_else(LabelSelector::everything, selector),
        deny_if_missing: p.get("parameterNotFoundAction").and_then(Value::as_str) == Some("Deny"),
    });
    vec![Binding {
        name: v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        policy: spec["policyName"].as_str().unwrap_or_default().to_owned(),
        param_ref,
        resources: spec
            .get("matchResources")
            .filter(|r| r.is_object())
            .map(MatchResources::compile),
        deny: actions.iter().any(|a| a == "Deny"),
        warn: actions.iter().any(|a| a == "Warn"),
    }]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// A selector that does not parse (validation refuses those) selects nothing.
fn selector(v: &Value) -> LabelSelector {
    if v.is_null() {
        LabelSelector::everything()
    } else {
        LabelSelector::from_structured(v).unwrap_or_else(|_| LabelSelector::nothing())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request<'a>(
        name: &'a str,
        object: &'a Value,
        labels: Option<&'a BTreeMap<String, String>>,
    ) -> Request<'a> {
        Request {
            attributes: Attributes {
                operation: "CREATE",
                group: "apps",
                version: "v1",
                resource: "deployments",
                subresource: "",
                namespace: "default",
            },
            equivalents: &[],
            name,
            namespace_labels: labels,
            object: Some(object),
            old: None,
        }
    }

    #[test]
    fn match_resources_should_honour_names_exclusions_and_selectors() {
        let m = MatchResources::compile(&json!({
            "namespaceSelector": {"matchLabels": {"env": "prod"}},
            "resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                "resources": ["deployments"], "scope": "*"}],
            "excludeResourceRules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["deployments"], "resourceNames": ["special"]}],
        }));
        let prod: BTreeMap<String, String> = [("env".into(), "prod".into())].into();
        let object = json!({"metadata": {"name": "web"}});
        assert!(m.matches(&request("web", &object, Some(&prod))));
        assert!(
            !m.matches(&request("special", &object, Some(&prod))),
            "excluded by name"
        );
        assert!(!m.matches(&request("web", &object, Some(&BTreeMap::new()))));
        // A binding's matchResources without rules defers to the policy's.
        let any =
            MatchResources::compile(&json!({"objectSelector": {"matchLabels": {"tier": "web"}}}));
        assert!(!any.matches(&request("web", &object, None)));
        let labelled = json!({"metadata": {"name": "web", "labels": {"tier": "web"}}});
        assert!(any.matches(&request("web", &labelled, None)));
    }

    #[test]
    fn policies_and_bindings_should_compile_their_parts() {
        let p = &policy_of(&json!({"metadata": {"name": "replicas"}, "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "object.spec.replicas <= 5", "reason": "Forbidden"},
                {"expression": "object.", "messageExpression": "'x'"}],
            "failurePolicy": "Ignore",
        }}))[0];
        assert_eq!(
            p.param_kind,
            Some(("v1".to_owned(), "ConfigMap".to_owned()))
        );
        assert_eq!(p.validations[0].reason, Reason::Forbidden);
        assert!(p.validations[1].expression.1.is_err());
        assert!(!p.fail);
        let b = &binding_of(
            &json!({"metadata": {"name": "b"}, "spec": {"policyName": "replicas",
            "validationActions": ["Warn", "Audit"],
            "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}}),
        )[0];
        assert!(b.warn && !b.deny);
        let r = b.param_ref.as_ref().unwrap();
        assert_eq!(r.name.as_deref(), Some("limits"));
        assert!(r.deny_if_missing);
    }
}
