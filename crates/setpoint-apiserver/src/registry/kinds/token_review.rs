//! authentication.k8s.io/v1 TokenReview (create-only, cluster-scoped, never stored): who a
//! bearer token stands for, answered by the server's own token authenticator chain (`auth/`:
//! the admin token, static and bootstrap tokens, ServiceAccount tokens). A token the server
//! accepts is `authenticated` with its user (name, uid, groups, extra) and the audiences it is
//! good for: those the review asks for (the API audiences when it asks for none) that the
//! token names — a ServiceAccount token its `aud`, the others the API audiences, as
//! kube-apiserver's static tokens. Any other token is `authenticated: false` with the error
//! `invalid bearer token`, not an HTTP error. A review without a token is a 400.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::authentication::v1::TokenReview;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::identity::Identity;
use crate::registry::strategy::{round_trip, schema_of, Asker, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::ResourceDef;

/// What kube-apiserver says of a token no authenticator accepts.
const INVALID: &str = "invalid bearer token";

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenReview",
        plural: "tokenreviews",
        singular: "tokenreview",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: &["create"],
    }
    .build(Arc::new(TokenReviews), |_| vec![])]
}

#[derive(Debug)]
struct TokenReviews;

#[async_trait]
impl Strategy for TokenReviews {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<TokenReview>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<TokenReview>()
    }

    fn reviews(&self) -> bool {
        true
    }

    async fn validate(&self, _object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        Vec::new()
    }

    fn review(
        &self,
        object: Value,
        asker: &Asker,
        _namespace: Option<&str>,
    ) -> Result<Value, ApiError> {
        let token = object["spec"]["token"].as_str().unwrap_or_default();
        if token.is_empty() {
            return Err(ApiError::bad_request(
                "token is required for TokenReview in authentication",
            ));
        }
        let wanted: Vec<String> = object["spec"]["audiences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        let reviewed = asker.tokens.as_ref().and_then(|t| t.review(token, &wanted));
        let status = match reviewed {
            Some((user, audiences)) => {
                let mut info = json!({"username": user.name, "groups": user.groups});
                if !user.uid.is_empty() {
                    info["uid"] = json!(user.uid);
                }
                if !user.extra.is_empty() {
                    info["extra"] = json!(user.extra);
                }
                json!({"authenticated": true, "user": info, "audiences": audiences})
            }
            None => json!({"user": {}, "error": INVALID}),
        };
        Ok(super::review::answered(object, None, status))
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name()]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{admin_user, TokenAuthenticator};
    use crate::pki::BearerToken;

    fn review(token: &BearerToken, spec: Value) -> Result<Value, ApiError> {
        let asker = Asker {
            name: "alice".into(),
            groups: vec![],
            tokens: Some(TokenAuthenticator::for_tests(token.clone())),
            ..Asker::default()
        };
        TokenReviews.review(json!({"spec": spec}), &asker, None)
    }

    #[test]
    fn the_admin_token_should_be_the_admin_for_the_servers_audiences() {
        let token = BearerToken::generate();
        let status = review(&token, json!({"token": token.expose()})).unwrap()["status"].clone();
        assert_eq!(status["authenticated"], true);
        assert_eq!(status["user"]["username"], admin_user().name);
        assert_eq!(status["user"]["groups"], json!(admin_user().groups));
        assert_eq!(status["audiences"], json!([crate::DEFAULT_SERVICE_ACCOUNT_ISSUER]));
        let other = json!({"token": token.expose(), "audiences": ["https://vault.example.com"]});
        let status = review(&token, other).unwrap()["status"].clone();
        assert_eq!(status, json!({"user": {}, "error": INVALID}));
    }

    #[test]
    fn other_tokens_should_be_refused_in_the_status_and_none_with_a_400() {
        let token = BearerToken::generate();
        let status = review(&token, json!({"token": "not-the-token"})).unwrap()["status"].clone();
        assert_eq!(status["authenticated"], Value::Null);
        assert_eq!(status["error"], INVALID);
        let err = review(&token, json!({})).unwrap_err();
        assert_eq!(err.reason, setpoint_core::Reason::BadRequest);
    }
}
