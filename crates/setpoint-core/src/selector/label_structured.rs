//! The structured `LabelSelector` of the Kubernetes API (`matchLabels` and `matchExpressions`,
//! as in a Deployment's `spec.selector`), read from JSON and turned into requirements the way
//! `metav1.LabelSelectorAsSelector` does: `null` selects nothing, an empty selector everything,
//! each `matchLabels` entry is `key=value`, and each expression's operator is one of `In`,
//! `NotIn`, `Exists` and `DoesNotExist`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::label::LabelSelectorError;
use super::requirement::{LabelOperator, LabelRequirement};

/// The requirements of a structured selector, `None` for `null` (select nothing). An empty
/// list selects everything. `matchLabels` come first, in key order, then the expressions in
/// order; the first invalid one is the error.
pub(super) fn requirements_from_structured(
    selector: &Value,
) -> Result<Option<Vec<LabelRequirement>>, LabelSelectorError> {
    let object = match selector {
        Value::Null => return Ok(None),
        Value::Object(object) => object,
        other => return Err(malformed("a label selector", "an object", other)),
    };
    let mut requirements = Vec::new();
    for (key, value) in match_labels(object.get("matchLabels"))? {
        requirements.push(LabelRequirement::new(
            key,
            LabelOperator::Equals,
            vec![value],
        )?);
    }
    if let Some(expressions) = non_null(object.get("matchExpressions")) {
        let Value::Array(expressions) = expressions else {
            return Err(malformed("matchExpressions", "an array", expressions));
        };
        for expression in expressions {
            requirements.push(expression_requirement(expression)?);
        }
    }
    Ok(Some(requirements))
}

/// `matchLabels` as a sorted map; absent or `null` is empty.
fn match_labels(labels: Option<&Value>) -> Result<BTreeMap<String, String>, LabelSelectorError> {
    let Some(labels) = non_null(labels) else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(labels) = labels else {
        return Err(malformed("matchLabels", "an object", labels));
    };
    labels
        .iter()
        .map(|(key, value)| match value {
            Value::String(value) => Ok((key.clone(), value.clone())),
            other => Err(malformed(&format!("matchLabels[{key}]"), "a string", other)),
        })
        .collect()
}

/// One `matchExpressions` entry. A missing key or operator reads as the empty string, which
/// is then rejected as Kubernetes rejects it.
fn expression_requirement(expression: &Value) -> Result<LabelRequirement, LabelSelectorError> {
    let Value::Object(expression) = expression else {
        return Err(malformed(
            "a matchExpressions entry",
            "an object",
            expression,
        ));
    };
    let key = optional_string(expression.get("key"), "matchExpressions[].key")?;
    let operator = optional_string(expression.get("operator"), "matchExpressions[].operator")?;
    let operator = match operator.as_str() {
        "In" => LabelOperator::In,
        "NotIn" => LabelOperator::NotIn,
        "Exists" => LabelOperator::Exists,
        "DoesNotExist" => LabelOperator::DoesNotExist,
        _ => return Err(LabelSelectorError::UnknownOperator(operator)),
    };
    let values = match non_null(expression.get("values")) {
        None => Vec::new(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(malformed("matchExpressions[].values[]", "a string", other)),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(malformed("matchExpressions[].values", "an array", other)),
    };
    Ok(LabelRequirement::new(key, operator, values)?)
}

/// A string field, where absent or `null` reads as the empty string (Go's zero value).
fn optional_string(value: Option<&Value>, what: &str) -> Result<String, LabelSelectorError> {
    match non_null(value) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(malformed(what, "a string", other)),
    }
}

fn non_null(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

fn malformed(what: &str, expected: &str, found: &Value) -> LabelSelectorError {
    let kind = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    LabelSelectorError::Malformed(format!("{what} must be {expected}, not {kind}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::selector::{LabelSelector, LabelSelectorError};

    fn build(selector: serde_json::Value) -> Result<LabelSelector, String> {
        LabelSelector::from_structured(&selector).map_err(|e| e.to_string())
    }

    fn canonical(selector: serde_json::Value) -> String {
        build(selector).expect("valid selector").to_string()
    }

    #[test]
    fn null_should_select_nothing_and_empty_everything() {
        assert!(build(json!(null)).expect("valid").is_nothing());
        assert!(build(json!({})).expect("valid").is_everything());
        assert!(build(json!({"matchLabels": {}, "matchExpressions": []}))
            .expect("valid")
            .is_everything());
        assert!(
            build(json!({"matchLabels": null, "matchExpressions": null}))
                .expect("valid")
                .is_everything()
        );
    }

    #[test]
    fn match_labels_and_expressions_should_combine_sorted_by_key() {
        let selector = json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "owner", "operator": "Exists", "values": []},
            ],
        });
        assert_eq!(
            canonical(selector),
            "app=shop,env in (canary,prod),!legacy,owner,tier=web,zone notin (b)"
        );
    }

    #[test]
    fn structured_selector_should_match_like_its_string_form() {
        let s = build(json!({
            "matchLabels": {"app": "shop"},
            "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}],
        }))
        .expect("valid");
        assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "shop"}}})));
        assert!(!s.matches_object(&json!({"metadata": {"labels": {"app": "shop", "zone": "b"}}})));
        assert!(!s.matches_object(&json!({"metadata": {"labels": {"zone": "a"}}})));
    }

    #[test]
    fn set_operators_should_require_values_and_existence_operators_none() {
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
            Err("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty".to_owned())
        );
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]})),
            Err("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty".to_owned())
        );
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            Err(r#"values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist"#.to_owned())
        );
    }

    #[test]
    fn unknown_operators_should_be_rejected_with_the_operator_quoted() {
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})),
            Err(r#""Gt" is not a valid label selector operator"#.to_owned())
        );
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]})),
            Err(r#""in" is not a valid label selector operator"#.to_owned())
        );
        assert_eq!(
            build(json!({"matchExpressions": [{"key": "a"}]})),
            Err(r#""" is not a valid label selector operator"#.to_owned())
        );
    }

    #[test]
    fn invalid_keys_and_values_should_be_reported_without_the_parse_prefix() {
        let err = build(json!({"matchLabels": {"app": "-bad"}})).expect_err("invalid");
        assert!(
            err.starts_with(r#"values[0][app]: Invalid value: "-bad": a valid label"#),
            "{err}"
        );
        let err = build(json!({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}))
            .expect_err("invalid");
        assert!(
            err.starts_with(r#"key: Invalid value: "a b": name part must consist"#),
            "{err}"
        );
        let err =
            build(json!({"matchExpressions": [{"operator": "Exists"}]})).expect_err("invalid");
        assert!(
            err.starts_with(r#"key: Invalid value: "": name part must be non-empty; name part"#),
            "{err}"
        );
    }

    #[test]
    fn wrong_json_types_should_be_reported_as_malformed() {
        for selector in [
            json!("app=web"),
            json!({"matchLabels": ["app"]}),
            json!({"matchLabels": {"app": 1}}),
            json!({"matchExpressions": {}}),
            json!({"matchExpressions": ["a"]}),
            json!({"matchExpressions": [{"key": 1, "operator": "Exists"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
        ] {
            let err = LabelSelector::from_structured(&selector).expect_err("malformed");
            assert!(
                matches!(err, LabelSelectorError::Malformed(_)),
                "{selector}: {err:?}"
            );
        }
        assert_eq!(
            build(json!({"matchLabels": {"app": 1}})),
            Err(
                "malformed label selector: matchLabels[app] must be a string, not a number"
                    .to_owned()
            )
        );
    }
}
