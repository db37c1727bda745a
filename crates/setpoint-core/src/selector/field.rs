//! Field selectors: which objects a `fieldSelector` query parameter picks out by the values of
//! a few fields the resource exposes (`metadata.name`, `spec.nodeName`, ...). A
//! [`FieldSelector`] parses, prints and matches exactly as apimachinery's `fields.Selector`:
//!
//! * Terms are `field=value`, `field==value` or `field!=value`, separated by commas; the empty
//!   string selects everything. Nothing is trimmed: blanks belong to the field or the value.
//! * In a value, `\,`, `\=` and `\\` stand for `,`, `=` and `\`; any other backslash, and any
//!   unescaped `=`, is an error. The field is taken verbatim up to the first operator.
//! * Terms are kept sorted by their text as written, and print with `==` as `=` and values
//!   re-escaped.
//! * A field the object does not have compares as the empty string.
//!
//! Which fields exist depends on the resource; [`FieldSelector::resolve`] checks them against
//! the resource's [`SelectableFields`] as kube-apiserver does, with its error text.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::messages::go_quote;
use super::selectable_fields::SelectableFields;

/// How a [`FieldTerm`] compares a field with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value` or `field==value`: the field has the value.
    Equals,
    /// `field!=value`: the field has another value.
    NotEquals,
}

/// One condition of a field selector. Any field name and any value are allowed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldTerm {
    /// The field, e.g. `spec.nodeName`.
    pub field: String,
    /// How the field is compared with `value`.
    pub operator: FieldOperator,
    /// The value, unescaped.
    pub value: String,
}

/// A field selector: the objects satisfying every one of its terms; with none, every object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    /// The terms, in the order they print (parsed selectors: sorted by their written text).
    terms: Vec<FieldTerm>,
}

/// Why a field selector was rejected. The messages are apimachinery's, which kube-apiserver
/// returns in a 400 `BadRequest` `Status`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// A term has no `=`, `==` or `!=`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    MissingOperator {
        /// The whole selector as given.
        selector: String,
        /// The offending term.
        term: String,
    },
    /// A value has a backslash not followed by `\`, `,` or `=` (the sequence, e.g. `\n`, or a
    /// lone `\` at the end).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A value has an unescaped `=` (or `,`). apimachinery prints the character's code point.
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    UnescapedCharacter(char),
    /// The resource has a field-label conversion of its own and does not offer this field.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
    /// The resource offers only `metadata.name` and `metadata.namespace` (apimachinery's
    /// default conversion) and this is neither.
    #[error(
        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        go_quote(.0)
    )]
    UnknownField(String),
}

impl FieldSelector {
    /// The selector that matches every object.
    #[must_use]
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// The selector requiring all of `terms`, which print in the order given.
    pub fn from_terms(terms: impl IntoIterator<Item = FieldTerm>) -> FieldSelector {
        FieldSelector {
            terms: terms.into_iter().collect(),
        }
    }

