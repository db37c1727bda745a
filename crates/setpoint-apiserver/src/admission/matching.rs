//! Which webhooks a request goes to, as kube-apiserver decides it: the webhook's `rules`
//! (operations, API groups, versions, resources with their `res/sub`, `*/sub`, `res/*` and
//! `*/*` forms, and scope), then — with `matchPolicy: Equivalent` — the same rules against the
//! other served versions of the resource; its `namespaceSelector` against the labels of the
//! request's namespace (a Namespace's own labels for requests on namespaces; cluster-scoped
//! objects always match); its `objectSelector` against the old or the new object's labels;
//! and last its `matchConditions` (CEL), which see `object`, `oldObject` and `request`.

use std::collections::BTreeMap;

use serde_json::Value;
use setpoint_core::LabelSelector;

use super::configurations::{FailurePolicy, Rule, Webhook};

/// What a request is, as rules see it.
#[derive(Clone, Debug)]
pub(crate) struct Attributes<'a> {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub(crate) operation: &'a str,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    /// `""` for the main resource.
    pub(crate) subresource: &'a str,
    /// The namespace of the request; for a request on a namespace, that namespace's name.
    pub(crate) namespace: &'a str,
}

/// How a webhook matched: the version of the resource it matched at (another one than the
/// request's when it matched an equivalent version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub(crate) version: String,
}

impl Rule {
    /// Whether the rule covers a request.
    pub(crate) fn matches(&self, a: &Attributes<'_>) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
        any(&self.operations, a.operation)
            && any(&self.groups, a.group)
            && any(&self.versions, a.version)
            && self.resource_matches(a.resource, a.subresource)
            && self.scope_matches(a)
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| match r.split_once('/') {
            None => (r == "*" || r == resource) && subresource.is_empty(),
            Some((res, sub)) => {
                (res == "*" || res == resource)
                    && (sub == "*" || (!subresource.is_empty() && sub == subresource))
            }
        })
    }

    fn scope_matches(&self, a: &Attributes<'_>) -> bool {
        let namespace_object = a.group.is_empty() && a.resource == "namespaces";
        match self.scope.as_str() {
            "Namespaced" => !namespace_object && !a.namespace.is_empty(),
            "Cluster" => namespace_object || a.namespace.is_empty(),
            _ => true,
        }
    }
}

impl Webhook {
    /// The version at which the webhook's rules cover the request: the request's own, else
    /// (`matchPolicy: Equivalent`) the first of `equivalents` (the resource's other served
    /// versions, preferred first) that a rule covers, rules in order.
    pub(crate) fn matching_version(
        &self,
        a: &Attributes<'_>,
        equivalents: &[String],
    ) -> Option<Invocation> {
        if self.rules.iter().any(|r| r.matches(a)) {
            return Some(Invocation {
                version: a.version.to_owned(),
            });
        }
        if !self.equivalent {
            return None;
        }
        for rule in &self.rules {
            for version in equivalents.iter().filter(|v| *v != a.version) {
                let other = Attributes {
                    version,
                    ..a.clone()
                };
                if rule.matches(&other) {
                    return Some(Invocation {
                        version: version.clone(),
                    });
                }
            }
        }
        None
    }

    /// Whether `namespace_labels` (the request's namespace's labels; `None` for a
    /// cluster-scoped object other than a namespace) pass the namespace selector.
    pub(crate) fn namespace_matches(
        &self,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        match namespace_labels {
            None => true,
            Some(labels) => self.namespace_selector.matches(labels),
        }
    }

    /// Whether the new or the old object passes the object selector.
    pub(crate) fn object_matches(&self, object: Option<&Value>, old: Option<&Value>) -> bool {
        if self.object_selector.is_everything() {
            return true;
        }
        [object, old]
            .into_iter()
            .flatten()
            .any(|o| self.object_selector.matches(&labels_of(o)))
    }

    /// The match conditions' verdict: `Ok(true)` when all hold, `Ok(false)` when one is false
    /// (a false condition skips the webhook even if another fails to evaluate), `Err` when
    /// none is false and one failed — which skips the webhook under `failurePolicy: Ignore`
    /// and is the error to refuse the request with under `Fail`.
    pub(crate) fn conditions_hold(&self, variables: &[(&str, &Value)]) -> Result<bool, String> {
        let mut failure = None;
        for (name, expression) in &self.conditions {
            let verdict = match expression {
                Ok(e) => e.holds(variables),
                Err(e) => Err(format!("compilation failed: {e}")),
            };
            match verdict {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    failure.get_or_insert_with(|| format!("matchCondition {name:?}: {e}"));
                }
            }
        }
        match failure {
            Some(e) if self.failure_policy == FailurePolicy::Fail => Err(e),
            Some(_) => Ok(false),
            None => Ok(true),
        }
    }
}

