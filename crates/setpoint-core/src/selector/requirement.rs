//! One condition of a label selector: a key, an operator and the values it compares with, as
//! apimachinery's `labels.LabelRequirement`. A [`LabelRequirement`] can only be built valid, and matches
//! a set of labels exactly as Kubernetes does; notably `!=` and `notin` also match objects that
//! lack the label, and `>`/`<` match only labels whose value is a decimal integer.

use std::collections::BTreeMap;
use std::fmt;

use super::label_syntax::{label_key_problems, label_value_problems};
use super::messages::{aggregate, go_quote, go_string_slice, invalid_value};

/// How a [`LabelRequirement`] compares a label with its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LabelOperator {
    /// `key in (v1,v2)`: the label is present with one of the values.
    In,
    /// `key notin (v1,v2)`: the label is absent or has none of the values.
    NotIn,
    /// `key=v`: the label is present with the value.
    Equals,
    /// `key==v`: the same as [`LabelOperator::Equals`], kept apart only to print back as written.
    DoubleEquals,
    /// `key!=v`: the label is absent or has another value.
    NotEquals,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present, a decimal integer, and greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present, a decimal integer, and less than `n`.
    LessThan,
}

/// A valid label-selector condition.
///
/// Invariants, established by [`LabelRequirement::new`]: `key` is a valid label key; every value is a
/// valid label value; `In`/`NotIn` have at least one value; `Equals`, `DoubleEquals` and
/// `NotEquals` exactly one; `Exists`/`DoesNotExist` none; `GreaterThan`/`LessThan` exactly one,
/// which parses as an `i64`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelRequirement {
    /// The label key the condition is about.
    key: String,
    /// How the label is compared with `values`.
    operator: LabelOperator,
    /// The values, in the order given (they print sorted).
    values: Vec<String>,
}

/// Why a [`LabelRequirement`] could not be built: one or more problems, each worded as
/// apimachinery's `field.Error` (`values[0][app]: Invalid value: "-x": ...`), rendered together
/// as its error aggregate (`[first, second]` when several).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", aggregate(.problems))]
pub struct InvalidLabelRequirement {
    /// The problems found, in apimachinery's order. Never empty.
    problems: Vec<String>,
}

impl InvalidLabelRequirement {
    /// Wraps a non-empty list of problems.
    pub(super) fn new(problems: Vec<String>) -> InvalidLabelRequirement {
        debug_assert!(!problems.is_empty(), "an invalid requirement has a problem");
        InvalidLabelRequirement { problems }
    }

