//! How a custom resource's objects are handled: the [`Strategy`] of [`CustomResource`]. Its
//! schema prunes, defaults and validates them (with CEL rules); `metadata.generation` changes
//! with anything outside `metadata` (and `status`, when it has its own subresource), as
//! kube-apiserver does; the table has the version's printer columns; field selectors take
//! its `selectableFields`; objects are stored in the storage version's `apiVersion` (converted
//! by the CRD's webhook when it has one: `conversion/`);
//! strategic merge patches are refused (custom resources have no patch strategies); nothing
//! new is created while the CRD is terminating.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, SelectableFields};

use super::{table, CustomResource};
use crate::registry::store::Conversion;
use crate::registry::table::Column;
use crate::registry::{metadata_fields, metadata_labels, validate_finalizers, ScaleView, Strategy};

#[async_trait]
impl Strategy for CustomResource {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        self.prune(object.clone())
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        self.status
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
                if self.status {
                    map.remove("status");
                }
            }
            v
        };
        strip(new) != strip(old)
    }

    fn apply_defaults(&self, object: &mut Value) {
        self.schema.apply_defaults(object);
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        validate_finalizers(&object["metadata"], false, &mut causes);
        causes.extend(self.validate_schema(object, old).await);
        causes
    }

    fn refuse_create(&self) -> Option<ApiError> {
        if !self.terminating() {
            return None;
        }
        let mut e = ApiError::method_not_supported(&self.group_resource, "create");
        e.message = "create not allowed while custom resource definition is terminating".into();
        Some(e)
    }

    fn columns(&self) -> Vec<Column> {
        table::columns(&self.columns)
    }

    fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        table::cells(&self.columns, object, now)
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        if self.selectable.is_empty() {
            return SelectableFields::metadata_only();
        }
        let mut labels = metadata_labels(namespaced);
        labels.extend(self.selectable.iter().map(|(label, _)| label.clone()));
        SelectableFields::for_kind(labels)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        let mut fields = metadata_fields(object);
        fields.extend(self.selectable_values(object));
        fields
    }

    /// The stored form: the storage version's `apiVersion`.
    fn to_storage(&self, mut object: Value) -> Value {
        if object.is_object() {
            object["apiVersion"] = json!(self.storage_api_version);
        }
        object
    }

    fn serves_as_stored(&self) -> bool {
        false
    }

    /// The served form: this version's `apiVersion`, with the schema's defaults; with a
    /// conversion webhook, the stored form (converted on each read by [`Self::conversion`]).
    fn served_from_storage(&self, mut object: Value) -> Value {
        if self.webhook.is_some() {
            return object;
        }
        if object.is_object() {
            object["apiVersion"] = json!(self.api_version);
        }
        self.schema.apply_defaults(&mut object);
        object
    }

    fn conversion(&self) -> Option<&dyn Conversion> {
        self.webhook.as_ref().map(|_| self as &dyn Conversion)
    }

    fn list_kind(&self, _kind: &str) -> String {
        self.list_kind.clone()
    }

    fn scale(&self) -> Option<&dyn ScaleView> {
        self.scale.as_ref().map(|s| s as &dyn ScaleView)
    }

    fn accepts_strategic_merge(&self) -> bool {
        false
    }

    fn openapi_schema(&self) -> Option<&Value> {
        Some(&self.raw_schema)
    }
}
