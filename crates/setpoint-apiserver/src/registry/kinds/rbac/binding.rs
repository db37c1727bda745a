//! RoleBinding (namespaced) and ClusterRoleBinding: grant a role to subjects. The role
//! reference names the RBAC group (defaulted), a `Role` or `ClusterRole` (a ClusterRoleBinding
//! only a `ClusterRole`) and a name, and never changes; each subject is a `User` or `Group` of
//! the RBAC group or a `ServiceAccount` (with a namespace, cluster-wide) of the core group, whose
//! API group defaults accordingly. The row is `NAME ROLE AGE`, with users, groups and service
//! accounts in the wide view.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use serde_json::{json, Value};
use setpoint_core::Cause;

use super::GROUP;
use crate::registry::defaults::object_at;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

/// The RoleBinding resource, or the ClusterRoleBinding one.
pub(super) fn resource(cluster: bool) -> ResourceDef {
    let (kind, plural, singular) = if cluster {
        ("ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding")
    } else {
        ("RoleBinding", "rolebindings", "rolebinding")
    };
    Identity {
        group: GROUP,
        version: "v1",
        kind,
        plural,
        singular,
        short_names: &[],
        categories: &[],
        namespaced: !cluster,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Bindings { cluster }), |_| vec![])
}

const SUBJECT_KINDS: &[&str] = &["ServiceAccount", "User", "Group"];

#[derive(Debug)]
struct Bindings {
    cluster: bool,
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Strategy for Bindings {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        if self.cluster {
            round_trip::<ClusterRoleBinding>(object)
        } else {
            round_trip::<RoleBinding>(object)
        }
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        if self.cluster {
            schema_of::<ClusterRoleBinding>()
        } else {
            schema_of::<RoleBinding>()
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Any
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(role_ref) = object_at(object, &["roleRef"]) {
            if role_ref.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty) {
                role_ref.insert("apiGroup".into(), json!(GROUP));
            }
        }
        let subjects = object.get_mut("subjects").and_then(Value::as_array_mut);
        for subject in subjects.into_iter().flatten().filter_map(Value::as_object_mut) {
            let user_or_group =
                matches!(subject.get("kind").and_then(Value::as_str), Some("User" | "Group"));
            if user_or_group && subject.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty) {
                subject.insert("apiGroup".into(), json!(GROUP));
            }
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let role_ref = &object["roleRef"];
        if role_ref["apiGroup"] != GROUP {
            causes.push(Cause::not_supported("roleRef.apiGroup", &role_ref["apiGroup"], &[GROUP]));
        }
        let kinds: &[&str] = if self.cluster { &["ClusterRole"] } else { &["Role", "ClusterRole"] };
        if !role_ref["kind"].as_str().is_some_and(|k| kinds.contains(&k)) {
            causes.push(Cause::not_supported("roleRef.kind", &role_ref["kind"], kinds));
        }
        if role_ref["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required("roleRef.name"));
        }
        for (i, subject) in items(&object["subjects"]).iter().enumerate() {
            self.validate_subject(subject, &format!("subjects[{i}]"), &mut causes);
        }
        if let Some(old) = old {
            if old["roleRef"] != object["roleRef"] {
                causes.push(Cause::invalid("roleRef", role_ref, "cannot change roleRef"));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Role", 0),
            Column::new("Age", 0),
            Column::new("Users", 1),
            Column::new("Groups", 1),
            Column::new("ServiceAccounts", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let role_ref = &o["roleRef"];
        let names = |kind: &str| -> String {
            let list: Vec<String> = items(&o["subjects"])
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| {
                    let name = s["name"].as_str().unwrap_or_default();
                    match (kind, s["namespace"].as_str()) {
                        ("ServiceAccount", Some(ns)) => format!("{ns}/{name}"),
                        _ => name.to_owned(),
                    }
                })
                .collect();
            list.join(", ")
        };
        vec![
            name_cell(o),
            json!(format!(
                "{}/{}",
                role_ref["kind"].as_str().unwrap_or_default(),
                role_ref["name"].as_str().unwrap_or_default()
            )),
            age_cell(o, now),
            json!(names("User")),
            json!(names("Group")),
            json!(names("ServiceAccount")),
        ]
    }
}

impl Bindings {
    /// The problems of one subject at `at`.
    fn validate_subject(&self, subject: &Value, at: &str, causes: &mut Vec<Cause>) {
        if subject["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{at}.name")));
        }
        let group = subject["apiGroup"].as_str().unwrap_or_default();
        match subject["kind"].as_str() {
            Some("ServiceAccount") => {
                if !group.is_empty() {
                    causes.push(Cause::not_supported(format!("{at}.apiGroup"), &subject["apiGroup"], &[""]));
                }
                if self.cluster && subject["namespace"].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("{at}.namespace")));
                }
            }
            Some("User" | "Group") => {
                if group != GROUP {
                    causes.push(Cause::not_supported(format!("{at}.apiGroup"), &subject["apiGroup"], &[GROUP]));
                }
            }
            _ => causes.push(Cause::not_supported(format!("{at}.kind"), &subject["kind"], SUBJECT_KINDS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(cluster: bool, subjects: Value) -> (Bindings, Value) {
        let mut o = json!({"metadata": {"name": "b", "namespace": "d"},
            "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": subjects});
        let b = Bindings { cluster };
        b.apply_defaults(&mut o);
        (b, o)
    }

    fn fields(b: &Bindings, o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(b.validate(o, old)).into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn groups_should_default_and_subjects_be_checked() {
        let (b, o) = binding(false, json!([{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "robot"}]));
        assert_eq!(o["roleRef"]["apiGroup"], GROUP);
        assert_eq!(o["subjects"][0]["apiGroup"], GROUP);
        assert!(o["subjects"][1].get("apiGroup").is_none());
        assert!(fields(&b, &o, None).is_empty());
        let (b, o) = binding(true, json!([{"kind": "ServiceAccount", "name": "robot"}, {"kind": "Robot", "name": "r"}]));
        assert_eq!(fields(&b, &o, None), ["subjects[0].namespace", "subjects[1].kind"]);
        assert_eq!(b.cells(&o, Utc::now())[1], "ClusterRole/view");
    }

    #[test]
    fn the_role_reference_should_never_change() {
        let (b, old) = binding(false, json!([]));
        let mut new = old.clone();
        new["roleRef"]["name"] = json!("edit");
        assert_eq!(fields(&b, &new, Some(&old)), ["roleRef"]);
        new["roleRef"]["kind"] = json!("Role");
        let (cb, _) = binding(true, json!([]));
        assert_eq!(fields(&cb, &new, None), ["roleRef.kind"]);
    }
}
