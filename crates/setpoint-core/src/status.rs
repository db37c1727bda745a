//! API errors and the Kubernetes `Status` object that carries them. Every non-2xx answer of the
//! API server is one of these; the HTTP code, `reason`, `message` and `details` follow
//! apimachinery's `errors` package so that kubectl prints what users know, e.g.
//! `Error from server (NotFound): deployments.apps "web" not found`.

use serde_json::{json, Map, Value};

use crate::cause::Cause;
use crate::gvk::GroupResource;

/// Why a request failed: the `reason` field of a `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// 400: the request itself is malformed.
    BadRequest,
    /// 401: no valid credentials.
    Unauthorized,
    /// 403: not allowed.
    Forbidden,
    /// 404: no such object (or collection).
    NotFound,
    /// 409: create of a name that exists.
    AlreadyExists,
    /// 409: the object changed since it was read.
    Conflict,
    /// 410: the resource version asked for is no longer retained.
    Expired,
    /// 405: the verb is not supported on this resource.
    MethodNotAllowed,
    /// 406: no acceptable representation.
    NotAcceptable,
    /// 413: the body is too large.
    RequestEntityTooLarge,
    /// 415: the body's content type is not supported here.
    UnsupportedMediaType,
    /// 422: the object fails validation.
    Invalid,
    /// 429: too many requests.
    TooManyRequests,
    /// 500: the server failed.
    InternalError,
    /// 503: the server cannot serve now.
    ServiceUnavailable,
    /// 504: the server timed out waiting (e.g. for a resource version it has not reached).
    Timeout,
}

impl Reason {
    /// The HTTP status code that goes with the reason.
    #[must_use]
    pub fn code(self) -> u16 {
        match self {
            Reason::BadRequest => 400,
            Reason::Unauthorized => 401,
            Reason::Forbidden => 403,
            Reason::NotFound => 404,
            Reason::MethodNotAllowed => 405,
            Reason::NotAcceptable => 406,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Expired => 410,
            Reason::RequestEntityTooLarge => 413,
            Reason::UnsupportedMediaType => 415,
            Reason::Invalid => 422,
            Reason::TooManyRequests => 429,
            Reason::InternalError => 500,
            Reason::ServiceUnavailable => 503,
            Reason::Timeout => 504,
        }
    }

    /// The `reason` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Expired => "Expired",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
        }
    }

    /// Whether kube-apiserver's `Status` for this reason always carries `details` (maybe
    /// empty, `{}`): apimachinery builds these errors with a non-nil `Details`, and clients
    /// read it without checking (`kubectl debug` dereferences `Details.Name` of a 404).
    #[must_use]
    pub fn always_has_details(self) -> bool {
        matches!(
            self,
            Reason::NotFound
                | Reason::AlreadyExists
                | Reason::Conflict
                | Reason::Invalid
                | Reason::Forbidden
                | Reason::MethodNotAllowed
                | Reason::InternalError
                | Reason::Timeout
        )
    }
}

/// A failed API request, ready to be sent as a `Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The reason (and with it the HTTP code).
    pub reason: Reason,
    /// The human-readable message.
    pub message: String,
    /// `details`: the object's name, group and kind, and field causes.
    pub details: Option<Box<Details>>,
}

/// The `details` of a `Status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// Object name.
    pub name: String,
    /// API group.
    pub group: String,
    /// Resource (plural) — or, for `Invalid`, the Kind.
    pub kind: String,
    /// Object UID, when known.
    pub uid: Option<String>,
    /// Field causes.
    pub causes: Vec<Cause>,
    /// Seconds after which to retry.
    pub retry_after_seconds: Option<u32>,
}

