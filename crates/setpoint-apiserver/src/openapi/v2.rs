//! OpenAPI v2 (Swagger 2.0) as the gnostic protobuf that kubectl 1.27/1.28 fetch from
//! `/openapi/v2` (`client-go discovery OpenAPISchema`) and parse with kube-openapi's
//! `pkg/util/proto` (`NewOpenAPIData`): one document for every group-version, from the same
//! operations and schemas as the v3 documents.
//!
//! That parser rejects the whole document on any schema it does not accept, so the v3 schemas
//! are brought into the shape it wants: `#/definitions/` references, an `allOf` of a single
//! reference flattened to the reference (with the description beside it, as Swagger 2.0
//! documents have it), references to missing definitions, unknown types and keywords Swagger
//! 2.0 lacks (`anyOf`, `oneOf`, `not`, `nullable`) dropped, arrays always with `items`.

use std::collections::BTreeSet;

use prost::Message;
use serde_json::{Map, Value};

use super::operation::{Method, Operation, Payload};
use super::params::Location;
use super::paths::paths;
use super::schema::{components, reference, REF_PREFIX};
use super::v2_proto as pb;
use super::v3::{reason, API_VERSION};
use super::OpenApiResource;

/// The media type kubectl asks `/openapi/v2` for (`Accept`). Its `@` is no token character,
/// so it cannot be the answer's `Content-Type`: see [`V2_PROTOBUF_CONTENT_TYPE`].
pub(crate) const V2_PROTOBUF_ACCEPT: &str =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The `Content-Type` of [`v2_protobuf`]'s answer, as kube-apiserver sends it. kubectl 1.27
/// and 1.28 parse the answer's `Content-Type` with Go's `mime.ParseMediaType` and fail with
/// "mime: unexpected content after media subtype" on [`V2_PROTOBUF_ACCEPT`]'s `@`.
pub(crate) const V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The body of `GET /openapi/v2` when the `Accept` header names [`V2_PROTOBUF_ACCEPT`] or
/// [`V2_PROTOBUF_CONTENT_TYPE`] (protobuf, sent as [`V2_PROTOBUF_CONTENT_TYPE`]): every
/// resource's operations and the schemas they reference, in one document.
pub(crate) fn v2_protobuf(resources: &[OpenApiResource]) -> Vec<u8> {
    document(resources).encode_to_vec()
}

/// The v2 protobuf `document` with the Swagger 2.0 `definitions` of aggregated API servers
/// added (those it lacks), in the same shape as its own; `None` if `document` does not decode.
pub(crate) fn with_definitions(document: &[u8], extra: &Map<String, Value>) -> Option<Vec<u8>> {
    let mut doc = pb::Document::decode(document).ok()?;
    let definitions = doc.definitions.get_or_insert_with(Default::default);
    let existing: BTreeSet<String> = definitions
        .additional_properties
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let known: BTreeSet<&str> = existing
        .iter()
        .map(String::as_str)
        .chain(extra.keys().map(String::as_str))
        .collect();
    for (name, schema) in extra {
        if existing.contains(name) {
            continue;
        }
        definitions.additional_properties.push(pb::NamedSchema {
            name: name.clone(),
            value: Some(convert(&v3_references(schema), &known)),
        });
    }
    Some(doc.encode_to_vec())
}

/// A Swagger 2.0 schema with its `#/definitions/` references written as v3 ones, which
/// [`convert`] takes.
fn v3_references(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v.as_str()) {
                        ("$ref", Some(r)) => {
                            Value::String(r.replacen("#/definitions/", REF_PREFIX, 1))
                        }
                        _ => v3_references(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(v3_references).collect()),
        other => other.clone(),
    }
}

