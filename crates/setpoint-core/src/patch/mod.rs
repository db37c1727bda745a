//! The patch engine: applies the three PATCH body types kube-apiserver accepts besides
//! server-side apply to a stored object, held as a `serde_json::Value`.
//!
//! | Content-Type | [`PatchType`] | function |
//! |---|---|---|
//! | `application/json-patch+json` (RFC 6902) | `Json` | [`json_patch`] |
//! | `application/merge-patch+json` (RFC 7386) | `Merge` | [`merge_patch`] |
//! | `application/strategic-merge-patch+json` | `StrategicMerge` | [`strategic_merge_patch`] |
//!
//! [`apply_patch`] picks the engine, and for strategic merge patch the kind's [`PatchSchema`].
//! Each engine follows the Go library kube-apiserver uses, quirks included, and promises that a
//! failed patch changes nothing: the caller's object is consumed and a new one returned.
//! Server-side apply (`application/apply-patch+yaml`) is not handled here.
//!
//! # How kube-apiserver answers a patch that fails
//!
//! Read from `k8s.io/apiserver/pkg/endpoints/handlers/patch.go` (`applyJSPatch`,
//! `interpretStrategicMergePatchError`) and `responsewriters/status.go`; each
//! [`PatchError::kind`] records the answer, and the API server's one error-to-`Status` mapper
//! turns it into a response:
//!
//! * **JSON patch.** A body that does not decode as a list of operations: 400 `BadRequest`,
//!   `error decoding patch: …`. More than 10 000 operations: 413 `RequestEntityTooLarge`.
//!   *Any* failure while applying — a failed `test`, a path that does not exist, an index out
//!   of range, an unknown `op`, too many bytes copied — is 422 `Invalid` built with
//!   `NewGenericServerResponse`, which discards the library's text: the message is always
//!   [`INVALID_PATCH_MESSAGE`], `details` is `{}`, there are no causes. This crate's errors
//!   still say which operation failed and why, for logs. (Not 500: no JSON patch failure
//!   reaches the client as an internal error.)
//! * **JSON merge patch.** A `null` body: 400 `Invalid JSON Patch`. Any other non-object:
//!   400 `error decoding patch: …`. Applying cannot fail.
//! * **Strategic merge patch.** A body that is not an object: 400. A malformed
//!   `$retainKeys`, `$setElementOrder/…` or `$deleteFromPrimitiveList/…`: 400 with upstream's
//!   text (`invalid patch format of …`). A list of lists: 422, generic message as above. Every
//!   other failure (a list element without its merge key, `$patch: merge`, an unknown `$patch`,
//!   mixed element types, elements out of `$setElementOrder` order, …) is returned by upstream
//!   as a plain Go error, which kube-apiserver answers with 500, an empty reason and the error's
//!   text as message. For a kind without patch metadata (custom resources) the request is
//!   refused with 415 before any of this.
//! * **After any patch**, the API server decodes the result into the kind; a result that does
//!   not decode is 422 `Invalid` with a cause on field `patch`, and unknown fields follow the
//!   request's `fieldValidation` (that, and JSON patch's [`JsonPatch::unknown_fields`], are the
//!   API server's business, not this module's).

mod error;
mod json_patch;
mod merge_patch;
mod pointer;
mod strategic;

use serde_json::Value;

pub use error::{OperationFailure, PatchError, PatchErrorKind, PatchResult, INVALID_PATCH_MESSAGE};
pub use json_patch::{json_patch, JsonPatch, MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS};
pub use merge_patch::merge_patch;
pub use strategic::{strategic_merge_patch, FieldStrategy, PatchSchema};

/// A PATCH body type handled by [`apply_patch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json`: a list of RFC 6902 operations.
    Json,
    /// `application/merge-patch+json`: an RFC 7386 merge patch.
    Merge,
    /// `application/strategic-merge-patch+json`: a Kubernetes strategic merge patch.
    StrategicMerge,
}

impl PatchType {
    /// The patch type of a request's `Content-Type`, parameters (`; charset=…`) ignored. `None`
    /// for anything else, including `application/apply-patch+yaml`. Matching is exact, as
    /// upstream's.
    #[must_use]
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = match content_type.find(';') {
            Some(at) if at > 0 => &content_type[..at],
            _ => content_type,
        };
        [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge]
            .into_iter()
            .find(|t| t.content_type() == media_type)
    }

    /// The media type of this patch type.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
        }
    }
}

/// Applies `patch` of type `patch_type` to `original`, an object of kind `kind` in
/// `api_version`. A strategic merge patch for a kind without a [`PatchSchema`] fails with
/// [`PatchError::StrategicMergeUnsupported`].
///
/// ```
/// use serde_json::json;
/// use setpoint_core::{apply_patch, PatchType};
/// let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}});
/// let patch = json!({"spec": {"replicas": 3}});
/// let out = apply_patch(PatchType::StrategicMerge, "apps/v1", "Deployment", deploy, patch).unwrap();
/// assert_eq!(out["spec"]["replicas"], 3);
/// ```
pub fn apply_patch(
    patch_type: PatchType,
    api_version: &str,
    kind: &str,
    original: Value,
    patch: Value,
) -> PatchResult<Value> {
    match patch_type {
        PatchType::Json => json_patch(original, patch),
        PatchType::Merge => merge_patch(original, patch),
        PatchType::StrategicMerge => {
            let schema = PatchSchema::for_kind(api_version, kind)
                .ok_or(PatchError::StrategicMergeUnsupported)?;
            strategic_merge_patch(original, patch, schema)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types_should_map_to_patch_types_ignoring_parameters() {
        assert_eq!(
            PatchType::from_content_type("application/json-patch+json"),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json"),
            Some(PatchType::StrategicMerge)
        );
        for other in [
            "application/apply-patch+yaml",
            "application/json",
            "Application/Merge-Patch+JSON",
            "",
        ] {
            assert_eq!(PatchType::from_content_type(other), None, "{other:?}");
        }
    }

    #[test]
    fn strategic_merge_for_a_custom_resource_should_be_unsupported_media_type() {
        let err = apply_patch(
            PatchType::StrategicMerge,
            "example.com/v1",
            "Widget",
            json!({"spec": {}}),
            json!({"spec": {"a": 1}}),
        )
        .unwrap_err();
        assert_eq!(err, PatchError::StrategicMergeUnsupported);
        assert_eq!(err.kind(), PatchErrorKind::UnsupportedMediaType);
    }

    #[test]
    fn json_and_merge_patches_should_work_for_any_kind() {
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1}});
        let out = apply_patch(
            PatchType::Merge,
            "example.com/v1",
            "Widget",
            cr.clone(),
            json!({"spec": {"size": 2}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["size"], 2);
        let out = apply_patch(
            PatchType::Json,
            "example.com/v1",
            "Widget",
            cr,
            json!([{"op": "replace", "path": "/spec/size", "value": 3}]),
        )
        .unwrap();
        assert_eq!(out["spec"]["size"], 3);
    }

    #[test]
    fn a_failed_test_op_should_map_to_invalid() {
        let err = apply_patch(
            PatchType::Json,
            "v1",
            "ConfigMap",
            json!({"data": {"a": "1"}}),
            json!([{"op": "test", "path": "/data/a", "value": "2"}]),
        )
        .unwrap_err();
        assert_eq!(err.kind(), PatchErrorKind::Invalid);
    }
}
