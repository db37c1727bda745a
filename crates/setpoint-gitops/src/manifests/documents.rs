//! Reading the objects of one manifest file: YAML (several documents separated by `---`) or
//! JSON; empty documents skipped; a `kind: List` (or `*List`) document flattened into its
//! `items`. Every object must have `apiVersion`, `kind` and `metadata.name`.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{BuildError, ObjectId};

/// Whether a file name is a manifest a directory without a kustomization contributes.
pub(super) fn is_manifest_file(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")
}

/// The objects of the file at `file`, `display` naming it in errors.
pub(super) fn read_file(file: &Path, display: &str) -> Result<Vec<Value>, BuildError> {
    let text = std::fs::read_to_string(file).map_err(|source| BuildError::Read {
        path: display.to_owned(),
        source,
    })?;
    parse(&text, display)
}

/// The objects in `text` (the contents of the file `display`).
pub(super) fn parse(text: &str, display: &str) -> Result<Vec<Value>, BuildError> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|e| BuildError::Parse {
            file: display.to_owned(),
            message: e.to_string(),
        })?;
        push_object(value, display, index + 1, &mut objects)?;
    }
    Ok(objects)
}

/// Adds one document's objects (none for an empty document, the items of a List).
fn push_object(
    value: Value,
    display: &str,
    document: usize,
    objects: &mut Vec<Value>,
) -> Result<(), BuildError> {
    let invalid = |message: &str| BuildError::Invalid {
        file: display.to_owned(),
        document,
        message: message.to_owned(),
    };
    match value {
        Value::Null => Ok(()),
        Value::Object(map) if map.is_empty() => Ok(()),
        Value::Object(mut map) => {
            let is_list = map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || (k.ends_with("List") && map.contains_key("items")));
            if is_list {
                let items = match map.remove("items") {
                    Some(Value::Array(items)) => items,
                    Some(Value::Null) | None => Vec::new(),
                    Some(_) => return Err(invalid("`items` of a List is not a list")),
                };
                for item in items {
                    if !item.is_object() {
                        return Err(invalid("an item of a List is not an object"));
                    }
                    push_one(item, &invalid, objects)?;
                }
                Ok(())
            } else {
                push_one(Value::Object(map), &invalid, objects)
            }
        }
        _ => Err(invalid("the document is not an object")),
    }
}

fn push_one(
    object: Value,
    invalid: &dyn Fn(&str) -> BuildError,
    objects: &mut Vec<Value>,
) -> Result<(), BuildError> {
    if ObjectId::of(&object).is_none() {
        return Err(invalid(
            "the object lacks apiVersion, kind or metadata.name",
        ));
    }
    objects.push(object);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_should_be_split_lists_flattened_and_empty_ones_skipped() {
        let text = "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n\
                    - apiVersion: v1\n  kind: Secret\n  metadata:\n    name: c\n---\n";
        let objects = parse(text, "x.yaml").expect("parse");
        let names: Vec<_> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn bad_yaml_should_name_the_file() {
        let err = parse("kind: [unclosed\n", "apps/web.yaml").expect_err("bad yaml");
        assert!(err.to_string().contains("apps/web.yaml"), "{err}");
        let err = parse("apiVersion: v1\nkind: ConfigMap\n", "c.yaml").expect_err("no name");
        assert!(
            err.to_string().contains("c.yaml") && err.to_string().contains("document 1"),
            "{err}"
        );
        let err = parse("- 1\n- 2\n", "l.yaml").expect_err("not an object");
        assert!(err.to_string().contains("not an object"), "{err}");
    }

    #[test]
    fn json_files_should_parse() {
        let objects = parse(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}"#,
            "j.json",
        )
        .expect("parse");
        assert_eq!(objects.len(), 1);
    }
}
