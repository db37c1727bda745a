//! Field paths into an object, as Setpoint's `Object` and `External` metrics name their value
//! (`.status.queueLength`, `status.queueLength`, `{.status.queueLength}`,
//! `.spec.items[0].depth`, `.metadata.labels['example.com/depth']`), and the number found
//! there in milli-units: a JSON number or a quantity string (`1500m`, `2k`, `3`).
//!
//! The grammar is kubectl's JSONPath restricted to one field: dot-separated names, `[N]` list
//! indexes, and quoted bracket keys for names holding dots or slashes. No wildcards, filters
//! or ranges — a metric is one number.

use serde_json::Value;

use crate::scheduler::milli_value;

/// Why a path gave no number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldPathError {
    /// The path does not parse.
    #[error("invalid field path {path:?}: {why}")]
    Syntax {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Nothing is at the path.
    #[error("has no field {0}")]
    Missing(String),
    /// What is at the path is not a number or a quantity.
    #[error("field {path} is {found}, not a number or a quantity")]
    NotNumeric {
        /// The path as given.
        path: String,
        /// What was found, shortened.
        found: String,
    },
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object member.
    Key(String),
    /// A list element.
    Index(usize),
}

/// Parses a field path into steps (at least one).
pub(crate) fn parse(path: &str) -> Result<Vec<Step>, FieldPathError> {
    let err = |why| FieldPathError::Syntax {
        path: path.to_owned(),
        why,
    };
    let mut rest = path.trim();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner
            .strip_suffix('}')
            .ok_or_else(|| err("unbalanced braces"))?;
    }
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    let mut steps = Vec::new();
    let mut chars = rest.char_indices().peekable();
    let mut name = String::new();
    // Whether a name is expected next (start, or after a dot).
    let mut after_dot = true;
    while let Some((_, c)) = chars.next() {
        match c {
            '.' => {
                if after_dot && name.is_empty() {
                    return Err(err("empty field name"));
                }
                if !name.is_empty() {
                    steps.push(Step::Key(std::mem::take(&mut name)));
                }
                after_dot = true;
            }
            '[' => {
                if !name.is_empty() {
                    steps.push(Step::Key(std::mem::take(&mut name)));
                } else if after_dot && !steps.is_empty() {
                    return Err(err("empty field name"));
                }
                let mut inner = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == ']' && !is_open_quote(&inner) {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed {
                    return Err(err("unclosed bracket"));
                }
                steps.push(
                    bracket(&inner)
                        .ok_or_else(|| err("bracket holds neither an index nor a quoted key"))?,
                );
                after_dot = false;
            }
            ']' | '{' | '}' | '*' | '@' | '?' | ' ' => {
                return Err(err(
                    "only names, [N] indexes and ['quoted'] keys are allowed",
                ))
            }
            c => {
                if !after_dot && name.is_empty() {
                    return Err(err("a name after a bracket needs a dot"));
                }
                name.push(c);
            }
        }
    }
    if !name.is_empty() {
        steps.push(Step::Key(name));
    } else if after_dot {
        return Err(err("empty field name"));
    }
    Ok(steps)
}

/// Whether `s` opens a quote it has not closed (a `]` inside quotes is part of the key).
fn is_open_quote(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(q @ ('\'' | '"')) => !(s.len() >= 2 && s.ends_with(q)),
        _ => false,
    }
}

fn bracket(inner: &str) -> Option<Step> {
    let inner = inner.trim();
    for q in ['\'', '"'] {
        if let Some(key) = inner.strip_prefix(q).and_then(|k| k.strip_suffix(q)) {
            return Some(Step::Key(key.to_owned()));
        }
    }
    inner.parse().ok().map(Step::Index)
}

/// The value at `path` in `object`, in milli-units.
pub(crate) fn milli_at(object: &Value, path: &str) -> Result<i64, FieldPathError> {
    let mut at = object;
    for step in parse(path)? {
        let next = match step {
            Step::Key(k) => at.get(k.as_str()),
            Step::Index(i) => at.get(i),
        };
        at = next.ok_or_else(|| FieldPathError::Missing(path.to_owned()))?;
    }
    let not_numeric = || FieldPathError::NotNumeric {
        path: path.to_owned(),
        found: shorten(at),
    };
    match at {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.checked_mul(1000).ok_or_else(not_numeric),
            None => n
                .as_f64()
                .map(|f| (f * 1000.0).ceil())
                .filter(|f| f.is_finite() && f.abs() < 9.2e18)
                .map(|f| f as i64)
                .ok_or_else(not_numeric),
        },
        Value::String(s) => milli_value(s)
            .and_then(|m| i64::try_from(m).ok())
            .ok_or_else(not_numeric),
        _ => Err(not_numeric()),
    }
}

fn shorten(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(v: &[&str]) -> Vec<Step> {
        v.iter().map(|k| Step::Key((*k).to_owned())).collect()
    }

    #[test]
    fn paths_should_parse_in_every_accepted_spelling() {
        for p in [
            ".status.queueLength",
            "status.queueLength",
            "{.status.queueLength}",
            "{status.queueLength}",
        ] {
            assert_eq!(parse(p).unwrap(), keys(&["status", "queueLength"]), "{p}");
        }
        assert_eq!(
            parse(".spec.items[0].x").unwrap(),
            vec![
                Step::Key("spec".into()),
                Step::Key("items".into()),
                Step::Index(0),
                Step::Key("x".into())
            ]
        );
        assert_eq!(
            parse(".metadata.labels['app.kubernetes.io/x']").unwrap(),
            keys(&["metadata", "labels", "app.kubernetes.io/x"])
        );
        assert_eq!(parse(r#"data["a]b"]"#).unwrap(), keys(&["data", "a]b"]));
    }

    #[test]
    fn bad_paths_should_be_refused() {
        for p in [
            "", ".", "a..b", "a.", "{a", "a[", "a[x]", "a[*]", "a[0]b", "a b",
        ] {
            assert!(
                matches!(parse(p), Err(FieldPathError::Syntax { .. })),
                "{p:?} parsed as {:?}",
                parse(p)
            );
        }
    }

    #[test]
    fn values_should_be_numbers_or_quantities() {
        let o = json!({"status": {"n": 7, "f": 1.5, "q": "1500m", "k": "2k", "s": "three",
            "items": [{"d": "3"}], "b": true},
            "metadata": {"labels": {"example.com/depth": "12"}}});
        assert_eq!(milli_at(&o, ".status.n"), Ok(7_000));
        assert_eq!(milli_at(&o, "status.f"), Ok(1_500));
        assert_eq!(milli_at(&o, "{.status.q}"), Ok(1_500));
        assert_eq!(milli_at(&o, ".status.k"), Ok(2_000_000));
        assert_eq!(milli_at(&o, ".status.items[0].d"), Ok(3_000));
        assert_eq!(
            milli_at(&o, ".metadata.labels['example.com/depth']"),
            Ok(12_000)
        );
        assert_eq!(
            milli_at(&o, ".status.missing"),
            Err(FieldPathError::Missing(".status.missing".into()))
        );
        assert_eq!(
            milli_at(&o, ".status.items[3].d"),
            Err(FieldPathError::Missing(".status.items[3].d".into()))
        );
        assert!(matches!(
            milli_at(&o, ".status.s"),
            Err(FieldPathError::NotNumeric { .. })
        ));
        assert!(matches!(
            milli_at(&o, ".status.b"),
            Err(FieldPathError::NotNumeric { .. })
        ));
        assert!(matches!(
            milli_at(&o, ".status"),
            Err(FieldPathError::NotNumeric { .. })
        ));
    }
}
