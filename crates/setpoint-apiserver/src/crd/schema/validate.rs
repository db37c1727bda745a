//! Validation of an object against its structural schema, with kube-apiserver's field paths
//! (`spec.ports[1].name`) and messages: type, `required`, `enum`, `minimum`/`maximum` (and
//! their exclusive forms), `multipleOf`, `minLength`/`maxLength`/`pattern`, a few `format`s,
//! `minItems`/`maxItems`/`uniqueItems`, `minProperties`/`maxProperties`, `nullable`,
//! `x-kubernetes-int-or-string`, embedded resources, list types (`set`, `map` with its keys),
//! `allOf`/`anyOf`/`oneOf`/`not`, and CEL rules with `self` and, on updates, `oldSelf`.

use serde_json::{json, Value};
use setpoint_core::Cause;

use super::{Additional, ListType, Schema, Type};
use crate::crd::cel::{check_rules, type_name, Budget};

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// How a path is named in messages: the root is `<root>`.
fn shown(path: &str) -> &str {
    if path.is_empty() {
        "<root>"
    } else {
        path
    }
}

fn invalid(path: &str, value: &Value, detail: String) -> Cause {
    Cause::invalid(shown(path), value, &detail)
}

fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

fn type_matches(want: Type, v: &Value) -> bool {
    match want {
        Type::Object => v.is_object(),
        Type::Array => v.is_array(),
        Type::String => v.is_string(),
        Type::Integer => v.is_i64() || v.is_u64(),
        Type::Number => v.is_number(),
        Type::Boolean => v.is_boolean(),
    }
}

