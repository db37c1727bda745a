//! GET and LIST of core/v1 ComponentStatus: the objects are computed on each request
//! (`api/components.rs`), encoded as an object, a list, a `Table` or metadata like stored ones,
//! and every answer (a 404 too) carries the kind's deprecation warning.

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::read::{respond_object, table_of};
use super::response::{self, Body, Form};
use super::write::with_warnings;
use super::Ctx;
use crate::registry::COMPONENT_STATUS_DEPRECATED;
use crate::request_info::Verb;

/// Answers a get or a list (the only verbs the kind has).
pub(crate) async fn serve(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let warning = [COMPONENT_STATUS_DEPRECATED.to_owned()];
    let mut statuses = ctx.api.component_statuses().await;
    let response = match ctx.req.verb {
        Verb::Get => {
            let name = ctx.name();
            match statuses.iter().position(|o| o["metadata"]["name"] == name) {
                Some(i) => respond_object(
                    ctx.def,
                    &statuses.swap_remove(i),
                    ctx.accept,
                    StatusCode::OK,
                ),
                None => response::error(&ApiError::not_found(&ctx.gr(), name)),
            }
        }
        _ => list(ctx, statuses),
    };
    Ok(with_warnings(response, &warning))
}

/// The list of `items` in the form the client asked for.
fn list(ctx: &Ctx<'_>, items: Vec<Value>) -> Response<Body> {
    let metadata = json!({});
    match response::form(ctx.accept) {
        Form::Object => response::json(
            StatusCode::OK,
            &json!({
                "kind": ctx.def.list_kind(),
                "apiVersion": "v1",
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
