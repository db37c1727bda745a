//! DELETE and DELETECOLLECTION, with kube-apiserver's two-phase deletion: an object with
//! finalizers (or deleted with `Foreground`/`Orphan` propagation, which add theirs) is only
//! marked with `deletionTimestamp`; a scheduled pod is deleted gracefully (marked, for its node
//! to stop it); a namespace becomes `Terminating`. Everything else goes at once.

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{success_status, ApiError, Revision};
use setpoint_store::StoreError;

use super::meta::{self, meta_str};
use super::params::ListOptions;
use super::read::{read_object, respond_object};
use super::response::{self, Body};
use super::update::{guaranteed_update, Scope, Updated};
use super::write::{decode_body, store_error};
use super::Ctx;
use crate::registry::strategy::Kind;

/// The parts of `DeleteOptions` that matter here.
#[derive(Default)]
struct DeleteOptions {
    grace_period: Option<i64>,
    propagation: Option<String>,
    precondition_uid: Option<String>,
    precondition_rv: Option<String>,
}

fn delete_options(ctx: &Ctx<'_>) -> Result<DeleteOptions, ApiError> {
    // client-go's typed clients (`kubectl drain`) send the body as Kubernetes protobuf.
    let body = if ctx.body.is_empty() {
        Value::Null
    } else {
        decode_body(ctx)?
    };
    let mut o = options_from_body(&body);
    if let Some(g) = ctx.query.get("gracePeriodSeconds") {
        o.grace_period = Some(
            g.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        );
    }
    if let Some(p) = ctx.query.get("propagationPolicy") {
        o.propagation = Some(p.clone());
    }
    checked(o)
}

/// The options a `DeleteOptions` object (a DELETE's body, an `Eviction`'s `deleteOptions`)
/// sets; `null` sets none.
fn options_from_body(body: &Value) -> DeleteOptions {
    let mut o = DeleteOptions {
        grace_period: body["gracePeriodSeconds"].as_i64(),
        propagation: body["propagationPolicy"].as_str().map(str::to_owned),
        precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_owned),
        precondition_rv: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_owned),
    };
    if body["orphanDependents"] == json!(true) && o.propagation.is_none() {
        o.propagation = Some("Orphan".into());
    }
    o
}

/// Refuses a propagation policy kube-apiserver does not know.
fn checked(o: DeleteOptions) -> Result<DeleteOptions, ApiError> {
    match o.propagation.as_deref() {
        None | Some("Background" | "Foreground" | "Orphan") => Ok(o),
        Some(other) => Err(ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            vec![setpoint_core::Cause::not_supported(
                "propagationPolicy",
                &json!(other),
                &["Foreground", "Background", "Orphan", "nil"],
            )],
        )),
    }
}

/// Deletes the pod a `pods/{name}/eviction` request names, with the eviction's
/// `deleteOptions` (`null` for none).
pub(crate) async fn evict(
    ctx: &Ctx<'_>,
    delete_options: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let options = checked(options_from_body(delete_options))?;
    let current = read_object(ctx).await?;
    delete_one(ctx, current, &options, dry_run).await.map(drop)
}

/// DELETE one object.
pub(crate) async fn delete(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = delete_options(ctx)?;
    let dry_run = ctx.dry_run()?;
    let current = read_object(ctx).await?;
    delete_one(ctx, current, &options, dry_run).await
}

