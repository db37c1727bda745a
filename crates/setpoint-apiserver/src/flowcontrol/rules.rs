//! FlowSchema matching: what a request looks like to API Priority and Fairness (a
//! [`Digest`]: who asks, the verb, and a resource or a non-resource path) and whether one of a
//! FlowSchema's rules matches it, with kube-apiserver's wildcards (`*` for verbs, groups,
//! resources, namespaces and names; a trailing `/*` on a non-resource URL for a prefix).
//! A FlowSchema matches when any of its rules has a subject that is the user and a resource or
//! non-resource rule that covers what it asks.

use k8s_openapi::api::flowcontrol::v1 as fc;

use crate::auth::{User, AUTHENTICATED_GROUP};

/// The group every unauthenticated request is in (none reach the handler: the transport
/// refuses them, but a FlowSchema may name it).
const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// How a ServiceAccount's user name starts.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What a request asks for, as far as classification cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A resource request.
    Resource {
        /// `get`, `list`, `watch`, `create`, …
        verb: String,
        /// The API group; `""` for core.
        group: String,
        /// The resource, with `/subresource` when there is one (`pods/status`).
        resource: String,
        /// The namespace; `None` for a cluster-scoped request.
        namespace: Option<String>,
    },
    /// Anything else: the lower-case HTTP method and the path.
    NonResource {
        /// `get`, `post`, `put`, …
        verb: String,
        /// The request's path.
        path: String,
    },
}

/// A request as FlowSchemas see it.
#[derive(Clone, Debug)]
pub(crate) struct Digest<'a> {
    /// Who asks.
    pub(crate) user: &'a User,
    /// What is asked.
    pub(crate) asked: Asked,
}

impl Digest<'_> {
    /// The namespace of a namespaced resource request (the `ByNamespace` distinguisher).
    pub(crate) fn namespace(&self) -> &str {
        match &self.asked {
            Asked::Resource {
                namespace: Some(ns),
                ..
            } => ns,
            _ => "",
        }
    }
}

/// Whether `rule` (one entry of a FlowSchema's `rules`) matches `digest`.
pub(crate) fn rule_matches(rule: &fc::PolicyRulesWithSubjects, digest: &Digest<'_>) -> bool {
    if !rule
        .subjects
        .iter()
        .any(|subject| subject_matches(subject, digest.user))
    {
        return false;
    }
    match &digest.asked {
        Asked::Resource {
            verb,
            group,
            resource,
            namespace,
        } => rule.resource_rules.iter().flatten().any(|r| {
            listed(&r.verbs, verb)
                && listed(&r.api_groups, group)
                && listed(&r.resources, resource)
                && match namespace {
                    Some(ns) => r.namespaces.iter().flatten().any(|n| n == "*" || n == ns),
                    None => r.cluster_scope == Some(true),
                }
        }),
        Asked::NonResource { verb, path } => rule.non_resource_rules.iter().flatten().any(|r| {
            listed(&r.verbs, verb) && r.non_resource_urls.iter().any(|u| url_matches(u, path))
        }),
    }
}

/// Whether `subject` names `user`.
fn subject_matches(subject: &fc::Subject, user: &User) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == "*" || u.name == user.name),
        "Group" => subject.group.as_ref().is_some_and(|g| {
            g.name == "*"
                || g.name == AUTHENTICATED_GROUP
                || (g.name != UNAUTHENTICATED_GROUP && user.in_group(&g.name))
        }),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = user.name.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            let Some((namespace, name)) = rest.split_once(':') else {
                return false;
            };
            namespace == sa.namespace && (sa.name == "*" || sa.name == name)
        }),
        _ => false,
    }
}

/// Whether `list` holds `*` or `value`.
fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// Whether a rule's non-resource URL covers `path`: `*` covers all, `/prefix/*` covers
/// `/prefix` and everything under it, anything else only itself.
fn url_matches(url: &str, path: &str) -> bool {
    if url == "*" || url == path {
        return true;
    }
    url.strip_suffix("/*").is_some_and(|prefix| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_resource_prefix_urls_should_cover_the_prefix_and_below_only() {
        assert!(url_matches("/healthz/*", "/healthz"));
        assert!(url_matches("/healthz/*", "/healthz/etcd"));
        assert!(!url_matches("/healthz/*", "/healthzz"));
        assert!(url_matches("*", "/anything"));
        assert!(!url_matches("/version", "/version/x"));
    }

    #[test]
    fn service_account_subjects_should_match_by_namespace_and_name() {
        let sa = fc::Subject {
            kind: "ServiceAccount".to_owned(),
            service_account: Some(fc::ServiceAccountSubject {
                namespace: "kube-system".to_owned(),
                name: "*".to_owned(),
            }),
            ..Default::default()
        };
        let inside = User::new("system:serviceaccount:kube-system:job-controller", []);
        let outside = User::new("system:serviceaccount:default:job-controller", []);
        assert!(subject_matches(&sa, &inside));
        assert!(!subject_matches(&sa, &outside));
    }
}
