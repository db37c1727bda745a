//! Label selectors: which objects a `labelSelector` query parameter, or a `selector` field of a
//! workload, picks out by their `metadata.labels`. A [`LabelSelector`] is the conjunction of its
//! [`LabelRequirement`]s and matches, parses and prints exactly as apimachinery's `labels.Selector`:
//! its `Display` is the canonical string form, which parses back to an equal selector.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::label_parser::parse_requirements;
use super::label_structured::requirements_from_structured;
use super::messages::go_quote;
use super::requirement::{InvalidLabelRequirement, LabelRequirement};

/// A label selector: all objects, no objects, or those satisfying every one of a list of
/// requirements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// What the selector selects.
    selects: Selects,
}

/// What a [`LabelSelector`] selects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Selects {
    /// Nothing at all (a structured selector that is `null`).
    Nothing,
    /// Objects satisfying every requirement; everything when there are none. Sorted by key,
    /// requirements with the same key kept in the order given.
    AllOf(Vec<LabelRequirement>),
}

/// Why a label selector could not be built. The messages are apimachinery's, which
/// kube-apiserver returns in a 400 `BadRequest` `Status`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelSelectorError {
    /// A requirement in the string form is malformed or invalid. The detail is worded as
    /// apimachinery words it, e.g. `found 'b', expected: in, notin, =, ==, !=, gt, lt` or
    /// `<nil>: Invalid value: "-a": name part must consist of ...`.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The string form is malformed between requirements, e.g.
    /// `found ',', expected: identifier after ','`.
    #[error("{0}")]
    Syntax(String),
    /// A requirement of the structured form is invalid (apimachinery does not prefix these).
    #[error(transparent)]
    InvalidRequirement(#[from] InvalidLabelRequirement),
    /// A `matchExpressions` entry has an operator other than `In`, `NotIn`, `Exists` and
    /// `DoesNotExist`.
    #[error("{} is not a valid label selector operator", go_quote(.0))]
    UnknownOperator(String),
    /// The structured form is not shaped like a `LabelSelector` (wrong JSON types).
    #[error("malformed label selector: {0}")]
    Malformed(String),
}

impl LabelSelector {
    /// The selector that matches every object (the empty string, or `{}` in structured form).
    #[must_use]
    pub fn everything() -> LabelSelector {
        LabelSelector {
            selects: Selects::AllOf(Vec::new()),
        }
    }

    /// The selector that matches no object (a `null` structured selector). It prints as the
    /// empty string, as apimachinery's does, so its string form does not parse back to it.
    #[must_use]
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            selects: Selects::Nothing,
        }
    }

    /// The selector requiring all of `requirements`; with none, [`LabelSelector::everything`].
    pub fn from_requirements(requirements: impl IntoIterator<Item = LabelRequirement>) -> Self {
        let mut requirements: Vec<LabelRequirement> = requirements.into_iter().collect();
        requirements.sort_by(|a, b| a.key().cmp(b.key()));
        LabelSelector {
            selects: Selects::AllOf(requirements),
        }
    }

    /// Parses the string form used by the `labelSelector` query parameter and `kubectl -l`:
    /// comma-separated requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
    /// `!k`, `k>n`, `k<n`, with blanks allowed around tokens. The empty string selects
    /// everything. Errors carry apimachinery's messages.
    pub fn parse(selector: &str) -> Result<LabelSelector, LabelSelectorError> {
        parse_requirements(selector).map(LabelSelector::from_requirements)
    }

    /// Builds a selector from the structured `LabelSelector` of the Kubernetes API, given as
    /// JSON: `{"matchLabels": {k: v}, "matchExpressions": [{"key", "operator", "values"}]}`.
    /// `null` selects nothing and `{}` everything, as `metav1.LabelSelectorAsSelector` has it;
    /// `In`/`NotIn` need values and `Exists`/`DoesNotExist` must have none.
    pub fn from_structured(selector: &Value) -> Result<LabelSelector, LabelSelectorError> {
        match requirements_from_structured(selector)? {
            None => Ok(LabelSelector::nothing()),
            Some(requirements) => Ok(LabelSelector::from_requirements(requirements)),
        }
    }

    /// Whether this selector does not restrict anything (apimachinery's `Empty()`).
    #[must_use]
    pub fn is_everything(&self) -> bool {
        matches!(&self.selects, Selects::AllOf(requirements) if requirements.is_empty())
    }

    /// Whether this selector matches no object at all.
    #[must_use]
    pub fn is_nothing(&self) -> bool {
        self.selects == Selects::Nothing
    }

    /// The requirements, sorted by key; `None` for [`LabelSelector::nothing`].
    #[must_use]
    pub fn requirements(&self) -> Option<&[LabelRequirement]> {
        match &self.selects {
            Selects::Nothing => None,
            Selects::AllOf(requirements) => Some(requirements),
        }
    }

    /// Whether an object with these labels is selected.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether a JSON object is selected by its `metadata.labels`. A missing or `null`
    /// `metadata.labels` counts as no labels, and a label whose value is not a string as absent.
    #[must_use]
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.matches_with(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
    }

    /// Whether an object is selected, `label` giving the value of each label it is asked for
    /// (`None`: the object has no such label). For labels held in a form other than a map.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        match &self.selects {
            Selects::Nothing => false,
            Selects::AllOf(requirements) => {
                requirements.iter().all(|r| r.matches_label(label(r.key())))
            }
        }
    }
}

