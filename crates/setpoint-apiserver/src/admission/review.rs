//! The `AdmissionReview` (`admission.k8s.io/v1`) a webhook is sent, and what its answer
//! means: the checks kube-apiserver makes on it (the right kind, a `response`, the request's
//! `uid`; a patch only from a mutating webhook and only as `JSONPatch`), and the error a denial
//! becomes — `admission webhook "NAME" denied the request: MESSAGE` with the webhook's code
//! (at least 400).

use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;
use setpoint_core::{ApiError, Details, Reason};

/// What a webhook is asked about (`request` of the review), borrowing the objects.
#[derive(Debug)]
pub(crate) struct ReviewRequest<'a> {
    pub(crate) uid: &'a str,
    /// `{group, version, kind}` of the object as sent (the matched version).
    pub(crate) kind: Value,
    /// `{group, version, resource}` as matched.
    pub(crate) resource: Value,
    pub(crate) subresource: &'a str,
    /// As the client asked.
    pub(crate) request_kind: Value,
    pub(crate) request_resource: Value,
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) user_info: &'a Value,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    pub(crate) dry_run: bool,
    pub(crate) options: Value,
}

/// The `request` of a review as it is written: empty strings left out, absent objects `null`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    uid: &'a str,
    kind: &'a Value,
    resource: &'a Value,
    #[serde(skip_serializing_if = "str::is_empty")]
    sub_resource: &'a str,
    request_kind: &'a Value,
    request_resource: &'a Value,
    #[serde(skip_serializing_if = "str::is_empty")]
    request_sub_resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    operation: &'a str,
    user_info: &'a Value,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
    dry_run: bool,
    options: &'a Value,
}

/// The whole review.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    kind: &'static str,
    api_version: &'static str,
    request: Wire<'a>,
}

impl ReviewRequest<'_> {
    fn wire(&self) -> Wire<'_> {
        Wire {
            uid: self.uid,
            kind: &self.kind,
            resource: &self.resource,
            sub_resource: self.subresource,
            request_kind: &self.request_kind,
            request_resource: &self.request_resource,
            request_sub_resource: self.subresource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            object: self.object,
            old_object: self.old_object,
            dry_run: self.dry_run,
            options: &self.options,
        }
    }

    /// The `request` object (what CEL expressions see as `request`).
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(self.wire()).unwrap_or(Value::Null)
    }

    /// The whole `AdmissionReview` sent to a webhook, serialized.
    pub(crate) fn review_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&Review {
            kind: "AdmissionReview",
            api_version: "admission.k8s.io/v1",
            request: self.wire(),
        })
    }
}

/// A webhook's answer, checked.
#[derive(Debug, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) allowed: bool,
    /// `response.status`, if any.
    pub(crate) status: Value,
    /// The JSON patch (decoded from base64), if any.
    pub(crate) patch: Option<Value>,
    pub(crate) warnings: Vec<String>,
}

/// Reads a webhook's answer to the review with `uid`; the error says why it is unusable (the
/// text follows `received invalid webhook response: `).
pub(crate) fn read_response(body: &[u8], uid: &str, mutating: bool) -> Result<Verdict, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let (api_version, kind) = (
        v["apiVersion"].as_str().unwrap_or_default(),
        v["kind"].as_str().unwrap_or_default(),
    );
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        ));
    }
    let response = &v["response"];
    if !response.is_object() {
        return Err("webhook response was absent".to_owned());
    }
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let allowed = response["allowed"].as_bool().unwrap_or(false);
    let patch = match response["patch"].as_str().filter(|p| !p.is_empty()) {
        None => None,
        Some(_) if !mutating => {
            return Err("validating webhook may not return response.patch".to_owned())
        }
        Some(encoded) => {
            match response["patchType"].as_str() {
                None | Some("") => {
                    return Err(
                        "webhook returned response.patch but not response.patchType".to_owned()
                    )
                }
                Some("JSONPatch") => {}
                Some(other) => {
                    return Err(format!(
                        "webhook returned invalid response.patchType of {other:?}"
                    ))
                }
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("response.patch is not base64: {e}"))?;
            Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| format!("response.patch is not a JSON patch: {e}"))?,
            )
        }
    };
    let warnings = response["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(clean_warning)
        .collect();
    Ok(Verdict {
        allowed,
        status: response["status"].clone(),
        patch,
        warnings,
    })
}

/// The longest warning passed on (longer ones are cut, as kube-apiserver cuts them).
const MAX_WARNING_LENGTH: usize = 4 * 1024;

/// A warning as it may be sent in a header: control characters become spaces; blank ones are
/// dropped.
fn clean_warning(w: &str) -> Option<String> {
    let cleaned: String = w
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        return None;
    }
    let mut end = cleaned.len().min(MAX_WARNING_LENGTH);
    while !cleaned.is_char_boundary(end) {
        end -= 1;
    }
    Some(cleaned[..end].to_owned())
}

