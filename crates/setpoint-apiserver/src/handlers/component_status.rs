//! GET and LIST of core/v1 ComponentStatus: the objects are computed on each request
//! (`api/components.rs`), encoded as an object, a list, a `Table` or metadata like stored ones,
//! and every answer (a 404 too) carries the kind's deprecation warning.

use http::{Response, StatusCode};
use serde_json::json;
use setpoint_core::ApiError;

use super::read::{respond_decoded, respond_object};
use super::response::{self, Body};
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
        _ => respond_decoded(ctx, statuses, json!({}), response::form(ctx.accept)),
    };
    Ok(with_warnings(response, &warning))
}
