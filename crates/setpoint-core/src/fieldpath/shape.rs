//! [`Shape`]: what server-side apply needs to know of a kind's schema — how each list merges
//! (replaced whole, a set of scalars, or items keyed by fields), which objects are atomic
//! (replaced whole), and which object keys are map entries rather than named fields.
//!
//! Built-in kinds get theirs from the strategic-merge table ([`PatchSchema`]): a list with a
//! merge key is keyed by it (container and service ports by port *and* protocol, as their
//! `listMapKey`s say), a merged list of scalars is a set, every other list is atomic; label
//! selectors are atomic, as their types are marked. Custom resources get theirs from the
//! structural schema: `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`, `additionalProperties` and `x-kubernetes-preserve-unknown-fields`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::patch::{FieldStrategy, PatchSchema};

/// How a list merges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole; owned as one field.
    #[default]
    Atomic,
    /// A set of scalars: items merge by value.
    Set,
    /// Items are objects identified by these fields.
    Map(Vec<String>),
}

/// The merge rules of one node of a schema and the nodes below it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// How a list here merges.
    pub list: ListType,
    /// An object here is replaced whole.
    pub atomic: bool,
    /// An object's keys not in `fields` are map entries (each owned on its own, even when
    /// its value is an object).
    pub entries: bool,
    /// Built-in rules apply below (label selectors are atomic).
    builtin: bool,
    /// Named fields of an object here.
    pub fields: BTreeMap<String, Shape>,
    /// A list's items, or a map's values.
    pub items: Option<Box<Shape>>,
}

static EMPTY: Shape = Shape {
    list: ListType::Atomic,
    atomic: false,
    entries: false,
    builtin: false,
    fields: BTreeMap::new(),
    items: None,
};

static BUILTIN_EMPTY: Shape = Shape {
    list: ListType::Atomic,
    atomic: false,
    entries: false,
    builtin: true,
    fields: BTreeMap::new(),
    items: None,
};

static BUILTIN_ATOMIC: Shape = Shape {
    list: ListType::Atomic,
    atomic: true,
    entries: false,
    builtin: true,
    fields: BTreeMap::new(),
    items: None,
};

/// Fields of built-in kinds whose types are atomic wherever they appear: label selectors
/// (and `Service`/`ReplicationController` selectors, whose maps are marked atomic).
const ATOMIC_BUILTIN_FIELDS: &[&str] = &[
    "selector",
    "labelSelector",
    "namespaceSelector",
    "podSelector",
    "objectSelector",
];

/// A key field's default, used when an item omits it (a port's protocol).
#[must_use]
pub(super) fn key_default(field: &str) -> Option<Value> {
    (field == "protocol").then(|| Value::String("TCP".into()))
}

impl Shape {
    /// The shape of the named field `name` of an object here.
    #[must_use]
    pub fn field(&self, name: &str) -> &Shape {
        if let Some(shape) = self.fields.get(name) {
            return shape;
        }
        if self.builtin && ATOMIC_BUILTIN_FIELDS.contains(&name) {
            return &BUILTIN_ATOMIC;
        }
        match &self.items {
            Some(items) => items,
            None => self.default_child(),
        }
    }

    /// The shape of a list's items (or a map's values). A built-in list node holds its
    /// items' fields itself (the strategic-merge table's paths skip list items).
    #[must_use]
    pub fn item(&self) -> &Shape {
        match &self.items {
            Some(items) => items,
            None if self.builtin && !self.fields.is_empty() => self,
            None => self.default_child(),
        }
    }

    /// Whether `name` is a named field here (not a map entry).
    #[must_use]
    pub fn is_named(&self, name: &str) -> bool {
        !self.entries || self.fields.contains_key(name)
    }

    fn default_child(&self) -> &'static Shape {
        if self.builtin {
            &BUILTIN_EMPTY
        } else {
            &EMPTY
        }
    }

    /// The shape of a built-in kind: its strategic-merge table, or (for a kind without one)
    /// object metadata, pod templates under `spec.template` and `spec.jobTemplate`, and
    /// `status.conditions` keyed by type.
    #[must_use]
    pub fn builtin(api_version: &str, kind: &str) -> Shape {
        let mut root = Shape {
            builtin: true,
            ..Shape::default()
        };
        let entries = match PatchSchema::for_kind(api_version, kind) {
            Some(schema) => schema.entries(),
            None => generic_builtin_entries(),
        };
        for (path, strategy) in entries {
            let list = match strategy {
                FieldStrategy::MergeByKey { key, .. } => ListType::Map(keys_of(&path, key)),
                FieldStrategy::MergeScalars => ListType::Set,
                _ => continue,
            };
            root.node_mut(&path).list = list;
        }
        let conditions = root.node_mut("status.conditions");
        if conditions.list == ListType::Atomic {
            conditions.list = ListType::Map(vec!["type".into()]);
        }
        root
    }

    /// The shape of a custom resource from its structural (OpenAPI v3) schema.
    #[must_use]
    pub fn from_openapi(schema: &Value) -> Shape {
        let mut root = shape_of(schema);
        // Every object's metadata is an ObjectMeta, whatever the CRD's schema says of it.
        static OBJECT_META: std::sync::OnceLock<Option<Shape>> = std::sync::OnceLock::new();
        let meta =
            OBJECT_META.get_or_init(|| Shape::builtin("v1", "ConfigMap").fields.remove("metadata"));
        if let Some(meta) = meta {
            root.fields.insert("metadata".into(), meta.clone());
        }
        root
    }

    /// The node at a dotted path of field names, created (with built-in defaults) if absent.
    fn node_mut(&mut self, path: &str) -> &mut Shape {
        path.split('.').fold(self, |node, name| {
            let builtin = node.builtin;
            node.fields.entry(name.to_owned()).or_insert_with(|| Shape {
                builtin,
                ..Shape::default()
            })
        })
    }
}

