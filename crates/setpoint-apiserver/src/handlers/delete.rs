//! DELETE and DELETECOLLECTION: decode the `DeleteOptions` (body and query), call the registry
//! store, and answer as kube-apiserver does.

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{success_status, ApiError};

use super::params::list_options;
use super::read::respond_object;
use super::response::{self, Body};
use super::write::decode_body;
use super::Ctx;
use crate::registry::meta::meta_str;
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::Deleted;

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

/// DELETE one object.
pub(crate) async fn delete(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = delete_options(ctx)?;
    let deleted = ctx
        .store
        .delete(ctx.req.namespace.as_deref(), ctx.name(), &options)
        .await?;
    Ok(respond_deleted(ctx, deleted))
}

/// What DELETE answers: a marked object as it is now; once the object is gone, pods (and
/// service accounts) return the object, everything else a success `Status`.
pub(crate) fn respond_deleted(ctx: &Ctx<'_>, deleted: Deleted) -> Response<Body> {
    match deleted {
        Deleted::Marked(o) => respond_object(ctx.def, &o, ctx.accept, StatusCode::OK),
        Deleted::Gone(o) if ctx.def.strategy.delete_returns_object() => {
            respond_object(ctx.def, &o, ctx.accept, StatusCode::OK)
        }
        Deleted::Gone(o) => {
            let name = meta_str(&o, "name").unwrap_or_default();
            let uid = meta_str(&o, "uid").unwrap_or_default();
            response::json(StatusCode::OK, &success_status(&ctx.gr(), name, uid))
        }
    }
}

/// DELETECOLLECTION: deletes every selected object; answers with the list of them as they
/// were.
pub(crate) async fn delete_collection(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = list_options(ctx, false)?;
    let delete_options = delete_options(ctx)?;
    let (deleted, revision) = ctx
        .store
        .delete_collection(ctx.req.namespace.as_deref(), &options, &delete_options)
        .await?;
    let list = json!({
        "kind": ctx.def.list_kind(),
        "apiVersion": ctx.def.gvk.api_version(),
        "metadata": {"resourceVersion": revision.to_string()},
        "items": deleted,
    });
    Ok(response::json(StatusCode::OK, &list))
}