    /// The individual problems, each as apimachinery words a field error.
    #[must_use]
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl LabelRequirement {
    /// Builds a requirement, checking it as apimachinery's `labels.NewRequirement` does, with
    /// the same problem wording and order: the key, then the number of values the operator
    /// needs (and, for `>`/`<`, that the value is an integer), then each value.
    pub fn new(
        key: impl Into<String>,
        operator: LabelOperator,
        values: Vec<String>,
    ) -> Result<LabelRequirement, InvalidLabelRequirement> {
        let key = key.into();
        let mut problems = Vec::new();
        let key_problems = label_key_problems(&key);
        if !key_problems.is_empty() {
            problems.push(invalid_value(
                "key",
                &go_quote(&key),
                &key_problems.join("; "),
            ));
        }
        let count_problem =
            |detail: &str| invalid_value("values", &go_string_slice(&values), detail);
        match operator {
            LabelOperator::In | LabelOperator::NotIn if values.is_empty() => {
                problems.push(count_problem(
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::NotEquals
                if values.len() != 1 =>
            {
                problems.push(count_problem(
                    "exact-match compatibility requires one single value",
                ));
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist if !values.is_empty() => {
                problems.push(count_problem(
                    "values set must be empty for exists and does not exist",
                ));
            }
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                if values.len() != 1 {
                    problems.push(count_problem(
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        problems.push(invalid_value(
                            &format!("values[{i}]"),
                            &go_quote(value),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let value_problems = label_value_problems(value);
            if !value_problems.is_empty() {
                problems.push(invalid_value(
                    &format!("values[{i}][{key}]"),
                    &go_quote(value),
                    &value_problems.join("; "),
                ));
            }
        }
        if problems.is_empty() {
            Ok(LabelRequirement {
                key,
                operator,
                values,
            })
        } else {
            Err(InvalidLabelRequirement::new(problems))
        }
    }

    /// The label key this requirement is about.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How the label is compared with the values.
    #[must_use]
    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The values, in the order they were given.
    #[must_use]
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_label(labels.get(&self.key).map(String::as_str))
    }

    /// Whether a label whose value is `label` (`None` when absent) satisfies this requirement.
    pub(super) fn matches_label(&self, label: Option<&str>) -> bool {
        let has_value = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            LabelOperator::In | LabelOperator::Equals | LabelOperator::DoubleEquals => {
                label.is_some_and(has_value)
            }
            LabelOperator::NotIn | LabelOperator::NotEquals => !label.is_some_and(has_value),
            LabelOperator::Exists => label.is_some(),
            LabelOperator::DoesNotExist => label.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let Some(actual) = label.and_then(|l| l.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(bound) = self.values.first().and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    /// The canonical string form apimachinery prints: `!k`, `k`, `k=v`, `k==v`, `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, with set values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (op, open, close) = match self.operator {
            LabelOperator::Exists => return f.write_str(&self.key),
            LabelOperator::DoesNotExist => return write!(f, "!{}", self.key),
            LabelOperator::Equals => ("=", "", ""),
            LabelOperator::DoubleEquals => ("==", "", ""),
            LabelOperator::NotEquals => ("!=", "", ""),
            LabelOperator::In => (" in ", "(", ")"),
            LabelOperator::NotIn => (" notin ", "(", ")"),
            LabelOperator::GreaterThan => (">", "", ""),
            LabelOperator::LessThan => ("<", "", ""),
        };
        let mut sorted: Vec<&str> = self.values.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        write!(f, "{}{op}{open}{}{close}", self.key, sorted.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn req(key: &str, op: LabelOperator, values: &[&str]) -> LabelRequirement {
        LabelRequirement::new(key, op, values.iter().map(|v| (*v).to_owned()).collect())
            .expect("valid requirement")
    }

    fn problems(key: &str, op: LabelOperator, values: &[&str]) -> String {
        LabelRequirement::new(key, op, values.iter().map(|v| (*v).to_owned()).collect())
            .expect_err("invalid requirement")
            .to_string()
    }

    #[test]
    fn not_equals_and_not_in_should_match_objects_without_the_label() {
        let none = labels(&[]);
        assert!(req("a", LabelOperator::NotEquals, &["x"]).matches(&none));
        assert!(req("a", LabelOperator::NotIn, &["x"]).matches(&none));
        assert!(!req("a", LabelOperator::Equals, &["x"]).matches(&none));
        assert!(!req("a", LabelOperator::In, &["x"]).matches(&none));
    }

    #[test]
    fn set_operators_should_compare_with_every_value() {
        let l = labels(&[("a", "y")]);
        assert!(req("a", LabelOperator::In, &["x", "y"]).matches(&l));
        assert!(!req("a", LabelOperator::NotIn, &["x", "y"]).matches(&l));
        assert!(req("a", LabelOperator::NotIn, &["x", "z"]).matches(&l));
        assert!(req("a", LabelOperator::DoubleEquals, &["y"]).matches(&l));
        assert!(!req("a", LabelOperator::NotEquals, &["y"]).matches(&l));
    }

    #[test]
    fn exists_should_match_an_empty_value_and_does_not_exist_should_not() {
        let l = labels(&[("a", "")]);
        assert!(req("a", LabelOperator::Exists, &[]).matches(&l));
        assert!(!req("a", LabelOperator::DoesNotExist, &[]).matches(&l));
        assert!(req("a", LabelOperator::Equals, &[""]).matches(&l));
    }

    #[test]
    fn numeric_operators_should_match_only_integer_labels() {
        let gt = req("a", LabelOperator::GreaterThan, &["5"]);
        let lt = req("a", LabelOperator::LessThan, &["5"]);
        assert!(gt.matches(&labels(&[("a", "6")])));
        assert!(!gt.matches(&labels(&[("a", "5")])));
        assert!(lt.matches(&labels(&[("a", "-7")])));
        assert!(!gt.matches(&labels(&[("a", "six")])));
        assert!(!lt.matches(&labels(&[("a", "six")])));
        assert!(!gt.matches(&labels(&[])));
        assert!(!lt.matches(&labels(&[])));
        assert!(!gt.matches(&labels(&[("a", "99999999999999999999")])));
    }

    #[test]
    fn new_should_reject_wrong_value_counts_with_apimachinery_wording() {
        assert_eq!(
            problems("a", LabelOperator::In, &[]),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            problems("a", LabelOperator::Exists, &["x"]),
            r#"values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist"#
        );
        assert_eq!(
            problems("a", LabelOperator::Equals, &["x", "y"]),
            r#"values: Invalid value: []string{"x", "y"}: exact-match compatibility requires one single value"#
        );
    }

    #[test]
    fn new_should_require_one_integer_for_numeric_operators() {
        assert_eq!(
            problems("a", LabelOperator::GreaterThan, &["x"]),
            r#"values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer"#
        );
        assert_eq!(
            problems("a", LabelOperator::LessThan, &["1", "2"]),
            r#"values: Invalid value: []string{"1", "2"}: for 'Gt', 'Lt' operators, exactly one value is required"#
        );
        assert!(LabelRequirement::new("a", LabelOperator::LessThan, vec!["-3".into()]).is_err());
        assert!(LabelRequirement::new("a", LabelOperator::LessThan, vec!["007".into()]).is_ok());
    }

    #[test]
    fn new_should_aggregate_several_problems_in_brackets() {
        let message = problems("-k", LabelOperator::In, &["ok", "b@d"]);
        assert!(
            message.starts_with(r#"[key: Invalid value: "-k": name part must consist"#),
            "{message}"
        );
        assert!(
            message.contains(r#", values[1][-k]: Invalid value: "b@d": a valid label must be"#),
            "{message}"
        );
        assert!(message.ends_with(']'), "{message}");
    }

    #[test]
    fn display_should_print_the_canonical_form_with_sorted_set_values() {
        assert_eq!(
            req("a", LabelOperator::In, &["z", "b", "b"]).to_string(),
            "a in (b,b,z)"
        );
        assert_eq!(
            req("a", LabelOperator::NotIn, &[""]).to_string(),
            "a notin ()"
        );
        assert_eq!(req("a", LabelOperator::Equals, &["x"]).to_string(), "a=x");
        assert_eq!(
            req("a", LabelOperator::DoubleEquals, &["x"]).to_string(),
            "a==x"
        );
        assert_eq!(req("a", LabelOperator::NotEquals, &[""]).to_string(), "a!=");
        assert_eq!(req("a", LabelOperator::Exists, &[]).to_string(), "a");
        assert_eq!(req("a", LabelOperator::DoesNotExist, &[]).to_string(), "!a");
        assert_eq!(
            req("a", LabelOperator::GreaterThan, &["07"]).to_string(),
            "a>07"
        );
        assert_eq!(req("a", LabelOperator::LessThan, &["7"]).to_string(), "a<7");
    }
}
