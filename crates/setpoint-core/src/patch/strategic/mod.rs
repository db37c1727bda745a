//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds, as
//! kube-apiserver applies it (`k8s.io/apimachinery/pkg/util/strategicpatch`
//! `StrategicMergeMapPatch`).
//!
//! Like a JSON merge patch, `null` deletes a field and objects merge recursively. Unlike it,
//! lists whose field has a `merge` strategy in the kind's [`PatchSchema`] are merged: lists of
//! objects element by element, matched by the field's merge key; lists of scalars as sets.
//! Other lists are replaced whole. Directives steer the merge:
//!
//! * `"$patch": "replace"` in an object: the object (less the directive) replaces the live one;
//!   in an element of a merged list: the other patch elements become the whole list.
//! * `"$patch": "delete"` in an object: the object becomes `{}`; in an element of a merged list
//!   (with its merge key): the live elements with that key are removed.
//! * `"$retainKeys": [fields]` in an object: live fields not listed are dropped before merging;
//!   the patch may only set listed fields.
//! * `"$setElementOrder/<list>": [elements or merge keys]`: the merged list is ordered as given,
//!   elements only the server had keeping their places relative to these.
//! * `"$deleteFromPrimitiveList/<list>": [values]`: these values are removed from a merged
//!   list of scalars.
//!
//! `"$patch": "merge"` is refused (upstream never implemented it): as the value of an object's
//! directive with [`PatchError::UnknownDirective`], in a list element with
//! [`PatchError::ListMergeDirective`]. Both are 500s upstream.
//!
//! Upstream behaviours kept on purpose, because clients see them (this follows apimachinery as
//! of Kubernetes 1.24 and later, unchanged through 1.33):
//!
//! * A value for a field the live object lacks, or holds with another JSON type, is stored
//!   without its `null` members and without any object carrying `$patch` (with the member or
//!   element holding it); other directive keys inside it are kept, and the API server's typed
//!   decoding then drops or rejects them according to `fieldValidation`.
//! * `$deleteFromPrimitiveList/<list>` never creates the list, and also applies to lists
//!   without a merge strategy.
//! * A merged list's new elements go right after the patch element before them, or first, not
//!   last, unless `$setElementOrder` places them (see the `order` module).
//!
//! Not reproduced: upstream fails with a 500 when a patch merges into a field its Go struct does
//! not have; without the Go types this treats unknown fields with the default strategy.

mod elements;
mod kinds;
mod merge;
mod order;
mod schema;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

pub use schema::{FieldStrategy, PatchSchema};

use super::error::{PatchError, PatchResult};

/// Applies the strategic merge patch `patch` to the object `original` of a kind described by
/// `schema` (see [`PatchSchema::for_kind`]).
///
/// A `null` patch changes nothing; a patch or object that is not a JSON object is
/// [`PatchError::Malformed`].
///
/// ```
/// use serde_json::json;
/// use setpoint_core::{strategic_merge_patch, PatchSchema};
/// let pod = json!({"spec": {"containers": [
///     {"name": "app", "image": "app:1"},
///     {"name": "proxy", "image": "envoy:1"},
/// ]}});
/// let patch = json!({"spec": {"containers": [{"name": "proxy", "image": "envoy:2"}]}});
/// let schema = PatchSchema::for_kind("v1", "Pod").unwrap();
/// let out = strategic_merge_patch(pod, patch, schema).unwrap();
/// assert_eq!(out, json!({"spec": {"containers": [
///     {"name": "app", "image": "app:1"},
///     {"name": "proxy", "image": "envoy:2"},
/// ]}}));
/// ```
pub fn strategic_merge_patch(
    original: Value,
    patch: Value,
    schema: &PatchSchema,
) -> PatchResult<Value> {
    let patch = match patch {
        Value::Object(patch) => patch,
        Value::Null => Map::new(),
        _ => {
            return Err(PatchError::Malformed(
                "a strategic merge patch must be a JSON object".to_owned(),
            ))
        }
    };
    let Value::Object(original) = original else {
        return Err(PatchError::Malformed(
            "the object to patch is not a JSON object".to_owned(),
        ));
    };
    merge::merge_object(original, patch, Some(schema.root())).map(Value::Object)
}