async fn delete_one(
    ctx: &Ctx<'_>,
    current: Value,
    options: &DeleteOptions,
    dry_run: bool,
) -> Result<Response<Body>, ApiError> {
    let name = meta_str(&current, "name").unwrap_or_default().to_owned();
    let uid = meta_str(&current, "uid").unwrap_or_default().to_owned();
    let rv = meta_str(&current, "resourceVersion")
        .unwrap_or_default()
        .to_owned();
    if options.precondition_uid.as_ref().is_some_and(|u| *u != uid) {
        return Err(ApiError::conflict(
            &ctx.gr(),
            &name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {uid}",
                options.precondition_uid.as_deref().unwrap_or_default()
            ),
        ));
    }
    if options.precondition_rv.as_ref().is_some_and(|r| *r != rv) {
        return Err(ApiError::conflict(
            &ctx.gr(),
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {rv}",
                options.precondition_rv.as_deref().unwrap_or_default()
            ),
        ));
    }

    let kind = ctx.def.strategy;
    let mut add_finalizer = match options.propagation.as_deref() {
        Some("Foreground") => Some("foregroundDeletion"),
        Some("Orphan") => Some("orphan"),
        _ => None,
    };
    let graceful_pod = kind == Kind::Pod
        && current["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        && options
            .grace_period
            .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            > 0;
    if kind == Kind::Namespace {
        add_finalizer = None; // the namespace's own spec.finalizers hold it
    }
    if kind == Kind::CustomResourceDefinition {
        // Held until the CRD controller has deleted every object of the resource.
        add_finalizer = Some(crate::crd::controller::CLEANUP_FINALIZER);
    }
    let has_finalizers = !meta::finalizers(&current).is_empty()
        || (kind == Kind::Namespace
            && current["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty()));
    let mark = has_finalizers || add_finalizer.is_some() || graceful_pod;

    if !mark {
        if dry_run {
            return Ok(deleted_response(ctx, &current, &uid));
        }
        let expected = rv.parse::<Revision>().ok();
        return match ctx
            .api
            .store
            .delete(
                Bytes::from(ctx.def.key(ctx.req.namespace.as_deref(), &name)),
                expected,
            )
            .await
        {
            Ok(event) => {
                let mut gone = current;
                meta::metadata(&mut gone).insert(
                    "resourceVersion".into(),
                    json!(event.revision().to_string()),
                );
                Ok(deleted_response(ctx, &gone, &uid))
            }
            Err(StoreError::Conflict { .. }) => {
                // Changed since we read it: decide again on the new state.
                let fresh = read_object(ctx).await?;
                Box::pin(delete_one(ctx, fresh, options, dry_run)).await
            }
            Err(e) => Err(store_error(ctx, e)),
        };
    }

    let grace = options.grace_period;
    let updated = guaranteed_update(
        ctx.api,
        ctx.def,
        ctx.req.namespace.as_deref(),
        &name,
        Scope::Full,
        dry_run,
        &|current| {
            let mut next = current.clone();
            let already = !current["metadata"]["deletionTimestamp"].is_null();
            {
                let meta = meta::metadata(&mut next);
                meta.remove("resourceVersion");
                if !already {
                    let seconds = if graceful_pod {
                        grace
                            .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
                            .unwrap_or(30)
                    } else {
                        0
                    };
                    let at = chrono::Utc::now() + chrono::Duration::seconds(seconds);
                    meta.insert(
                        "deletionTimestamp".into(),
                        json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                    );
                    meta.insert("deletionGracePeriodSeconds".into(), json!(seconds));
                }
                if let Some(f) = add_finalizer {
                    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
                    if let Some(arr) = list.as_array_mut() {
                        if !arr.iter().any(|x| x == f) && !already {
                            // One propagation policy at a time: finalizer validation refuses
                            // orphan with foregroundDeletion, and kube-apiserver swaps them.
                            let other = match f {
                                "orphan" => Some("foregroundDeletion"),
                                "foregroundDeletion" => Some("orphan"),
                                _ => None,
                            };
                            arr.retain(|x| other.is_none_or(|o| x != o));
                            arr.push(json!(f));
                        }
                    }
                }
            }
            if kind == Kind::Namespace {
                next["status"]["phase"] = json!("Terminating");
            }
            Ok(next)
        },
    )
    .await?;
    Ok(match updated {
        Updated::Deleted(o) => deleted_response(ctx, &o, &uid),
        Updated::Stored(o) => respond_object(ctx.def, &o, ctx.accept, StatusCode::OK),
    })
}

/// What DELETE answers once the object is gone: pods (and service accounts) return the
/// object, everything else a success `Status`.
fn deleted_response(ctx: &Ctx<'_>, object: &Value, uid: &str) -> Response<Body> {
    if matches!(ctx.def.strategy, Kind::Pod | Kind::ServiceAccount) {
        return respond_object(ctx.def, object, ctx.accept, StatusCode::OK);
    }
    let name = meta_str(object, "name").unwrap_or_default();
    response::json(StatusCode::OK, &success_status(&ctx.gr(), name, uid))
}

/// DELETECOLLECTION: deletes every selected object; answers with the list of them as they
/// were.
pub(crate) async fn delete_collection(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse(ctx, false)?;
    let delete_options = delete_options(ctx)?;
    let dry_run = ctx.dry_run()?;
    let (objects, revision) = ctx.api.consistent(ctx.def).await?;
    let prefix = ctx.def.collection_prefix(ctx.req.namespace.as_deref());
    let mut deleted = Vec::new();
    for (key, o) in objects.iter() {
        if !key.starts_with(prefix.as_bytes()) || !options.filter.matches(o) {
            continue;
        }
        let Ok(current) = serde_json::from_slice::<Value>(&o.json) else {
            continue;
        };
        let sub = Ctx {
            api: ctx.api,
            def: ctx.def,
            req: ctx.req,
            query: ctx.query,
            accept: None,
            content_type: ctx.content_type.clone(),
            body: Bytes::new(),
        };
        match delete_one(&sub, current.clone(), &delete_options, dry_run).await {
            Ok(_) => deleted.push(current),
            Err(e) if e.reason == setpoint_core::Reason::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": ctx.def.list_kind(),
        "apiVersion": ctx.def.gvk.api_version(),
        "metadata": {"resourceVersion": revision.to_string()},
        "items": deleted,
    });
    Ok(response::json(StatusCode::OK, &list))
}