    /// Parses the `fieldSelector` string form (see the module documentation). Any field name
    /// is accepted here; use [`FieldSelector::resolve`] to check them against a resource.
    pub fn parse(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut raw_terms = split_terms(selector);
        raw_terms.sort_unstable();
        let mut terms = Vec::with_capacity(raw_terms.len());
        for raw in raw_terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, operator, value)) = split_term(raw) else {
                return Err(FieldSelectorError::MissingOperator {
                    selector: selector.to_owned(),
                    term: raw.to_owned(),
                });
            };
            terms.push(FieldTerm {
                field: field.to_owned(),
                operator,
                value: unescape_value(value)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Checks every field against what the resource offers and renames legacy aliases (a pod's
    /// `spec.host` becomes `spec.nodeName`), as kube-apiserver does before listing. The first
    /// unsupported field, in term order, is the error.
    pub fn resolve(&self, fields: &SelectableFields) -> Result<FieldSelector, FieldSelectorError> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for term in &self.terms {
            let field = fields.resolve_field(&term.field)?;
            // apimachinery drops a term its conversion maps to an empty field and value.
            if field.is_empty() && term.value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: field.to_owned(),
                operator: term.operator,
                value: term.value.clone(),
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether this selector does not restrict anything (apimachinery's `Empty()`).
    #[must_use]
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms, in the order they print.
    #[must_use]
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// The value `field` must equal for an object to be selected, if a term demands one: the
    /// first `field=value` term for it. Useful to narrow a scan (e.g. pods by `spec.nodeName`).
    #[must_use]
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.operator == FieldOperator::Equals && t.field == field)
            .map(|t| t.value.as_str())
    }

    /// Whether an object whose selectable fields have these values is selected. A field
    /// missing from `fields` compares as the empty string.
    #[must_use]
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.matches_with(|field| fields.get(field))
    }

    /// Whether an object is selected, `lookup` giving the value of each field it is asked
    /// for (`None` compares as the empty string).
    pub fn matches_with<F, S>(&self, lookup: F) -> bool
    where
        F: Fn(&str) -> Option<S>,
        S: AsRef<str>,
    {
        self.terms.iter().all(|term| {
            let actual = lookup(&term.field);
            let actual = actual.as_ref().map_or("", AsRef::as_ref);
            match term.operator {
                FieldOperator::Equals => actual == term.value,
                FieldOperator::NotEquals => actual != term.value,
            }
        })
    }
}

impl fmt::Display for FieldTerm {
    /// `field=value` or `field!=value`, with `\`, `,` and `=` in the value escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

impl fmt::Display for FieldSelector {
    /// The terms, comma-separated; the empty string for everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = FieldSelectorError;

    /// [`FieldSelector::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldSelector::parse(s)
    }
}

/// Splits at commas not preceded by an escaping backslash; the pieces keep their backslashes.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at the first place an operator starts, trying `!=`, then `==`, then `=`.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        let (operator, len) = if rest.starts_with("!=") {
            (FieldOperator::NotEquals, 2)
        } else if rest.starts_with("==") {
            (FieldOperator::Equals, 2)
        } else if rest.starts_with('=') {
            (FieldOperator::Equals, 1)
        } else {
            return None;
        };
        Some((&term[..i], operator, &term[i + len..]))
    })
}

/// Undoes [`escape_value`], rejecting unknown escapes and unescaped `,` or `=`.
fn unescape_value(value: &str) -> Result<String, FieldSelectorError> {
    if !value.contains(['\\', ',', '=']) {
        return Ok(value.to_owned());
    }
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(FieldSelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => return Err(FieldSelectorError::UnescapedCharacter(c)),
            c => out.push(c),
        }
    }
    if escaped {
        return Err(FieldSelectorError::InvalidEscape("\\".to_owned()));
    }
    Ok(out)
}

