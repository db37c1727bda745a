//! A CRD version's `openAPIV3Schema`, compiled once when the CRD is registered: the
//! structural schema that prunes unknown fields ([`Schema::prune`]), fills in defaults
//! ([`Schema::apply_defaults`]) and validates objects with field paths in the causes
//! ([`Schema::validate`]), including CEL `x-kubernetes-validations` ([`super::cel`]).
//!
//! Compiling fails (with the field path in the CRD) on what could not be applied later: a
//! `pattern` that is not a regular expression, a CEL rule that does not parse, a `type` that
//! OpenAPI does not have. [`Schema::check_costs`] refuses CEL rules estimated to cost too
//! much.

mod cost;
mod default;
mod prune;
mod validate;

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::cel::Rule;

/// A JSON type a schema node admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

/// `additionalProperties` of an object node (not set, or `false`: only the declared
/// properties).
#[derive(Debug)]
pub(crate) enum Additional {
    /// `true`: any value (kept, as kube-apiserver keeps them).
    Any,
    /// A map whose values follow the schema.
    Schema(Box<Schema>),
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    /// Scalar items, each at most once.
    Set,
    /// Object items, unique by the `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// One compiled schema node.
#[derive(Debug, Default)]
pub(crate) struct Schema {
    pub(crate) kind: Option<Type>,
    pub(crate) format: Option<String>,
    pub(crate) nullable: bool,
    pub(crate) properties: BTreeMap<String, Schema>,
    pub(crate) additional: Option<Additional>,
    pub(crate) items: Option<Box<Schema>>,
    pub(crate) required: Vec<String>,
    pub(crate) enumeration: Vec<Value>,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) pattern: Option<Regex>,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) unique_items: bool,
    pub(crate) min_properties: Option<u64>,
    pub(crate) max_properties: Option<u64>,
    pub(crate) default: Option<Value>,
    pub(crate) preserve_unknown: bool,
    pub(crate) int_or_string: bool,
    pub(crate) embedded_resource: bool,
    pub(crate) list_type: Option<ListType>,
    /// Value validations that do not shape the object (`allOf`, `anyOf`, `oneOf`, `not`).
    pub(crate) all_of: Vec<Schema>,
    pub(crate) any_of: Vec<Schema>,
    pub(crate) one_of: Vec<Schema>,
    pub(crate) not: Option<Box<Schema>>,
    /// `x-kubernetes-validations`.
    pub(crate) rules: Vec<Rule>,
}

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn join(path: &str, child: &str) -> String {
    if path.is_empty() {
        child.to_owned()
    } else {
        format!("{path}.{child}")
    }
}

impl Schema {
    /// Whether the schema has CEL rules anywhere.
    pub(crate) fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Schema::has_rules)
            || self.items.as_deref().is_some_and(Schema::has_rules)
            || matches!(&self.additional, Some(Additional::Schema(s)) if s.has_rules())
            || (self.all_of.iter())
                .chain(&self.any_of)
                .chain(&self.one_of)
                .chain(self.not.as_deref())
                .any(Schema::has_rules)
    }

    /// Compiles a JSONSchemaProps value; `path` names it in errors
    /// (`spec.versions[0].schema.openAPIV3Schema.properties[spec]`).
    pub(crate) fn compile(v: &Value, path: &str) -> Result<Schema, String> {
        if !v.is_object() {
            return Err(format!("{path}: must be an object"));
        }
        let kind = match v.get("type").and_then(Value::as_str) {
            None | Some("") => None,
            Some(t) => Some(Type::parse(t).ok_or_else(|| {
                format!("{path}.type: Unsupported value: {t:?}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"")
            })?),
        };
        let mut properties = BTreeMap::new();
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                let child = format!("{path}.properties[{k}]");
                properties.insert(k.clone(), Schema::compile(p, &child)?);
            }
        }
        let additional = match v.get("additionalProperties") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(Additional::Any),
            Some(s) => Some(Additional::Schema(Box::new(Schema::compile(
                s,
                &join(path, "additionalProperties"),
            )?))),
        };
        let items = match v.get("items") {
            None | Some(Value::Null) => None,
            Some(s) => Some(Box::new(Schema::compile(s, &join(path, "items"))?)),
        };
        let pattern = match v.get("pattern").and_then(Value::as_str) {
            None => None,
            Some(p) => Some(Regex::new(p).map_err(|e| {
                format!(
                    "{path}.pattern: Invalid value: {p:?}: must be a valid regular expression: {e}"
                )
            })?),
        };
        let list_type = match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
            None => None,
            Some("atomic") => Some(ListType::Atomic),
            Some("set") => Some(ListType::Set),
            Some("map") => Some(ListType::Map(
                v.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| keys.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default(),
            )),
            Some(other) => {
                return Err(format!("{path}.x-kubernetes-list-type: Unsupported value: {other:?}: supported values: \"atomic\", \"map\", \"set\""))
            }
        };
        let list = |key: &str| -> Result<Vec<Schema>, String> {
            v.get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, s)| Schema::compile(s, &format!("{path}.{key}[{i}]")))
                        .collect()
                })
                .unwrap_or_else(|| Ok(Vec::new()))
        };
        let mut rules = Vec::new();
        if let Some(list) = v.get("x-kubernetes-validations").and_then(Value::as_array) {
            for (i, r) in list.iter().enumerate() {
                rules.push(Rule::compile(
                    r,
                    &format!("{path}.x-kubernetes-validations[{i}]"),
                )?);
            }
        }
        Ok(Schema {
            kind,
            format: v.get("format").and_then(Value::as_str).map(str::to_owned),
            nullable: v.get("nullable").and_then(Value::as_bool).unwrap_or(false),
            properties,
            additional,
            items,
            required: v
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            enumeration: v
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            minimum: v.get("minimum").and_then(Value::as_f64),
            exclusive_minimum: v
                .get("exclusiveMinimum")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            maximum: v.get("maximum").and_then(Value::as_f64),
            exclusive_maximum: v
                .get("exclusiveMaximum")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            multiple_of: v.get("multipleOf").and_then(Value::as_f64),
            min_length: u64_at(v, "minLength"),
            max_length: u64_at(v, "maxLength"),
            pattern,
            min_items: u64_at(v, "minItems"),
            max_items: u64_at(v, "maxItems"),
            unique_items: v
                .get("uniqueItems")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            min_properties: u64_at(v, "minProperties"),
            max_properties: u64_at(v, "maxProperties"),
            default: v.get("default").cloned(),
            preserve_unknown: v
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            int_or_string: v
                .get("x-kubernetes-int-or-string")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            embedded_resource: v
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            list_type,
            all_of: list("allOf")?,
            any_of: list("anyOf")?,
            one_of: list("oneOf")?,
            not: match v.get("not") {
                None | Some(Value::Null) => None,
                Some(s) => Some(Box::new(Schema::compile(s, &join(path, "not"))?)),
            },
            rules,
        })
    }
}