fn format_ok(format: &str, v: &Value) -> bool {
    match (format, v) {
        ("int32", Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        ("date-time", Value::String(s)) => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        ("date", Value::String(s)) => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        ("email", Value::String(s)) => {
            let mut parts = s.splitn(2, '@');
            matches!((parts.next(), parts.next()), (Some(a), Some(b)) if !a.is_empty() && b.contains('.'))
        }
        ("uuid", Value::String(s)) => {
            let groups: Vec<&str> = s.split('-').collect();
            groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && groups
                    .iter()
                    .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
        }
        _ => true,
    }
}

/// The key an item of a `map` list is identified by.
fn map_key(item: &Value, keys: &[String]) -> Value {
    let mut out = serde_json::Map::new();
    for k in keys {
        out.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(out)
}

impl Schema {
    /// Validates `value` at `path` (empty for the whole object); `old` is the same place in
    /// the object before an update, where it can be told (for transition rules). CEL rules
    /// are paid for from `budget`, and no longer run once it is exhausted.
    pub(crate) fn validate(
        &self,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        budget: &Budget,
        causes: &mut Vec<Cause>,
    ) {
        let before = causes.len();
        if value.is_null() {
            if !self.nullable && (self.kind.is_some() || self.int_or_string) {
                let want = self.kind.map_or("integer,string", Type::name);
                causes.push(invalid(
                    path,
                    &json!("null"),
                    format!("{} in body must be of type {want}: \"null\"", shown(path)),
                ));
            }
            return;
        }
        if self.int_or_string {
            if !(value.is_string() || value.is_i64() || value.is_u64()) {
                causes.push(invalid(
                    path,
                    &json!(type_name(value)),
                    format!(
                        "{} in body must be of type integer,string: {:?}",
                        shown(path),
                        type_name(value)
                    ),
                ));
                return;
            }
        } else if let Some(want) = self.kind {
            if !type_matches(want, value) {
                causes.push(invalid(
                    path,
                    &json!(type_name(value)),
                    format!(
                        "{} in body must be of type {}: {:?}",
                        shown(path),
                        want.name(),
                        type_name(value)
                    ),
                ));
                return;
            }
        }
        if !self.enumeration.is_empty() && !self.enumeration.contains(value) {
            let list: Vec<String> = self.enumeration.iter().map(Value::to_string).collect();
            causes.push(Cause::new(
                "FieldValueNotSupported",
                shown(path),
                format!(
                    "{}: Unsupported value: {value}: supported values: {}",
                    shown(path),
                    list.join(", ")
                ),
            ));
        }
        if let Some(format) = &self.format {
            if !format_ok(format, value) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{} in body must be of type {format}: {value}", shown(path)),
                ));
            }
        }
        match value {
            Value::Number(n) => {
                self.validate_number(n.as_f64().unwrap_or(0.0), value, path, causes)
            }
            Value::String(s) => self.validate_string(s, value, path, causes),
            Value::Array(items) => self.validate_array(items, old, path, budget, causes),
            Value::Object(map) => self.validate_object(map, old, path, budget, causes),
            _ => {}
        }
        for s in &self.all_of {
            s.validate(value, old, path, budget, causes);
        }
        let passes = |s: &Schema| {
            let mut scratch = Vec::new();
            s.validate(value, old, path, budget, &mut scratch);
            scratch.is_empty()
        };
        if !self.any_of.is_empty() && !self.any_of.iter().any(passes) {
            causes.push(invalid(
                path,
                value,
                "must validate at least one schema (anyOf)".into(),
            ));
        }
        if !self.one_of.is_empty() && self.one_of.iter().filter(|s| passes(s)).count() != 1 {
            causes.push(invalid(
                path,
                value,
                "must validate one and only one schema (oneOf)".into(),
            ));
        }
        if let Some(not) = &self.not {
            if passes(not) {
                causes.push(invalid(
                    path,
                    value,
                    "must not validate the schema (not)".into(),
                ));
            }
        }
        // CEL rules run only on values that passed the rest, as kube-apiserver's do.
        if causes.len() == before {
            check_rules(&self.rules, value, old, shown(path), budget, causes);
        }
    }

    fn validate_number(&self, n: f64, value: &Value, path: &str, causes: &mut Vec<Cause>) {
        let p = shown(path);
        if let Some(min) = self.minimum {
            if (self.exclusive_minimum && n <= min) || n < min {
                let op = if self.exclusive_minimum {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                causes.push(invalid(
                    path,
                    value,
                    format!("{p} in body should be {op} {}", number_text(min)),
                ));
            }
        }
        if let Some(max) = self.maximum {
            if (self.exclusive_maximum && n >= max) || n > max {
                let op = if self.exclusive_maximum {
                    "less than"
                } else {
                    "less than or equal to"
                };
                causes.push(invalid(
                    path,
                    value,
                    format!("{p} in body should be {op} {}", number_text(max)),
                ));
            }
        }
        if let Some(m) = self.multiple_of {
            if m != 0.0 && (n / m).fract() != 0.0 {
                causes.push(invalid(
                    path,
                    value,
                    format!("{p} in body should be a multiple of {}", number_text(m)),
                ));
            }
        }
    }

    fn validate_string(&self, s: &str, value: &Value, path: &str, causes: &mut Vec<Cause>) {
        let p = shown(path);
        let len = s.chars().count() as u64;
        if let Some(max) = self.max_length {
            if len > max {
                causes.push(Cause::new(
                    "FieldValueTooLong",
                    p,
                    format!("{p}: Too long: may not be more than {max} bytes"),
                ));
            }
        }
        if let Some(min) = self.min_length {
            if len < min {
                causes.push(invalid(
                    path,
                    value,
                    format!("{p} in body should be at least {min} chars long"),
                ));
            }
        }
        if let Some(re) = &self.pattern {
            if !re.is_match(s) {
                causes.push(invalid(
                    path,
                    value,
                    format!("{p} in body should match '{}'", re.as_str()),
                ));
            }
        }
    }

    fn validate_array(
        &self,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
        budget: &Budget,
        causes: &mut Vec<Cause>,
    ) {
        let p = shown(path);
        if let Some(max) = self.max_items {
            if items.len() as u64 > max {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    p,
                    format!(
                        "{p}: Too many: {}: must have at most {max} items",
                        items.len()
                    ),
                ));
            }
        }
        if let Some(min) = self.min_items {
            if (items.len() as u64) < min {
                causes.push(invalid(
                    path,
                    &json!(items.len()),
                    format!("{p} in body should have at least {min} items"),
                ));
            }
        }
        let keys = match &self.list_type {
            Some(ListType::Map(keys)) => Some(keys.as_slice()),
            _ => None,
        };
        if self.unique_items || self.list_type == Some(ListType::Set) || keys.is_some() {
            let mut seen: Vec<Value> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let id = keys.map_or_else(|| item.clone(), |k| map_key(item, k));
                if seen.contains(&id) {
                    causes.push(Cause::duplicate(format!("{p}[{i}]"), &id));
                } else {
                    seen.push(id);
                }
            }
        }
        let Some(schema) = &self.items else { return };
        let old_items = old.and_then(Value::as_array);
        for (i, item) in items.iter().enumerate() {
            // Items are matched to their former selves by key in `map` lists only.
            let before = match (keys, old_items) {
                (Some(k), Some(olds)) => {
                    let id = map_key(item, k);
                    olds.iter().find(|o| map_key(o, k) == id)
                }
                _ => None,
            };
            schema.validate(item, before, &format!("{path}[{i}]"), budget, causes);
        }
    }

    fn validate_object(
        &self,
        map: &serde_json::Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        budget: &Budget,
        causes: &mut Vec<Cause>,
    ) {
        let p = shown(path);
        for r in &self.required {
            if !map.contains_key(r) {
                causes.push(Cause::required(child(path, r)));
            }
        }
        if self.embedded_resource {
            for r in ["apiVersion", "kind"] {
                if map.get(r).and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push(Cause::required(child(path, r)));
                }
            }
        }
        if let Some(max) = self.max_properties {
            if map.len() as u64 > max {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    p,
                    format!(
                        "{p}: Too many: {}: must have at most {max} items",
                        map.len()
                    ),
                ));
            }
        }
        if let Some(min) = self.min_properties {
            if (map.len() as u64) < min {
                causes.push(invalid(
                    path,
                    &json!(map.len()),
                    format!("{p} in body should have at least {min} properties"),
                ));
            }
        }
        for (k, v) in map {
            // The root's metadata is ObjectMeta, checked by the API's own rules.
            if path.is_empty() && (k == "metadata" || k == "apiVersion" || k == "kind") {
                continue;
            }
            let schema = match self.properties.get(k) {
                Some(s) => s,
                None => match &self.additional {
                    Some(Additional::Schema(s)) => s,
                    _ => continue,
                },
            };
            let before = old.and_then(|o| o.get(k));
            schema.validate(v, before, &child(path, k), budget, causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Schema;
    use crate::crd::cel::limits::RUNTIME_BUDGET;
    use crate::crd::cel::Budget;

    fn check(schema: serde_json::Value, value: serde_json::Value) -> Vec<String> {
        let s = Schema::compile(&schema, "s").unwrap();
        let mut causes = Vec::new();
        let budget = Budget::new(RUNTIME_BUDGET);
        s.validate(&value, None, "", &budget, &mut causes);
        causes.into_iter().map(|c| c.message).collect()
    }

    #[test]
    fn validation_should_name_the_field_of_a_wrong_type() {
        let msgs = check(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}),
            json!({"spec": {"replicas": "three"}}),
        );
        assert_eq!(
            msgs,
            vec![
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
            ]
        );
    }

    #[test]
    fn validation_should_check_required_enum_and_bounds() {
        let schema = json!({"type": "object", "required": ["size"], "properties": {
            "color": {"type": "string", "enum": ["red", "blue"]},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
            "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1}}});
        let msgs = check(
            schema,
            json!({"color": "pink", "count": 9, "name": "ABCDE", "tags": ["a", "b"], "ratio": 1}),
        );
        assert_eq!(
            msgs,
            vec![
                "size: Required value",
                r#"color: Unsupported value: "pink": supported values: "red", "blue""#,
                "count: Invalid value: 9: count in body should be less than or equal to 5",
                "name: Too long: may not be more than 4 bytes",
                r#"name: Invalid value: "ABCDE": name in body should match '^[a-z]+$'"#,
                "ratio: Invalid value: 1: ratio in body should be less than 1",
                "tags: Too many: 2: must have at most 1 items",
            ]
        );
        assert!(check(json!({"type": "integer", "minimum": 1}), json!(0))[0]
            .contains("greater than or equal to 1"));
        assert!(
            check(json!({"type": "string", "minLength": 3}), json!("ab"))[0]
                .contains("at least 3 chars long")
        );
    }

    #[test]
    fn validation_should_accept_int_or_string_and_nullable() {
        let schema = json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true},
            "maybe": {"type": "string", "nullable": true}}});
        assert!(check(schema.clone(), json!({"port": 80, "maybe": null})).is_empty());
        assert!(check(schema.clone(), json!({"port": "http"})).is_empty());
        assert_eq!(
            check(schema, json!({"port": true})),
            vec![
                r#"port: Invalid value: "boolean": port in body must be of type integer,string: "boolean""#
            ]
        );
    }

    #[test]
    fn validation_should_find_duplicates_in_set_and_map_lists() {
        let schema = json!({"type": "object", "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}}});
        let msgs = check(
            schema,
            json!({"set": ["a", "b", "a"], "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]}),
        );
        assert_eq!(
            msgs,
            vec![
                r#"map[1]: Duplicate value: {"name":"x"}"#,
                r#"set[2]: Duplicate value: "a""#,
            ]
        );
    }

    #[test]
    fn validation_should_check_formats_and_embedded_resources() {
        let schema = json!({"type": "object", "properties": {
            "at": {"type": "string", "format": "date-time"},
            "obj": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}});
        assert!(check(
            schema.clone(),
            json!({"at": "2024-01-02T03:04:05Z", "obj": {"apiVersion": "v1", "kind": "Pod"}})
        )
        .is_empty());
        let msgs = check(schema, json!({"at": "yesterday", "obj": {}}));
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(
            msgs[0].starts_with("at: Invalid value: \"yesterday\""),
            "{msgs:?}"
        );
        assert_eq!(msgs[1], "obj.apiVersion: Required value");
    }

    fn check_with(schema: &Schema, value: serde_json::Value, budget: &Budget) -> Vec<String> {
        let mut causes = Vec::new();
        schema.validate(&value, None, "", budget, &mut causes);
        causes.into_iter().map(|c| c.message).collect()
    }

    #[test]
    fn costly_rules_should_stop_at_the_call_limit_and_the_request_budget() {
        // Regression (issue 14.5): CEL rules had no runtime cost limit.
        let pairs = "self.v.all(a, self.v.all(b, a + b >= 0))";
        let schema = Schema::compile(
            &json!({"type": "object", "properties": {"items": {"type": "array", "items": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": pairs}, {"rule": "false", "message": "second"}],
                "properties": {"v": {"type": "array", "items": {"type": "integer"}}}}}}}),
            "s",
        )
        .unwrap();
        // 600² steps are past the per-call limit: the rule fails, and no other rule runs.
        let long: Vec<i64> = (0..600).collect();
        let budget = Budget::new(RUNTIME_BUDGET);
        let msgs = check_with(
            &schema,
            json!({"items": [{"v": long}, {"v": [1]}]}),
            &budget,
        );
        assert_eq!(
            msgs,
            vec![format!("items[0]: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {pairs}")]
        );
        // Items that each fit in the limit but together not in the budget: the rules run
        // until the budget is spent.
        let short: Vec<i64> = (0..30).collect();
        let items: Vec<_> = (0..5).map(|_| json!({"v": short})).collect();
        let msgs = check_with(&schema, json!({"items": items}), &Budget::new(20_000));
        let out = "Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run";
        assert!(msgs.last().unwrap().ends_with(out), "{msgs:?}");
        assert!(msgs.len() < 5, "{msgs:?}");
        assert!(msgs[0].ends_with(": second"), "{msgs:?}");
    }
}
