//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`), as kube-apiserver's
//! apiextensions-apiserver serves them.
//!
//! - A CRD is a built-in object (listed in `registry/kinds/custom_resource_definition.rs`)
//!   whose strategy is [`kind`]'s: defaulted and validated by [`definition`] (names, scope,
//!   versions, one storage version, compilable schemas and CEL rules, scale paths).
//! - [`controller`] turns each stored CRD into served resources ([`build`]): one
//!   `ResourceDef` per served version, whose strategy is a [`CustomResource`] with the
//!   version's compiled [`schema`] ([`strategy`] implements it; [`custom_of`] finds it again). It checks the names against other CRDs of the group, sets the
//!   `NamesAccepted` and `Established` conditions, `acceptedNames` and `storedVersions`, and
//!   swaps the API's registry so discovery, OpenAPI and the REST paths change at once. On
//!   deletion it holds the CRD with the `customresourcecleanup.apiextensions.k8s.io`
//!   finalizer, deletes every custom object, then lets the CRD go.
//! - Objects of every version are stored once, under `/registry/<group>/<plural>/`, in the
//!   storage version's `apiVersion`; other versions are served by rewriting `apiVersion`
//!   (conversion strategy `None`) or by the CRD's conversion webhook ([`conversion`]).

mod build;
pub(crate) mod cel;
pub(crate) mod controller;
mod conversion;
mod definition;
mod jsonpath;
mod kind;
pub(crate) mod scale;
mod schema;
mod strategy;
pub(crate) mod table;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use setpoint_core::{Cause, GroupResource};

use crate::registry::ResourceDef;
pub(crate) use kind::definitions;
use schema::Schema;

/// The [`CustomResource`] a resource is served by, if it is a custom resource.
pub(crate) fn custom_of(def: &ResourceDef) -> Option<&CustomResource> {
    let strategy: &dyn std::any::Any = def.strategy.as_ref();
    strategy.downcast_ref::<CustomResource>()
}

/// What a CRD defines for one served version of its resource.
#[derive(Debug)]
pub(crate) struct CustomResource {
    /// The CRD's name, `<plural>.<group>`.
    pub(crate) crd_name: String,
    /// The resource, for errors.
    pub(crate) group_resource: GroupResource,
    /// `<group>/<version>` of this version.
    pub(crate) api_version: String,
    /// `<group>/<version>` objects are stored in.
    pub(crate) storage_api_version: String,
    /// `spec.names.listKind`.
    pub(crate) list_kind: String,
    /// The compiled `openAPIV3Schema` (shared with the threads that run its CEL rules).
    schema: Arc<Schema>,
    /// The schema as written, for the OpenAPI documents.
    pub(crate) raw_schema: Value,
    /// Whether the `status` subresource is enabled.
    pub(crate) status: bool,
    /// The `scale` subresource's paths, if enabled.
    pub(crate) scale: Option<scale::ScalePaths>,
    /// The table columns, `Name` excepted.
    pub(crate) columns: Vec<table::PrinterColumn>,
    /// `selectableFields`: field label (`spec.color`) and where its value is.
    pub(crate) selectable: Vec<(String, jsonpath::JsonPath)>,
    /// The conversion webhook, when `spec.conversion.strategy` is `Webhook`: objects are then
    /// converted by it ([`conversion`]), not by rewriting `apiVersion`.
    pub(crate) webhook: Option<Arc<conversion::Webhook>>,
    /// The CRD's `spec` this was built from: a different spec means a new definition.
    pub(crate) spec: Value,
    /// Set once the CRD is being deleted: no new objects may be created.
    terminating: AtomicBool,
}

impl CustomResource {
    /// The values of the `selectableFields` of `object`, as field selectors compare them.
    pub(crate) fn selectable_values(&self, object: &Value) -> Vec<(String, String)> {
        self.selectable
            .iter()
            .map(|(label, path)| {
                let value = match path.select(object).first() {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                (label.clone(), value)
            })
            .collect()
    }

    /// Whether the CRD is being deleted.
    pub(crate) fn terminating(&self) -> bool {
        self.terminating.load(Ordering::Relaxed)
    }

    pub(crate) fn set_terminating(&self) {
        self.terminating.store(true, Ordering::Relaxed);
    }

    /// The object with what the schema does not declare dropped, and `metadata` as
    /// `ObjectMeta` sees it (unknown fields dropped, wrong types an error).
    pub(crate) fn prune(&self, mut object: Value) -> Result<Value, String> {
        self.schema.prune(&mut object, true);
        if let Some(meta) = object.get_mut("metadata").filter(|m| !m.is_null()) {
            let typed: ObjectMeta =
                serde_json::from_value(meta.clone()).map_err(|e| format!("metadata: {e}"))?;
            *meta = serde_json::to_value(typed).map_err(|e| e.to_string())?;
        }
        Ok(object)
    }

    /// Validates an object against the schema and its rules (`old` on updates). A schema
    /// with CEL rules is checked on a blocking thread ([`cel::pool`]), within one request's
    /// cost budget.
    pub(crate) async fn validate_schema(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        if !self.schema.has_rules() {
            return validate_now(&self.schema, object, old);
        }
        let schema = Arc::clone(&self.schema);
        let (object, old) = (object.clone(), old.cloned());
        cel::pool::run(move || validate_now(&schema, &object, old.as_ref()))
            .await
            .unwrap_or_else(|| {
                vec![Cause::new(
                    "InternalError",
                    "",
                    "validation was cancelled: the server is shutting down",
                )]
            })
    }
}

/// Validates an object against `schema` and its rules, within one request's cost budget.
fn validate_now(schema: &Schema, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let budget = cel::Budget::new(cel::limits::RUNTIME_BUDGET);
    schema.validate(object, old, "", &budget, &mut causes);
    causes
}
