//! GET and LIST. Lists are served from the watch cache at the revision the request's
//! `resourceVersion` semantics call for; pages of one list share one snapshot.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use chrono::Utc;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{api_version, ApiError, Reason};

use super::params::{Continue, ListOptions, RvMatch};
use super::response::{self, Body, Form};
use super::{write, Ctx};
use crate::registry::ResourceDef;
use crate::watchcache::{CachedObject, Objects};

/// GET one object, read from the store (a consistent read).
pub(crate) async fn get(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let object = read_object(ctx).await?;
    Ok(respond_object(ctx.def, &object, ctx.accept, StatusCode::OK))
}

/// The stored object at the request's key, with its resource version; 404 if absent.
pub(crate) async fn read_object(ctx: &Ctx<'_>) -> Result<Value, ApiError> {
    let kv = ctx
        .api
        .store
        .get(ctx.key().as_bytes())
        .await
        .map_err(|e| write::store_error(ctx, e))?
        .ok_or_else(|| ApiError::not_found(&ctx.gr(), ctx.name()))?;
    let stored: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object does not decode: {e}")))?;
    let mut object = ctx.def.served_from_storage(stored);
    super::meta::metadata(&mut object)
        .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
    Ok(object)
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

/// The cache snapshot a list reads, and its revision.
async fn snapshot(
    ctx: &Ctx<'_>,
    options: &ListOptions,
) -> Result<(Objects, setpoint_core::Revision), ApiError> {
    let cache = ctx.api.cache(ctx.def)?;
    if let Some(token) = &options.continue_token {
        let objects = ctx.api.exactly_at(ctx.def, token.revision).await.map_err(|e| {
            if e.reason == Reason::Expired {
                ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results.")
            } else {
                e
            }
        })?;
        return Ok((objects, token.revision));
    }
    match options.rv {
        RvMatch::MostRecent => ctx.api.consistent(ctx.def).await,
        RvMatch::Any => {
            cache
                .wait_for(setpoint_core::Revision::ZERO, super::CACHE_CATCH_UP)
                .await?;
            Ok(cache.snapshot())
        }
        RvMatch::NotOlderThan(r) => ctx.api.not_older_than(ctx.def, r).await,
        RvMatch::Exact(r) => Ok((ctx.api.exactly_at(ctx.def, r).await?, r)),
    }
}

/// LIST a collection.
pub(crate) async fn list(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse(ctx, false)?;
    if crate::request::flag(ctx.query, "sendInitialEvents")? {
        return Err(super::params::invalid_options(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    let (objects, revision) = snapshot(ctx, &options).await?;
    let prefix = Bytes::from(ctx.def.collection_prefix(ctx.req.namespace.as_deref()));
    let start = match &options.continue_token {
        // A token from another collection (or a forged one) starts outside this one's range.
        Some(c) if !c.start.as_bytes().starts_with(&prefix) => {
            return Err(ApiError::bad_request(
                "continue key is not valid: it does not belong to this collection",
            ))
        }
        Some(c) => Bound::Included(Bytes::from(c.start.clone())),
        None => Bound::Included(prefix.clone()),
    };
    let end = setpoint_store::prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let limit = options.limit.unwrap_or(usize::MAX);
    let mut items: Vec<Arc<CachedObject>> = Vec::new();
    let mut remaining = 0u64;
    for (_, o) in objects.range((start, end)) {
        if !options.filter.matches(o) {
            continue;
        }
        if items.len() < limit {
            items.push(o.clone());
        } else {
            remaining += 1;
        }
    }
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if remaining > 0 {
        let last = items.last().map(|o| o.key.clone()).unwrap_or_default();
        let mut start = String::from_utf8_lossy(&last).into_owned();
        start.push('\0');
        metadata["continue"] = json!(Continue { revision, start }.encode());
        if options.filter.labels.is_everything() && options.filter.fields.is_everything() {
            metadata["remainingItemCount"] = json!(remaining);
        }
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
        Form::Table { v1beta1 } => {
            let include = ctx
                .query
                .get("includeObject")
                .map_or("Metadata", String::as_str);
            let values = items
                .iter()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json).ok());
            response::json(
                StatusCode::OK,
                &table_of(ctx.def, values, metadata, v1beta1, include),
            )
        }
        Form::Metadata { v1beta1 } => {
            let values: Vec<Value> = items
                .iter()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json).ok())
                .map(|o| response::partial_metadata(&o, v1beta1))
                .collect();
            response::json(
                StatusCode::OK,
                &json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
                    "metadata": metadata,
                    "items": values,
                }),
            )
        }
    })
}
