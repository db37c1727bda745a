//! RBAC policy rules: whether a rule allows a request (kube's `RuleAllows`), and whether a set
//! of rules covers another (for escalation checks, kube's `Covers`: every rule broken down into
//! one verb on one resource of one group, or one verb on one URL, must be allowed).
//!
//! Matching: `*` matches any verb, group, resource or URL; a resource is matched whole
//! (`pods`, `pods/log`) or by `*/<subresource>`; an empty `resourceNames` matches any name; a
//! URL ending in `*` matches by prefix.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::authz::Attributes;

/// The wildcard of every rule field.
const ALL: &str = "*";

fn list(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or_default()
}

fn has_or_all(items: &[String], wanted: &str) -> bool {
    items.iter().any(|item| item == ALL || item == wanted)
}

/// Whether `rule` allows the request `attributes` describes.
pub(crate) fn allows(attributes: &Attributes, rule: &PolicyRule) -> bool {
    if !has_or_all(&rule.verbs, &attributes.verb) {
        return false;
    }
    if !attributes.resource_request {
        return list(&rule.non_resource_urls)
            .iter()
            .any(|url| url_matches(url, &attributes.path));
    }
    has_or_all(list(&rule.api_groups), &attributes.api_group)
        && list(&rule.resources)
            .iter()
            .any(|r| resource_matches(r, &attributes.resource, &attributes.subresource))
        && name_matches(list(&rule.resource_names), &attributes.name)
}

/// Whether the rule resource `rule` matches `resource` with `subresource` (`""`: none).
fn resource_matches(rule: &str, resource: &str, subresource: &str) -> bool {
    if rule == ALL {
        return true;
    }
    if subresource.is_empty() {
        return rule == resource;
    }
    if rule.strip_prefix("*/") == Some(subresource) {
        return true;
    }
    rule.strip_prefix(resource)
        .and_then(|rest| rest.strip_prefix('/'))
        == Some(subresource)
}

fn name_matches(names: &[String], name: &str) -> bool {
    names.is_empty() || names.iter().any(|n| n == name)
}

/// Whether the rule URL `rule` matches `path` (`*`, exact, or a prefix ending in `*`).
fn url_matches(rule: &str, path: &str) -> bool {
    if rule == ALL || rule == path {
        return true;
    }
    rule.strip_suffix('*')
        .is_some_and(|prefix| path.starts_with(prefix))
}

/// One permission of a broken-down rule: a verb on a group's resource (and maybe one name), or
/// a verb on a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Permission<'a> {
    Resource {
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: Option<&'a str>,
    },
    Url {
        verb: &'a str,
        url: &'a str,
    },
}

/// The permissions `rule` grants, one by one.
fn breakdown(rule: &PolicyRule) -> Vec<Permission<'_>> {
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for group in list(&rule.api_groups) {
            for resource in list(&rule.resources) {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(Permission::Resource {
                        verb,
                        group,
                        resource,
                        name: None,
                    });
                }
                for name in names {
                    out.push(Permission::Resource {
                        verb,
                        group,
                        resource,
                        name: Some(name),
                    });
                }
            }
        }
        for url in list(&rule.non_resource_urls) {
            out.push(Permission::Url { verb, url });
        }
    }
    out
}

/// Whether `owner` grants `permission` (kube's `ruleCovers`: wildcards cover anything; a
/// `resource/*` or `*/sub` owner resource covers by pattern; a URL by prefix).
fn covers(owner: &PolicyRule, permission: &Permission<'_>) -> bool {
    match permission {
        Permission::Resource {
            verb,
            group,
            resource,
            name,
        } => {
            has_or_all(&owner.verbs, verb)
                && has_or_all(list(&owner.api_groups), group)
                && list(&owner.resources)
                    .iter()
                    .any(|r| resource_covers(r, resource))
                && {
                    let names = list(&owner.resource_names);
                    names.is_empty() || name.is_some_and(|n| names.iter().any(|o| o == n))
                }
        }
        Permission::Url { verb, url } => {
            has_or_all(&owner.verbs, verb)
                && list(&owner.non_resource_urls).iter().any(|o| {
                    o == ALL
                        || o == url
                        || o.strip_suffix('*')
                            .is_some_and(|prefix| url.starts_with(prefix))
                })
        }
    }
}

/// Whether the owner resource `owner` covers the requested rule resource `wanted`.
fn resource_covers(owner: &str, wanted: &str) -> bool {
    if owner == ALL || owner == wanted {
        return true;
    }
    let Some((resource, sub)) = wanted.split_once('/') else {
        return false;
    };
    owner.strip_suffix("/*") == Some(resource) || owner.strip_prefix("*/") == Some(sub)
}

