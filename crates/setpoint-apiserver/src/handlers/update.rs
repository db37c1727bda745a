//! Updates: the read-modify-write loop every PUT, PATCH and server-made change goes through
//! ([`guaranteed_update`]): read the object, compute its new state, keep what the client may
//! not change, apply the kind's defaults, bump `generation` on a spec change, validate, then
//! write conditionally on the revision read — retried on conflict unless the client named a
//! `resourceVersion`, which then must match (else 409).

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{apply_patch, ApiError, Cause, PatchErrorKind, PatchType, Reason, Revision};
use setpoint_store::StoreError;

use super::meta::{self, meta_str};
use super::read::respond_object;
use super::response::Body;
use super::write::{
    decode_body, field_validation, invalid, store_error_for, store_error_plain, typed,
    with_warnings,
};
use super::{Api, Ctx};
use crate::registry::ResourceDef;

/// What an update may touch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource: status changes are ignored where the kind has a status subresource.
    Main,
    /// The status subresource: only status changes.
    Status,
    /// A change the server makes itself (marking for deletion): nothing is masked.
    Full,
}

/// The outcome of an update.
pub(crate) enum Updated {
    /// The object as stored now.
    Stored(Value),
    /// The update removed the last finalizer of an object being deleted: it is gone.
    Deleted(Value),
}

/// Reads the object, computes its new state with `change`, and writes it conditionally;
/// retries on a conflict unless the new state carries the client's own resource version.
pub(crate) async fn guaranteed_update(
    api: &Api,
    def: &ResourceDef,
    namespace: Option<&str>,
    name: &str,
    scope: Scope,
    dry_run: bool,
    change: &(dyn Fn(&Value) -> Result<Value, ApiError> + Sync),
) -> Result<Updated, ApiError> {
    let key = def.key(namespace, name);
    let gr = def.group_resource();
    loop {
        let kv = api
            .store
            .get(key.as_bytes())
            .await
            .map_err(store_error_plain)?
            .ok_or_else(|| ApiError::not_found(&gr, name))?;
        let stored: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("stored object does not decode: {e}")))?;
        let mut current = def.served_from_storage(stored);
        let rv = kv.mod_revision.to_string();
        meta::metadata(&mut current).insert("resourceVersion".into(), json!(rv));
        let mut new = change(&current)?;
        let precondition = meta_str(&new, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if let Some(p) = &precondition {
            if p.parse::<Revision>().is_err() {
                return Err(ApiError::bad_request(format!(
                    "invalid resource version {p:?}"
                )));
            }
            if *p != rv {
                return Err(ApiError::modified(&gr, name));
            }
        }
        // An update or patch may not move an object: kube-apiserver refuses a namespace that
        // differs from the request's (an empty one defaults to it; cluster-scoped objects
        // have theirs cleared) before it checks the name.
        if let Some(ns) = namespace {
            if meta_str(&new, "namespace").is_some_and(|n| !n.is_empty() && n != ns) {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        if meta_str(&new, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&new, "name").unwrap_or_default()
            )));
        }
        meta::keep_system_fields(&mut new, &current, scope == Scope::Full);
        {
            let meta = meta::metadata(&mut new);
            meta.insert("name".into(), json!(name));
            match namespace {
                Some(ns) => meta.insert("namespace".into(), json!(ns)),
                None => meta.remove("namespace"),
            };
        }
        match scope {
            Scope::Main if def.has_status() => new["status"] = current["status"].clone(),
            Scope::Main | Scope::Full => {}
            Scope::Status => {
                let status = new["status"].clone();
                let labels = new["metadata"]["labels"].clone();
                let annotations = new["metadata"]["annotations"].clone();
                new = current.clone();
                new["status"] = status;
                let meta = meta::metadata(&mut new);
                meta.remove("resourceVersion");
                for (field, value) in [("labels", labels), ("annotations", annotations)] {
                    if value.is_null() {
                        meta.remove(field);
                    } else {
                        meta.insert(field.into(), value);
                    }
                }
            }
        }
        if let Some(map) = new.as_object_mut() {
            if map.get("status").is_some_and(Value::is_null) {
                map.remove("status");
            }
        }
        def.prepare_update(&mut new, &current);
        if def.generation_changed(&new, &current) {
            let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
            meta::metadata(&mut new).insert("generation".into(), json!(g + 1));
        }
        // A change the server makes itself (binding a pod, marking for deletion) is trusted
        // past the rules that stop clients changing immutable fields: `pods/binding` sets
        // `spec.nodeName`, which no client update may.
        let old = (scope != Scope::Full).then_some(&current);
        let mut causes = def.validate(&new, old).await;
        let old_finalizers = meta::finalizers(&current);
        let new_finalizers = meta::finalizers(&new);
        let deleting = !current["metadata"]["deletionTimestamp"].is_null();
        if deleting && new_finalizers.iter().any(|f| !old_finalizers.contains(f)) {
            causes.push(Cause::forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted",
            ));
        }
        if !causes.is_empty() {
            return Err(invalid(def, name, causes));
        }
        let mut unchanged = current.clone();
        meta::metadata(&mut unchanged).remove("resourceVersion");
        if new == unchanged {
            return Ok(Updated::Stored(current));
        }
        if dry_run {
            // Nothing was written, so the object is still at the version read; kube-apiserver
            // answers a dry-run update with it (`kubectl diff` compares it to the live one).
            meta::metadata(&mut new).insert("resourceVersion".into(), json!(rv));
            return Ok(Updated::Stored(new));
        }
        // A namespace is held by its `spec.finalizers` too (the namespace controller's
        // `kubernetes`, removed through `finalize`), as kube-apiserver's namespace storage does.
        let held_by_spec = def.strategy.held(&new);
        if deleting && new_finalizers.is_empty() && !held_by_spec {
            match api
                .store
                .delete(Bytes::from(key.clone()), Some(kv.mod_revision))
                .await
            {
                Ok(event) => {
                    meta::metadata(&mut new).insert(
                        "resourceVersion".into(),
                        json!(event.revision().to_string()),
                    );
                    return Ok(Updated::Deleted(new));
                }
                Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
                Err(e) => return Err(store_error_for(def, name, e)),
            }
        }
        let stored = def.to_storage(new.clone());
        let bytes = Bytes::from(serde_json::to_vec(&stored).expect("serializes"));
        match api
            .store
            .update(Bytes::from(key.clone()), bytes, Some(kv.mod_revision))
            .await
        {
            Ok(stored) => {
                meta::metadata(&mut new).insert(
                    "resourceVersion".into(),
                    json!(stored.mod_revision.to_string()),
                );
                return Ok(Updated::Stored(new));
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(e) => return Err(store_error_for(def, name, e)),
        }
    }
}

