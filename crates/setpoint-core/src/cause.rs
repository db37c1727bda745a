//! One reason an object is invalid: a `cause` in a `Status`'s `details`, naming the field
//! (`spec.replicas`) and worded as apimachinery's `field.Error` words it.

use serde_json::{Map, Value};

/// One reason an object is invalid, naming the field (`spec.replicas`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub reason: String,
    /// What is wrong, as kubectl prints it after the field.
    pub message: String,
    /// The field's path.
    pub field: String,
}

impl Cause {
    /// A cause of the given type.
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: reason.to_owned(),
            message: message.into(),
            field: field.into(),
        }
    }

    /// The message without its leading `field: `: what a `Status` carries in a cause, as
    /// apimachinery sends it (kubectl prints `field: message` for each cause, so a message
    /// that repeated the field would show it twice).
    pub fn body(&self) -> &str {
        if self.field.is_empty() {
            return &self.message;
        }
        self.message
            .strip_prefix(self.field.as_str())
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(&self.message)
    }

    /// The cause as a `Status` carries it: `reason, message, field`, each left out when
    /// empty (Go's `omitempty`).
    pub(crate) fn to_json(&self) -> Value {
        let mut cause = Map::new();
        for (key, value) in [
            ("reason", self.reason.as_str()),
            ("message", self.body()),
            ("field", self.field.as_str()),
        ] {
            if !value.is_empty() {
                cause.insert(key.into(), value.into());
            }
        }
        Value::Object(cause)
    }

    /// `field: Required value`.
    pub fn required(field: impl Into<String>) -> Self {
        let field = field.into();
        Cause::new(
            "FieldValueRequired",
            field.clone(),
            format!("{field}: Required value"),
        )
    }

    /// `field: Invalid value: <value>: <detail>`.
    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        let field = field.into();
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        Cause::new(
            "FieldValueInvalid",
            field.clone(),
            format!("{field}: Invalid value: {shown}: {detail}"),
        )
    }

    /// `field: Unsupported value: <value>: supported values: …`.
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let field = field.into();
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause::new(
            "FieldValueNotSupported",
            field.clone(),
            format!(
                "{field}: Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
        )
    }

    /// `field: Forbidden: <detail>`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        Cause::new(
            "FieldValueForbidden",
            field.clone(),
            format!("{field}: Forbidden: {detail}"),
        )
    }

    /// `field: Duplicate value: <value>`.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        let field = field.into();
        Cause::new(
            "FieldValueDuplicate",
            field.clone(),
            format!("{field}: Duplicate value: {value}"),
        )
    }
}
