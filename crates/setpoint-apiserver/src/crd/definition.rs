//! The CustomResourceDefinition kind's own defaults and validation, as far as Setpoint
//! serves CRDs: names (`<plural>.<group>`, DNS labels, a group with a dot), scope, versions
//! (unique names, at least one, exactly one storage version), a compilable structural schema
//! per version whose CEL rules are not estimated to cost too much (kube-apiserver's limits),
//! scale paths and printer columns; `spec.scope` and `spec.group` never change.

use serde_json::{json, Value};
use setpoint_core::Cause;

use super::jsonpath::JsonPath;
use super::schema::Schema;
use crate::registry::strategy::{validate_name, NameRule};

/// Fills in what kube-apiserver defaults on a CRD: `conversion.strategy: None`, `singular`
/// and `listKind`.
pub(super) fn default_definition(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !kind.is_empty() {
            if names
                .get("singular")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if names
                .get("listKind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
    }
}

/// Turns a compile error (`<path>: <message>`) into a cause at its path.
fn compile_cause(error: String) -> Cause {
    let field = error.split(": ").next().unwrap_or_default().to_owned();
    Cause::new("FieldValueInvalid", field, error)
}

fn label(causes: &mut Vec<Cause>, field: &str, value: &Value) {
    let text = value.as_str().unwrap_or_default();
    if text.is_empty() {
        causes.push(Cause::required(field));
        return;
    }
    for problem in validate_name(text, NameRule::Label) {
        causes.push(Cause::invalid(field, value, &problem));
    }
}

/// Validates a CRD (and, on update, what changed from `old`).
pub(super) fn validate_definition(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &spec["group"],
            "should be a domain with at least one dot",
        ));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            &crd["metadata"]["name"],
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    label(&mut causes, "spec.names.plural", &names["plural"]);
    if !names["singular"].is_null() {
        label(&mut causes, "spec.names.singular", &names["singular"]);
    }
    if names["kind"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.names.kind"));
    }
    for (i, s) in names["shortNames"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        label(&mut causes, &format!("spec.names.shortNames[{i}]"), s);
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        None => causes.push(Cause::required("spec.scope")),
        Some(_) => causes.push(Cause::not_supported(
            "spec.scope",
            &spec["scope"],
            &["Cluster", "Namespaced"],
        )),
    }
    super::conversion::validate(spec, &mut causes);
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
    } else if versions
        .iter()
        .filter(|v| v["storage"] == json!(true))
        .count()
        != 1
    {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!(versions.len()),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        label(&mut causes, &format!("{at}.name"), &v["name"]);
        if seen.contains(&&v["name"]) {
            causes.push(Cause::duplicate(format!("{at}.name"), &v["name"]));
        }
        seen.push(&v["name"]);
        // kube-apiserver does not hold a version's unchanged schema to the per-rule cost
        // limit again, so an update elsewhere never fails on rules it once accepted.
        let unchanged = old
            .and_then(|o| o["spec"]["versions"].as_array())
            .and_then(|olds| olds.iter().find(|o| o["name"] == v["name"]))
            .is_some_and(|o| o["schema"] == v["schema"]);
        version(&mut causes, &at, v, unchanged);
    }
    if let Some(old) = old {
        for field in ["scope", "group"] {
            if !old["spec"][field].is_null() && old["spec"][field] != spec[field] {
                causes.push(Cause::invalid(
                    format!("spec.{field}"),
                    &spec[field],
                    "field is immutable",
                ));
            }
        }
    }
    causes
}