/// The labels of an object.
pub(crate) fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// Whether a webhook's namespace selector needs the namespace's labels at all.
pub(crate) fn needs_namespace(selector: &LabelSelector) -> bool {
    !selector.is_everything()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn webhook(extra: Value) -> Webhook {
        let mut w = json!({
            "name": "w.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/"},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "pods/status"], "scope": "*"}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        if let (Some(w), Some(extra)) = (w.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                w.insert(k.clone(), v.clone());
            }
        }
        Webhook::compile("c", &w)
    }

    fn attributes<'a>(operation: &'a str, resource: &'a str, sub: &'a str) -> Attributes<'a> {
        Attributes {
            operation,
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            namespace: "default",
        }
    }

    #[test]
    fn rules_should_match_operations_resources_and_subresources() {
        let w = webhook(json!({}));
        let m = |op, res, sub| w.matching_version(&attributes(op, res, sub), &[]).is_some();
        assert!(m("CREATE", "configmaps", ""));
        assert!(m("UPDATE", "configmaps", ""));
        assert!(!m("DELETE", "configmaps", ""));
        assert!(!m("CREATE", "secrets", ""));
        // A resource without a subresource does not cover its subresources, and the other way.
        assert!(!m("UPDATE", "configmaps", "status"));
        assert!(m("UPDATE", "pods", "status"));
        assert!(!m("UPDATE", "pods", ""));
    }

    #[test]
    fn wildcards_should_cover_what_they_say() {
        let rule = |resources: Value| Rule {
            operations: vec!["*".into()],
            groups: vec!["*".into()],
            versions: vec!["*".into()],
            resources: serde_json::from_value(resources).unwrap(),
            scope: "*".into(),
        };
        let a = attributes("DELETE", "pods", "");
        let s = attributes("UPDATE", "pods", "status");
        assert!(rule(json!(["*"])).matches(&a));
        assert!(!rule(json!(["*"])).matches(&s));
        assert!(rule(json!(["*/*"])).matches(&a) && rule(json!(["*/*"])).matches(&s));
        // `res/*` covers the resource itself too (its subresource `""` is one of `*`).
        assert!(rule(json!(["pods/*"])).matches(&s) && rule(json!(["pods/*"])).matches(&a));
        assert!(rule(json!(["*/status"])).matches(&s));
        assert!(!rule(json!(["*/scale"])).matches(&s));
    }

    #[test]
    fn scope_should_tell_namespaced_from_cluster_requests() {
        let rule = |scope: &str| Rule {
            operations: vec!["*".into()],
            groups: vec!["*".into()],
            versions: vec!["*".into()],
            resources: vec!["*".into()],
            scope: scope.into(),
        };
        let namespaced = attributes("CREATE", "configmaps", "");
        let node = Attributes {
            namespace: "",
            ..attributes("CREATE", "nodes", "")
        };
        // A namespace carries its own name as the request's namespace, and is cluster-scoped.
        let namespace = Attributes {
            namespace: "team-a",
            ..attributes("CREATE", "namespaces", "")
        };
        assert!(rule("Namespaced").matches(&namespaced));
        assert!(!rule("Namespaced").matches(&node) && !rule("Namespaced").matches(&namespace));
        assert!(rule("Cluster").matches(&node) && rule("Cluster").matches(&namespace));
        assert!(!rule("Cluster").matches(&namespaced));
        assert!(rule("*").matches(&node));
    }

    #[test]
    fn equivalent_versions_should_match_unless_the_policy_is_exact() {
        let w = webhook(
            json!({"rules": [{"operations": ["*"], "apiGroups": ["example.com"],
            "apiVersions": ["v1beta1"], "resources": ["widgets"]}]}),
        );
        let a = Attributes {
            group: "example.com",
            ..attributes("CREATE", "widgets", "")
        };
        let versions = vec!["v1".to_owned(), "v1beta1".to_owned()];
        assert_eq!(
            w.matching_version(&a, &versions),
            Some(Invocation {
                version: "v1beta1".into()
            })
        );
        let exact = webhook(
            json!({"matchPolicy": "Exact", "rules": [{"operations": ["*"],
            "apiGroups": ["example.com"], "apiVersions": ["v1beta1"], "resources": ["widgets"]}]}),
        );
        assert_eq!(exact.matching_version(&a, &versions), None);
    }

    #[test]
    fn selectors_should_read_namespace_and_object_labels() {
        let w = webhook(json!({
            "namespaceSelector": {"matchLabels": {"admission": "on"}},
            "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        }));
        let on: BTreeMap<String, String> = [("admission".into(), "on".into())].into();
        assert!(w.namespace_matches(Some(&on)));
        assert!(!w.namespace_matches(Some(&BTreeMap::new())));
        assert!(
            w.namespace_matches(None),
            "cluster-scoped objects always match"
        );
        let plain = json!({"metadata": {"name": "a"}});
        let skipped = json!({"metadata": {"name": "a", "labels": {"skip": "yes"}}});
        assert!(w.object_matches(Some(&plain), None));
        assert!(!w.object_matches(Some(&skipped), None));
        // Either the old or the new object may match.
        assert!(w.object_matches(Some(&skipped), Some(&plain)));
        assert!(!w.object_matches(None, Some(&skipped)));
    }

    #[test]
    fn match_conditions_should_skip_on_false_and_follow_the_failure_policy_on_errors() {
        let conditions = json!({"matchConditions": [
            {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
            {"name": "broken", "expression": "object.spec.missing == 1"},
        ]});
        let w = webhook(conditions.clone());
        let object = json!({"metadata": {"name": "a"}});
        let request = |ns: &str| json!({"namespace": ns});
        let kube_system = request("kube-system");
        let default = request("default");
        assert_eq!(
            w.conditions_hold(&[
                ("object", &object),
                ("oldObject", &Value::Null),
                ("request", &kube_system)
            ]),
            Ok(false),
            "a false condition wins over an error"
        );
        let failed = w.conditions_hold(&[
            ("object", &object),
            ("oldObject", &Value::Null),
            ("request", &default),
        ]);
        assert!(
            failed.as_ref().is_err_and(|e| e.contains("broken")),
            "{failed:?}"
        );
        let mut ignore = conditions;
        ignore["failurePolicy"] = json!("Ignore");
        let w = webhook(ignore);
        assert_eq!(
            w.conditions_hold(&[
                ("object", &object),
                ("oldObject", &Value::Null),
                ("request", &default)
            ]),
            Ok(false)
        );
    }
}
