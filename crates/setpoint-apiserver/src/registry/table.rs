//! What every kind's `Table` (`kubectl get`) is made of: [`Column`] definitions, the `Name`
//! column, and cells shared between kinds (ages as kubectl prints them, label selectors).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use setpoint_core::LabelSelector;

/// One column of a table.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub(crate) name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub(crate) kind: String,
    pub(crate) format: String,
    /// 0: always shown; 1 and up: with `-o wide`.
    pub(crate) priority: i64,
    pub(crate) description: String,
}

impl Column {
    /// A string column.
    pub(crate) fn new(name: &str, priority: i64) -> Column {
        Column {
            name: name.to_owned(),
            kind: "string".to_owned(),
            format: String::new(),
            priority,
            description: String::new(),
        }
    }

    /// An integer column.
    pub(crate) fn integer(name: &str, priority: i64) -> Column {
        Column {
            kind: "integer".to_owned(),
            ..Column::new(name, priority)
        }
    }

    /// The `Name` column of built-in kinds.
    pub(crate) fn name() -> Column {
        Column {
            format: "name".to_owned(),
            description: "Name must be unique within a namespace.".to_owned(),
            ..Column::new("Name", 0)
        }
    }

    /// The column definition as a `Table` carries it.
    pub(crate) fn to_json(&self) -> Value {
        json!({"name": self.name, "type": self.kind, "format": self.format, "description": self.description, "priority": self.priority})
    }
}

/// The `Name` cell of an object.
pub(crate) fn name_cell(o: &Value) -> Value {
    json!(o["metadata"]["name"].as_str().unwrap_or_default())
}

/// The `Age` cell of an object.
pub(crate) fn age_cell(o: &Value, now: DateTime<Utc>) -> Value {
    json!(age(&o["metadata"]["creationTimestamp"], now))
}

/// An integer cell: the number, or 0.
pub(crate) fn int_cell(v: &Value) -> Value {
    json!(v.as_i64().unwrap_or(0))
}

/// A structured label selector in its string form (`app=web,tier in (a,b)`), as the wide
/// `Selector` column shows it.
pub(crate) fn selector_string(selector: &Value) -> String {
    match LabelSelector::from_structured(selector) {
        Ok(s) if !s.is_everything() => s.to_string(),
        _ => "<none>".into(),
    }
}

/// A label map as kubectl prints it (`app=web,tier=db`, keys sorted), or `<none>`.
pub(crate) fn labels_string(labels: &Value) -> String {
    let pairs: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// The `Created At` column of kinds whose table has nothing else (kube-apiserver's default
/// table).
pub(crate) fn created_at_column() -> Column {
    Column {
        kind: "date".into(),
        ..Column::new("Created At", 0)
    }
}

/// The `Created At` cell.
pub(crate) fn created_at_cell(o: &Value) -> Value {
    o["metadata"]["creationTimestamp"].clone()
}

/// Age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d3h`, …), from an RFC 3339 timestamp.
pub(crate) fn age(ts: &Value, now: DateTime<Utc>) -> String {
    let Some(t) = ts
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
    else {
        return "<unknown>".into();
    };
    human_duration((now - t.with_timezone(&Utc)).num_seconds())
}

/// apimachinery's `HumanDuration`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d, y) = (s / 60, s / 3600, s / 86400, s / (86400 * 365));
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if y < 2 {
        format!("{d}d")
    } else if y < 8 {
        let rd = d % 365;
        if rd == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{rd}d")
        }
    } else {
        format!("{y}y")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_should_match_kubectl() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
        ] {
            assert_eq!(human_duration(s), want);
        }
    }
}
