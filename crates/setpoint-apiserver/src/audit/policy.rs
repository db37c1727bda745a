//! The audit policy: kube's `audit.k8s.io/v1` `Policy` (YAML or JSON), validated when loaded,
//! and the level a request gets — the first rule that matches decides; a request no rule
//! matches is not recorded. A rule matches when each of its non-empty lists does: `users`
//! (the user's name), `userGroups` (any of its groups), `verbs`, `namespaces` (`""` for
//! cluster-scoped requests) and `resources` (group, `resources` as `pods`, `pods/log`,
//! `pods/*`, `*/status` or `*`, `resourceNames`) for resource requests, `nonResourceURLs`
//! (exact, `*`, or a prefix ending in `*`) for the others. Stages to omit are the policy's and
//! the rule's together; a rule's `omitManagedFields` overrides the policy's.
//!
//! Unlike kube-apiserver, unknown fields are refused: a misspelt `namespace:` silently widening
//! a rule is worse than a startup error. [`DEFAULT_POLICY`] is the policy `setpoint server`
//! uses without `--audit-policy-file` (docs/design/audit.md explains each rule).

use std::path::Path;

use serde::Deserialize;

use super::event::{Level, Stage};
use super::AuditError;
use crate::auth::User;
use crate::request_info::ResourceRequest;

/// The policy used without `--audit-policy-file`: nothing of health checks, discovery,
/// events, heartbeats or the components' reads; everything else at `Metadata` (so no body of
/// a Secret, ConfigMap, TokenRequest or TokenReview ever reaches the log), once per request
/// (`RequestReceived` omitted).
pub const DEFAULT_POLICY: &str = include_str!("default-policy.yaml");

/// A set of stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stages(u8);

impl Stages {
    fn bit(stage: Stage) -> u8 {
        match stage {
            Stage::RequestReceived => 1,
            Stage::ResponseStarted => 2,
            Stage::ResponseComplete => 4,
            Stage::Panic => 8,
        }
    }

    fn of(stages: &[Stage]) -> Stages {
        Stages(stages.iter().fold(0, |bits, s| bits | Stages::bit(*s)))
    }

    /// Whether `stage` is in the set.
    pub(crate) fn contains(self, stage: Stage) -> bool {
        self.0 & Stages::bit(stage) != 0
    }
}

/// What the policy says of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) level: Level,
    /// Stages not to record.
    pub(crate) omit_stages: Stages,
    /// Whether `metadata.managedFields` is left out of the recorded bodies.
    pub(crate) omit_managed_fields: bool,
}

/// What a policy rule is matched against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Facts<'a> {
    /// Who sent the request; `None` if it was not authenticated.
    pub(crate) user: Option<&'a User>,
    /// The verb (`create`, …; for a non-resource request the lower-cased method).
    pub(crate) verb: &'a str,
    /// The resource asked for, if it is a resource request.
    pub(crate) resource: Option<&'a ResourceRequest>,
    /// The request's path.
    pub(crate) path: &'a str,
}

/// A validated policy.
#[derive(Clone, Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

#[derive(Clone, Debug)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleFile {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

impl Policy {
    /// Reads and validates the policy in `path`.
    pub fn load(path: &Path) -> Result<Policy, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuditError::ReadPolicy {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&text).map_err(|problem| AuditError::BadPolicy {
            path: path.display().to_string(),
            problem,
        })
    }

    /// The built-in [`DEFAULT_POLICY`].
    pub fn default_policy() -> Policy {
        match Policy::parse(DEFAULT_POLICY) {
            Ok(policy) => policy,
            // The unit tests parse it: unreachable in a tested build.
            Err(_) => Policy {
                rules: Vec::new(),
                omit_stages: Stages::default(),
                omit_managed_fields: false,
            },
        }
    }

    /// Parses and validates a policy document; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let file: PolicyFile = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        let _ = &file.metadata;
        if file.api_version != "audit.k8s.io/v1" || file.kind != "Policy" {
            return Err(format!(
                "expected apiVersion audit.k8s.io/v1 and kind Policy, got {} {}",
                file.api_version, file.kind
            ));
        }
        if file.rules.is_empty() {
            return Err("the policy has no rules (it would record nothing)".to_owned());
        }
        let omit_stages = Stages::of(&file.omit_stages);
        let mut rules = Vec::with_capacity(file.rules.len());
        for (i, rule) in file.rules.into_iter().enumerate() {
            validate(&rule).map_err(|problem| format!("rules[{i}]: {problem}"))?;
            rules.push(Rule {
                level: rule.level,
                users: rule.users,
                user_groups: rule.user_groups,
                verbs: rule.verbs,
                resources: rule.resources,
                namespaces: rule.namespaces,
                non_resource_urls: rule.non_resource_urls,
                omit_stages: Stages(omit_stages.0 | Stages::of(&rule.omit_stages).0),
                omit_managed_fields: rule.omit_managed_fields.unwrap_or(file.omit_managed_fields),
            });
        }
        Ok(Policy {
            rules,
            omit_stages,
            omit_managed_fields: file.omit_managed_fields,
        })
    }

    /// What the policy says of the request `facts` describes.
    pub(crate) fn decide(&self, facts: &Facts<'_>) -> Decision {
        match self.rules.iter().find(|rule| rule.matches(facts)) {
            Some(rule) => Decision {
                level: rule.level,
                omit_stages: rule.omit_stages,
                omit_managed_fields: rule.omit_managed_fields,
            },
            None => Decision {
                level: Level::None,
                omit_stages: self.omit_stages,
                omit_managed_fields: self.omit_managed_fields,
            },
        }
    }
}

