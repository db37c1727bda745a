//! Why a patch could not be applied, and how kube-apiserver answers each failure.
//!
//! Every failure of the three patch engines is a [`PatchError`]. Its [`PatchError::kind`] tells
//! the API server's single error-to-`Status` mapper which answer kube-apiserver gives; the mapper
//! owns the numeric codes. The texts follow upstream where upstream shows them to the client
//! (400 and 500 answers) and are free-form where upstream hides them (422 answers).

use thiserror::Error;

/// The result of applying a patch.
pub type PatchResult<T> = std::result::Result<T, PatchError>;

/// The `Status` kube-apiserver answers for a failed patch
/// (`k8s.io/apiserver/pkg/endpoints/handlers/patch.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchErrorKind {
    /// 400, reason `BadRequest`, message the error's text.
    BadRequest,
    /// 422, reason `Invalid`. Upstream builds this with `NewGenericServerResponse`, which drops
    /// the detail: the message is always [`INVALID_PATCH_MESSAGE`] and `details` is `{}`.
    Invalid,
    /// 413, reason `RequestEntityTooLarge`, message `Request entity too large: ` + the error's
    /// text.
    RequestEntityTooLarge,
    /// 415, reason `UnsupportedMediaType` (strategic merge patch for a kind without patch
    /// metadata, e.g. a custom resource).
    UnsupportedMediaType,
    /// 500 with an empty reason and the error's text as message: upstream returns these errors
    /// unconverted, and kube-apiserver answers any non-`Status` error that way.
    Internal,
}

/// The message of every 422 answer to a patch: kube-apiserver replaces the patch library's text
/// with this generic one.
pub const INVALID_PATCH_MESSAGE: &str =
    "the server rejected our request due to an error in our request";

/// A patch that could not be applied. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum PatchError {
    /// The body does not have the JSON shape its patch type requires (not an array of operation
    /// objects, an operation field of the wrong type, a merge patch that is not an object, …).
    #[error("error decoding patch: {0}")]
    Malformed(String),

    /// A JSON merge patch whose body is `null`.
    #[error("Invalid JSON Patch")]
    NullMergePatch,

    /// A JSON patch with more operations than kube-apiserver accepts.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {count}")]
    TooManyOperations {
        /// Operations in the patch.
        count: usize,
        /// The limit, [`super::MAX_JSON_PATCH_OPERATIONS`].
        max: usize,
    },

    /// One operation of a JSON patch could not be applied.
    #[error("JSON patch operation {index} ({op} {path:?}) failed: {failure}")]
    OperationFailed {
        /// Position of the operation in the patch, from 0.
        index: usize,
        /// Its `op`, or `unknown` when absent.
        op: String,
        /// Its `path`, empty when absent.
        path: String,
        /// What went wrong.
        failure: OperationFailure,
    },

    /// A strategic merge patch for a kind that has no patch metadata (custom resources).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    StrategicMergeUnsupported,

    /// A `$retainKeys` directive that is not a list, or a patch setting a field it does not
    /// retain.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeys,

    /// A `$setElementOrder` key without `/<field>`.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrder,

    /// A `$deleteFromPrimitiveList` key without `/<field>`.
    #[error("invalid patch format of primitive list")]
    BadDeleteFromPrimitiveList,

    /// A list whose elements are lists.
    #[error("lists of lists are not supported")]
    ListOfLists,

    /// A `$patch` directive other than `replace` or `delete` on an object.
    #[error("unknown patch type: {directive} in map: {object}")]
    UnknownDirective {
        /// The directive's value, as JSON.
        directive: String,
        /// The object holding it, as JSON.
        object: String,
    },

    /// `$patch: merge` (or another unknown directive) on an element of a merged list.
    #[error("merging lists cannot yet be specified in the patch")]
    ListMergeDirective,

    /// An element of a merged list of objects without its merge key.
    #[error("map: {element} does not contain declared merge key: {key}")]
    MissingMergeKey {
        /// The element, as JSON.
        element: String,
        /// The merge key it lacks.
        key: String,
    },

    /// A value of the wrong JSON type where a strategic merge patch needs a list or an object.
    #[error("expected a {expected}, but received a {actual}")]
    UnexpectedType {
        /// What was needed, in Go's spelling (`[]interface {}`, `map[string]interface {}`).
        expected: &'static str,
        /// What was found, in Go's spelling.
        actual: &'static str,
    },

    /// A merged list whose elements do not all have the same JSON type.
    #[error("list element types are not identical: {lists}")]
    MixedListElements {
        /// The lists, as JSON.
        lists: String,
    },

    /// A `$setElementOrder` list for a list that is empty in both the object and the patch.
    #[error("no elements in any of the given slices")]
    NoListElements,

    /// A merged list of objects whose field has no merge key.
    #[error("cannot merge lists without merge key for {field}")]
    NoMergeKey {
        /// The list field.
        field: String,
    },

    /// Patch elements in another order than their `$setElementOrder` list.
    #[error("the order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}")]
    OrderMismatch {
        /// The patch list, as JSON.
        patch: String,
        /// The `$setElementOrder` list, as JSON.
        order: String,
    },
}

