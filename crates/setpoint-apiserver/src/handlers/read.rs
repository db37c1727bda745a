//! GET and LIST: the registry store reads (see `registry/store/read.rs` for the
//! `resourceVersion` semantics); this encodes the answer as an object, a list, a `Table` or
//! partial object metadata.

use chrono::Utc;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{api_version, ApiError};

use super::params::list_options;
use super::response::{self, Body, Form};
use super::Ctx;
use crate::registry::ResourceDef;

/// GET one object, read from the store (a consistent read).
pub(crate) async fn get(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let object = read_object(ctx).await?;
    Ok(respond_object(ctx.def, &object, ctx.accept, StatusCode::OK))
}

/// The stored object the request names, with its resource version; 404 if absent.
pub(crate) async fn read_object(ctx: &Ctx<'_>) -> Result<Value, ApiError> {
    ctx.store
        .get(ctx.req.namespace.as_deref(), ctx.name())
        .await
}

/// Answers with one object in the form the client asked for.
pub(crate) fn respond_object(
    def: &ResourceDef,
    object: &Value,
    accept: Option<&str>,
    status: StatusCode,
) -> Response<Body> {
    match response::form(accept) {
        Form::Object => response::json(status, object),
        Form::Metadata { v1beta1 } => {
            response::json(status, &response::partial_metadata(object, v1beta1))
        }
        Form::Table { v1beta1 } => {
            let rv = object["metadata"]["resourceVersion"].clone();
            response::json(
                status,
                &table_of(
                    def,
                    std::iter::once(object.clone()),
                    json!({"resourceVersion": rv}),
                    v1beta1,
                    "Metadata",
                ),
            )
        }
    }
}

/// A `Table` of objects.
pub(crate) fn table_of(
    def: &ResourceDef,
    objects: impl Iterator<Item = Value>,
    metadata: Value,
    v1beta1: bool,
    include: &str,
) -> Value {
    let now = Utc::now();
    let columns: Vec<Value> = def.strategy.columns().iter().map(|c| c.to_json()).collect();
    let rows: Vec<Value> = objects
        .map(|o| {
            let cells = def.strategy.cells(&o, now);
            let object = match include {
                "None" => Value::Null,
                "Object" => o,
                _ => response::partial_metadata(&o, v1beta1),
            };
            let mut row = json!({"cells": cells});
            if !object.is_null() {
                row["object"] = object;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// LIST a collection.
pub(crate) async fn list(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = list_options(ctx, false)?;
    if crate::request_info::flag(ctx.query, "sendInitialEvents")? {
        return Err(super::params::invalid_options(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    let page = ctx
        .store
        .list(ctx.req.namespace.as_deref(), &options)
        .await?;
    let items = page.items;
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let av = api_version(&ctx.def.gvk.group, &ctx.def.gvk.version);
    Ok(match response::form(ctx.accept) {
        Form::Object => response::json_bytes(
            StatusCode::OK,
            response::list_bytes(
                &ctx.def.list_kind(),
                &av,
                &metadata,
                items.iter().map(|o| &o.json),
            ),
        ),
        form => respond_decoded(
            ctx,
            items
                .iter()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json.bytes()).ok())
                .collect(),
            metadata,
            form,
        ),
    })
}

/// A list of decoded `items` with list `metadata`, in the `form` the client asked for: the
/// kind's list, a `Table`, or `PartialObjectMetadataList`.
pub(crate) fn respond_decoded(
    ctx: &Ctx<'_>,
    items: Vec<Value>,
    metadata: Value,
    form: Form,
) -> Response<Body> {
    match form {
        Form::Object => response::json(
            StatusCode::OK,
            &json!({
                "kind": ctx.def.list_kind(),
                "apiVersion": api_version(&ctx.def.gvk.group, &ctx.def.gvk.version),
                "metadata": metadata,
                "items": items,
            }),
        ),
        Form::Table { v1beta1 } => {
            let include = ctx
                .query
                .get("includeObject")
                .map_or("Metadata", String::as_str);
            response::json(
                StatusCode::OK,
                &table_of(ctx.def, items.into_iter(), metadata, v1beta1, include),
            )
        }
        Form::Metadata { v1beta1 } => {
            let items: Vec<Value> = items
                .iter()
                .map(|o| response::partial_metadata(o, v1beta1))
                .collect();
            response::json(
                StatusCode::OK,
                &json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
                    "metadata": metadata,
                    "items": items,
                }),
            )
        }
    }
}
