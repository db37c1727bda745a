//! `kubectl get` tables of custom resources: `Name`, then the version's
//! `additionalPrinterColumns` (or, when it has none, `Age`), each cell read with its
//! JSONPath and shown as its `type` says (`date` as an age, like `Age`).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::jsonpath::JsonPath;
use crate::registry::table::{age, Column};

/// One `additionalPrinterColumns` entry.
#[derive(Debug)]
pub(crate) struct PrinterColumn {
    pub(crate) name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub(crate) kind: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    path: JsonPath,
}

impl PrinterColumn {
    /// Parses a column; its path was validated with the CRD.
    pub(crate) fn parse(v: &Value) -> Result<PrinterColumn, String> {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(PrinterColumn {
            name: text("name"),
            kind: text("type"),
            format: text("format"),
            description: text("description"),
            priority: v.get("priority").and_then(Value::as_i64).unwrap_or(0),
            path: JsonPath::parse(&text("jsonPath"))?,
        })
    }

    /// The column a version without printer columns gets.
    pub(crate) fn age() -> PrinterColumn {
        PrinterColumn {
            name: "Age".into(),
            kind: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
            priority: 0,
            path: JsonPath::of_fields(&["metadata", "creationTimestamp"]),
        }
    }

    fn cell(&self, o: &Value, now: DateTime<Utc>) -> Value {
        let found = self.path.select(o);
        let Some(first) = found.first() else {
            return Value::Null;
        };
        match self.kind.as_str() {
            "date" => json!(age(first, now)),
            "integer" | "number" | "boolean" if found.len() == 1 => (*first).clone(),
            _ => {
                let texts: Vec<String> = found
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                json!(texts.join(","))
            }
        }
    }
}

/// The column definitions of a table.
pub(crate) fn columns(columns: &[PrinterColumn]) -> Vec<Column> {
    let mut out = vec![Column {
        name: "Name".into(),
        kind: "string".into(),
        format: "name".into(),
        description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
        priority: 0,
    }];
    out.extend(columns.iter().map(|c| Column {
        name: c.name.clone(),
        kind: c.kind.clone(),
        format: c.format.clone(),
        description: c.description.clone(),
        priority: c.priority,
    }));
    out
}

/// The cells of one object's row.
pub(crate) fn cells(columns: &[PrinterColumn], o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut out = vec![json!(o["metadata"]["name"].as_str().unwrap_or_default())];
    out.extend(columns.iter().map(|c| c.cell(o, now)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_should_follow_the_columns_types() {
        let cols = vec![
            PrinterColumn::parse(&json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"})).unwrap(),
            PrinterColumn::parse(&json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"})).unwrap(),
            PrinterColumn::parse(&json!({"name": "Missing", "type": "string", "jsonPath": ".spec.none"})).unwrap(),
            PrinterColumn::age(),
        ];
        let now = Utc::now();
        let created = (now - chrono::Duration::seconds(90)).to_rfc3339();
        let o = json!({"metadata": {"name": "w", "creationTimestamp": created}, "spec": {"replicas": 2},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            cells(&cols, &o, now),
            vec![
                json!("w"),
                json!(2),
                json!("True"),
                Value::Null,
                json!("90s")
            ]
        );
        assert_eq!(columns(&cols).len(), 5);
    }
}
