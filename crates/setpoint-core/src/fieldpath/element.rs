//! One step of a field path, in the encoded form `fieldsV1` keys use: `f:<field name>`,
//! `k:<JSON object of the item's key fields>` (an item of a list keyed by fields),
//! `v:<JSON value>` (an item of a set list) and `i:<index>` (a list item by position).

use std::fmt::Write;

use serde_json::{Map, Value};

/// A decoded path element.
#[derive(Clone, Debug, PartialEq)]
pub enum Element {
    /// An object's field.
    Field(String),
    /// An item of an associative list, by its key fields (sorted by name).
    Key(Map<String, Value>),
    /// An item of a set, by its value.
    Value(Value),
    /// A list item by position.
    Index(usize),
}

impl Element {
    /// The `fieldsV1` key of a field.
    #[must_use]
    pub fn field(name: &str) -> String {
        format!("f:{name}")
    }

    /// The `fieldsV1` key of a keyed list item; the key fields are written sorted by name.
    #[must_use]
    pub fn key(fields: &[(&str, &Value)]) -> String {
        let mut sorted: Vec<&(&str, &Value)> = fields.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::from("k:{");
        for (i, (name, value)) in sorted.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String((*name).to_owned()).to_string());
            out.push(':');
            out.push_str(&compact(value));
        }
        out.push('}');
        out
    }

    /// The `fieldsV1` key of a set item.
    #[must_use]
    pub fn value(value: &Value) -> String {
        format!("v:{}", compact(value))
    }

    /// The `fieldsV1` key of a list item by position.
    #[must_use]
    pub fn index(index: usize) -> String {
        format!("i:{index}")
    }

    /// Decodes a `fieldsV1` key; `None` if it is not one.
    #[must_use]
    pub fn decode(encoded: &str) -> Option<Element> {
        let (prefix, rest) = encoded.split_once(':')?;
        match prefix {
            "f" => Some(Element::Field(rest.to_owned())),
            "k" => match serde_json::from_str(rest).ok()? {
                Value::Object(map) if !map.is_empty() => Some(Element::Key(map)),
                _ => None,
            },
            "v" => serde_json::from_str(rest).ok().map(Element::Value),
            "i" => rest.parse().ok().map(Element::Index),
            _ => None,
        }
    }

    /// Writes this element as conflict messages show it: `.name`, `[name="web"]`,
    /// `[="x"]`, `[0]`.
    fn display(&self, out: &mut String) {
        match self {
            Element::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Element::Key(fields) => {
                out.push('[');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{name}={}", compact(value));
                }
                out.push(']');
            }
            Element::Value(value) => {
                let _ = write!(out, "[={}]", compact(value));
            }
            Element::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
}

/// A path of encoded elements as conflict messages show it, e.g.
/// `.spec.containers[name="web"].image`.
#[must_use]
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for encoded in path {
        match Element::decode(encoded) {
            Some(element) => element.display(&mut out),
            None => {
                out.push('.');
                out.push_str(encoded);
            }
        }
    }
    out
}

/// `value` as compact JSON with object keys sorted (a stable encoding for keys).
fn compact(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), compact(&map[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elements_should_encode_as_fields_v1_keys() {
        assert_eq!(Element::field("spec"), "f:spec");
        assert_eq!(
            Element::key(&[("protocol", &json!("TCP")), ("containerPort", &json!(80))]),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(Element::value(&json!("kubernetes")), r#"v:"kubernetes""#);
        assert_eq!(Element::index(3), "i:3");
    }

    #[test]
    fn paths_should_display_as_conflict_messages_show_them() {
        let path = vec![
            "f:spec".to_owned(),
            "f:containers".to_owned(),
            r#"k:{"name":"web"}"#.to_owned(),
            "f:image".to_owned(),
        ];
        assert_eq!(display_path(&path), r#".spec.containers[name="web"].image"#);
        assert_eq!(
            display_path(&[
                "f:metadata".into(),
                "f:finalizers".into(),
                r#"v:"a""#.into()
            ]),
            r#".metadata.finalizers[="a"]"#
        );
        assert_eq!(Element::decode("i:2"), Some(Element::Index(2)));
        assert_eq!(Element::decode("x:2"), None);
        assert_eq!(Element::decode("k:[]"), None);
    }
}