/// The v2 document of the resources.
pub(super) fn document(resources: &[OpenApiResource]) -> pb::Document {
    let ops = paths(resources);
    let mut used = Vec::new();
    for op in ops.values().flatten() {
        used.extend(op.body.iter().map(|b| reference(&b.definition)));
        for (_, payload) in &op.responses {
            if let Payload::Definition(name) = payload {
                used.push(reference(name));
            }
        }
    }
    let schemas = components(resources, &Value::Array(used));
    let known: BTreeSet<&str> = schemas.keys().map(String::as_str).collect();
    let path = ops
        .iter()
        .map(|(path, ops)| {
            let mut item = pb::PathItem::default();
            for op in ops {
                let slot = match op.method {
                    Method::Get => &mut item.get,
                    Method::Put => &mut item.put,
                    Method::Post => &mut item.post,
                    Method::Delete => &mut item.delete,
                    Method::Patch => &mut item.patch,
                };
                *slot = Some(operation(op));
            }
            pb::NamedPathItem {
                name: path.clone(),
                value: Some(item),
            }
        })
        .collect();
    let additional_properties = schemas
        .iter()
        .map(|(name, schema)| pb::NamedSchema {
            name: name.clone(),
            value: Some(convert(schema, &known)),
        })
        .collect();
    pb::Document {
        swagger: "2.0".into(),
        info: Some(pb::Info {
            title: "Kubernetes".into(),
            version: API_VERSION.into(),
        }),
        paths: Some(pb::Paths { path }),
        definitions: Some(pb::Definitions {
            additional_properties,
        }),
        ..Default::default()
    }
}

fn operation(op: &Operation) -> pb::Operation {
    use pb::non_body_parameter::Oneof as NonBody;
    use pb::parameter::Oneof as Param;

    let mut parameters: Vec<pb::ParametersItem> = op
        .params
        .iter()
        .map(|p| {
            let non_body = if p.location == Location::Path {
                NonBody::PathParameterSubSchema(pb::PathParameterSubSchema {
                    required: true,
                    r#in: "path".into(),
                    description: p.description.into(),
                    name: p.name.into(),
                    r#type: p.ty.as_str().into(),
                    unique_items: true,
                })
            } else {
                NonBody::QueryParameterSubSchema(pb::QueryParameterSubSchema {
                    required: false,
                    r#in: "query".into(),
                    description: p.description.into(),
                    name: p.name.into(),
                    r#type: p.ty.as_str().into(),
                    unique_items: true,
                })
            };
            parameter(Param::NonBodyParameter(pb::NonBodyParameter {
                oneof: Some(non_body),
            }))
        })
        .collect();
    if let Some(body) = &op.body {
        parameters.push(parameter(Param::BodyParameter(pb::BodyParameter {
            name: "body".into(),
            r#in: "body".into(),
            required: op.method != Method::Delete,
            schema: Some(ref_schema(&body.definition)),
            ..Default::default()
        })));
    }
    let response_code = op
        .responses
        .iter()
        .map(|(code, payload)| {
            let schema = match payload {
                Payload::Definition(name) => ref_schema(name),
                Payload::Text => pb::Schema {
                    r#type: Some(type_item("string")),
                    ..Default::default()
                },
            };
            pb::NamedResponseValue {
                name: code.to_string(),
                value: Some(pb::ResponseValue {
                    oneof: Some(pb::response_value::Oneof::Response(pb::Response {
                        description: reason(*code).into(),
                        schema: Some(pb::SchemaItem {
                            oneof: Some(pb::schema_item::Oneof::Schema(schema)),
                        }),
                    })),
                }),
            }
        })
        .collect();
    let gvk = serde_json::json!({
        "group": op.gvk.group, "kind": op.gvk.kind, "version": op.gvk.version,
    });
    pb::Operation {
        description: op.description.clone(),
        operation_id: op.id.clone(),
        produces: op.produces.iter().map(|&m| m.into()).collect(),
        consumes: match &op.body {
            Some(body) => body.content_types.iter().map(|&m| m.into()).collect(),
            None => vec!["*/*".into()],
        },
        parameters,
        responses: Some(pb::Responses { response_code }),
        schemes: vec!["https".into()],
        vendor_extension: vec![
            named_any("x-kubernetes-action", &op.action.as_str().into()),
            named_any("x-kubernetes-group-version-kind", &gvk),
        ],
        ..Default::default()
    }
}

fn parameter(p: pb::parameter::Oneof) -> pb::ParametersItem {
    pb::ParametersItem {
        oneof: Some(pb::parameters_item::Oneof::Parameter(pb::Parameter {
            oneof: Some(p),
        })),
    }
}

fn ref_schema(definition: &str) -> pb::Schema {
    pb::Schema {
        xref: format!("#/definitions/{definition}"),
        ..Default::default()
    }
}

fn type_item(t: &str) -> pb::TypeItem {
    pb::TypeItem {
        value: vec![t.into()],
    }
}

