//! Object name rules (DNS-1123 label and subdomain), with apimachinery's messages.

/// Which rule a kind's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// RFC 1123 label: ≤ 63 of `[a-z0-9-]`, alphanumeric at both ends (namespaces, services).
    Label,
    /// RFC 1123 subdomain: ≤ 253, dot-separated labels (most kinds).
    Subdomain,
    /// Any name that is a valid path segment (events).
    Any,
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
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
            if !is_label(name) {
                problems.push(LABEL_MSG.into());
            }
        }
        NameRule::Subdomain => {
            if name.len() > 253 {
                problems.push("must be no more than 253 characters".into());
            }
            if !name.split('.').all(is_label) {
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
}