impl Default for LabelSelector {
    /// [`LabelSelector::everything`].
    fn default() -> Self {
        LabelSelector::everything()
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical string form: the requirements in key order, comma-separated, without
    /// blanks. Everything and nothing both print as the empty string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Selects::AllOf(requirements) = &self.selects else {
            return Ok(());
        };
        for (i, requirement) in requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for LabelSelector {
    type Err = LabelSelectorError;

    /// [`LabelSelector::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::selector::LabelOperator;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).expect("valid selector")
    }

    #[test]
    fn everything_should_match_any_labels_and_nothing_none() {
        for l in [labels(&[]), labels(&[("a", "b")])] {
            assert!(LabelSelector::everything().matches(&l));
            assert!(!LabelSelector::nothing().matches(&l));
        }
        assert!(LabelSelector::everything().is_everything());
        assert!(!LabelSelector::nothing().is_everything());
        assert!(LabelSelector::nothing().is_nothing());
        assert_eq!(LabelSelector::nothing().requirements(), None);
        assert_eq!(LabelSelector::nothing().to_string(), "");
        assert_eq!(LabelSelector::default(), LabelSelector::everything());
    }

    #[test]
    fn selector_should_require_every_requirement() {
        let s = sel("env=prod,tier in (web,api),!legacy");
        assert!(s.matches(&labels(&[("env", "prod"), ("tier", "web")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("tier", "api"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("tier", "api")])));
    }

    #[test]
    fn requirements_should_be_sorted_by_key_keeping_order_within_a_key() {
        let s = sel("z=1,a!=2,m,a!=1");
        let keys: Vec<&str> = s
            .requirements()
            .expect("requirements")
            .iter()
            .map(LabelRequirement::key)
            .collect();
        assert_eq!(keys, ["a", "a", "m", "z"]);
        assert_eq!(s.to_string(), "a!=2,a!=1,m,z=1");
    }

    #[test]
    fn matches_object_should_read_metadata_labels() {
        let s = sel("app=web,tier!=db");
        let object = json!({"metadata": {"name": "p", "labels": {"app": "web"}}});
        assert!(s.matches_object(&object));
        let other = json!({"metadata": {"labels": {"app": "web", "tier": "db"}}});
        assert!(!s.matches_object(&other));
        assert!(!s.matches_object(&json!({"metadata": {}})));
        assert!(sel("!app").matches_object(&json!({"metadata": {"labels": null}})));
        assert!(sel("!app").matches_object(&json!({})));
        assert!(sel("!app").matches_object(&json!({"metadata": {"labels": {"app": 1}}})));
        assert!(LabelSelector::everything().matches_object(&json!(null)));
    }

    #[test]
    fn display_should_round_trip_through_parse() {
        for text in [
            "",
            "a",
            "!a",
            "a=b",
            "a==b",
            "a!=b",
            "a=",
            "a in (b)",
            "a in ()",
            "a notin (,b,c)",
            "a>5",
            "a<0",
            "b,!c,example.com/a in (x,y)",
        ] {
            let parsed = sel(text);
            assert_eq!(parsed.to_string(), text);
            assert_eq!(sel(&parsed.to_string()), parsed, "{text:?}");
        }
    }

    #[test]
    fn display_should_normalise_blanks_order_and_duplicates() {
        assert_eq!(
            sel("  b in ( z , y, z ) ,  a  =  x ").to_string(),
            "a=x,b in (y,z)"
        );
        assert_eq!(sel("x notin(b,a,)").to_string(), "x notin (,a,b)");
    }

    #[test]
    fn from_requirements_should_sort_and_build_everything_from_none() {
        let r = |k: &str| LabelRequirement::new(k, LabelOperator::Exists, vec![]).expect("valid");
        let s = LabelSelector::from_requirements([r("b"), r("a")]);
        assert_eq!(s.to_string(), "a,b");
        assert!(LabelSelector::from_requirements([]).is_everything());
    }

    #[test]
    fn from_str_should_parse_like_parse() {
        let s: LabelSelector = "a=b".parse().expect("valid");
        assert_eq!(s, sel("a=b"));
        assert!("a b".parse::<LabelSelector>().is_err());
    }
}
