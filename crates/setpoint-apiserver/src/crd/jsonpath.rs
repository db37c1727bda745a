//! The JSONPath subset CRDs use for printer columns and the scale subresource: fields
//! (`.spec.replicas`, `['a.b']`), indexes (`[0]`, `[-1]`), wildcards (`[*]`) and equality
//! filters (`[?(@.type=="Ready")]`).

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.a.b=="v")]`: the items whose field path equals the value.
    Filter(Vec<String>, Value),
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses a path such as `.status.conditions[?(@.type=="Ready")].status`.
    pub(crate) fn parse(path: &str) -> Result<JsonPath, String> {
        let text = path.trim();
        let text = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text);
        let text = text.strip_prefix('$').unwrap_or(text);
        let mut steps = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                if name.is_empty() {
                    return Err(format!("invalid JSONPath {path:?}: empty field name"));
                }
                steps.push(Step::Field(name.to_owned()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = r
                    .find(']')
                    .ok_or_else(|| format!("invalid JSONPath {path:?}: unclosed '['"))?;
                // A filter may contain `]` only inside quotes; CRD paths do not need that.
                let inner = r[..end].trim();
                steps.push(
                    parse_bracket(inner).ok_or_else(|| {
                        format!("invalid JSONPath {path:?}: unsupported [{inner}]")
                    })?,
                );
                rest = &r[end + 1..];
            } else {
                return Err(format!(
                    "invalid JSONPath {path:?}: expected '.' or '[' at {rest:?}"
                ));
            }
        }
        Ok(JsonPath { steps })
    }

    /// The path of these fields (`["spec", "replicas"]` is `.spec.replicas`).
    pub(crate) fn of_fields(fields: &[&str]) -> JsonPath {
        JsonPath {
            steps: fields
                .iter()
                .map(|f| Step::Field((*f).to_owned()))
                .collect(),
        }
    }

    /// The values the path selects in `root`.
    pub(crate) fn select<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in current {
                match step {
                    Step::Field(name) => {
                        if let Some(c) = v.get(name) {
                            next.push(c);
                        }
                    }
                    Step::Index(i) => {
                        if let Some(items) = v.as_array() {
                            let at = if *i < 0 { items.len() as i64 + i } else { *i };
                            if let Some(c) = usize::try_from(at).ok().and_then(|a| items.get(a)) {
                                next.push(c);
                            }
                        }
                    }
                    Step::All => match v {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter(fields, want) => {
                        if let Some(items) = v.as_array() {
                            next.extend(items.iter().filter(|item| {
                                fields.iter().try_fold(*item, |o, f| o.get(f)) == Some(want)
                            }));
                        }
                    }
                }
            }
            current = next;
        }
        current
    }

    /// The field names of a path made only of fields (`.spec.replicas` → `spec`,
    /// `replicas`), for writing at it.
    pub(crate) fn fields(&self) -> Option<Vec<&str>> {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect()
    }
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<i64>() {
        return Some(Step::Index(i));
    }
    if let Some(q) = unquote(inner) {
        return Some(Step::Field(q));
    }
    let cond = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, rhs) = cond.split_once("==")?;
    let lhs = lhs.trim().strip_prefix("@.")?;
    let rhs = rhs.trim();
    let want = match unquote(rhs) {
        Some(s) => Value::String(s),
        None => serde_json::from_str(rhs).ok()?,
    };
    Some(Step::Filter(
        lhs.split('.').map(str::to_owned).collect(),
        want,
    ))
}

fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    for q in ['\'', '"'] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return Some(inner.to_owned());
        }
    }
    None
}

/// Writes `value` at a path made only of fields, creating objects on the way.
pub(crate) fn set(root: &mut Value, fields: &[&str], value: Value) {
    let Some((last, parents)) = fields.split_last() else {
        return;
    };
    let mut at = root;
    for f in parents {
        if !at.get(*f).is_some_and(Value::is_object) {
            at[*f] = Value::Object(serde_json::Map::new());
        }
        at = &mut at[*f];
    }
    at[*last] = value;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_should_select_fields_indexes_and_filtered_items() {
        let o = json!({"spec": {"replicas": 3, "a.b": 1, "list": [1, 2, 3]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}});
        let get = |p: &str| {
            JsonPath::parse(p)
                .unwrap()
                .select(&o)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(get(".spec.replicas"), vec![json!(3)]);
        assert_eq!(get(".spec['a.b']"), vec![json!(1)]);
        assert_eq!(get(".spec.list[-1]"), vec![json!(3)]);
        assert_eq!(get(".spec.list[*]").len(), 3);
        assert_eq!(
            get(".status.conditions[?(@.type==\"Ready\")].status"),
            vec![json!("True")]
        );
        assert!(get(".spec.missing").is_empty());
        assert!(JsonPath::parse("spec").is_err());
        assert!(JsonPath::parse(".a[").is_err());
    }

    #[test]
    fn set_should_create_parents() {
        let mut o = json!({"metadata": {}});
        let p = JsonPath::parse(".spec.replicas").unwrap();
        set(&mut o, &p.fields().unwrap(), json!(4));
        assert_eq!(o["spec"]["replicas"], 4);
    }
}
