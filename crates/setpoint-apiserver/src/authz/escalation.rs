//! RBAC escalation prevention (kube's `policybased` RBAC storage): a user may create or update
//! a Role or ClusterRole only if it already holds every permission the role grants, or may
//! `escalate` roles/clusterroles; and a RoleBinding or ClusterRoleBinding only if it holds every
//! permission of the referenced role (in the binding's namespace), or may `bind` that role.
//! Setting an `aggregationRule` needs full authority. `system:masters` may do anything.
//!
//! The seam is the registry store's admission hook: the handler runs an RBAC write under an
//! [`EscalationCheck`] that sees the final object (after a patch is applied) just before it is
//! validated by admission and written, then hands over to the request's own admission.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;
use setpoint_core::{ApiError, GroupResource};

use super::rbac::rules::{describe, rule, uncovered, url_rule};
use super::{Attributes, Authorizer, Chain, Decision};
use crate::auth::User;
use crate::registry::store::{Admit, Operation};
use crate::registry::ResourceDef;

const GROUP: &str = "rbac.authorization.k8s.io";

/// Checks RBAC writes of one request for escalation, then asks `inner` (the request's
/// admission, if any).
pub(crate) struct EscalationCheck {
    user: User,
    chain: Arc<Chain>,
    inner: Option<Arc<dyn Admit>>,
}

impl EscalationCheck {
    /// The check for a write of `def` by `user` (`None`: an in-process caller, not checked),
    /// or `None` when nothing is to be checked.
    pub(crate) fn for_write(
        chain: &Arc<Chain>,
        def: &ResourceDef,
        user: Option<&User>,
        inner: Option<Arc<dyn Admit>>,
    ) -> Option<Arc<dyn Admit>> {
        let user = user?;
        let rbac = def.gvk.group == GROUP
            && matches!(
                def.plural.as_str(),
                "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
            );
        if !rbac || user.in_group(super::chain::MASTERS_GROUP) {
            return None;
        }
        Some(Arc::new(EscalationCheck {
            user: user.clone(),
            chain: chain.clone(),
            inner,
        }))
    }

    /// Whether the user may `verb` the RBAC `resource` named `name` in `namespace`.
    fn may(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let attributes = Attributes::resource(&self.user, verb, GROUP, resource, namespace, name);
        matches!(self.chain.authorize(&attributes), Decision::Allow(_))
    }

    /// kube's refusal when the user lacks some of `rules` in `namespace`; `Ok` if it holds them.
    fn confirm_no_escalation(&self, rules: &[PolicyRule], namespace: &str) -> Result<(), String> {
        let (owned, errors) = self.chain.rbac().rules_for(&self.user, namespace);
        let missing = uncovered(&owned, rules);
        if missing.is_empty() {
            return Ok(());
        }
        let mut lines: Vec<String> = compact(missing).iter().map(describe).collect();
        lines.sort();
        lines.dedup();
        let groups: Vec<String> = self.user.groups.iter().map(|g| format!("{g:?}")).collect();
        let mut message = format!(
            "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user.name,
            groups.join(" "),
            lines.join("\n")
        );
        if !errors.is_empty() {
            message.push_str(&format!("; resolution errors: [{}]", errors.join(", ")));
        }
        Err(message)
    }

    /// The escalation check of `object` (and `old`, on an update) of `def`.
    fn check(
        &self,
        def: &ResourceDef,
        object: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let refuse = |why: String| {
            let gr = GroupResource::new(GROUP, &def.plural);
            ApiError::forbidden_object(&gr, name, &why)
        };
        match def.plural.as_str() {
            "roles" | "clusterroles" => {
                let aggregation = &object["aggregationRule"];
                let aggregation_changed = old.map_or(!aggregation.is_null(), |o| {
                    o["aggregationRule"] != *aggregation
                });
                if def.plural == "clusterroles" && aggregation_changed && !aggregation.is_null() {
                    let everything = [rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
                    if !self.may("escalate", &def.plural, namespace, name)
                        && self.confirm_no_escalation(&everything, namespace).is_err()
                    {
                        return Err(refuse(
                            "must have cluster-admin privileges to use the aggregationRule"
                                .to_owned(),
                        ));
                    }
                }
                if old.is_some_and(|o| o["rules"] == object["rules"]) {
                    return Ok(());
                }
                if self.may("escalate", &def.plural, namespace, name) {
                    return Ok(());
                }
                let rules: Vec<PolicyRule> =
                    serde_json::from_value(object["rules"].clone()).unwrap_or_default();
                self.confirm_no_escalation(&rules, namespace)
                    .map_err(refuse)
            }
            _ => {
                let role_ref = &object["roleRef"];
                let kind = role_ref["kind"].as_str().unwrap_or_default();
                let role = role_ref["name"].as_str().unwrap_or_default();
                let resource = if kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                if self.may("bind", resource, namespace, role) {
                    return Ok(());
                }
                let rules = self
                    .chain
                    .rbac()
                    .role_rules(kind == "ClusterRole", namespace, role)
                    .map_err(refuse)?;
                self.confirm_no_escalation(&rules, namespace)
                    .map_err(refuse)
            }
        }
    }
}

/// Rules differing only in their verbs merged, as kube compacts the missing rules it reports.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let same = out.iter_mut().find(|o| {
            o.api_groups == rule.api_groups
                && o.resources == rule.resources
                && o.resource_names == rule.resource_names
                && o.non_resource_urls == rule.non_resource_urls
        });
        match same {
            Some(existing) => {
                for verb in rule.verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => out.push(rule),
        }
    }
    out
}

#[async_trait]
impl Admit for EscalationCheck {
    async fn mutate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&mut Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<bool, ApiError> {
        match &self.inner {
            Some(inner) => inner.mutate(def, operation, object, old, dry_run).await,
            None => Ok(false),
        }
    }

    async fn validate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if let (Operation::Create | Operation::Update, Some(object)) = (operation, object) {
            self.check(def, object, old)?;
        }
        match &self.inner {
            Some(inner) => inner.validate(def, operation, object, old, dry_run).await,
            None => Ok(()),
        }
    }
}
