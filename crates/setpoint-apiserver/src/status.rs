//! The failures the transport answers itself, before or instead of the handler, as Kubernetes
//! `Status` objects with the codes, reasons and messages kube-apiserver uses. This is the one
//! place the transport maps a failure to an HTTP status code.

use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

use crate::server::{full_body, Body};

/// A failure answered with a `Status` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The request carried no valid credentials (401).
    Unauthorized,
    /// The request body is longer than `limit` bytes (413).
    RequestEntityTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request body could not be read (400).
    BadRequest(String),
    /// Serving the request failed inside the server (500).
    InternalError(String),
    /// The request asked to act as someone else (`Impersonate-*` headers), which this server
    /// does not allow anyone (403).
    ImpersonationForbidden {
        /// Who is asking.
        user: String,
        /// What was to be impersonated: `users`, `groups`, `uids` or `userextras`.
        resource: &'static str,
        /// Its value: the user name, a group, a UID or an extra's value.
        name: String,
    },
    /// The request was not served within the request timeout (504).
    Timeout,
}

/// The API group of an impersonated `resource`, as kube-apiserver's authorizer is asked.
fn impersonated_group(resource: &str) -> &'static str {
    match resource {
        "users" | "groups" | "serviceaccounts" => "",
        _ => "authentication.k8s.io",
    }
}

/// A `meta.k8s.io/v1` `Status`, with fields in kube-apiserver's order.
#[derive(Serialize)]
struct Status<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: Empty,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    code: u16,
}

#[derive(Serialize)]
struct Empty {}

/// `StatusDetails`, fields in kube-apiserver's order, empty ones left out.
#[derive(Default, Serialize)]
struct Details<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    causes: Vec<Cause<'a>>,
}

#[derive(Serialize)]
struct Cause<'a> {
    message: &'a str,
}

impl Failure {
    /// The HTTP status code.
    pub(crate) fn code(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::RequestEntityTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::InternalError(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::ImpersonationForbidden { .. } => StatusCode::FORBIDDEN,
            Self::Timeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The `Status` body as JSON.
    pub(crate) fn to_json(&self) -> String {
        let (reason, message, details) = match self {
            Self::Unauthorized => ("Unauthorized", "Unauthorized".to_owned(), None),
            Self::RequestEntityTooLarge { limit } => (
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {limit}"),
                None,
            ),
            Self::BadRequest(message) => ("BadRequest", message.clone(), None),
            Self::InternalError(cause) => (
                "InternalError",
                format!("Internal error occurred: {cause}"),
                Some(Details {
                    causes: vec![Cause { message: cause }],
                    ..Details::default()
                }),
            ),
            Self::ImpersonationForbidden {
                user,
                resource,
                name,
            } => {
                // kube-apiserver's words when its authorizer refuses an impersonation, with
                // the reason after the colon.
                let group = impersonated_group(resource);
                (
                    "Forbidden",
                    format!(
                        "{resource}{dot}{group} {name:?} is forbidden: User {user:?} cannot \
                         impersonate resource {resource:?} in API group {group:?} at the cluster \
                         scope: impersonation is not supported by this server",
                        dot = if group.is_empty() { "" } else { "." },
                    ),
                    Some(Details {
                        name,
                        group,
                        kind: resource,
                        ..Details::default()
                    }),
                )
            }
            Self::Timeout => (
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded"
                    .to_owned(),
                Some(Details::default()),
            ),
        };
        let status = Status {
            kind: "Status",
            api_version: "v1",
            metadata: Empty {},
            status: "Failure",
            message: &message,
            reason,
            details,
            code: self.code().as_u16(),
        };
        serde_json::to_string(&status).unwrap_or_default()
    }

    /// The HTTP response: the `Status` body with the trailing newline kube-apiserver's JSON
    /// encoder writes after every body.
    pub(crate) fn into_response(self) -> Response<Body> {
        let mut body = self.to_json();
        body.push('\n');
        let mut response = Response::new(full_body(body));
        *response.status_mut() = self.code();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_should_match_kube_apiserver_byte_for_byte() {
        assert_eq!(
            Failure::Unauthorized.to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
    }

    #[test]
    fn too_large_should_name_the_limit_like_kube_apiserver() {
        let failure = Failure::RequestEntityTooLarge { limit: 3_145_728 };
        assert_eq!(failure.code(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            failure.to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}"#
        );
    }

    #[test]
    fn timeout_should_match_kube_apiserver_byte_for_byte() {
        assert_eq!(Failure::Timeout.code(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            Failure::Timeout.to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}"#
        );
    }

    #[test]
    fn internal_error_should_carry_its_cause() {
        let json = Failure::InternalError("boom".to_owned()).to_json();
        assert!(json.contains(r#""message":"Internal error occurred: boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500"#), "{json}");
    }
}