impl PatchError {
    /// The answer kube-apiserver gives for this failure.
    #[must_use]
    pub fn kind(&self) -> PatchErrorKind {
        match self {
            Self::Malformed(_)
            | Self::NullMergePatch
            | Self::BadRetainKeys
            | Self::BadSetElementOrder
            | Self::BadDeleteFromPrimitiveList => PatchErrorKind::BadRequest,
            Self::OperationFailed { .. } | Self::ListOfLists => PatchErrorKind::Invalid,
            Self::TooManyOperations { .. } => PatchErrorKind::RequestEntityTooLarge,
            Self::StrategicMergeUnsupported => PatchErrorKind::UnsupportedMediaType,
            Self::UnknownDirective { .. }
            | Self::ListMergeDirective
            | Self::MissingMergeKey { .. }
            | Self::UnexpectedType { .. }
            | Self::MixedListElements { .. }
            | Self::NoListElements
            | Self::NoMergeKey { .. }
            | Self::OrderMismatch { .. } => PatchErrorKind::Internal,
        }
    }
}

/// Why one JSON patch operation failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OperationFailure {
    /// `op` is absent or not one of `add`, `remove`, `replace`, `move`, `copy`, `test`.
    #[error("unexpected op {0:?}")]
    UnknownOp(String),
    /// The operation lacks `path`, or `from` for `move` and `copy`.
    #[error("operation is missing its {0:?} field")]
    MissingField(&'static str),
    /// A location's parent does not exist (or is not an object or array). `pointer` is the
    /// `path` or `from` that names it.
    #[error("doc is missing path: {pointer:?}")]
    MissingPath {
        /// The pointer that could not be followed.
        pointer: String,
    },
    /// `remove` or `move` of an object member that does not exist.
    #[error("unable to remove nonexistent key {key:?} at {pointer:?}")]
    MissingKey {
        /// The pointer naming it.
        pointer: String,
        /// The member name.
        key: String,
    },
    /// An array location whose last token is not an integer (or `-` where `-` is not allowed).
    #[error("{token:?} at {pointer:?} is not a proper array index")]
    NotAnIndex {
        /// The pointer naming it.
        pointer: String,
        /// The offending token.
        token: String,
    },
    /// An array index outside the array.
    #[error("index {index} at {pointer:?} is outside an array of {len} elements")]
    IndexOutOfRange {
        /// The pointer naming it.
        pointer: String,
        /// The index as written.
        index: i64,
        /// The array's length.
        len: usize,
    },
    /// A `test` whose value differs from the document's.
    #[error("testing value {pointer:?} failed")]
    TestFailed {
        /// The tested pointer.
        pointer: String,
    },
    /// `copy` operations together copied more bytes than kube-apiserver allows.
    #[error(
        "unable to complete the copy, the accumulated size increase of copy is {size}, \
         exceeding the limit {limit}"
    )]
    CopyLimitExceeded {
        /// Bytes copied so far, this operation included.
        size: usize,
        /// The limit, [`super::MAX_JSON_PATCH_COPY_BYTES`].
        limit: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_failure_should_be_reported_with_its_index_op_and_path() {
        let e = PatchError::OperationFailed {
            index: 2,
            op: "test".into(),
            path: "/metadata/finalizers".into(),
            failure: OperationFailure::TestFailed {
                pointer: "/metadata/finalizers".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            "JSON patch operation 2 (test \"/metadata/finalizers\") failed: \
             testing value \"/metadata/finalizers\" failed"
        );
        assert_eq!(e.kind(), PatchErrorKind::Invalid);
    }

    #[test]
    fn decoding_failures_should_be_bad_requests_and_smp_internals_should_be_500s() {
        assert_eq!(
            PatchError::NullMergePatch.kind(),
            PatchErrorKind::BadRequest
        );
        assert_eq!(PatchError::BadRetainKeys.kind(), PatchErrorKind::BadRequest);
        assert_eq!(PatchError::ListOfLists.kind(), PatchErrorKind::Invalid);
        assert_eq!(
            PatchError::ListMergeDirective.kind(),
            PatchErrorKind::Internal
        );
        assert_eq!(
            PatchError::TooManyOperations {
                count: 10_001,
                max: 10_000
            }
            .kind(),
            PatchErrorKind::RequestEntityTooLarge
        );
    }
}
