//! Subresources: `status` (spec and status written separately; a CertificateSigningRequest's
//! `approval` writes its status the same way), `scale` (an
//! `autoscaling/v1 Scale` view of the replicas, also server-side applied), `pods/binding` (what a scheduler posts; a
//! core `Binding` posted to `bindings` does the same),
//! `namespaces/finalize`, `pods/log`, and `pods/eviction` (in `eviction.rs`). Each is decoded
//! here and stored by the registry (`registry/store/scale.rs`, `registry/kinds/pod/`,
//! `registry/kinds/namespace/`).

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::fieldpath::Operation;
use setpoint_core::{success_status, ApiError};

use super::read::{read_object, respond_object};
use super::response::{self, Body};
use super::update::apply::ApplyRequest;
use super::update::{self, respond_updated};
use super::write::{decode_body, typed, FieldValidation};
use super::Ctx;
use crate::registry::managed_fields::FieldManager;
use crate::registry::store::{ScaleChange, Scope};
use crate::registry::{bind_pod, finalize_namespace};
use crate::request_info::Verb;

/// Dispatches a subresource request.
pub(crate) async fn handle(ctx: &Ctx<'_>, sub: &str) -> Result<Response<Body>, ApiError> {
    let not_allowed = || ApiError::method_not_supported(&ctx.gr(), ctx.req.verb.as_str());
    match (sub, ctx.req.verb) {
        ("status", Verb::Get) => {
            let o = read_object(ctx).await?;
            Ok(respond_object(ctx.def, &o, ctx.accept, StatusCode::OK))
        }
        ("status", Verb::Update) => update::update_scoped(ctx, Scope::Status).await,
        ("status", Verb::Patch) => update::patch_scoped(ctx, Scope::Status).await,
        // A CertificateSigningRequest's approval conditions live in its status.
        ("approval", Verb::Get) => {
            let o = read_object(ctx).await?;
            Ok(respond_object(ctx.def, &o, ctx.accept, StatusCode::OK))
        }
        ("approval", Verb::Update) => update::update_scoped(ctx, Scope::Status).await,
        ("approval", Verb::Patch) => update::patch_scoped(ctx, Scope::Status).await,
        ("scale", Verb::Get) => {
            let scale = ctx
                .store
                .get_scale(ctx.req.namespace.as_deref(), ctx.name())
                .await?;
            Ok(response::json(StatusCode::OK, &scale))
        }
        ("scale", Verb::Update | Verb::Patch) => scale_write(ctx).await,
        ("binding", Verb::Create) => binding(ctx).await,
        ("eviction", Verb::Create) => super::eviction::evict(ctx).await,
        ("token", Verb::Create) => super::token_request::create(ctx).await,
        ("finalize", Verb::Update) => finalize(ctx).await,
        ("log", Verb::Get) => super::pod_log::pod_log(ctx).await,
        _ => Err(not_allowed()),
    }
}

/// PUT or PATCH of `scale`: changes the parent's replicas. An apply patch applies a `Scale`:
/// its manager comes to own the parent's replicas, conflicting with their other owners.
async fn scale_write(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let (change, fields) = if ctx.req.verb == Verb::Patch && update::is_apply(&ctx.content_type) {
        let apply = ApplyRequest::of(ctx)?;
        let fields = FieldManager::new(ctx.def, apply.manager, Operation::Apply, Scope::Main)
            .on_subresource("scale");
        (
            ScaleChange::Apply {
                config: apply.config,
                force: apply.force,
            },
            fields,
        )
    } else if ctx.req.verb == Verb::Patch {
        let patch_type = update::patch_type(
            &ctx.content_type,
            ctx.def.strategy.accepts_strategic_merge(),
        )?;
        let body: Value = serde_json::from_slice(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        let fields = ctx
            .field_manager(Scope::Main, "PatchOptions")?
            .on_subresource("scale");
        (ScaleChange::Patch(patch_type, body), fields)
    } else {
        let fields = ctx
            .field_manager(Scope::Main, "UpdateOptions")?
            .on_subresource("scale");
        (ScaleChange::Replace(decode_body(ctx)?), fields)
    };
    let scale = ctx
        .store
        .update_scale(
            ctx.req.namespace.as_deref(),
            ctx.name(),
            &change,
            ctx.dry_run()?,
            &fields,
        )
        .await?;
    Ok(response::json(StatusCode::OK, &scale))
}

/// POST `pods/{name}/binding`: assigns the pod to a node, once.
async fn binding(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let body = decode_body(ctx)?;
    let uid = bind_pod(
        ctx.store,
        ctx.req.namespace.as_deref(),
        ctx.name(),
        &body,
        ctx.dry_run()?,
    )
    .await?;
    let mut status = success_status(&ctx.gr(), ctx.name(), &uid);
    status["code"] = json!(201);
    Ok(response::json(StatusCode::CREATED, &status))
}

/// POST of a core/v1 `Binding` to `bindings`: binds the pod the binding names, as
/// `pods/binding` does.
pub(crate) async fn bind_named(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    if ctx.req.name.is_some() {
        return Err(ApiError::method_not_supported(&ctx.gr(), "create"));
    }
    let (body, _) = typed(ctx.def, decode_body(ctx)?, FieldValidation::Ignore)?;
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let causes = ctx.def.strategy.validate(&body, None).await;
    if !causes.is_empty() {
        return Err(ApiError::invalid("Binding", "", &name, causes));
    }
    let pods = ctx.api.registry_store_of("", "v1", "pods")?;
    let uid = bind_pod(
        &pods,
        ctx.req.namespace.as_deref(),
        &name,
        &body,
        ctx.dry_run()?,
    )
    .await?;
    let mut status = success_status(&pods.def.group_resource(), &name, &uid);
    status["code"] = json!(201);
    Ok(response::json(StatusCode::CREATED, &status))
}

/// PUT `namespaces/{name}/finalize`: replaces `spec.finalizers`; a terminating namespace
/// whose finalizers are all gone is removed.
async fn finalize(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let body = decode_body(ctx)?;
    let updated = finalize_namespace(
        ctx.store,
        ctx.name(),
        &body["spec"]["finalizers"],
        ctx.dry_run()?,
    )
    .await?;
    Ok(respond_updated(ctx, updated, &[]))
}