/// Prefixes `\`, `,` and `=` with a backslash so the value parses back unchanged.
fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> FieldSelector {
        FieldSelector::parse(s).expect("valid selector")
    }

    fn error(s: &str) -> String {
        FieldSelector::parse(s)
            .expect_err("invalid selector")
            .to_string()
    }

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn term(field: &str, operator: FieldOperator, value: &str) -> FieldTerm {
        FieldTerm {
            field: field.to_owned(),
            operator,
            value: value.to_owned(),
        }
    }

    #[test]
    fn empty_string_should_select_everything() {
        let s = parse("");
        assert!(s.is_everything());
        assert_eq!(s, FieldSelector::everything());
        assert!(s.matches(&fields(&[])));
        assert_eq!(s.to_string(), "");
        assert!(parse(",,").is_everything());
    }

    #[test]
    fn parse_should_accept_all_three_operators() {
        assert_eq!(
            parse("a=1,b==2,c!=3").terms(),
            [
                term("a", FieldOperator::Equals, "1"),
                term("b", FieldOperator::Equals, "2"),
                term("c", FieldOperator::NotEquals, "3"),
            ]
        );
    }

    #[test]
    fn parse_should_sort_terms_by_their_written_text() {
        assert_eq!(
            parse("status.phase=Running,metadata.name=a").to_string(),
            "metadata.name=a,status.phase=Running"
        );
        assert_eq!(parse("b=1,,a=2,").to_string(), "a=2,b=1");
    }

    #[test]
    fn parse_should_split_at_the_first_operator_and_keep_blanks() {
        assert_eq!(
            parse("a = b").terms(),
            [term("a ", FieldOperator::Equals, " b")]
        );
        assert_eq!(parse("=").terms(), [term("", FieldOperator::Equals, "")]);
        assert_eq!(parse("a=").terms(), [term("a", FieldOperator::Equals, "")]);
        assert_eq!(
            parse("a!b!=c").terms(),
            [term("a!b", FieldOperator::NotEquals, "c")]
        );
    }

    #[test]
    fn parse_should_unescape_backslash_comma_and_equals_in_values() {
        let s = parse(r"metadata.name=a\,b\=c\\d,x!=\\");
        assert_eq!(
            s.terms(),
            [
                term("metadata.name", FieldOperator::Equals, r"a,b=c\d"),
                term("x", FieldOperator::NotEquals, "\\"),
            ]
        );
        assert_eq!(s.to_string(), r"metadata.name=a\,b\=c\\d,x!=\\");
    }

    #[test]
    fn parse_should_reject_a_term_without_operator_quoting_the_whole_selector() {
        assert_eq!(
            error("a=b,foo"),
            "invalid selector: 'a=b,foo'; can't understand 'foo'"
        );
        assert_eq!(
            error("a<b"),
            "invalid selector: 'a<b'; can't understand 'a<b'"
        );
        assert_eq!(error(" "), "invalid selector: ' '; can't understand ' '");
    }

    #[test]
    fn parse_should_reject_bad_escapes_and_unescaped_equals_like_apimachinery() {
        assert_eq!(
            error(r"a=b\n"),
            r"invalid field selector: invalid escape sequence: \n"
        );
        assert_eq!(
            error(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            error("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            error("a==b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            error("a!=="),
            "invalid field selector: unescaped character in value: 61"
        );
    }

    #[test]
    fn parse_should_agree_with_apimachinery_on_its_classic_cases() {
        for text in ["x=a,y=b,z=c", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"] {
            assert_eq!(parse(text).to_string(), text);
        }
        for text in [
            "x=a||y=b",
            "x==a==b",
            "x=a,b",
            "x in (a)",
            "x in (a,b,c)",
            "x",
        ] {
            assert!(
                FieldSelector::parse(text).is_err(),
                "{text:?} should not parse"
            );
        }
        assert_eq!(parse("x=a,a=x").to_string(), parse("a=x,x=a").to_string());
    }

    #[test]
    fn parse_should_report_the_first_bad_term_in_sorted_order() {
        assert_eq!(
            error("z=1=2,a"),
            "invalid selector: 'z=1=2,a'; can't understand 'a'"
        );
    }

    #[test]
    fn display_should_round_trip_through_parse() {
        for text in [
            "",
            "a=b",
            "a!=b",
            "a=",
            r"a=\,\=\\",
            "metadata.name=x,metadata.namespace!=y",
            "spec.nodeName=héllo",
        ] {
            let s = parse(text);
            assert_eq!(s.to_string(), text);
            assert_eq!(parse(&s.to_string()), s);
        }
        assert_eq!(parse("a==b").to_string(), "a=b");
    }

    #[test]
    fn from_terms_should_escape_values_when_printed() {
        let s = FieldSelector::from_terms([term("spec.nodeName", FieldOperator::Equals, "a,b=c")]);
        assert_eq!(s.to_string(), r"spec.nodeName=a\,b\=c");
        assert_eq!(parse(&s.to_string()), s);
    }

    #[test]
    fn matches_should_require_every_term() {
        let s = parse("spec.nodeName=n1,status.phase!=Failed");
        assert!(s.matches(&fields(&[
            ("spec.nodeName", "n1"),
            ("status.phase", "Running")
        ])));
        assert!(!s.matches(&fields(&[
            ("spec.nodeName", "n1"),
            ("status.phase", "Failed")
        ])));
        assert!(!s.matches(&fields(&[("spec.nodeName", "n2")])));
    }

    #[test]
    fn missing_fields_should_compare_as_the_empty_string() {
        let absent = fields(&[]);
        assert!(parse("spec.nodeName=").matches(&absent));
        assert!(parse("spec.nodeName!=n1").matches(&absent));
        assert!(!parse("spec.nodeName!=").matches(&absent));
        assert!(!parse("spec.nodeName=n1").matches(&absent));
    }

    #[test]
    fn matches_with_should_accept_owned_or_borrowed_lookups() {
        let s = parse("metadata.name=a");
        assert!(s.matches_with(|f| (f == "metadata.name").then(|| "a".to_owned())));
        assert!(s.matches_with(|f| (f == "metadata.name").then_some("a")));
        assert!(!s.matches_with(|_| None::<String>));
    }

    #[test]
    fn requires_exact_match_should_find_the_first_equality_on_the_field() {
        let s = parse("spec.nodeName!=x,spec.nodeName=n1,status.phase=Running");
        assert_eq!(s.requires_exact_match("spec.nodeName"), Some("n1"));
        assert_eq!(s.requires_exact_match("status.phase"), Some("Running"));
        assert_eq!(parse("a!=b").requires_exact_match("a"), None);
        assert_eq!(s.requires_exact_match("metadata.name"), None);
    }
}
