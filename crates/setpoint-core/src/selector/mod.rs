//! Label and field selectors, parsed, printed and matched exactly as kube-apiserver does, so
//! that `labelSelector` and `fieldSelector` query parameters from unmodified clients select the
//! same objects and invalid ones fail with the same messages (which the API server returns in a
//! 400 `BadRequest` `Status`).
//!
//! * [`LabelSelector`]: `app=web,tier in (a,b),!legacy` or the structured
//!   `matchLabels`/`matchExpressions` form, matched against `metadata.labels`.
//! * [`FieldSelector`]: `metadata.name=x,status.phase!=Failed`, matched against field values
//!   the caller extracts, with the fields each resource supports described by
//!   [`SelectableFields`].
//!
//! ```
//! use setpoint_core::{FieldSelector, LabelSelector, SelectableFields};
//!
//! let labels = LabelSelector::parse("app=web, tier notin (db)").unwrap();
//! let pod = serde_json::json!({"metadata": {"name": "p", "labels": {"app": "web"}}});
//! assert!(labels.matches_object(&pod));
//! assert_eq!(labels.to_string(), "app=web,tier notin (db)");
//!
//! let fields = FieldSelector::parse("metadata.name=p").unwrap();
//! let fields = fields.resolve(&SelectableFields::metadata_only()).unwrap();
//! assert!(fields.matches_with(|f| (f == "metadata.name").then_some("p")));
//! ```

mod field;
mod label;
mod label_parser;
mod label_structured;
mod label_syntax;
mod messages;
mod requirement;
mod selectable_fields;

pub use field::{FieldOperator, FieldSelector, FieldSelectorError, FieldTerm};
pub use label::{LabelSelector, LabelSelectorError};
pub use requirement::{InvalidLabelRequirement, LabelOperator, LabelRequirement};
pub use selectable_fields::SelectableFields;
