//! [`Strategy`]: everything that differs from one kind of object to the next, as
//! kube-apiserver's per-kind registry strategies have it: decoding into the typed Kubernetes
//! struct (which rejects wrong types and shows which fields are unknown), names, defaulting,
//! what a create or update may change (status is reset on create and kept on a spec update; the
//! `status` subresource changes only status), `metadata.generation`, validation with field
//! paths, allocations that need the kind's other objects ([`Peers`]), table rows, selectable
//! fields, the stored form, the `scale` view and the kind's part in deletion.
//!
//! Each built-in kind implements it in its own file under `registry/kinds/`; custom resources
//! implement it in `crd/`. Every method but [`Strategy::normalize`], [`Strategy::validate`],
//! [`Strategy::columns`] and [`Strategy::cells`] has a default: what most kinds do.

mod names;

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::schemars::generate::SchemaGenerator;
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use setpoint_core::{ApiError, Cause, SelectableFields};

use super::table::Column;

pub(crate) use names::{validate_name, NameRule};

/// How dependents are treated when their owner is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// The owner goes now; the garbage collector deletes the dependents afterwards.
    Background,
    /// The owner waits (finalizer `foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
    /// The dependents are kept and lose their owner reference (finalizer `orphan`).
    Orphan,
}

/// The other objects of the resource an object is being created in, for allocations that
/// must not collide (a service's cluster IP).
#[async_trait]
pub(crate) trait Peers: Send + Sync {
    /// Every object of the resource, read consistently (at least as new as the latest write).
    async fn objects(&self) -> Result<Vec<Value>, ApiError>;
}

/// The `autoscaling/v1 Scale` view of a kind with a `scale` subresource.
pub(crate) trait ScaleView: Send + Sync {
    /// The `Scale` of an object.
    fn scale_of(&self, object: &Value) -> Value;
    /// Sets the replica count an object asks for.
    fn set_replicas(&self, object: &mut Value, replicas: i64);
    /// The field path of the replica count the `Scale`'s `spec.replicas` reads and writes.
    fn replicas_field(&self) -> Vec<String> {
        vec!["spec".to_owned(), "replicas".to_owned()]
    }
}

/// The `Scale` of `object` with `replicas` asked for and `status` (`replicas`, `selector`).
pub(crate) fn scale_document(object: &Value, replicas: i64, status: Value) -> Value {
    let meta = &object["metadata"];
    serde_json::json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": replicas},
        "status": status,
    })
}

/// The behaviour of one kind (for a custom resource: of one served version).
#[async_trait]
pub(crate) trait Strategy: std::any::Any + Send + Sync + std::fmt::Debug {
    /// The object as the typed struct (or a custom resource's schema) sees it: fields of the
    /// wrong type are an error, unknown fields are dropped (see [`unknown_fields`]).
    fn normalize(&self, object: &Value) -> Result<Value, String>;

    /// The rule object names of this kind follow.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether `metadata.generation` is kept.
    fn has_generation(&self) -> bool {
        false
    }

    /// Whether the kind has a `status` subresource: status is then kept out of main-resource
    /// writes, and the subresource writes only status.
    fn has_status(&self) -> bool {
        false
    }

