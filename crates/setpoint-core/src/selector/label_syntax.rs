//! The syntax of label keys and values, checked as apimachinery checks them
//! (`IsLabelKey`/`IsQualifiedName`, `IsLabelValue`, `IsDNS1123Subdomain`), returning the same
//! problem descriptions so error messages match kube-apiserver's word for word.
//!
//! * A key is an optional prefix and `/` and a name. The prefix is a DNS-1123 subdomain (at most
//!   253 characters of `[a-z0-9.-]`, dot-separated labels starting and ending alphanumeric); the
//!   name is 1 to 63 characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
//! * A value is empty, or up to 63 characters shaped like a key's name.

/// The regular expression apimachinery quotes for a key's name part.
const LABEL_KEY_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// The regular expression apimachinery quotes for a label value.
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// The regular expression apimachinery quotes for a DNS-1123 subdomain.
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

const LABEL_KEY_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Longest name part of a key, and longest value.
const LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain (a key's prefix).
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// Problems with `key` as a label key, empty if it is valid. apimachinery joins them with `"; "`.
pub(super) fn label_key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let name = match key.split_once('/') {
        None => key,
        Some((_, rest)) if rest.contains('/') => {
            problems.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_NAME_MSG, LABEL_KEY_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return problems;
        }
        Some((prefix, name)) => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    dns1123_subdomain_problems(prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            name
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX_LENGTH {
        problems.push(format!("name part {}", max_len_error(LABEL_MAX_LENGTH)));
    }
    if !is_label_name(name) {
        problems.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_NAME_MSG,
                LABEL_KEY_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    problems
}

/// Problems with `value` as a label value, empty if it is valid.
pub(super) fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_MAX_LENGTH {
        problems.push(max_len_error(LABEL_MAX_LENGTH));
    }
    if !value.is_empty() && !is_label_name(value) {
        problems.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    problems
}

/// Problems with `s` as a DNS-1123 subdomain, empty if it is valid.
fn dns1123_subdomain_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        problems.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !s.split('.').all(is_dns1123_label_shape) {
        problems.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    problems
}

/// `[A-Za-z0-9]` first and last, `[-A-Za-z0-9_.]` between, at least one character.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, with no length limit (the subdomain check has none per label).
fn is_dns1123_label_shape(s: &str) -> bool {
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

/// apimachinery's `MaxLenError`.
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// apimachinery's `RegexError`, including its doubled spaces between examples.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME_PART_SHAPE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    #[test]
    fn label_key_should_accept_plain_and_prefixed_names() {
        for key in [
            "a",
            "app",
            "A.b-C_d",
            "0",
            "example.com/MyName",
            "app.kubernetes.io/name",
            "k8s.io/a",
            &"x".repeat(63),
            &format!("{}/a", "a".repeat(253)),
        ] {
            assert_eq!(label_key_problems(key), Vec::<String>::new(), "{key:?}");
        }
    }

    #[test]
    fn label_key_should_describe_a_badly_shaped_name_like_apimachinery() {
        assert_eq!(label_key_problems("-a"), vec![NAME_PART_SHAPE.to_owned()]);
        assert_eq!(label_key_problems("app:"), vec![NAME_PART_SHAPE.to_owned()]);
        assert_eq!(
            label_key_problems(""),
            vec![
                "name part must be non-empty".to_owned(),
                NAME_PART_SHAPE.to_owned()
            ]
        );
    }

    #[test]
    fn label_key_should_reject_a_name_over_63_characters() {
        assert_eq!(
            label_key_problems(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_owned()]
        );
    }

    #[test]
    fn label_key_should_describe_a_bad_prefix_like_apimachinery() {
        assert_eq!(
            label_key_problems("app.kubernetes_io/name"),
            vec!["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned()]
        );
        assert_eq!(
            label_key_problems("/a"),
            vec!["prefix part must be non-empty".to_owned()]
        );
        assert_eq!(
            label_key_problems(&format!("{}/a", "a".repeat(254)))[0],
            "prefix part must be no more than 253 characters"
        );
        assert_eq!(label_key_problems("Example.com/a").len(), 1);
    }

    #[test]
    fn label_key_should_reject_more_than_one_slash_with_a_single_problem() {
        assert_eq!(
            label_key_problems("a/b/c"),
            vec!["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned()]
        );
    }

    #[test]
    fn label_value_should_accept_empty_and_well_shaped_values() {
        for value in [
            "",
            "a",
            "MyValue",
            "my_value",
            "12345",
            "a.b-c_d",
            &"v".repeat(63),
        ] {
            assert_eq!(
                label_value_problems(value),
                Vec::<String>::new(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn label_value_should_describe_bad_values_like_apimachinery() {
        let shape = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        assert_eq!(label_value_problems("-a"), vec![shape.to_owned()]);
        assert_eq!(label_value_problems("a b"), vec![shape.to_owned()]);
        assert_eq!(label_value_problems("é"), vec![shape.to_owned()]);
        assert_eq!(
            label_value_problems(&"z".repeat(64)),
            vec!["must be no more than 63 characters".to_owned()]
        );
        assert_eq!(
            label_value_problems(&format!("{}-", "z".repeat(64))).len(),
            2
        );
    }
}