fn validate(rule: &RuleFile) -> Result<(), String> {
    if !rule.non_resource_urls.is_empty()
        && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
    {
        return Err("a rule cannot apply to both resources and non-resource URLs".to_owned());
    }
    for url in &rule.non_resource_urls {
        let body = url.strip_suffix('*').unwrap_or(url);
        if url != "*" && !url.starts_with('/') {
            return Err(format!("nonResourceURLs: {url:?} must begin with \"/\""));
        }
        if body.contains('*') {
            return Err(format!(
                "nonResourceURLs: {url:?} may only use a wildcard (*) at its end"
            ));
        }
    }
    for group in &rule.resources {
        if !group.resource_names.is_empty() && group.resources.is_empty() {
            return Err(format!(
                "resources (group {:?}): resourceNames need at least one resource",
                group.group
            ));
        }
        for resource in &group.resources {
            if resource.is_empty() || resource.matches('/').count() > 1 {
                return Err(format!("resources: {resource:?} is not a resource name"));
            }
        }
    }
    Ok(())
}

impl Rule {
    fn matches(&self, facts: &Facts<'_>) -> bool {
        if !self.users.is_empty() && !facts.user.is_some_and(|u| self.users.contains(&u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !facts
                .user
                .is_some_and(|u| u.groups.iter().any(|g| self.user_groups.contains(g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == facts.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return facts.resource.is_some_and(|r| self.matches_resource(r));
        }
        if !self.non_resource_urls.is_empty() {
            return facts.resource.is_none()
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(facts.path, spec));
        }
        true
    }

    fn matches_resource(&self, r: &ResourceRequest) -> bool {
        let namespace = r.namespace.as_deref().unwrap_or_default();
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let subresource = r.subresource.as_deref().unwrap_or_default();
        let name = r.name.as_deref().unwrap_or_default();
        self.resources.iter().any(|gr| {
            gr.group == r.group
                && (gr.resources.is_empty()
                    || ((gr.resource_names.is_empty()
                        || gr.resource_names.iter().any(|n| n == name))
                        && gr
                            .resources
                            .iter()
                            .any(|spec| resource_matches(spec, &r.resource, subresource))))
        })
    }
}

/// Whether `spec` (`pods`, `pods/log`, `pods/*`, `*/status`, `*`) names `resource` with
/// `subresource` (`""` for none).
fn resource_matches(spec: &str, resource: &str, subresource: &str) -> bool {
    if spec == "*" {
        return true;
    }
    let (spec_resource, spec_sub) = spec.split_once('/').unwrap_or((spec, ""));
    match (spec_resource, spec_sub) {
        (r, "*") => r == resource, // the resource and all its subresources
        ("*", s) => !subresource.is_empty() && s == subresource,
        (r, s) => r == resource && s == subresource,
    }
}

/// Whether `path` matches a `nonResourceURLs` entry.
fn path_matches(path: &str, spec: &str) -> bool {
    match spec.strip_suffix('*') {
        _ if spec == path => true,
        Some(prefix) => path.starts_with(prefix),
        None => false,
    }
}

#[cfg(test)]
mod tests;
