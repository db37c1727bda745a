//! PUT and PATCH of an object (and of its `status`): decode, type-check, then the registry
//! store's guaranteed update; answer with the stored object.

use http::{Response, StatusCode};
use serde_json::Value;
use setpoint_core::{apply_patch, ApiError, Cause, PatchErrorKind, PatchType, Reason};

pub(crate) mod apply;

use super::read::respond_object;
use super::response::Body;
use super::write::{decode_body, field_validation, typed, with_warnings};
use super::Ctx;
use crate::registry::meta;
use crate::registry::store::{Scope, Updated};

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
    let manager = ctx.field_manager(scope, "UpdateOptions")?;
    let (object, warnings) = typed(ctx.def, decode_body(ctx)?, validation)?;
    let updated = ctx
        .store
        .update(
            ctx.req.namespace.as_deref(),
            ctx.name(),
            scope,
            ctx.dry_run()?,
            &|current| {
                let mut new = object.clone();
                manager.track(Some(current), &mut new);
                Ok(new)
            },
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
    if is_apply(&ctx.content_type) {
        return apply::apply(ctx, scope).await;
    }
    let patch_type = patch_type(
        &ctx.content_type,
        ctx.def.strategy.accepts_strategic_merge(),
    )?;
    if ctx.query.contains_key("force") {
        return Err(ApiError::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            vec![Cause::new(
                "FieldValueForbidden",
                "force",
                "force: Forbidden: may not be specified for non-apply patch",
            )],
        ));
    }
    let manager = ctx.field_manager(scope, "PatchOptions")?;
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
    let updated = ctx
        .store
        .update(
            ctx.req.namespace.as_deref(),
            ctx.name(),
            scope,
            ctx.dry_run()?,
            &|current| {
                let mut base = current.clone();
                meta::metadata(&mut base).remove("resourceVersion");
                let patched = apply_patch(patch_type, &av, &ctx.def.gvk.kind, base, patch.clone())
                    .map_err(patch_error)?;
                let (mut typed, w) = typed(ctx.def, patched, validation)?;
                manager.track(Some(current), &mut typed);
                *warnings.lock().expect("not poisoned") = w;
                Ok(typed)
            },
        )
        .await?;
    let warnings = warnings.into_inner().expect("not poisoned");
    Ok(respond_updated(ctx, updated, &warnings))
}

/// Whether a request's content type is a server-side apply patch.
pub(crate) fn is_apply(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    media_type == apply::MEDIA_TYPE
}

/// The patch type of a request's content type (apply patches are handled before), or 415
/// naming the patch types accepted (strategic merge only by kinds that accept it), as
/// kube-apiserver words it. `application/apply-patch+cbor` is refused so: Setpoint does not
/// serve CBOR, as kube-apiserver without its CBOR feature gate.
pub(crate) fn patch_type(content_type: &str, strategic: bool) -> Result<PatchType, ApiError> {
    PatchType::from_content_type(content_type).ok_or_else(|| {
        let mut accepted = vec![PatchType::Json.content_type(), PatchType::Merge.content_type()];
        if strategic {
            accepted.push(PatchType::StrategicMerge.content_type());
        }
        accepted.push(apply::MEDIA_TYPE);
        ApiError::new(
            Reason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    })
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