/// A value as gnostic holds it: YAML text (here JSON, which is YAML).
fn any(value: &Value) -> pb::Any {
    pb::Any {
        yaml: value.to_string(),
    }
}

fn named_any(name: &str, value: &Value) -> pb::NamedAny {
    pb::NamedAny {
        name: name.into(),
        value: Some(any(value)),
    }
}

/// A v3 schema as a v2 one; `known` are the definitions references may point to.
pub(super) fn convert(value: &Value, known: &BTreeSet<&str>) -> pb::Schema {
    let Value::Object(map) = value else {
        return pb::Schema::default();
    };
    let mut s = pb::Schema::default();
    let flattened = single_reference(map);
    for (key, v) in map {
        let text = || v.as_str().unwrap_or_default().to_owned();
        match key.as_str() {
            "$ref" => s.xref = v2_reference(v.as_str().unwrap_or_default(), known),
            "allOf" if flattened.is_some() => {}
            "allOf" => s.all_of = each(v, known),
            "format" => s.format = text(),
            "title" => s.title = text(),
            "description" => s.description = text(),
            "pattern" => s.pattern = text(),
            "default" => s.default = Some(any(v)),
            "example" => s.example = Some(any(v)),
            "multipleOf" => s.multiple_of = v.as_f64().unwrap_or_default(),
            "maximum" => s.maximum = v.as_f64().unwrap_or_default(),
            "minimum" => s.minimum = v.as_f64().unwrap_or_default(),
            "exclusiveMaximum" => s.exclusive_maximum = v.as_bool().unwrap_or_default(),
            "exclusiveMinimum" => s.exclusive_minimum = v.as_bool().unwrap_or_default(),
            "maxLength" => s.max_length = v.as_i64().unwrap_or_default(),
            "minLength" => s.min_length = v.as_i64().unwrap_or_default(),
            "maxItems" => s.max_items = v.as_i64().unwrap_or_default(),
            "minItems" => s.min_items = v.as_i64().unwrap_or_default(),
            "maxProperties" => s.max_properties = v.as_i64().unwrap_or_default(),
            "minProperties" => s.min_properties = v.as_i64().unwrap_or_default(),
            "uniqueItems" => s.unique_items = v.as_bool().unwrap_or_default(),
            "readOnly" => s.read_only = v.as_bool().unwrap_or_default(),
            "required" => s.required = strings(v),
            "enum" => s.r#enum = v.as_array().into_iter().flatten().map(any).collect(),
            "type" => s.r#type = schema_type(v),
            "items" => {
                s.items = Some(pb::ItemsItem {
                    schema: match v {
                        Value::Array(_) => each(v, known),
                        _ => vec![convert(v, known)],
                    },
                })
            }
            "properties" => {
                let additional_properties = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, p)| pb::NamedSchema {
                        name: name.clone(),
                        value: Some(convert(p, known)),
                    })
                    .collect();
                s.properties = Some(pb::Properties {
                    additional_properties,
                });
            }
            "additionalProperties" => {
                use pb::additional_properties_item::Oneof;
                let oneof = match v {
                    Value::Bool(b) => Oneof::Boolean(*b),
                    _ => Oneof::Schema(convert(v, known)),
                };
                s.additional_properties = Some(Box::new(pb::AdditionalPropertiesItem {
                    oneof: Some(oneof),
                }));
            }
            _ if key.starts_with("x-") => s.vendor_extension.push(named_any(key, v)),
            _ => {}
        }
    }
    if let Some(reference) = flattened {
        s.xref = v2_reference(reference, known);
    }
    if s.r#type.as_ref().is_some_and(|t| t.value == ["array"]) && s.items.is_none() {
        s.items = Some(pb::ItemsItem {
            schema: vec![pb::Schema::default()],
        });
    }
    s
}

/// The reference of `{"allOf": [{"$ref": …}], …}` without a type or properties of its own.
fn single_reference(map: &Map<String, Value>) -> Option<&str> {
    let [only] = map.get("allOf")?.as_array()?.as_slice() else {
        return None;
    };
    let only = only.as_object()?;
    let reference = only.get("$ref")?.as_str()?;
    let plain = only.len() == 1 && !map.contains_key("type") && !map.contains_key("properties");
    plain.then_some(reference)
}