/// The key fields of a list merged by `key` at `path`: container ports and service ports are
/// keyed by their port and protocol.
fn keys_of(path: &str, key: &str) -> Vec<String> {
    let two = |a: &str| vec![a.to_owned(), "protocol".to_owned()];
    match key {
        "containerPort" => two("containerPort"),
        "port" if path.ends_with("spec.ports") => two("port"),
        _ => vec![key.to_owned()],
    }
}

/// The table of a built-in kind without its own: a Deployment's pod template rules, mounted
/// where workload kinds keep their templates.
fn generic_builtin_entries() -> Vec<(String, FieldStrategy)> {
    let Some(deployment) = PatchSchema::for_kind("apps/v1", "Deployment") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (path, strategy) in deployment.entries() {
        if let Some(rest) = path.strip_prefix("spec.template.") {
            out.push((path.clone(), strategy));
            out.push((format!("spec.jobTemplate.spec.template.{rest}"), strategy));
        } else if path.starts_with("metadata.") {
            out.push((path.clone(), strategy));
        }
    }
    out
}

/// A structural schema node's shape.
fn shape_of(schema: &Value) -> Shape {
    let mut shape = Shape {
        list: match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        },
        atomic: schema["x-kubernetes-map-type"].as_str() == Some("atomic"),
        entries: schema["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true),
        ..Shape::default()
    };
    if let Some(properties) = schema["properties"].as_object() {
        for (name, child) in properties {
            shape.fields.insert(name.clone(), shape_of(child));
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        shape.items = Some(Box::new(shape_of(items)));
    }
    if let Some(values) = schema.get("additionalProperties") {
        if values.is_object() || values == &Value::Bool(true) {
            shape.entries = true;
            if values.is_object() {
                shape.items = Some(Box::new(shape_of(values)));
            }
        }
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_kinds_should_key_their_lists_as_kubernetes_does() {
        let pod = Shape::builtin("v1", "Pod");
        let containers = pod.field("spec").field("containers");
        assert_eq!(containers.list, ListType::Map(vec!["name".into()]));
        assert_eq!(
            containers.item().field("ports").list,
            ListType::Map(vec!["containerPort".into(), "protocol".into()])
        );
        assert_eq!(containers.item().field("args").list, ListType::Atomic);
        assert_eq!(
            pod.field("metadata").field("finalizers").list,
            ListType::Set
        );
        let svc = Shape::builtin("v1", "Service");
        assert_eq!(
            svc.field("spec").field("ports").list,
            ListType::Map(vec!["port".into(), "protocol".into()])
        );
        assert!(svc.field("spec").field("selector").atomic);
        let deploy = Shape::builtin("apps/v1", "Deployment");
        assert!(deploy.field("spec").field("selector").atomic);
        assert!(!deploy.field("spec").field("template").atomic);
        // A kind without a table still keys its pod template's containers.
        let sts = Shape::builtin("apps/v1", "StatefulSet");
        assert_eq!(
            sts.field("spec")
                .field("template")
                .field("spec")
                .field("containers")
                .list,
            ListType::Map(vec!["name".into()])
        );
        assert_eq!(
            sts.field("status").field("conditions").list,
            ListType::Map(vec!["type".into()])
        );
    }

    #[test]
    fn custom_resources_should_follow_their_schema_extensions() {
        let shape = Shape::from_openapi(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "ref": {"type": "object", "x-kubernetes-map-type": "atomic"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}}
                }}
            }
        }));
        let spec = shape.field("spec");
        assert_eq!(spec.field("items").list, ListType::Map(vec!["name".into()]));
        assert_eq!(spec.field("tags").list, ListType::Set);
        assert_eq!(spec.field("args").list, ListType::Atomic);
        assert!(spec.field("ref").atomic);
        assert!(spec.field("env").entries && !spec.field("env").is_named("X"));
        assert!(spec.is_named("anything"));
        assert_eq!(
            shape.field("metadata").field("finalizers").list,
            ListType::Set
        );
    }
}
