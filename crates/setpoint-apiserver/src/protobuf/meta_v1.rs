//! Descriptor tables for `k8s.io/apimachinery/pkg/apis/meta/v1` (proto package
//! `apimachinery.pkg.apis.meta.v1`): the messages other kinds embed. Field numbers are those of
//! that package's `generated.proto`. `Time` is not a table but [`Kind::Time`].
//!
//! Not decoded (a body carrying them is rejected): `ObjectMeta.managedFields` (17), which
//! clients do not send on create.

use super::schema::{field, kept, list, map, Kind, Message};

/// `ObjectMeta`.
pub(crate) static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        field(1, "name", Kind::String),
        field(2, "generateName", Kind::String),
        field(3, "namespace", Kind::String),
        field(4, "selfLink", Kind::String),
        field(5, "uid", Kind::String),
        field(6, "resourceVersion", Kind::String),
        field(7, "generation", Kind::Int64),
        field(8, "creationTimestamp", Kind::Time),
        field(9, "deletionTimestamp", Kind::Time),
        // *int64
        kept(10, "deletionGracePeriodSeconds", Kind::Int64),
        map(11, "labels", Kind::String),
        map(12, "annotations", Kind::String),
        list(13, "ownerReferences", Kind::Message(&OWNER_REFERENCE)),
        list(14, "finalizers", Kind::String),
    ],
};

/// `OwnerReference`: `apiVersion`, `kind`, `name` and `uid` have no `omitempty`; the bools are
/// pointers.
pub(crate) static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        kept(1, "kind", Kind::String),
        kept(3, "name", Kind::String),
        kept(4, "uid", Kind::String),
        kept(5, "apiVersion", Kind::String),
        kept(6, "controller", Kind::Bool),
        kept(7, "blockOwnerDeletion", Kind::Bool),
    ],
};

/// `LabelSelector`.
pub(crate) static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        map(1, "matchLabels", Kind::String),
        list(
            2,
            "matchExpressions",
            Kind::Message(&LABEL_SELECTOR_REQUIREMENT),
        ),
    ],
};

/// `LabelSelectorRequirement`.
pub(crate) static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        kept(1, "key", Kind::String),
        kept(2, "operator", Kind::String),
        list(3, "values", Kind::String),
    ],
};

/// `Condition`, the standard status condition.
pub(crate) static CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        kept(1, "type", Kind::String),
        kept(2, "status", Kind::String),
        field(3, "observedGeneration", Kind::Int64),
        field(4, "lastTransitionTime", Kind::Time),
        kept(5, "reason", Kind::String),
        kept(6, "message", Kind::String),
    ],
};