/// `#/definitions/<name>` for a v3 reference to a known definition, else empty (no reference).
fn v2_reference(v3: &str, known: &BTreeSet<&str>) -> String {
    match v3.strip_prefix(REF_PREFIX) {
        Some(name) if known.contains(name) => format!("#/definitions/{name}"),
        _ => String::new(),
    }
}

fn each(v: &Value, known: &BTreeSet<&str>) -> Vec<pb::Schema> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| convert(s, known))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The first type kube-openapi knows; it rejects unknown ones and lists of several.
fn schema_type(v: &Value) -> Option<pb::TypeItem> {
    const KNOWN: [&str; 6] = ["object", "array", "string", "number", "integer", "boolean"];
    let first = match v {
        Value::String(t) => Some(t.as_str()),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| KNOWN.contains(t)),
        _ => None,
    };
    first.filter(|t| KNOWN.contains(t)).map(type_item)
}

/// Definitions of a decoded document by name.
#[cfg(test)]
pub(super) fn definitions_by_name(
    doc: &pb::Document,
) -> std::collections::BTreeMap<&str, &pb::Schema> {
    doc.definitions
        .iter()
        .flat_map(|d| &d.additional_properties)
        .filter_map(|n| Some((n.name.as_str(), n.value.as_ref()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn known() -> BTreeSet<&'static str> {
        ["io.k8s.api.core.v1.PodSpec"].into_iter().collect()
    }

    #[test]
    fn aggregated_definitions_should_be_added_with_their_references() {
        let doc = pb::Document {
            definitions: Some(pb::Definitions {
                additional_properties: vec![pb::NamedSchema {
                    name: "io.k8s.Own".into(),
                    value: Some(pb::Schema::default()),
                }],
            }),
            ..Default::default()
        };
        let extra = serde_json::json!({
            "io.k8s.Own": {"description": "not replaced"},
            "com.example.Flunder": {"description": "a flunder", "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/com.example.Spec"}}},
            "com.example.Spec": {"type": "object"}});
        let merged = with_definitions(&doc.encode_to_vec(), extra.as_object().unwrap()).unwrap();
        let merged = pb::Document::decode(merged.as_slice()).unwrap();
        let defs = merged.definitions.unwrap().additional_properties;
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["io.k8s.Own", "com.example.Flunder", "com.example.Spec"]
        );
        assert!(defs[0].value.as_ref().unwrap().description.is_empty());
        let flunder = defs[1].value.as_ref().unwrap();
        let spec = &flunder.properties.as_ref().unwrap().additional_properties[0];
        assert_eq!(
            spec.value.as_ref().unwrap().xref,
            "#/definitions/com.example.Spec"
        );
    }

    #[test]
    fn single_allof_references_should_flatten_with_their_description() {
        let v3 = json!({
            "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}],
            "description": "the spec",
            "x-kubernetes-patch-strategy": "retainKeys",
        });
        let v2 = convert(&v3, &known());
        assert_eq!(v2.xref, "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert_eq!(v2.description, "the spec");
        assert!(v2.all_of.is_empty());
        assert_eq!(v2.vendor_extension[0].name, "x-kubernetes-patch-strategy");
        assert_eq!(
            v2.vendor_extension[0]
                .value
                .as_ref()
                .map(|a| a.yaml.as_str()),
            Some("\"retainKeys\"")
        );
    }

    #[test]
    fn parser_hostile_shapes_should_be_made_safe() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "dangling": {"$ref": "#/components/schemas/io.example.Missing"},
                "list": {"type": "array"},
                "maybe": {"type": ["null", "string"], "nullable": true, "anyOf": [{"type": "string"}]},
            },
        });
        let v2 = convert(&v3, &known());
        let props: BTreeMap<_, _> = v2
            .properties
            .iter()
            .flat_map(|p| &p.additional_properties)
            .map(|n| (n.name.as_str(), n.value.clone().unwrap_or_default()))
            .collect();
        assert_eq!(props["dangling"].xref, "");
        assert_eq!(
            props["list"].items.as_ref().map(|i| i.schema.len()),
            Some(1)
        );
        assert_eq!(
            props["maybe"].r#type.as_ref().map(|t| t.value.clone()),
            Some(vec!["string".to_owned()])
        );
    }
}
