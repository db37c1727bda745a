//! The `components.schemas` of a document: each resource's kind and list schemas under
//! Kubernetes' definition names, and every built-in schema they reference, transitively.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::builtin::{builtin_definition, builtin_definition_name, LIST_META, OBJECT_META};
use super::OpenApiResource;

/// What every `$ref` of a v3 document starts with.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// A definition that lends its `apiVersion` and `kind` property schemas (with their
/// descriptions) to custom resources and lists.
const TYPE_META_LENDER: &str = "io.k8s.api.core.v1.Namespace";

/// `x-kubernetes-group-version-kind` of a schema: a list of one.
pub(super) fn gvk_list(group: &str, version: &str, kind: &str) -> Value {
    json!([gvk_object(group, version, kind)])
}

/// `x-kubernetes-group-version-kind` of an operation: one object.
pub(super) fn gvk_object(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// `{"$ref": …}` to a definition.
pub(super) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{name}") })
}

/// A reference with a description beside it, wrapped in `allOf` as OpenAPI 3.0 wants.
fn described_reference(name: &str, description: &str) -> Value {
    json!({ "allOf": [reference(name)], "description": description })
}

/// Whether the kind is built in (its patches may be strategic merge patches).
pub(super) fn is_builtin(r: &OpenApiResource) -> bool {
    builtin_definition_name(&r.group, &r.version, &r.kind).is_some()
}

/// The definition name of a resource's kind: Kubernetes' for built-ins
/// (`io.k8s.api.apps.v1.Deployment`), the reversed group for custom resources
/// (`com.example.v1.Widget`), as kube-apiserver names them.
pub(super) fn definition_name(r: &OpenApiResource) -> String {
    if let Some(name) = builtin_definition_name(&r.group, &r.version, &r.kind) {
        return name.to_owned();
    }
    let reversed: Vec<&str> = r.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), r.version, r.kind)
}

/// The definition name of a resource's list kind, e.g. `io.k8s.api.core.v1.PodList`.
pub(super) fn list_definition_name(r: &OpenApiResource) -> String {
    format!("{}List", definition_name(r))
}

/// The schema a document publishes for a resource's kind: the given one with its
/// `x-kubernetes-group-version-kind`; for custom resources also `apiVersion`, `kind` and
/// `metadata` (always `ObjectMeta`), which a CRD's schema may leave out.
fn kind_schema(r: &OpenApiResource) -> Value {
    let mut schema = match &r.schema {
        Value::Object(map) => map.clone(),
        _ => match builtin_definition(&definition_name(r)) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        },
    };
    if !is_builtin(r) {
        schema.entry("type").or_insert_with(|| "object".into());
        let properties = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(properties) = properties {
            add_type_meta(properties);
            properties.insert(
                "metadata".into(),
                described_reference(OBJECT_META, "Standard object's metadata."),
            );
        }
    }
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_list(&r.group, &r.version, &r.kind),
    );
    Value::Object(schema)
}

/// Adds `apiVersion` and `kind`, unless present.
fn add_type_meta(properties: &mut Map<String, Value>) {
    for field in ["apiVersion", "kind"] {
        if !properties.contains_key(field) {
            let lent = builtin_definition(TYPE_META_LENDER)
                .and_then(|d| d["properties"].get(field))
                .cloned()
                .unwrap_or_else(|| json!({"type": "string"}));
            properties.insert(field.into(), lent);
        }
    }
}

/// The schema of a resource's list kind (`PodList`): `items` of the kind and `ListMeta`.
fn list_schema(r: &OpenApiResource) -> Value {
    let mut properties = Map::new();
    add_type_meta(&mut properties);
    properties.insert(
        "items".into(),
        json!({
            "description": format!("List of {}.", r.plural),
            "type": "array",
            "items": reference(&definition_name(r)),
        }),
    );
    properties.insert(
        "metadata".into(),
        described_reference(LIST_META, "Standard list metadata."),
    );
    json!({
        "description": format!("{}List is a list of {} objects.", r.kind, r.kind),
        "type": "object",
        "required": ["items"],
        "properties": properties,
        "x-kubernetes-group-version-kind": gvk_list(&r.group, &r.version, &format!("{}List", r.kind)),
    })
}

/// The schemas of a document: every resource's kind and list, then, transitively, every
/// built-in schema that they or `roots` (the document's paths) reference. A reference to a
/// name that is neither is left dangling.
pub(super) fn components<'a>(
    resources: impl IntoIterator<Item = &'a OpenApiResource>,
    roots: &Value,
) -> BTreeMap<String, Value> {
    let mut schemas = BTreeMap::new();
    for r in resources {
        schemas.insert(definition_name(r), kind_schema(r));
        schemas.insert(list_definition_name(r), list_schema(r));
    }
    let mut pending = Vec::new();
    references(roots, &mut pending);
    for schema in schemas.values() {
        references(schema, &mut pending);
    }
    while let Some(name) = pending.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        if let Some(schema) = builtin_definition(&name) {
            references(schema, &mut pending);
            schemas.insert(name, schema.clone());
        }
    }
    schemas
}

/// Appends the definition names `value`'s `$ref`s point to.
pub(super) fn references(value: &Value, names: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
            {
                names.push(name.to_owned());
            }
            map.values().for_each(|v| references(v, names));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, names)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> OpenApiResource {
        OpenApiResource {
            group: "stable.example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
            subresources: vec![],
            verbs: vec![],
            schema: json!({
                "type": "object",
                "properties": {
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                },
            }),
        }
    }

    #[test]
    fn custom_resources_should_be_named_by_reversed_group() {
        let w = widget();
        assert_eq!(definition_name(&w), "com.example.stable.v1.Widget");
        assert_eq!(list_definition_name(&w), "com.example.stable.v1.WidgetList");
        assert!(!is_builtin(&w));
    }

    #[test]
    fn custom_resource_metadata_should_become_object_meta() {
        let schema = kind_schema(&widget());
        let properties = &schema["properties"];
        assert_eq!(
            properties["metadata"]["allOf"][0]["$ref"],
            format!("{REF_PREFIX}{OBJECT_META}")
        );
        assert_eq!(properties["apiVersion"]["type"], "string");
        assert!(properties["kind"]["description"].is_string());
        assert_eq!(properties["spec"]["properties"]["size"]["type"], "integer");
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "version": "v1", "kind": "Widget"}])
        );
    }

    #[test]
    fn components_should_pull_in_referenced_builtins_transitively() {
        let schemas = components(
            [&widget()],
            &reference("io.k8s.apimachinery.pkg.apis.meta.v1.Status"),
        );
        for name in [
            "com.example.stable.v1.Widget",
            "com.example.stable.v1.WidgetList",
            OBJECT_META,
            LIST_META,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
        ] {
            assert!(schemas.contains_key(name), "{name}");
        }
        assert!(!schemas.contains_key("io.k8s.api.core.v1.Pod"));
    }
}