fn version(causes: &mut Vec<Cause>, at: &str, v: &Value, schema_unchanged: bool) {
    let schema = &v["schema"]["openAPIV3Schema"];
    let schema_at = format!("{at}.schema.openAPIV3Schema");
    if schema.is_null() {
        causes.push(Cause::new(
            "FieldValueRequired",
            schema_at.clone(),
            format!("{schema_at}: Required value: schemas are required"),
        ));
    } else {
        let before = causes.len();
        let compiled = match Schema::compile(schema, &schema_at) {
            Ok(compiled) => Some(compiled),
            Err(e) => {
                causes.push(compile_cause(e));
                None
            }
        };
        structural(causes, schema, &schema_at, true);
        if schema["type"] != json!("object") {
            causes.push(Cause::invalid(
                format!("{schema_at}.type"),
                &schema["type"],
                "must be object at the root",
            ));
        }
        // Rule costs are estimated only on a schema that is otherwise valid.
        if let Some(compiled) = compiled.filter(|_| causes.len() == before) {
            causes.extend(compiled.check_costs(&schema_at, !schema_unchanged));
        }
    }
    if let Some(scale) = v["subresources"].get("scale").filter(|s| !s.is_null()) {
        for (key, prefix, required) in [
            ("specReplicasPath", ".spec.", true),
            ("statusReplicasPath", ".status.", true),
            ("labelSelectorPath", ".", false),
        ] {
            let field = format!("{at}.subresources.scale.{key}");
            match scale[key].as_str() {
                None if required => causes.push(Cause::required(field)),
                None => {}
                Some(p) if !p.starts_with(prefix) || JsonPath::parse(p).is_err() => {
                    causes.push(Cause::invalid(
                        field,
                        &scale[key],
                        &format!("should be a json path under {prefix}"),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    let selectable = v["selectableFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if selectable.len() > 8 {
        causes.push(Cause::new(
            "FieldValueTooMany",
            format!("{at}.selectableFields"),
            format!(
                "{at}.selectableFields: Too many: {}: must have at most 8 items",
                selectable.len()
            ),
        ));
    }
    for (i, f) in selectable.iter().enumerate() {
        let field = format!("{at}.selectableFields[{i}].jsonPath");
        let fields_only = f["jsonPath"]
            .as_str()
            .filter(|p| p.starts_with('.'))
            .and_then(|p| JsonPath::parse(p).ok())
            .is_some_and(|p| p.fields().is_some());
        if !fields_only {
            causes.push(Cause::invalid(
                field,
                &f["jsonPath"],
                "must be a simple path of fields, such as .spec.color",
            ));
        }
    }
    for (i, c) in v["additionalPrinterColumns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let field = format!("{at}.additionalPrinterColumns[{i}]");
        if c["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{field}.name")));
        }
        match c["type"].as_str() {
            Some("integer" | "number" | "string" | "boolean" | "date") => {}
            _ => causes.push(Cause::not_supported(
                format!("{field}.type"),
                &c["type"],
                &["boolean", "date", "integer", "number", "string"],
            )),
        }
        match c["jsonPath"].as_str() {
            Some(p) if JsonPath::parse(p).is_ok() => {}
            _ => causes.push(Cause::invalid(
                format!("{field}.jsonPath"),
                &c["jsonPath"],
                "must be a simple json path",
            )),
        }
    }
}

/// The rules that make a schema structural, as kube-apiserver checks them: every node that
/// shapes the object (properties, items, additionalProperties) has a `type`, unless it is
/// `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`; an object has
/// `properties` or `additionalProperties`, not both. Nodes under `allOf`/`anyOf`/`oneOf`/`not`
/// only validate and are not held to them.
fn structural(causes: &mut Vec<Cause>, node: &Value, at: &str, root: bool) {
    let flag = |k: &str| node.get(k).and_then(Value::as_bool).unwrap_or(false);
    if !root
        && node
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        causes.push(Cause::new(
            "FieldValueRequired",
            format!("{at}.type"),
            format!("{at}.type: Required value: must not be empty for specified object fields"),
        ));
    }
    let has_additional = node
        .get("additionalProperties")
        .is_some_and(|a| a.is_object() || *a == json!(true));
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        if has_additional && !props.is_empty() {
            causes.push(Cause::forbidden(
                format!("{at}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        for (k, p) in props {
            structural(causes, p, &format!("{at}.properties[{k}]"), false);
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        structural(causes, items, &format!("{at}.items"), false);
    }
    if let Some(additional) = node.get("additionalProperties").filter(|a| a.is_object()) {
        structural(
            causes,
            additional,
            &format!("{at}.additionalProperties"),
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    #[test]
    fn a_valid_crd_should_pass_and_get_its_defaults() {
        let mut c = crd();
        default_definition(&mut c);
        assert_eq!(c["spec"]["conversion"]["strategy"], "None");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert!(validate_definition(&c, None).is_empty());
    }

    #[test]
    fn a_crd_should_name_what_is_wrong() {
        let mut c = crd();
        c["metadata"]["name"] = json!("other.example.com");
        c["spec"]["versions"][0]["storage"] = json!(false);
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}});
        c["spec"]["scope"] = json!("Everywhere");
        let fields: Vec<String> = validate_definition(&c, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "metadata.name",
                "spec.scope",
                "spec.versions",
                "spec.versions[0].schema.openAPIV3Schema.properties[a].pattern",
            ]
        );
        let mut untyped = crd();
        untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
            "spec": {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}});
        let fields: Vec<String> = validate_definition(&untyped, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties",
            ]
        );
        let mut changed = crd();
        changed["spec"]["scope"] = json!("Cluster");
        let causes = validate_definition(&changed, Some(&crd()));
        assert_eq!(causes[0].field, "spec.scope");
    }

    #[test]
    fn an_unchanged_schema_should_not_be_held_to_the_per_rule_cost_limit_again() {
        // Over the per-rule limit (2000² pairs), under the per-CRD one.
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object",
            "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, a + b >= 0))"}],
            "properties": {"l": {"type": "array", "maxItems": 2000, "items": {"type": "integer"}}}});
        let causes = validate_definition(&c, None);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(
            causes[0].field,
            "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule"
        );
        assert!(causes[0]
            .message
            .contains("estimated rule cost exceeds budget by factor of"));
        let mut relabelled = c.clone();
        relabelled["spec"]["names"]["shortNames"] = json!(["w"]);
        assert!(validate_definition(&relabelled, Some(&c)).is_empty());
    }
}