/// The rules of `wanted` that `owner` does not cover (empty: covered), each broken down.
pub(crate) fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for rule in wanted {
        for permission in breakdown(rule) {
            if owner.iter().any(|o| covers(o, &permission)) {
                continue;
            }
            missing.push(match permission {
                Permission::Resource {
                    verb,
                    group,
                    resource,
                    name,
                } => PolicyRule {
                    verbs: vec![verb.to_owned()],
                    api_groups: Some(vec![group.to_owned()]),
                    resources: Some(vec![resource.to_owned()]),
                    resource_names: name.map(|n| vec![n.to_owned()]),
                    non_resource_urls: None,
                },
                Permission::Url { verb, url } => PolicyRule {
                    verbs: vec![verb.to_owned()],
                    non_resource_urls: Some(vec![url.to_owned()]),
                    ..PolicyRule::default()
                },
            });
        }
    }
    missing
}

/// A rule as kube prints it in an escalation refusal:
/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub(crate) fn describe(rule: &PolicyRule) -> String {
    let quoted = |items: &[String]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if !list(&rule.api_groups).is_empty() {
        parts.push(format!("APIGroups:[{}]", quoted(list(&rule.api_groups))));
    }
    if !list(&rule.resources).is_empty() {
        parts.push(format!("Resources:[{}]", quoted(list(&rule.resources))));
    }
    if !list(&rule.resource_names).is_empty() {
        parts.push(format!(
            "ResourceNames:[{}]",
            quoted(list(&rule.resource_names))
        ));
    }
    if !list(&rule.non_resource_urls).is_empty() {
        parts.push(format!(
            "NonResourceURLs:[{}]",
            quoted(list(&rule.non_resource_urls))
        ));
    }
    parts.push(format!("Verbs:[{}]", quoted(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}

/// A rule from string slices (bootstrap policy, tests).
pub(crate) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        verbs: owned(verbs),
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        ..PolicyRule::default()
    }
}

/// A non-resource rule from string slices.
pub(crate) fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        verbs: owned(verbs),
        non_resource_urls: Some(owned(urls)),
        ..PolicyRule::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::User;

    fn ask(verb: &str, group: &str, resource: &str, name: &str) -> Attributes {
        Attributes::resource(&User::new("u", []), verb, group, resource, "ns", name)
    }

    #[test]
    fn resource_rules_should_match_verbs_groups_resources_and_names() {
        let pods = rule(&["get", "list"], &[""], &["pods"]);
        assert!(allows(&ask("get", "", "pods", "p"), &pods));
        assert!(!allows(&ask("create", "", "pods", ""), &pods));
        assert!(!allows(&ask("get", "apps", "pods", ""), &pods));
        assert!(!allows(&ask("get", "", "pods/log", "p"), &pods));
        let logs = rule(&["get"], &[""], &["pods/log"]);
        assert!(allows(&ask("get", "", "pods/log", "p"), &logs));
        assert!(!allows(&ask("get", "", "pods", "p"), &logs));
        let scale = rule(&["*"], &["*"], &["*/scale"]);
        assert!(allows(
            &ask("update", "apps", "deployments/scale", "d"),
            &scale
        ));
        assert!(!allows(&ask("update", "apps", "deployments", "d"), &scale));
        let mut named = rule(&["get"], &[""], &["configmaps"]);
        named.resource_names = Some(vec!["one".into()]);
        assert!(allows(&ask("get", "", "configmaps", "one"), &named));
        assert!(!allows(&ask("get", "", "configmaps", "two"), &named));
        assert!(!allows(&ask("list", "", "configmaps", ""), &named));
        assert!(allows(
            &ask("delete", "x", "y/z", "n"),
            &rule(&["*"], &["*"], &["*"])
        ));
    }

    #[test]
    fn url_rules_should_match_exactly_or_by_a_trailing_star() {
        let user = User::new("u", []);
        let r = url_rule(&["get"], &["/healthz", "/apis/*"]);
        let path = |p: &str| Attributes::non_resource(&user, "get", p);
        assert!(allows(&path("/healthz"), &r));
        assert!(!allows(&path("/healthz/etcd"), &r));
        assert!(allows(&path("/apis/apps/v1"), &r));
        assert!(!allows(
            &Attributes::non_resource(&user, "post", "/healthz"),
            &r
        ));
        // A resource rule never allows a path.
        assert!(!allows(&path("/api"), &rule(&["*"], &["*"], &["*"])));
    }

    #[test]
    fn uncovered_should_list_what_the_owner_lacks() {
        let owner = [rule(&["get", "list"], &[""], &["pods", "services/*"])];
        assert!(uncovered(
            &owner,
            &[rule(&["get"], &[""], &["pods", "services/status"])]
        )
        .is_empty());
        let missing = uncovered(&owner, &[rule(&["get", "delete"], &[""], &["pods"])]);
        assert_eq!(missing.len(), 1);
        assert_eq!(
            describe(&missing[0]),
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#
        );
        let mut named = rule(&["get"], &[""], &["secrets"]);
        named.resource_names = Some(vec!["s".into()]);
        assert!(!uncovered(&[named.clone()], &[rule(&["get"], &[""], &["secrets"])]).is_empty());
        assert!(uncovered(&[rule(&["get"], &[""], &["secrets"])], &[named]).is_empty());
        assert!(uncovered(
            &[url_rule(&["get"], &["/logs/*"])],
            &[url_rule(&["get"], &["/logs/x"])]
        )
        .is_empty());
    }
}
