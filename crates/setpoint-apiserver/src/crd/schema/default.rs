//! Defaulting: a property the object lacks (or has as `null` where the schema is not
//! `nullable`) takes the schema's `default`, at every depth, in objects, maps and list items.
//! Applied on every write and on every read from storage, as kube-apiserver does, so a
//! default added to a CRD shows on objects stored before it.

use serde_json::Value;

use super::{Additional, Schema};

impl Schema {
    /// Fills in the defaults this schema declares.
    pub(crate) fn apply_defaults(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (k, child) in &self.properties {
                    let Some(default) = &child.default else {
                        continue;
                    };
                    match map.get(k) {
                        None => {
                            map.insert(k.clone(), default.clone());
                        }
                        Some(Value::Null) if !child.nullable => {
                            map.insert(k.clone(), default.clone());
                        }
                        Some(_) => {}
                    }
                }
                for (k, v) in map.iter_mut() {
                    match self.properties.get(k) {
                        Some(child) => child.apply_defaults(v),
                        None => {
                            if let Some(Additional::Schema(child)) = &self.additional {
                                child.apply_defaults(v);
                            }
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(child) = &self.items {
                    for item in items {
                        child.apply_defaults(item);
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

    #[test]
    fn defaults_should_fill_missing_and_null_fields_at_every_depth() {
        let s = Schema::compile(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "default": {},
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "auto"},
                    "ports": {"type": "array", "items": {"type": "object", "properties": {
                        "protocol": {"type": "string", "default": "TCP"}}}}}}}}),
            "s",
        )
        .unwrap();
        let mut o = json!({"metadata": {"name": "x"}});
        s.apply_defaults(&mut o);
        assert_eq!(o["spec"], json!({"replicas": 1, "mode": "auto"}));
        let mut o =
            json!({"spec": {"replicas": 3, "mode": null, "ports": [{}, {"protocol": "UDP"}]}});
        s.apply_defaults(&mut o);
        assert_eq!(
            o["spec"],
            json!({"replicas": 3, "mode": "auto", "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}]})
        );
    }
}