    /// Whether a change from `old` to `new` bumps `metadata.generation` (a spec change).
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        self.has_generation() && new["spec"] != old["spec"]
    }

    /// The kind's defaults, applied on every create and update.
    fn apply_defaults(&self, _object: &mut Value) {}

    /// What a new object starts with beyond its defaults (its initial status).
    fn initialize(&self, _object: &mut Value) {}

    /// Prepares a new object: its status reset (with a status subresource), its defaults, its
    /// initial state.
    fn prepare_create(&self, object: &mut Value) {
        if self.has_status() {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        self.apply_defaults(object);
        self.initialize(object);
    }

    /// Prepares an updated object from the stored one, `old`: its defaults, and whatever the
    /// kind keeps that a client may leave out.
    fn prepare_update(&self, new: &mut Value, _old: &Value) {
        self.apply_defaults(new);
    }

    /// Every problem with `object` (an update also checks what changed from `old`).
    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause>;

    /// What a create does once the object is prepared and before it is validated, with the
    /// resource's other objects at hand (allocations).
    async fn before_create(&self, _peers: &dyn Peers, _object: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// What an update of the main resource does once `new` is prepared (from the stored
    /// `old`) and before it is validated, with the resource's other objects at hand
    /// (allocations an update may need).
    async fn before_update(
        &self,
        _peers: &dyn Peers,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Why no object of this kind may be created now, if so.
    fn refuse_create(&self) -> Option<ApiError> {
        None
    }

    /// The columns of the kind's table (`kubectl get`).
    fn columns(&self) -> Vec<Column>;

    /// The cells of one object's row, in [`Strategy::columns`] order.
    fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value>;

    /// The field labels field selectors may use on this kind.
    fn selectable(&self, _namespaced: bool) -> SelectableFields {
        SelectableFields::metadata_only()
    }

    /// The values of every selectable field of `object`.
    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        super::fields::metadata_fields(object)
    }

    /// The object as stored, from the object as served.
    fn to_storage(&self, object: Value) -> Value {
        object
    }

    /// The object as served, from the object as stored.
    fn served_from_storage(&self, object: Value) -> Value {
        object
    }

    /// Whether [`Strategy::served_from_storage`] returns what it is given: a kind that
    /// overrides it to convert or default returns `false`, or its restarted watch cache
    /// would serve objects as stored.
    fn serves_as_stored(&self) -> bool {
        true
    }

    /// How objects are converted between the resource's versions when `to_storage` and
    /// `served_from_storage` cannot do it alone (a CRD's conversion webhook): the registry
    /// store calls it after `served_from_storage` and before `to_storage`, and the watch cache
    /// then keeps objects as stored (`registry/store/convert.rs`).
    fn conversion(&self) -> Option<&dyn crate::registry::store::Conversion> {
        None
    }

    /// The kind of a list of `kind` objects.
    fn list_kind(&self, kind: &str) -> String {
        format!("{kind}List")
    }

    /// The `scale` view, for a kind with a `scale` subresource.
    fn scale(&self) -> Option<&dyn ScaleView> {
        None
    }

    /// Whether strategic merge patches apply (built-in kinds have patch strategies; custom
    /// resources have none, so kube-apiserver refuses such patches for them).
    fn accepts_strategic_merge(&self) -> bool {
        true
    }

    /// Whether a write of this kind changes which resources are served (CRDs).
    fn defines_resources(&self) -> bool {
        false
    }

    /// The kind's OpenAPI v3 schema, when it is not a built-in type's (a custom resource's).
    fn openapi_schema(&self) -> Option<&Value> {
        None
    }

    /// The `k8s-openapi` type whose schema the OpenAPI documents give a built-in kind.
    fn typed_schema(&self) -> Option<TypedSchema> {
        None
    }

    /// When deleting `object` (with the grace period the client asked for) only marks it for
    /// its node to stop: the seconds it is given.
    fn graceful_deletion_seconds(&self, _object: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// The finalizer a deletion with `propagation` adds.
    fn deletion_finalizer(&self, propagation: Option<Propagation>) -> Option<&'static str> {
        match propagation {
            Some(Propagation::Foreground) => Some("foregroundDeletion"),
            Some(Propagation::Orphan) => Some("orphan"),
            Some(Propagation::Background) | None => None,
        }
    }

    /// What marking an object for deletion changes besides its metadata.
    fn mark_deleting(&self, _object: &mut Value) {}

    /// Whether something other than `metadata.finalizers` keeps `object` from going.
    fn held(&self, _object: &Value) -> bool {
        false
    }

    /// Whether DELETE answers with the deleted object rather than a `Status`.
    fn delete_returns_object(&self) -> bool {
        false
    }

    /// Whether creating an object of the kind binds the pod it names instead (core/v1
    /// `bindings`, as `pods/binding` does).
    fn binds_pods(&self) -> bool {
        false
    }

    /// Whether the kind is core/v1 ComponentStatus: its objects are the control plane's health,
    /// computed on every read (`api/components.rs`), and never stored.
    fn reports_components(&self) -> bool {
        false
    }

    /// Whether the kind is a create-only review (`SelfSubjectAccessReview`, …): a create is
    /// answered by [`Strategy::review`] and nothing is stored.
    fn reviews(&self) -> bool {
        false
    }

    /// A review kind's answer to a valid `object` asked by `asker`, in the request's
    /// `namespace`: the object with its `status`.
    fn review(
        &self,
        object: Value,
        _asker: &Asker,
        _namespace: Option<&str>,
    ) -> Result<Value, ApiError> {
        Ok(object)
    }
}

/// Who sends a request, as a review kind sees it, and what the server authenticates with.
#[derive(Clone, Debug, Default)]
pub(crate) struct Asker {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
    /// The user's uid and extra attributes (SelfSubjectReview reports them).
    pub(crate) uid: String,
    pub(crate) extra: std::collections::BTreeMap<String, Vec<String>>,
    /// The server's token authenticator (for TokenReview); `None` in an API not served over
    /// HTTPS, which has no tokens.
    pub(crate) tokens: Option<crate::auth::TokenAuthenticator>,
}

/// Adds a type's schema (and those it references) to a generator and returns a `$ref` to it.
pub(crate) type TypedSchema = fn(&mut SchemaGenerator) -> Schema;

/// The [`TypedSchema`] of `T`.
pub(crate) fn schema_of<T: JsonSchema>() -> Option<TypedSchema> {
    Some(SchemaGenerator::subschema_for::<T>)
}

/// Decodes `value` as `T` and encodes it again: the typed view of the object.
pub(crate) fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// The paths of fields in `original` that `normalized` lacks: unknown fields, as kube-apiserver
/// reports them (`spec.foo`, `spec.containers[0].bar`). Nulls are not fields.
pub(crate) fn unknown_fields(original: &Value, normalized: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_unknown(original, normalized, String::new(), &mut out);
    out
}

fn collect_unknown(original: &Value, normalized: &Value, path: String, out: &mut Vec<String>) {
    match (original, normalized) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match n.get(k) {
                    Some(nv) => collect_unknown(v, nv, child, out),
                    None => out.push(child),
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            for (i, (ov, nv)) in o.iter().zip(n).enumerate() {
                collect_unknown(ov, nv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_should_reject_wrong_types_and_drop_unknown_fields() {
        use k8s_openapi::api::core::v1::Pod;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}], "extra": true}});
        let n = round_trip::<Pod>(&pod).unwrap();
        assert_eq!(
            unknown_fields(&pod, &n),
            vec!["spec.containers[0].bogus", "spec.extra"]
        );
        let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "x"}});
        assert!(round_trip::<Pod>(&bad).is_err());
    }
}
