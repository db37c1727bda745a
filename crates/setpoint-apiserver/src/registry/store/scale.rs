//! The `scale` subresource of any resource whose strategy has a scale view
//! ([`ScaleView`](crate::registry::strategy::ScaleView)): an `autoscaling/v1 Scale` read from
//! the object, and written back as a change of its replica count through the guaranteed update.

use serde_json::{json, Value};
use setpoint_core::{apply_patch, ApiError, Cause, PatchType};

use super::{RegistryStore, Scope, Updated};
use crate::registry::managed_fields::FieldManager;
use crate::registry::meta;
use crate::registry::strategy::ScaleView;

/// What a scale write asks for.
pub(crate) enum ScaleChange {
    /// PUT: this `Scale`.
    Replace(Value),
    /// PATCH: this patch of the current `Scale`.
    Patch(PatchType, Value),
    /// PATCH with an apply patch: this `Scale` configuration, forced or not.
    Apply { config: Value, force: bool },
}

impl RegistryStore {
    fn scale_view(&self) -> Result<&dyn ScaleView, ApiError> {
        self.def
            .strategy
            .scale()
            .ok_or_else(|| ApiError::internal("the resource has no scale view"))
    }

    /// The `Scale` of the object `name` of `namespace`.
    pub(crate) async fn get_scale(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let object = self.get(namespace, name).await?;
        Ok(self.scale_view()?.scale_of(&object))
    }

    /// Sets the replicas of the object `name` of `namespace` as `change` says (a `Scale` with
    /// a `resourceVersion` must match the object's), recorded as `fields`' write through
    /// `scale`; returns the new `Scale`.
    pub(crate) async fn update_scale(
        &self,
        namespace: Option<&str>,
        name: &str,
        change: &ScaleChange,
        dry_run: bool,
        fields: &FieldManager<'_>,
    ) -> Result<Value, ApiError> {
        let view = self.scale_view()?;
        let updated = self
            .update(namespace, name, Scope::Main, dry_run, &|current| {
                let scale = match change {
                    ScaleChange::Apply { config, force } => {
                        let (mut next, scale) =
                            fields.apply_scale(current, view, config, *force)?;
                        checked_replicas(name, &scale["spec"]["replicas"])?;
                        meta::metadata(&mut next).remove("resourceVersion");
                        return Ok(next);
                    }
                    ScaleChange::Patch(t, body) => {
                        let mut base = view.scale_of(current);
                        base["metadata"]
                            .as_object_mut()
                            .map(|m| m.remove("resourceVersion"));
                        apply_patch(*t, "autoscaling/v1", "Scale", base, body.clone())
                            .map_err(|e| ApiError::bad_request(e.to_string()))?
                    }
                    ScaleChange::Replace(body) => body.clone(),
                };
                let n = checked_replicas(name, &scale["spec"]["replicas"])?;
                let mut next = current.clone();
                view.set_replicas(&mut next, n);
                fields.track(Some(current), &mut next);
                let rv = scale["metadata"]["resourceVersion"]
                    .as_str()
                    .filter(|s| !s.is_empty());
                let meta = meta::metadata(&mut next);
                match rv {
                    Some(rv) => meta.insert("resourceVersion".into(), json!(rv)),
                    None => meta.remove("resourceVersion"),
                };
                Ok(next)
            })
            .await?;
        let object = match updated {
            Updated::Stored(o) | Updated::Deleted(o) => o,
        };
        Ok(view.scale_of(&object))
    }
}

/// A `Scale`'s `spec.replicas` (absent: 0), or the 422 kube-apiserver answers.
fn checked_replicas(name: &str, replicas: &Value) -> Result<i64, ApiError> {
    let invalid = |detail: &str| {
        ApiError::invalid(
            "Scale",
            "autoscaling",
            name,
            vec![Cause::invalid("spec.replicas", replicas, detail)],
        )
    };
    let n = match replicas.as_i64() {
        Some(n) => n,
        None if replicas.is_null() => 0,
        None => return Err(invalid("must be an integer")),
    };
    if n < 0 {
        return Err(invalid("must be greater than or equal to 0"));
    }
    Ok(n)
}
