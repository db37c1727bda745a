//! Built-in kinds' schemas, generated once from `k8s-openapi`'s `schemars` impls.
//!
//! The generator is set up for OpenAPI 3.0: references are `#/components/schemas/<name>` with
//! Kubernetes' definition names, and a reference with siblings (a field's description) is
//! wrapped in `allOf`, as in kube-apiserver's own v3 documents. On top of `k8s-openapi`'s
//! output, every kind's schema gets `x-kubernetes-group-version-kind`, the list fields get
//! their patch strategies ([`super::patch_meta`]), and `metadata` is no longer `required`
//! (`k8s-openapi` marks it so because its Rust field is not optional; Kubernetes does not,
//! except on core `v1` `Event`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::autoscaling::v1 as autoscaling;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::{JsonSchema, Schema};
use k8s_openapi::Resource;
use serde_json::Value;

use super::patch_meta;
use super::schema::{gvk_list, REF_PREFIX};
use crate::registry::registered_resources;
use crate::registry::strategy::TypedSchema;

/// `ObjectMeta`, the `metadata` of every kind.
pub(super) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// `ListMeta`, the `metadata` of every list.
pub(super) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// `Status`, what deleting a collection answers.
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// `DeleteOptions`, the body of DELETE requests.
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// `Patch`, the body of PATCH requests (any object).
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// `WatchEvent`, one event of a watch stream.
pub(super) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
/// `autoscaling/v1` `Scale`, what the `scale` subresource of any kind speaks.
pub(super) const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// A built-in kind and how to generate its schema.
struct BuiltinKind {
    group: String,
    version: String,
    kind: String,
    /// Adds the kind's schema, and every schema it references, to the generator's
    /// definitions and returns a `$ref` to it.
    register: TypedSchema,
}

fn kind<T: Resource + JsonSchema>() -> BuiltinKind {
    BuiltinKind {
        group: T::GROUP.to_owned(),
        version: T::VERSION.to_owned(),
        kind: T::KIND.to_owned(),
        register: SchemaGenerator::subschema_for::<T>,
    }
}

/// The built-in kinds with schemas: every registered kind that names its type
/// ([`crate::registry::Strategy::typed_schema`]), and the kinds of subresources.
fn kinds() -> &'static [BuiltinKind] {
    static KINDS: OnceLock<Vec<BuiltinKind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let mut kinds: Vec<BuiltinKind> = registered_resources()
            .into_iter()
            .filter_map(|def| {
                Some(BuiltinKind {
                    register: def.strategy.typed_schema()?,
                    group: def.gvk.group,
                    version: def.gvk.version,
                    kind: def.gvk.kind,
                })
            })
            .collect();
        kinds.extend([
            // Registered by `crd/`, which gives it its strategy.
            kind::<CustomResourceDefinition>(),
            kind::<core::Binding>(),
            kind::<policy::Eviction>(),
            kind::<autoscaling::Scale>(),
        ]);
        kinds
    })
}

/// Every built-in definition, by name, and the definition name of each of [`kinds`].
struct Registry {
    /// Each schema's `$ref`s name other entries of this map.
    definitions: BTreeMap<String, Value>,
    /// Parallel to [`kinds`].
    kind_names: Vec<String>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(generate)
}

fn generate() -> Registry {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let kind_names = kinds()
        .iter()
        .map(|k| ref_name(&(k.register)(&mut generator)))
        .collect();
    // What operations refer to besides the kinds.
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::Patch>();
    generator.subschema_for::<meta::WatchEvent<()>>();
    generator.subschema_for::<meta::ListMeta>();

    let mut definitions: BTreeMap<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    for (k, name) in kinds().iter().zip(&kind_names) {
        if let Some(Value::Object(schema)) = definitions.get_mut(name) {
            if !(k.group.is_empty() && k.kind == "Event") {
                unrequire_metadata(schema);
            }
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk_list(&k.group, &k.version, &k.kind),
            );
        }
    }
    patch_meta::annotate(&mut definitions);
    Registry {
        definitions,
        kind_names,
    }
}

/// The definition name a `{"$ref": "#/components/schemas/<name>"}` points to.
fn ref_name(reference: &Schema) -> String {
    reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .unwrap_or_default()
        .to_owned()
}

fn unrequire_metadata(schema: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|field| field != "metadata");
        if required.is_empty() {
            schema.remove("required");
        }
    }
}

