//! Setpoint's object model: the types every layer shares, with no I/O.
//!
//! - the store's notion of time, [`Revision`];
//! - group/version/kinds and group/resources ([`GroupVersionKind`], [`GroupResource`]);
//! - label and field selectors ([`LabelSelector`], [`FieldSelector`]);
//! - API errors and the `Status` objects that carry them ([`ApiError`], [`Reason`]), field
//!   [`Cause`]s, and [`wire`]: JSON in the field order kube-apiserver writes;
//! - patches: JSON patch, JSON merge patch and strategic merge patch ([`apply_patch`]);
//! - URL query strings, decoded ([`parse_query`], [`query_pairs`]).

mod cause;
pub mod cidr;
pub mod fieldpath;
mod gvk;
mod patch;
pub mod quantity;
mod query;
pub mod quota;
mod revision;
mod selector;
mod status;
pub mod wire;

pub use cause::Cause;
pub use gvk::{api_version, GroupResource, GroupVersionKind};
pub use patch::{
    apply_patch, json_patch, merge_patch, strategic_merge_patch, FieldStrategy, JsonPatch,
    OperationFailure, PatchError, PatchErrorKind, PatchResult, PatchSchema, PatchType,
    INVALID_PATCH_MESSAGE, MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS,
};
pub use query::{parse_query, percent_decode, query_pairs};
pub use revision::{ParseRevisionError, Revision};
pub use selector::{
    FieldOperator, FieldSelector, FieldSelectorError, FieldTerm, InvalidLabelRequirement,
    LabelOperator, LabelRequirement, LabelSelector, LabelSelectorError, SelectableFields,
};
pub use status::{success_status, ApiError, ApiResult, Details, Reason};
