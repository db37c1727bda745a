//! Create, and what every write shares: decoding the body, checking the type and unknown
//! fields (`fieldValidation`), mapping store errors. Creates let the kind's strategy prepare,
//! default and validate the object, then create it if absent; updates and patches are in
//! `update`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, Reason};
use setpoint_store::StoreError;

use super::meta::{self, meta_str};
use super::read::respond_object;
use super::response::Body;
use super::{Api, Ctx};
use crate::registry::strategy::{unknown_fields, validate_name};
use crate::registry::{Peers, ResourceDef};

/// Maps a store error to the API's, without object details.
pub(crate) fn store_error_plain(e: StoreError) -> ApiError {
    match e {
        StoreError::Compacted { requested, compacted } => {
            ApiError::too_old_resource_version(requested.get(), compacted.get())
        }
        StoreError::FutureRevision { requested, current } => {
            ApiError::too_large_resource_version(requested.get(), current.get())
        }
        StoreError::InvalidArgument(m) => ApiError::bad_request(m),
        StoreError::ValueTooLarge { size, limit } => ApiError::new(
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: the stored object of {size} bytes exceeds the limit of {limit} bytes"),
        ),
        StoreError::Unavailable(m) => ApiError::unavailable(m),
        other => ApiError::internal(other.to_string()),
    }
}

/// Maps a store error for the request's object.
pub(crate) fn store_error(ctx: &Ctx<'_>, e: StoreError) -> ApiError {
    store_error_for(ctx.def, ctx.name(), e)
}

pub(crate) fn store_error_for(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    let gr = def.group_resource();
    match e {
        StoreError::NotFound => ApiError::not_found(&gr, name),
        StoreError::AlreadyExists { .. } => ApiError::already_exists(&gr, name),
        StoreError::Conflict { .. } => ApiError::modified(&gr, name),
        other => store_error_plain(other),
    }
}

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
    let normalized = def.normalize(&object).map_err(|e| {
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

pub(crate) fn invalid(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(&def.gvk.kind, &def.gvk.group, name, causes)
}

/// POST: creates the object in the body.
pub(crate) async fn create(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    if ctx.req.name.is_some() {
        return Err(ApiError::method_not_supported(&ctx.gr(), "create"));
    }
    let validation = field_validation(ctx)?;
    let (object, warnings) = typed(ctx.def, decode_body(ctx)?, validation)?;
    let created = create_object(
        ctx.api,
        ctx.def,
        ctx.req.namespace.as_deref(),
        object,
        ctx.dry_run()?,
    )
    .await?;
    Ok(with_warnings(
        respond_object(ctx.def, &created, ctx.accept, StatusCode::CREATED),
        &warnings,
    ))
}

/// Creates `object` (already typed) in `namespace`: server-set metadata, defaults, validation,
/// namespace checks, then a create-if-absent in the store. Returns the stored object.
pub(crate) async fn create_object(
    api: &Api,
    def: &ResourceDef,
    namespace: Option<&str>,
    mut object: Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let body_ns = meta_str(&object, "namespace").map(str::to_owned);
    {
        let meta = meta::metadata(&mut object);
        if def.namespaced {
            match (namespace, body_ns.as_deref()) {
                (Some(url), Some(body)) if url != body => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                (Some(url), _) => {
                    meta.insert("namespace".into(), json!(url));
                }
                (None, _) => return Err(ApiError::bad_request("a namespace is required to create a namespaced object")),
            }
        } else {
            meta.remove("namespace");
        }
        for field in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(field);
        }
        meta.insert("uid".into(), json!(meta::new_uid()));
        meta.insert("creationTimestamp".into(), json!(meta::now()));
        if def.has_generation() {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    def.prepare_create(&mut object);
    def.strategy
        .before_create(&Resource { api, def }, &mut object)
        .await?;
    let generate = meta_str(&object, "generateName").map(str::to_owned);
    let explicit = meta_str(&object, "name")
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    if explicit.is_none() && generate.is_none() {
        return Err(invalid(
            def,
            "",
            vec![Cause::new(
                "FieldValueRequired",
                "metadata.name",
                "metadata.name: Required value: name or generateName is required",
            )],
        ));
    }
    if let Some(ns) = namespace {
        check_namespace(api, ns, def, explicit.as_deref().unwrap_or("")).await?;
    }
    for attempt in 0..8 {
        let name = match (&explicit, &generate) {
            (Some(n), _) => n.clone(),
            (None, Some(g)) => meta::generate_name(g),
            (None, None) => unreachable!("checked above"),
        };
        meta::metadata(&mut object).insert("name".into(), json!(name));
        let mut causes: Vec<Cause> = validate_name(&name, def.strategy.name_rule())
            .into_iter()
            .map(|p| Cause::invalid("metadata.name", &json!(name), &p))
            .collect();
        causes.extend(def.validate(&object, None).await);
        if !causes.is_empty() {
            return Err(invalid(def, &name, causes));
        }
        if dry_run {
            return Ok(object);
        }
        let key = def.key(namespace, &name);
        let stored = def.to_storage(object.clone());
        let bytes = Bytes::from(serde_json::to_vec(&stored).expect("serializes"));
        match api.store.create(Bytes::from(key), bytes).await {
            Ok(kv) => {
                meta::metadata(&mut object)
                    .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
                return Ok(object);
            }
            Err(StoreError::AlreadyExists { .. }) if explicit.is_none() && attempt < 7 => continue,
            Err(e) => return Err(store_error_for(def, &name, e)),
        }
    }
    unreachable!("the loop returns")
}

/// New objects need an existing namespace that is not being deleted.
async fn check_namespace(
    api: &Api,
    namespace: &str,
    def: &ResourceDef,
    name: &str,
) -> Result<(), ApiError> {
    let key = format!("/registry/namespaces/{namespace}");
    let kv = api
        .store
        .get(key.as_bytes())
        .await
        .map_err(store_error_plain)?
        .ok_or_else(|| {
            ApiError::not_found(
                &setpoint_core::GroupResource::new("", "namespaces"),
                namespace,
            )
        })?;
    let ns: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
    if !ns["metadata"]["deletionTimestamp"].is_null() {
        let mut e = ApiError::forbidden(format!(
            "{} {name:?} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            def.group_resource()
        ));
        e.details = Some(Box::new(setpoint_core::Details {
            name: name.to_owned(),
            group: def.gvk.group.clone(),
            kind: def.plural.clone(),
            causes: vec![Cause::new(
                "NamespaceTerminating",
                "metadata.namespace",
                format!("namespace {namespace} is being terminated"),
            )],
            ..Default::default()
        }));
        return Err(e);
    }
    Ok(())
}

/// The objects of one resource, for a create's [`crate::registry::Strategy::before_create`].
struct Resource<'a> {
    api: &'a Api,
    def: &'a ResourceDef,
}

#[async_trait::async_trait]
impl Peers for Resource<'_> {
    async fn objects(&self) -> Result<Vec<Value>, ApiError> {
        let (objects, _) = self.api.consistent(self.def).await?;
        Ok(objects
            .values()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.json).ok())
            .collect())
    }
}