/// The OpenAPI v3 schema of a built-in kind, or `None` for kinds without one (custom
/// resources, kinds Setpoint does not serve). Its `$ref`s point into
/// `#/components/schemas/`, which [`super::v3_group_version`] fills in.
///
/// Kinds: every built-in kind whose strategy names its type (all of `registry/kinds/`), and
/// core `v1` `Binding`, `policy/v1` `Eviction` and `autoscaling/v1` `Scale`.
pub(crate) fn builtin_schema(group: &str, version: &str, kind: &str) -> Option<Value> {
    let name = builtin_definition_name(group, version, kind)?;
    registry().definitions.get(name).cloned()
}

/// The definition name of a built-in kind, e.g. `io.k8s.api.core.v1.Pod`.
pub(super) fn builtin_definition_name(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'static str> {
    let at = kinds()
        .iter()
        .position(|k| k.group == group && k.version == version && k.kind == kind)?;
    registry().kind_names.get(at).map(String::as_str)
}

/// A built-in definition (kind or not) by name, e.g. `io.k8s.api.core.v1.PodSpec`.
pub(super) fn builtin_definition(name: &str) -> Option<&'static Value> {
    registry().definitions.get(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_should_have_a_described_schema_with_its_gvk_list() {
        for k in kinds() {
            let schema = builtin_schema(&k.group, &k.version, &k.kind).expect(&k.kind);
            assert_eq!(schema["type"], "object", "{}", k.kind);
            assert!(schema["description"].is_string(), "{}", k.kind);
            assert_eq!(
                schema["x-kubernetes-group-version-kind"],
                serde_json::json!([{"group": k.group, "version": k.version, "kind": k.kind}])
            );
        }
    }

    #[test]
    fn pod_schema_should_use_kubernetes_names_and_allof_wrapped_references() {
        let pod = builtin_schema("", "v1", "Pod").expect("Pod");
        assert_eq!(
            pod["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodSpec"
        );
        assert!(pod["properties"]["spec"]["description"].is_string());
        assert_eq!(
            builtin_definition_name("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        assert_eq!(
            builtin_definition_name("events.k8s.io", "v1", "Event"),
            Some("io.k8s.api.events.v1.Event")
        );
    }

    #[test]
    fn metadata_should_be_required_only_on_core_events() {
        let pod = builtin_schema("", "v1", "Pod").expect("Pod");
        assert!(pod.get("required").is_none());
        let event = builtin_schema("", "v1", "Event").expect("Event");
        assert!(event["required"]
            .as_array()
            .expect("required")
            .contains(&"metadata".into()));
        let binding = builtin_schema("", "v1", "Binding").expect("Binding");
        assert_eq!(binding["required"], serde_json::json!(["target"]));
    }

    #[test]
    fn unknown_kinds_should_have_no_builtin_schema() {
        assert!(builtin_schema("example.com", "v1", "Widget").is_none());
        assert!(builtin_schema("apps", "v1beta1", "Deployment").is_none());
        assert!(builtin_schema("", "v1", "Lease").is_none());
    }

    #[test]
    fn operation_schemas_should_be_registered() {
        for name in [
            OBJECT_META,
            LIST_META,
            STATUS,
            DELETE_OPTIONS,
            PATCH,
            WATCH_EVENT,
            SCALE,
        ] {
            assert!(builtin_definition(name).is_some(), "{name}");
        }
    }

    #[test]
    fn schemas_should_be_openapi_3_without_json_schema_leftovers() {
        /// Checks a schema; `properties` holds field names, not keywords, so it is walked
        /// by its values.
        fn walk(v: &Value, at: &str) {
            match v {
                Value::Object(map) => {
                    for (key, child) in map {
                        assert!(
                            !matches!(key.as_str(), "$schema" | "$defs" | "definitions" | "const"),
                            "{key} at {at}"
                        );
                        match key.as_str() {
                            "type" => assert!(child.is_string(), "type list at {at}"),
                            "$ref" => {
                                let r = child.as_str().expect("string $ref");
                                assert!(r.starts_with(REF_PREFIX), "{r} at {at}");
                            }
                            "properties" => {
                                for (field, schema) in child.as_object().expect("properties") {
                                    walk(schema, &format!("{at}.{field}"));
                                }
                            }
                            _ => walk(child, &format!("{at}/{key}")),
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|i| walk(i, at)),
                _ => {}
            }
        }
        for (name, schema) in &registry().definitions {
            walk(schema, name);
        }
    }
}
