//! DELETE and DELETECOLLECTION, with kube-apiserver's two-phase deletion: an object with
//! finalizers (or deleted with `Foreground`/`Orphan` propagation, which add theirs) is only
//! marked with `deletionTimestamp`; a scheduled pod is deleted gracefully (marked, for its node
//! to stop it); a namespace becomes `Terminating`. Everything else goes at once.

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{success_status, ApiError, Revision};
use setpoint_store::StoreError;

use super::delete_options::DeleteOptions;
use super::meta::{self, meta_str};
use super::params::ListOptions;
use super::read::{read_object, respond_object};
use super::response::{self, Body};
use super::update::{guaranteed_update, Scope, Updated};
use super::write::{decode_body, store_error};
use super::Ctx;

/// The `DeleteOptions` of a DELETE or DELETECOLLECTION: from its body (client-go's typed
/// clients, `kubectl drain` among them, send it as Kubernetes protobuf) and its query.
fn delete_options(ctx: &Ctx<'_>) -> Result<DeleteOptions, ApiError> {
    let body = if ctx.body.is_empty() {
        Value::Null
    } else {
        decode_body(ctx)?
    };
    DeleteOptions::parse(ctx.query, &body)
}

/// Deletes the pod a `pods/{name}/eviction` request names, with the eviction's
/// `deleteOptions` (`null` for none); a dry run when either those or the query say so.
pub(crate) async fn evict(ctx: &Ctx<'_>, delete_options: &Value) -> Result<(), ApiError> {
    let options = DeleteOptions::parse(ctx.query, delete_options)?;
    let current = read_object(ctx).await?;
    delete_one(ctx, current, &options).await.map(drop)
}

/// DELETE one object.
pub(crate) async fn delete(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = delete_options(ctx)?;
    let current = read_object(ctx).await?;
    delete_one(ctx, current, &options).await
}

async fn delete_one(
    ctx: &Ctx<'_>,
    current: Value,
    options: &DeleteOptions,
) -> Result<Response<Body>, ApiError> {
    let dry_run = options.dry_run;
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

    let strategy = &ctx.def.strategy;
    let add_finalizer = strategy.deletion_finalizer(options.propagation);
    let graceful = strategy
        .graceful_deletion_seconds(&current, options.grace_period)
        .is_some();
    let has_finalizers = !meta::finalizers(&current).is_empty() || strategy.held(&current);
    let mark = has_finalizers || add_finalizer.is_some() || graceful;

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
                Box::pin(delete_one(ctx, fresh, options)).await
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
                    let seconds = if graceful {
                        strategy
                            .graceful_deletion_seconds(current, grace)
                            .unwrap_or(0)
                    } else {
                        0
                    };
                    meta.insert(
                        "deletionTimestamp".into(),
                        json!(deletion_timestamp(chrono::Utc::now(), seconds)),
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
            strategy.mark_deleting(&mut next);
            Ok(next)
        },
    )
    .await?;
    Ok(match updated {
        Updated::Deleted(o) => deleted_response(ctx, &o, &uid),
        Updated::Stored(o) => respond_object(ctx.def, &o, ctx.accept, StatusCode::OK),
    })
}

/// The latest deletion time written: Go clients cannot carry a year past 9999 in a
/// `metav1.Time`, and Rust ones (`jiff`, under k8s-openapi) nothing past this instant.
const LATEST_DELETION: &str = "9999-12-30T22:00:00Z";

/// When an object deleted at `now` with a grace period of `seconds` is due to go, as an
/// RFC 3339 time. Grace periods are client input of any size: the time saturates at
/// [`LATEST_DELETION`].
fn deletion_timestamp(now: chrono::DateTime<chrono::Utc>, seconds: i64) -> String {
    let latest = chrono::DateTime::parse_from_rfc3339(LATEST_DELETION)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    let at = chrono::TimeDelta::try_seconds(seconds)
        .and_then(|d| now.checked_add_signed(d))
        .map_or(latest, |at| at.min(latest));
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What DELETE answers once the object is gone: pods (and service accounts) return the
/// object, everything else a success `Status`.
fn deleted_response(ctx: &Ctx<'_>, object: &Value, uid: &str) -> Response<Body> {
    if ctx.def.strategy.delete_returns_object() {
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
        match delete_one(&sub, current.clone(), &delete_options).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_timestamps_should_saturate_instead_of_panicking() {
        // Regression (issue 14.2): a huge grace period panicked in `Duration::seconds`.
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(deletion_timestamp(now, 30), "2026-01-02T03:04:35Z");
        assert_eq!(deletion_timestamp(now, 0), "2026-01-02T03:04:05Z");
        for huge in [i64::MAX, i64::MAX / 1000, 400_000_000_000] {
            assert_eq!(deletion_timestamp(now, huge), LATEST_DELETION);
            // Clients in Rust read it back.
            let parsed: k8s_openapi::jiff::Timestamp =
                deletion_timestamp(now, huge).parse().unwrap();
            assert_eq!(parsed.to_string(), LATEST_DELETION);
        }
    }
}
