//! POST (create), and what every write shares: decoding the body and checking the type and
//! unknown fields (`fieldValidation`). The registry store does the rest; updates and patches
//! are in `update`.

use http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::read::respond_object;
use super::response::Body;
use super::Ctx;
use crate::registry::store::Scope;
use crate::registry::strategy::unknown_fields;
use crate::registry::ResourceDef;

/// How unknown fields are treated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

pub(crate) fn field_validation(ctx: &Ctx<'_>) -> Result<FieldValidation, ApiError> {
    match ctx.query.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: {other}, must be one of: Ignore, Warn, Strict"
        ))),
    }
}

/// Decodes a JSON, YAML or Kubernetes protobuf body into an object.
pub(crate) fn decode_body(ctx: &Ctx<'_>) -> Result<Value, ApiError> {
    let media = ctx.content_type.split(';').next().unwrap_or("").trim();
    let value: Value = match media {
        "application/json" | "" | "*/*" => serde_json::from_slice(&ctx.body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid JSON: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            serde_yaml_ng::from_slice(&ctx.body).map_err(|e| {
                ApiError::bad_request(format!("the request body is not valid YAML: {e}"))
            })?
        }
        crate::protobuf::MEDIA_TYPE => crate::protobuf::decode(&ctx.body)?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// Checks `apiVersion` and `kind` against the endpoint (filling them in when absent), then
/// decodes through the typed struct: returns the normalized object and warnings for unknown
/// fields (or fails, under `Strict`).
pub(crate) fn typed(
    def: &ResourceDef,
    mut object: Value,
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let want_av = def.gvk.api_version();
    match object["apiVersion"].as_str() {
        None => object["apiVersion"] = json!(want_av),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )))
        }
    }
    match object["kind"].as_str() {
        None => object["kind"] = json!(def.gvk.kind),
        Some(k) if k == def.gvk.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.gvk.kind
            )))
        }
    }
    let normalized = def.strategy.normalize(&object).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version {v:?} cannot be handled as a {kind}: {e}",
            kind = def.gvk.kind,
            v = def.gvk.version
        ))
    })?;
    let unknown = if validation == FieldValidation::Ignore {
        Vec::new()
    } else {
        unknown_fields(&object, &normalized)
    };
    if validation == FieldValidation::Strict && !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect();
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            list.join(", ")
        )));
    }
    let warnings = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    Ok((normalized, warnings))
}

/// Adds `Warning` headers.
pub(crate) fn with_warnings(mut response: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append(http::header::WARNING, v);
        }
    }
    response
}

/// POST: creates the object in the body.
pub(crate) async fn create(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    if ctx.req.name.is_some() {
        return Err(ApiError::method_not_supported(&ctx.gr(), "create"));
    }
    let validation = field_validation(ctx)?;
    let manager = ctx.field_manager(Scope::Main, "CreateOptions")?;
    let (mut object, warnings) = typed(ctx.def, decode_body(ctx)?, validation)?;
    manager.track(None, &mut object);
    let created = ctx
        .store
        .create(ctx.req.namespace.as_deref(), object, ctx.dry_run()?)
        .await?;
    Ok(with_warnings(
        respond_object(ctx.def, &created, ctx.accept, StatusCode::CREATED),
        &warnings,
    ))
}
