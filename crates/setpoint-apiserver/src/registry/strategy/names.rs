//! Object name rules (DNS-1123 label and subdomain, DNS-1035 label), with apimachinery's
//! messages. Which kind uses which is kube-apiserver's per-kind `ValidateNameFunc`:
//! [`super::Strategy::name_rule`].

/// Which rule a kind's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// RFC 1123 label: ≤ 63 of `[a-z0-9-]`, alphanumeric at both ends (namespaces).
    Label,
    /// RFC 1035 label: an RFC 1123 label that starts with a letter (services).
    Dns1035Label,
    /// RFC 1123 subdomain: ≤ 253 characters of dot-separated `[a-z0-9-]` parts, each
    /// alphanumeric at both ends; a part has no length limit of its own (most kinds).
    Subdomain,
    /// Any name that is a valid path segment (core/v1 events).
    Any,
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn is_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The problems with `name` under `rule` (empty if valid), as apimachinery words them.
pub(crate) fn validate_name(name: &str, rule: NameRule) -> Vec<String> {
    let mut problems = Vec::new();
    if name == "." || name == ".." {
        problems.push(format!("may not be '{name}'"));
        return problems;
    }
    if name.contains('/') || name.contains('%') {
        problems.push(format!(
            "may not contain '{}'",
            if name.contains('/') { '/' } else { '%' }
        ));
        return problems;
    }
    match rule {
        NameRule::Any => {}
        NameRule::Label => {
            if name.len() > 63 {
                problems.push("must be no more than 63 characters".into());
            }
            if !is_label_chars(name) {
                problems.push(LABEL_MSG.into());
            }
        }
        NameRule::Dns1035Label => {
            if name.len() > 63 {
                problems.push("must be no more than 63 characters".into());
            }
            if !is_label_chars(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
                problems.push(DNS1035_MSG.into());
            }
        }
        NameRule::Subdomain => {
            if name.len() > 253 {
                problems.push("must be no more than 253 characters".into());
            }
            if !name.split('.').all(is_label_chars) {
                problems.push(SUBDOMAIN_MSG.into());
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_should_follow_dns_1123() {
        assert!(validate_name("web-1", NameRule::Label).is_empty());
        assert!(validate_name("a.b-c", NameRule::Subdomain).is_empty());
        assert!(!validate_name("a.b", NameRule::Label).is_empty());
        assert!(!validate_name("Web", NameRule::Subdomain).is_empty());
        assert!(!validate_name("-a", NameRule::Subdomain).is_empty());
        assert!(!validate_name("a/b", NameRule::Any).is_empty());
        assert!(validate_name("x.y.17a5", NameRule::Any).is_empty());
    }

    #[test]
    fn subdomain_names_should_allow_253_characters_in_one_part() {
        // Regression (issue 14.10): ConfigMap names of 64-253 characters were refused with
        // the 63-character label rule; a DNS-1123 subdomain limits only the whole name.
        assert!(validate_name(&"a".repeat(64), NameRule::Subdomain).is_empty());
        assert!(validate_name(&"a".repeat(253), NameRule::Subdomain).is_empty());
        assert_eq!(
            validate_name(&"a".repeat(254), NameRule::Subdomain),
            ["must be no more than 253 characters"]
        );
        assert!(!validate_name(&"a".repeat(64), NameRule::Label).is_empty());
    }

    #[test]
    fn dns_1035_labels_should_start_with_a_letter() {
        assert!(validate_name("web", NameRule::Dns1035Label).is_empty());
        assert_eq!(validate_name("1web", NameRule::Dns1035Label), [DNS1035_MSG]);
        assert!(validate_name("1web", NameRule::Label).is_empty());
    }
}
