//! Server-side apply: `PATCH` with `application/apply-patch+yaml` (a YAML or JSON object, the
//! manager's whole intent for the object). Updates the object if it exists, else creates it
//! (`201`); `fieldManager` is required, `force=true` takes over conflicting fields.

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::fieldpath::Operation;
use setpoint_core::{ApiError, Cause, Reason};

use super::super::read::respond_object;
use super::super::response::Body;
use super::super::write::{field_validation, typed, with_warnings};
use super::super::Ctx;
use super::respond_updated;
use crate::registry::managed_fields::{field_manager_causes, FieldManager};
use crate::registry::meta;
use crate::registry::store::Scope;

/// The media type of an apply patch.
pub(super) const MEDIA_TYPE: &str = "application/apply-patch+yaml";

/// How many times an apply that lost a race (created meanwhile, or deleted meanwhile) is
/// tried again.
const ATTEMPTS: usize = 3;

/// What an apply request asks: its manager (`fieldManager`, required), whether it forces, and
/// the configuration applied.
pub(crate) struct ApplyRequest {
    pub(crate) manager: String,
    pub(crate) force: bool,
    pub(crate) config: Value,
}

impl ApplyRequest {
    /// Reads and checks an apply request (422 `PatchOptions` without a valid `fieldManager`,
    /// 400 for a bad `force` or body).
    pub(crate) fn of(ctx: &Ctx<'_>) -> Result<ApplyRequest, ApiError> {
        let manager = ctx
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                patch_options_invalid(vec![Cause::new(
                    "FieldValueRequired",
                    "fieldManager",
                    "fieldManager: Required value: is required for apply patch",
                )])
            })?;
        let causes = field_manager_causes(manager);
        if !causes.is_empty() {
            return Err(patch_options_invalid(causes));
        }
        let force = match ctx.query.get("force").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "force: invalid value {other:?}: must be true or false"
                )))
            }
        };
        Ok(ApplyRequest {
            manager: manager.clone(),
            force,
            config: configuration(ctx)?,
        })
    }
}

/// Applies the configuration in the request body.
pub(super) async fn apply(ctx: &Ctx<'_>, scope: Scope) -> Result<Response<Body>, ApiError> {
    let ApplyRequest {
        manager,
        force,
        config,
    } = ApplyRequest::of(ctx)?;
    let validation = field_validation(ctx)?;
    let fields =
        FieldManager::new(ctx.def, manager, Operation::Apply, scope).across(ctx.other_versions());
    let dry_run = ctx.dry_run()?;
    let namespace = ctx.req.namespace.as_deref();
    let warnings = std::sync::Mutex::new(Vec::new());
    let applied = |current: Option<&Value>| -> Result<Value, ApiError> {
        let mut new = fields.apply(current, &config, force)?;
        if config["metadata"]["resourceVersion"].is_null() {
            meta::metadata(&mut new).remove("resourceVersion");
        }
        let (typed, w) = typed(ctx.def, new, validation)?;
        *warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = w;
        Ok(typed)
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let updated = ctx
            .store
            .update(namespace, ctx.name(), scope, dry_run, &|current| {
                applied(Some(current))
            })
            .await;
        let warnings = || {
            std::mem::take(
                &mut *warnings
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            )
        };
        match updated {
            Ok(updated) => return Ok(respond_updated(ctx, updated, &warnings())),
            Err(e) if e.reason == Reason::NotFound && scope == Scope::Main => {}
            Err(e) => return Err(e),
        }
        let mut object = applied(None)?;
        {
            let meta = meta::metadata(&mut object);
            meta.insert("name".into(), json!(ctx.name()));
            if let Some(ns) = namespace {
                meta.entry("namespace").or_insert_with(|| json!(ns));
            }
        }
        match ctx.store.create(namespace, object, dry_run).await {
            Ok(created) => {
                return Ok(with_warnings(
                    respond_object(ctx.def, &created, ctx.accept, StatusCode::CREATED),
                    &warnings(),
                ))
            }
            Err(e) if e.reason == Reason::AlreadyExists && attempt < ATTEMPTS => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The applied configuration: a YAML (or JSON) object naming its `apiVersion` and `kind`.
fn configuration(ctx: &Ctx<'_>) -> Result<Value, ApiError> {
    let config: Value = match serde_json::from_slice(&ctx.body) {
        Ok(v) => v,
        Err(_) => serde_yaml_ng::from_slice(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
    };
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "an apply configuration must be an object",
        ));
    }
    for field in ["apiVersion", "kind"] {
        if !config[field].is_string() {
            return Err(ApiError::bad_request(format!(
                "Object '{}' is missing in the apply configuration",
                if field == "kind" {
                    "Kind"
                } else {
                    "apiVersion"
                }
            )));
        }
    }
    Ok(config)
}

fn patch_options_invalid(causes: Vec<Cause>) -> ApiError {
    ApiError::invalid("PatchOptions", "meta.k8s.io", "", causes)
}