/// The error a denial by the webhook `name` becomes.
pub(crate) fn denial(name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {name:?} denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason_text = status["reason"].as_str().filter(|r| !r.is_empty());
    let message = match (message, reason_text) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status["code"].as_u64().filter(|c| *c >= 400).unwrap_or(400);
    let reason = reason_for(reason_text, code);
    let mut error = ApiError::new(reason, message);
    if let Some(details) = status["details"].as_object() {
        let field = |k: &str| {
            details
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        error.details = Some(Box::new(Details {
            name: field("name"),
            group: field("group"),
            kind: field("kind"),
            ..Default::default()
        }));
    } else if reason.always_has_details() {
        error.details = Some(Box::default());
    }
    error
}

/// The reason to answer with: the webhook's own if it is one Setpoint knows, else the one
/// that goes with its code (400 `BadRequest` when none does).
fn reason_for(reason: Option<&str>, code: u64) -> Reason {
    const KNOWN: [Reason; 16] = [
        Reason::BadRequest,
        Reason::Unauthorized,
        Reason::Forbidden,
        Reason::NotFound,
        Reason::AlreadyExists,
        Reason::Conflict,
        Reason::Expired,
        Reason::MethodNotAllowed,
        Reason::NotAcceptable,
        Reason::RequestEntityTooLarge,
        Reason::UnsupportedMediaType,
        Reason::Invalid,
        Reason::TooManyRequests,
        Reason::InternalError,
        Reason::ServiceUnavailable,
        Reason::Timeout,
    ];
    if let Some(r) = reason.and_then(|r| KNOWN.into_iter().find(|k| k.as_str() == r)) {
        if u64::from(r.code()) == code {
            return r;
        }
    }
    KNOWN
        .into_iter()
        .find(|k| u64::from(k.code()) == code)
        .unwrap_or(Reason::BadRequest)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
    }

    #[test]
    fn the_request_should_carry_kube_apiservers_fields() {
        let user = json!({"username": "alice", "groups": ["system:authenticated"]});
        let object = json!({"metadata": {"name": "a"}});
        let options = json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"});
        let review = ReviewRequest {
            uid: "u1",
            kind: json!({"group": "", "version": "v1", "kind": "Pod"}),
            resource: json!({"group": "", "version": "v1", "resource": "pods"}),
            subresource: "status",
            request_kind: json!({"group": "", "version": "v1", "kind": "Pod"}),
            request_resource: json!({"group": "", "version": "v1", "resource": "pods"}),
            name: "a",
            namespace: "default",
            operation: "UPDATE",
            user_info: &user,
            object: Some(&object),
            old_object: None,
            dry_run: true,
            options,
        };
        let r = review.to_json();
        assert_eq!(r["subResource"], "status");
        assert_eq!(r["requestSubResource"], "status");
        assert_eq!(r["namespace"], "default");
        assert_eq!(r["oldObject"], Value::Null);
        assert_eq!(r["dryRun"], true);
        assert_eq!(r["userInfo"]["username"], "alice");
        assert_eq!(r["name"], "a");
        assert!(r.get("requestSubResource").is_some());
        let whole: Value = serde_json::from_slice(&review.review_bytes().unwrap()).unwrap();
        assert_eq!(whole["kind"], "AdmissionReview");
        assert_eq!(whole["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(whole["request"], r);
        // Empty strings are left out.
        let cluster = ReviewRequest {
            subresource: "",
            namespace: "",
            ..review
        }
        .to_json();
        assert!(cluster.get("subResource").is_none() && cluster.get("namespace").is_none());
    }

    #[test]
    fn answers_should_be_checked_as_kube_apiserver_checks_them() {
        let ok = read_response(
            &answer(json!({"uid": "u", "allowed": true, "warnings": ["a\nb", " "]})),
            "u",
            false,
        )
        .unwrap();
        assert!(ok.allowed);
        assert_eq!(ok.warnings, ["a b"]);
        let wrong_uid = read_response(&answer(json!({"uid": "x", "allowed": true})), "u", false);
        assert_eq!(
            wrong_uid,
            Err("expected response.uid=\"u\", got \"x\"".to_owned())
        );
        assert!(read_response(b"garbage", "u", false).is_err());
        assert!(read_response(br#"{"apiVersion":"v1","kind":"Status"}"#, "u", false).is_err());
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#);
        let r = json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"});
        assert!(read_response(&answer(r.clone()), "u", false)
            .is_err_and(|e| e.contains("validating webhook")));
        let v = read_response(&answer(r), "u", true).unwrap();
        assert_eq!(v.patch.unwrap()[0]["op"], "add");
        let untyped = json!({"uid": "u", "allowed": true, "patch": patch});
        assert!(read_response(&answer(untyped), "u", true).is_err());
    }

    #[test]
    fn denials_should_read_as_kube_apiservers() {
        let e = denial(
            "deny.example.com",
            &json!({"message": "no thanks", "code": 403}),
        );
        assert_eq!(
            e.message,
            "admission webhook \"deny.example.com\" denied the request: no thanks"
        );
        assert_eq!(e.code(), 403);
        let e = denial("deny.example.com", &json!({"code": 200}));
        assert_eq!(
            e.message,
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
        assert_eq!(e.code(), 400);
        let e = denial("d.example.com", &json!({"reason": "Invalid", "code": 422}));
        assert_eq!(e.reason, Reason::Invalid);
        assert_eq!(
            e.message,
            "admission webhook \"d.example.com\" denied the request: Invalid"
        );
    }
}
