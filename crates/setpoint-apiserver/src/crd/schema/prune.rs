//! Pruning: what a structural schema does not declare is dropped, as kube-apiserver drops it
//! before storing a custom resource. `x-kubernetes-preserve-unknown-fields` keeps a node's
//! undeclared fields, `additionalProperties` makes an object a map, an embedded resource and
//! the root keep `apiVersion`, `kind` and `metadata`, and a `null` where the schema is not
//! `nullable` (and has no default to replace it with) is dropped too.

use serde_json::Value;

use super::{Additional, Schema};

/// Fields every object that is a Kubernetes object keeps whatever its schema says.
const TYPE_AND_OBJECT_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl Schema {
    /// Drops from `value` what this schema does not declare; `root` for the whole object.
    pub(crate) fn prune(&self, value: &mut Value, root: bool) {
        match value {
            Value::Object(map) => {
                let keep_meta = root || self.embedded_resource;
                map.retain(|k, v| {
                    if keep_meta && TYPE_AND_OBJECT_META.contains(&k.as_str()) {
                        return true;
                    }
                    match self.properties.get(k) {
                        Some(child) => {
                            if v.is_null() && !child.nullable && child.default.is_none() {
                                return false;
                            }
                            child.prune(v, false);
                            true
                        }
                        None => match &self.additional {
                            Some(Additional::Schema(child)) => {
                                if v.is_null() && !child.nullable && child.default.is_none() {
                                    return false;
                                }
                                child.prune(v, false);
                                true
                            }
                            Some(Additional::Any) => true,
                            None => self.preserve_unknown,
                        },
                    }
                });
            }
            Value::Array(items) => {
                if let Some(child) = &self.items {
                    for item in items {
                        child.prune(item, false);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Schema;

    fn schema(v: serde_json::Value) -> Schema {
        Schema::compile(&v, "s").unwrap()
    }

    #[test]
    fn prune_should_drop_undeclared_fields_and_keep_object_meta() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}));
        let mut o = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"size": 1, "bogus": true}, "extra": 1});
        s.prune(&mut o, true);
        assert_eq!(
            o,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"size": 1}})
        );
    }

    #[test]
    fn prune_should_honour_preserve_unknown_fields_maps_and_embedded_resources() {
        let s = schema(json!({"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"known": {"type": "object", "properties": {}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}
        }}));
        let mut o = json!({
            "free": {"anything": {"deep": 1}, "known": {"dropped": 1}},
            "labels": {"x": {"a": "1", "b": 2}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "other": 1},
            "list": [{"n": "a", "m": 1}]
        });
        s.prune(&mut o, false);
        assert_eq!(
            o,
            json!({
                "free": {"anything": {"deep": 1}, "known": {}},
                "labels": {"x": {"a": "1"}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
                "list": [{"n": "a"}]
            })
        );
    }

    #[test]
    fn prune_should_drop_nulls_only_where_not_nullable_and_without_default() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
            "c": {"type": "string", "default": "x"}}}));
        let mut o = json!({"a": null, "b": null, "c": null});
        s.prune(&mut o, false);
        assert_eq!(o, json!({"b": null, "c": null}));
    }
}