/// Result of an API operation.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// An error with a reason and message, no details.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_object(reason: Reason, gr: &GroupResource, name: &str, message: String) -> Self {
        ApiError {
            reason,
            message,
            details: Some(Box::new(Details {
                name: name.to_owned(),
                group: gr.group.clone(),
                kind: gr.resource.clone(),
                ..Default::default()
            })),
        }
    }

    /// 404 `<resource> "<name>" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::with_object(
            Reason::NotFound,
            gr,
            name,
            format!("{gr} {name:?} not found"),
        )
    }

    /// 409 `<resource> "<name>" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::with_object(
            Reason::AlreadyExists,
            gr,
            name,
            format!("{gr} {name:?} already exists"),
        )
    }

    /// 409 `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::with_object(
            Reason::Conflict,
            gr,
            name,
            format!("Operation cannot be fulfilled on {gr} {name:?}: {why}"),
        )
    }

    /// The optimistic-concurrency conflict, worded as kube-apiserver words it.
    pub fn modified(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `<Kind>[.<group>] "<name>" is invalid: <causes>`; `details.kind` is the Kind.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let message = match summary.len() {
            0 => format!("{qualified} {name:?} is invalid"),
            1 => format!("{qualified} {name:?} is invalid: {}", summary[0]),
            _ => format!("{qualified} {name:?} is invalid: [{}]", summary.join(", ")),
        };
        ApiError {
            reason: Reason::Invalid,
            message,
            details: Some(Box::new(Details {
                name: name.to_owned(),
                group: group.to_owned(),
                kind: kind.to_owned(),
                causes,
                ..Default::default()
            })),
        }
    }

    /// 400 with the message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }

    /// 410 `Expired`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(Reason::Expired, message)
    }

    /// 410 for a resource version older than the retained history.
    pub fn too_old_resource_version(requested: u64, oldest: u64) -> Self {
        Self::expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// 504 for a resource version the server has not reached (yet), with the
    /// `ResourceVersionTooLarge` cause client-go's reflector looks for and a retry hint.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::timeout(format!(
            "Too large resource version: {requested}, current: {current}"
        ));
        e.details = Some(Box::new(Details {
            causes: vec![Cause::new(
                "ResourceVersionTooLarge",
                "",
                "Too large resource version",
            )],
            retry_after_seconds: Some(1),
            ..Default::default()
        }));
        e
    }

    /// 405 for a verb a resource does not support.
    pub fn method_not_supported(gr: &GroupResource, action: &str) -> Self {
        Self::with_object(
            Reason::MethodNotAllowed,
            gr,
            "",
            format!(
                "{action} is not supported on resources of kind {gr:?}",
                gr = gr.to_string()
            ),
        )
    }

    /// 415 for a body type the endpoint does not take.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            Reason::UnsupportedMediaType,
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/apply-patch+yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"),
        )
    }

    /// 500 `Internal error occurred: <message>`, the message also as the one cause (as
    /// apimachinery's `NewInternalError`).
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError {
            reason: Reason::InternalError,
            message: format!("Internal error occurred: {message}"),
            details: Some(Box::new(Details {
                causes: vec![Cause::new("", "", message)],
                ..Default::default()
            })),
        }
    }

    /// 404 for a path the server does not serve (an unknown resource, subresource or
    /// group version): kube-apiserver's `the server could not find the requested resource`
    /// with empty `details`. Clients tell it from a missing object by the empty
    /// `details.name` (`kubectl debug` does, to say ephemeral containers are unsupported).
    pub fn no_such_path() -> Self {
        ApiError {
            reason: Reason::NotFound,
            message: "the server could not find the requested resource".to_owned(),
            details: Some(Box::default()),
        }
    }

    /// 403 with the message.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(Reason::Forbidden, message)
    }

    /// 403 `<resource> "<name>" is forbidden: <why>` with the object in `details`
    /// (apimachinery's `NewForbidden`), e.g. an impersonation refused.
    pub fn forbidden_object(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::with_object(
            Reason::Forbidden,
            gr,
            name,
            format!("{gr} {name:?} is forbidden: {why}"),
        )
    }

    /// 401 `Unauthorized`: the request carried no valid credentials.
    pub fn unauthorized() -> Self {
        Self::new(Reason::Unauthorized, "Unauthorized")
    }

    /// 413 for a request body over `limit` bytes, worded as kube-apiserver words it.
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 504 for a request not served within the request timeout, worded as kube-apiserver's
    /// timeout filter words it.
    pub fn request_timeout() -> Self {
        Self::timeout(
            "request did not complete within requested timeout - context deadline exceeded",
        )
    }

    /// 504 `Timeout: <message>` (apimachinery's `NewTimeoutError`).
    pub fn timeout(message: impl Into<String>) -> Self {
        ApiError {
            reason: Reason::Timeout,
            message: format!("Timeout: {}", message.into()),
            details: Some(Box::default()),
        }
    }

    /// 503 with the message.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Reason::ServiceUnavailable, message)
    }

    /// The HTTP status code.
    #[must_use]
    pub fn code(&self) -> u16 {
        self.reason.code()
    }

    /// The `Status` body for this error, as kube-apiserver writes it: fields in its order
    /// (see [`crate::wire`]), without the response's trailing newline.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        crate::wire::to_vec(&self.to_status())
    }

    /// The `Status` body for this error as a response carries it: [`to_json`](Self::to_json)
    /// and the trailing newline kube-apiserver's JSON encoder writes after every body.
    #[must_use]
    pub fn to_body(&self) -> Vec<u8> {
        let mut body = self.to_json();
        body.push(b'\n');
        body
    }

    /// The `Status` object for this error. Empty detail fields are left out, as Go's
    /// `omitempty` does; `details` itself is there (maybe `{}`) whenever apimachinery always
    /// sets it for the reason ([`Reason::always_has_details`]).
    #[must_use]
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code(),
        });
        if let Some(d) = &self.details {
            let mut details = Map::new();
            if !d.name.is_empty() {
                details.insert("name".into(), d.name.clone().into());
            }
            if !d.group.is_empty() {
                details.insert("group".into(), d.group.clone().into());
            }
            if !d.kind.is_empty() {
                details.insert("kind".into(), d.kind.clone().into());
            }
            if let Some(uid) = &d.uid {
                details.insert("uid".into(), uid.clone().into());
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d.causes.iter().map(Cause::to_json).collect();
                details.insert("causes".into(), causes.into());
            }
            if let Some(s) = d.retry_after_seconds {
                details.insert("retryAfterSeconds".into(), s.into());
            }
            status["details"] = Value::Object(details);
        } else if self.reason.always_has_details() {
            status["details"] = json!({});
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code(),
            self.reason.as_str(),
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

/// A `Status` reporting success, as DELETE answers for most kinds.
#[must_use]
pub fn success_status(gr: &GroupResource, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": gr.resource, "uid": uid});
    if !gr.group.is_empty() {
        details["group"] = gr.group.clone().into();
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_should_name_the_resource_and_group() {
        let e = ApiError::not_found(&GroupResource::new("apps", "deployments"), "web");
        let s = e.to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["details"]["group"], "apps");
    }

    #[test]
    fn invalid_should_carry_the_kind_and_field_causes() {
        let e = ApiError::invalid(
            "Deployment",
            "apps",
            "bad",
            vec![Cause::invalid(
                "spec.replicas",
                &json!(-1),
                "must be greater than or equal to 0",
            )],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["kind"], "Deployment");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.replicas");
        // Regression: causes carried `spec.replicas: Invalid value: …`, so kubectl, which
        // prints `field: message` per cause, showed the field twice.
        assert_eq!(
            s["details"]["causes"][0]["message"],
            "Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            s["message"],
            "Deployment.apps \"bad\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn status_bodies_should_carry_details_exactly_where_apimachinery_does() {
        // Regression (issue 14.7): a 404 without `details` made `kubectl debug` panic.
        let text = |e: &ApiError| String::from_utf8(e.to_json()).unwrap();
        assert_eq!(
            text(&ApiError::no_such_path()),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#
        );
        assert_eq!(
            text(&ApiError::new(Reason::Forbidden, "no")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no","reason":"Forbidden","details":{},"code":403}"#
        );
        assert_eq!(
            text(&ApiError::internal("boom")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500}"#
        );
        assert_eq!(
            text(&ApiError::too_large_resource_version(5, 3)),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 5, current: 3","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#
        );
        for e in [
            ApiError::bad_request("x"),
            ApiError::expired("x"),
            ApiError::unavailable("x"),
            ApiError::new(Reason::NotAcceptable, "x"),
            ApiError::unsupported_media_type("x"),
            ApiError::new(Reason::Unauthorized, "x"),
        ] {
            assert!(!text(&e).contains("details"), "{}", text(&e));
        }
        assert_eq!(
            text(&ApiError::already_exists(
                &GroupResource::new("apps", "deployments"),
                "web"
            )),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"web\" already exists","reason":"AlreadyExists","details":{"name":"web","group":"apps","kind":"deployments"},"code":409}"#
        );
    }

    #[test]
    fn transport_failures_should_match_kube_apiserver_byte_for_byte() {
        let text = |e: &ApiError| String::from_utf8(e.to_json()).unwrap();
        assert_eq!(
            text(&ApiError::unauthorized()),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let too_large = ApiError::request_entity_too_large(3_145_728);
        assert_eq!(too_large.code(), 413);
        assert_eq!(
            text(&too_large),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}"#
        );
        assert_eq!(ApiError::request_timeout().code(), 504);
        assert_eq!(
            text(&ApiError::request_timeout()),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}"#
        );
        let forbidden = ApiError::forbidden_object(
            &GroupResource::new("authentication.k8s.io", "uids"),
            "u",
            "no",
        );
        assert_eq!(
            text(&forbidden),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"uids.authentication.k8s.io \"u\" is forbidden: no","reason":"Forbidden","details":{"name":"u","group":"authentication.k8s.io","kind":"uids"},"code":403}"#
        );
    }

    #[test]
    fn a_body_should_end_with_the_encoders_newline() {
        let e = ApiError::unauthorized();
        let mut expected = e.to_json();
        expected.push(b'\n');
        assert_eq!(e.to_body(), expected);
    }

    #[test]
    fn conflict_should_use_the_optimistic_lock_wording() {
        let e = ApiError::modified(&GroupResource::new("", "configmaps"), "c");
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(e.code(), 409);
    }
}
