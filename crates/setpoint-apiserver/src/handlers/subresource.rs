//! Subresources: `status` (spec and status written separately), `scale` (an
//! `autoscaling/v1 Scale` view of `spec.replicas`), `pods/binding` (what a scheduler posts),
//! `namespaces/finalize`, `pods/log`, and `pods/eviction` (in `eviction.rs`).

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{apply_patch, success_status, ApiError};

use super::read::{read_object, respond_object};
use super::response::{self, Body};
use super::update::{self, respond_updated};
use super::write::decode_body;
use super::Ctx;
use crate::registry::meta::{self, meta_str};
use crate::registry::store::{Scope, Updated};
use crate::registry::ResourceDef;
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
        ("scale", Verb::Get) => {
            let o = read_object(ctx).await?;
            Ok(response::json(StatusCode::OK, &scale_of(ctx.def, &o)?))
        }
        ("scale", Verb::Update | Verb::Patch) => scale_write(ctx).await,
        ("binding", Verb::Create) => binding(ctx).await,
        ("eviction", Verb::Create) => super::eviction::evict(ctx).await,
        ("finalize", Verb::Update) => finalize(ctx).await,
        ("log", Verb::Get) => super::pod_log::pod_log(ctx).await,
        _ => Err(not_allowed()),
    }
}

/// The `Scale` view of an object (a resource with a `scale` subresource has one).
fn scale_of(def: &ResourceDef, o: &Value) -> Result<Value, ApiError> {
    def.strategy
        .scale()
        .map(|view| view.scale_of(o))
        .ok_or_else(|| ApiError::internal("the resource has no scale view"))
}

/// PUT or PATCH of `scale`: changes the parent's `spec.replicas`.
async fn scale_write(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let patch = if ctx.req.verb == Verb::Patch {
        let patch_type = update::patch_type(&ctx.content_type)?;
        let body: Value = serde_json::from_slice(&ctx.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        Some((patch_type, body))
    } else {
        None
    };
    let put = if patch.is_none() {
        Some(decode_body(ctx)?)
    } else {
        None
    };
    let updated = ctx
        .store
        .update(
            ctx.req.namespace.as_deref(),
            ctx.name(),
            Scope::Main,
            ctx.dry_run()?,
            &|current| {
                let scale = match (&patch, &put) {
                    (Some((t, body)), _) => {
                        let mut base = scale_of(ctx.def, current)?;
                        base["metadata"]
                            .as_object_mut()
                            .map(|m| m.remove("resourceVersion"));
                        apply_patch(*t, "autoscaling/v1", "Scale", base, body.clone())
                            .map_err(|e| ApiError::bad_request(e.to_string()))?
                    }
                    (None, Some(body)) => body.clone(),
                    (None, None) => unreachable!("one of them is set"),
                };
                let replicas = &scale["spec"]["replicas"];
                let Some(n) = replicas
                    .as_i64()
                    .or(if replicas.is_null() { Some(0) } else { None })
                else {
                    return Err(ApiError::invalid(
                        "Scale",
                        "autoscaling",
                        ctx.name(),
                        vec![setpoint_core::Cause::invalid(
                            "spec.replicas",
                            replicas,
                            "must be an integer",
                        )],
                    ));
                };
                if n < 0 {
                    return Err(ApiError::invalid(
                        "Scale",
                        "autoscaling",
                        ctx.name(),
                        vec![setpoint_core::Cause::invalid(
                            "spec.replicas",
                            replicas,
                            "must be greater than or equal to 0",
                        )],
                    ));
                }
                let mut next = current.clone();
                let view = ctx
                    .def
                    .strategy
                    .scale()
                    .ok_or_else(|| ApiError::internal("the resource has no scale view"))?;
                view.set_replicas(&mut next, n);
                let rv = scale["metadata"]["resourceVersion"]
                    .as_str()
                    .filter(|s| !s.is_empty());
                let meta = meta::metadata(&mut next);
                match rv {
                    Some(rv) => meta.insert("resourceVersion".into(), json!(rv)),
                    None => meta.remove("resourceVersion"),
                };
                Ok(next)
            },
        )
        .await?;
    let object = match updated {
        Updated::Stored(o) | Updated::Deleted(o) => o,
    };
    Ok(response::json(StatusCode::OK, &scale_of(ctx.def, &object)?))
}

/// POST `pods/{name}/binding`: assigns the pod to a node, once.
async fn binding(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let body = decode_body(ctx)?;
    let node = body["target"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError::invalid(
                "Binding",
                "",
                ctx.name(),
                vec![setpoint_core::Cause::required("target.name")],
            )
        })?;
    let updated = ctx.store.update(
        ctx.req.namespace.as_deref(),
        ctx.name(),
        Scope::Full,
        ctx.dry_run()?,
        &|current| {
            if let Some(existing) = current["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    &ctx.gr(),
                    ctx.name(),
                    &format!("pod {} is already assigned to node {existing:?}", ctx.name()),
                ));
            }
            if !current["metadata"]["deletionTimestamp"].is_null() {
                return Err(ApiError::conflict(&ctx.gr(), ctx.name(), "pod is being deleted, cannot be assigned to a host"));
            }
            let mut next = current.clone();
            next["spec"]["nodeName"] = json!(node);
            meta::metadata(&mut next).remove("resourceVersion");
            let conditions = next["status"]["conditions"].as_array().cloned().unwrap_or_default();
            let mut conditions: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
            conditions.push(json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": meta::now(), "lastProbeTime": null}));
            next["status"]["conditions"] = json!(conditions);
            Ok(next)
        },
    )
    .await?;
    let uid = match &updated {
        Updated::Stored(o) | Updated::Deleted(o) => {
            meta_str(o, "uid").unwrap_or_default().to_owned()
        }
    };
    let mut status = success_status(&ctx.gr(), ctx.name(), &uid);
    status["code"] = json!(201);
    Ok(response::json(StatusCode::CREATED, &status))
}

/// PUT `namespaces/{name}/finalize`: replaces `spec.finalizers`; a terminating namespace
/// whose finalizers are all gone is removed.
async fn finalize(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let body = decode_body(ctx)?;
    let finalizers = body["spec"]["finalizers"].clone();
    let name = ctx.name().to_owned();
    let updated = ctx
        .store
        .update(None, &name, Scope::Full, ctx.dry_run()?, &|current| {
            let mut next = current.clone();
            next["spec"]["finalizers"] = if finalizers.is_null() {
                json!([])
            } else {
                finalizers.clone()
            };
            meta::metadata(&mut next).remove("resourceVersion");
            Ok(next)
        })
        .await?;
    let done = match &updated {
        Updated::Stored(o) => {
            !o["metadata"]["deletionTimestamp"].is_null()
                && o["spec"]["finalizers"].as_array().is_none_or(Vec::is_empty)
                && meta::finalizers(o).is_empty()
        }
        Updated::Deleted(_) => false,
    };
    if done && !ctx.dry_run()? {
        let rv = match &updated {
            Updated::Stored(o) => meta_str(o, "resourceVersion").and_then(|r| r.parse().ok()),
            Updated::Deleted(_) => None,
        };
        ctx.store.remove(None, &name, rv).await?;
    }
    Ok(respond_updated(ctx, updated, &[]))
}
