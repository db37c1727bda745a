//! Role (namespaced) and ClusterRole: rules of verbs on resources (or, cluster-wide only, on
//! non-resource URLs). A rule needs verbs, and either API groups and resources or URLs, never
//! both; a ClusterRole with an aggregation rule has valid label selectors. The table is
//! `NAME CREATED AT`, as kube-apiserver prints it.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use serde_json::Value;
use setpoint_core::{Cause, LabelSelector};

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, NameRule, Strategy, TypedSchema};
use crate::registry::table::{created_at_cell, created_at_column, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

/// The Role resource, or the ClusterRole one.
pub(super) fn resource(cluster: bool) -> ResourceDef {
    let (kind, plural, singular) = if cluster {
        ("ClusterRole", "clusterroles", "clusterrole")
    } else {
        ("Role", "roles", "role")
    };
    Identity {
        group: super::GROUP,
        version: "v1",
        kind,
        plural,
        singular,
        short_names: &[],
        categories: &[],
        namespaced: !cluster,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Roles { cluster }), |_| vec![])
}

#[derive(Debug)]
struct Roles {
    cluster: bool,
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

#[async_trait]
impl Strategy for Roles {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        if self.cluster {
            round_trip::<ClusterRole>(object)
        } else {
            round_trip::<Role>(object)
        }
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        if self.cluster {
            schema_of::<ClusterRole>()
        } else {
            schema_of::<Role>()
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Any
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let rules = object["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, rule) in rules.iter().enumerate() {
            validate_rule(rule, &format!("rules[{i}]"), !self.cluster, &mut causes);
        }
        let selectors = object["aggregationRule"]["clusterRoleSelectors"].as_array();
        for (i, selector) in selectors.into_iter().flatten().enumerate() {
            if let Err(e) = LabelSelector::from_structured(selector) {
                causes.push(Cause::invalid(
                    format!("aggregationRule.clusterRoleSelectors[{i}]"),
                    selector,
                    &e.to_string(),
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), created_at_column()]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o), created_at_cell(o)]
    }
}

/// The problems of one policy rule at `at`.
fn validate_rule(rule: &Value, at: &str, namespaced: bool, causes: &mut Vec<Cause>) {
    if count(&rule["verbs"]) == 0 {
        causes.push(Cause::new(
            "FieldValueRequired",
            format!("{at}.verbs"),
            format!("{at}.verbs: Required value: verbs must contain at least one value"),
        ));
    }
    if count(&rule["nonResourceURLs"]) > 0 {
        let urls = &rule["nonResourceURLs"];
        if namespaced {
            causes.push(Cause::invalid(
                format!("{at}.nonResourceURLs"),
                urls,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if count(&rule["apiGroups"]) + count(&rule["resources"]) + count(&rule["resourceNames"]) > 0 {
            causes.push(Cause::invalid(
                format!("{at}.nonResourceURLs"),
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    for (field, what) in [("apiGroups", "api group"), ("resources", "resource")] {
        if count(&rule[field]) == 0 {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{at}.{field}"),
                format!("{at}.{field}: Required value: resource rules must supply at least one {what}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(cluster: bool, rules: Value) -> Vec<String> {
        let o = json!({"metadata": {"name": "system:r", "namespace": "d"}, "rules": rules});
        futures::executor::block_on(Roles { cluster }.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn rules_should_name_verbs_and_resources_or_urls() {
        let good = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        assert!(fields(false, good).is_empty());
        assert_eq!(fields(false, json!([{}])), ["rules[0].verbs", "rules[0].apiGroups", "rules[0].resources"]);
        let urls = json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]);
        assert!(fields(true, urls.clone()).is_empty());
        assert_eq!(fields(false, urls), ["rules[0].nonResourceURLs"]);
    }
}
