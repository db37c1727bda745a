//! The create-only review kinds, answered from what Setpoint really does and never stored:
//! authentication.k8s.io/v1 SelfSubjectReview (who the caller is), and authorization.k8s.io/v1
//! SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectRulesReview, validated here and answered by the authorizer chain
//! (`authz/review.rs`, called by the handler: the strategy has no authorizer).
//! (TokenReview, which needs the server's authenticator, is `token_review.rs`.)

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::identity::Identity;
use crate::registry::strategy::{round_trip, schema_of, Asker, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::ResourceDef;

/// The only verb of a review.
const CREATE: &[&str] = &["create"];

/// The review kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Review {
    SelfSubject,
    SelfSubjectAccess,
    SubjectAccess,
    LocalSubjectAccess,
    SelfSubjectRules,
}

pub(crate) fn resources() -> Vec<ResourceDef> {
    [
        ("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", false, Review::SelfSubject),
        ("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", true, Review::LocalSubjectAccess),
        ("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false, Review::SelfSubjectAccess),
        ("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false, Review::SelfSubjectRules),
        ("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false, Review::SubjectAccess),
    ]
    .into_iter()
    .map(|(group, kind, plural, namespaced, review)| {
        Identity {
            group,
            version: "v1",
            kind,
            plural,
            singular: &plural[..plural.len() - 1],
            short_names: &[],
            categories: &[],
            namespaced,
            verbs: CREATE,
        }
        .build(Arc::new(review), |_| vec![])
    })
    .collect()
}

#[async_trait]
impl Strategy for Review {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        match self {
            Review::SelfSubject => round_trip::<SelfSubjectReview>(object),
            Review::SelfSubjectAccess => round_trip::<SelfSubjectAccessReview>(object),
            Review::SubjectAccess => round_trip::<SubjectAccessReview>(object),
            Review::LocalSubjectAccess => round_trip::<LocalSubjectAccessReview>(object),
            Review::SelfSubjectRules => round_trip::<SelfSubjectRulesReview>(object),
        }
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        match self {
            Review::SelfSubject => schema_of::<SelfSubjectReview>(),
            Review::SelfSubjectAccess => schema_of::<SelfSubjectAccessReview>(),
            Review::SubjectAccess => schema_of::<SubjectAccessReview>(),
            Review::LocalSubjectAccess => schema_of::<LocalSubjectAccessReview>(),
            Review::SelfSubjectRules => schema_of::<SelfSubjectRulesReview>(),
        }
    }

    fn reviews(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let spec = &object["spec"];
        let mut causes = Vec::new();
        let access = matches!(
            self,
            Review::SelfSubjectAccess | Review::SubjectAccess | Review::LocalSubjectAccess
        );
        if access && spec["resourceAttributes"].is_null() == spec["nonResourceAttributes"].is_null() {
            causes.push(Cause::invalid(
                "spec.resourceAttributes",
                &spec["resourceAttributes"],
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        if *self == Review::SubjectAccess
            && spec["user"].as_str().is_none_or(str::is_empty)
            && spec["groups"].as_array().is_none_or(Vec::is_empty)
        {
            causes.push(Cause::invalid("spec.user", &json!(""), "at least one of user or group must be specified"));
        }
        if *self == Review::LocalSubjectAccess && !spec["nonResourceAttributes"].is_null() {
            causes.push(Cause::invalid(
                "spec.nonResourceAttributes",
                &spec["nonResourceAttributes"],
                "disallowed on this kind of request",
            ));
        }
        causes
    }

    fn review(
        &self,
        object: Value,
        asker: &Asker,
        namespace: Option<&str>,
    ) -> Result<Value, ApiError> {
        let status = match self {
            Review::SelfSubject => {
                let mut info = json!({"username": asker.name, "groups": asker.groups});
                if !asker.uid.is_empty() {
                    info["uid"] = json!(asker.uid);
                }
                if !asker.extra.is_empty() {
                    info["extra"] = json!(asker.extra);
                }
                json!({"userInfo": info})
            }
            // Filled by the authorizer (`authz/review.rs`); refused until it is.
            Review::SelfSubjectAccess | Review::SubjectAccess | Review::LocalSubjectAccess => {
                json!({"allowed": false})
            }
            Review::SelfSubjectRules => json!({"incomplete": true}),
        };
        Ok(answered(object, namespace, status))
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name()]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o)]
    }
}

/// A review as answered: the request with kube's answer metadata (no uid or resource version:
/// reviews are not stored; the name and namespace kept) and `status`.
pub(crate) fn answered(mut review: Value, namespace: Option<&str>, status: Value) -> Value {
    let mut meta = json!({"creationTimestamp": null});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    if let Some(name) = review["metadata"]["name"].as_str() {
        meta["name"] = json!(name);
    }
    review["metadata"] = meta;
    review["status"] = status;
    review
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asker() -> Asker {
        Asker { name: "alice".into(), groups: vec!["dev".into(), "system:authenticated".into()], ..Asker::default() }
    }

    fn fields(review: Review, spec: Value) -> Vec<String> {
        futures::executor::block_on(review.validate(&json!({"spec": spec}), None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn a_self_subject_review_should_name_the_asker() {
        let answer = Review::SelfSubject.review(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}), &asker(), None).unwrap();
        assert_eq!(answer["status"]["userInfo"], json!({"username": "alice", "groups": ["dev", "system:authenticated"]}));
        assert_eq!(answer["metadata"], json!({"creationTimestamp": null}));
    }

    #[test]
    fn access_reviews_should_be_validated() {
        let attrs = json!({"verb": "get", "resource": "pods"});
        assert_eq!(fields(Review::SubjectAccess, json!({"resourceAttributes": attrs})), ["spec.user"]);
        assert_eq!(fields(Review::SelfSubjectAccess, json!({})), ["spec.resourceAttributes"]);
        assert_eq!(
            fields(Review::LocalSubjectAccess, json!({"nonResourceAttributes": {"path": "/", "verb": "get"}})),
            ["spec.nonResourceAttributes"]
        );
    }
}