/// Answers an update's outcome.
pub(crate) fn respond_updated(
    ctx: &Ctx<'_>,
    updated: Updated,
    warnings: &[String],
) -> Response<Body> {
    let object = match updated {
        Updated::Stored(o) | Updated::Deleted(o) => o,
    };
    with_warnings(
        respond_object(ctx.def, &object, ctx.accept, StatusCode::OK),
        warnings,
    )
}

/// PUT: replaces the object (status excepted, where the kind has a status subresource).
pub(crate) async fn update(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    update_scoped(ctx, Scope::Main).await
}

/// PUT on the main resource or the status subresource.
pub(crate) async fn update_scoped(ctx: &Ctx<'_>, scope: Scope) -> Result<Response<Body>, ApiError> {
    let validation = field_validation(ctx)?;
    let (object, warnings) = typed(ctx.def, decode_body(ctx)?, validation)?;
    let updated = guaranteed_update(
        ctx.api,
        ctx.def,
        ctx.req.namespace.as_deref(),
        ctx.name(),
        scope,
        ctx.dry_run()?,
        &|_current| Ok(object.clone()),
    )
    .await?;
    Ok(respond_updated(ctx, updated, &warnings))
}

/// PATCH: applies a JSON, merge or strategic merge patch to the stored object.
pub(crate) async fn patch(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    patch_scoped(ctx, Scope::Main).await
}

/// PATCH on the main resource or the status subresource.
pub(crate) async fn patch_scoped(ctx: &Ctx<'_>, scope: Scope) -> Result<Response<Body>, ApiError> {
    let patch_type = patch_type(&ctx.content_type)?;
    if !ctx.def.strategy.accepts_strategic_merge() && patch_type == PatchType::StrategicMerge {
        // Custom resources have no patch strategies, so kube-apiserver refuses these.
        return Err(ApiError::new(
            Reason::UnsupportedMediaType,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let patch: Value = serde_json::from_slice(&ctx.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let validation = field_validation(ctx)?;
    let warnings = std::sync::Mutex::new(Vec::new());
    let av = ctx.def.gvk.api_version();
    let updated = guaranteed_update(
        ctx.api,
        ctx.def,
        ctx.req.namespace.as_deref(),
        ctx.name(),
        scope,
        ctx.dry_run()?,
        &|current| {
            let mut base = current.clone();
            meta::metadata(&mut base).remove("resourceVersion");
            let patched = apply_patch(patch_type, &av, &ctx.def.gvk.kind, base, patch.clone())
                .map_err(patch_error)?;
            let (typed, w) = typed(ctx.def, patched, validation)?;
            *warnings.lock().expect("not poisoned") = w;
            Ok(typed)
        },
    )
    .await?;
    let warnings = warnings.into_inner().expect("not poisoned");
    Ok(respond_updated(ctx, updated, &warnings))
}

/// The patch type of a request's content type; apply patches are refused for now.
pub(crate) fn patch_type(content_type: &str) -> Result<PatchType, ApiError> {
    if content_type.starts_with("application/apply-patch") {
        return Err(ApiError::new(
            Reason::UnsupportedMediaType,
            "server-side apply (application/apply-patch+yaml) is not supported by this server yet: use client-side `kubectl apply`, or a JSON, merge or strategic merge patch",
        ));
    }
    PatchType::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(content_type))
}

fn patch_error(e: setpoint_core::PatchError) -> ApiError {
    match e.kind() {
        PatchErrorKind::BadRequest => ApiError::bad_request(e.to_string()),
        PatchErrorKind::Invalid => {
            ApiError::new(Reason::Invalid, setpoint_core::INVALID_PATCH_MESSAGE)
        }
        PatchErrorKind::RequestEntityTooLarge => ApiError::new(
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: {e}"),
        ),
        PatchErrorKind::UnsupportedMediaType => {
            ApiError::new(Reason::UnsupportedMediaType, e.to_string())
        }
        // kube-apiserver answers these strategic-merge failures (a list element without its
        // merge key, an unknown `$patch` directive, …) with 500; they are the client's mistake,
        // so Setpoint says so with a 400.
        PatchErrorKind::Internal => ApiError::bad_request(e.to_string()),
    }
}
