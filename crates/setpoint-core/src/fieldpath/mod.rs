//! Field ownership for server-side apply: which fields of an object each manager owns, how an
//! applied configuration merges into the live object, and when an apply conflicts.
//!
//! The model is the one kube-apiserver uses (sigs.k8s.io/structured-merge-diff), written
//! here from its documented semantics:
//!
//! - [`FieldSet`]: a tree of path elements (`f:name`, `k:{"name":"web"}`, `v:"x"`, `i:0`);
//!   its JSON form is the `fieldsV1` of a `managedFields` entry.
//! - [`Shape`]: what the schema says about merging — list types (atomic, set, map with keys),
//!   atomic maps, which object keys are map entries rather than named fields.
//! - [`walk`]: an object's field set, the comparison of two objects (added, modified,
//!   removed), the merge of a configuration into an object, the removal of a set's fields.
//! - [`managers`]: the ownership rules: an update takes the fields it changed from everyone;
//!   an apply owns exactly the fields of its configuration, conflicts with other managers
//!   on fields whose value it changes (unless forced), and removes the fields it stopped
//!   applying that nobody else owns.

mod element;
pub mod managers;
mod set;
mod shape;
pub mod walk;

pub use element::{display_path, Element};
pub use managers::{Conflict, Ignore, Managed, ManagerKey, Managers, Operation, Writer};
pub use set::{FieldSet, FieldsV1Error};
pub use shape::{ListType, Shape};
