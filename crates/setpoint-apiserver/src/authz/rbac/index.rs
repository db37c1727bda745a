//! The RBAC index: every Role, ClusterRole, RoleBinding and ClusterRoleBinding, decoded once,
//! with the bindings indexed by the users and groups they name (a ServiceAccount subject by
//! its user name `system:serviceaccount:<ns>:<name>`), so a decision looks only at the
//! bindings of the asker. Changed one object at a time as the watch caches' events arrive.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};

use super::rules;
use crate::auth::User;
use crate::authz::{Attributes, Decision};

/// The four RBAC kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

/// A binding's identity: its namespace (`""` for a ClusterRoleBinding) and name. Ordered so
/// ClusterRoleBindings come first, as kube visits them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct BindingId {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// A binding, as the index keeps it.
#[derive(Debug)]
pub(crate) struct Binding {
    id: BindingId,
    /// Whether the role reference names a ClusterRole (else a Role of the binding's namespace).
    cluster_role: bool,
    role: String,
    subjects: Vec<Subject>,
}

/// The user name of the ServiceAccount `name` in `namespace`.
pub(crate) fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

impl Binding {
    /// The user name a subject stands for (`None` for a group or an unusable subject).
    fn subject_user(&self, subject: &Subject) -> Option<String> {
        match subject.kind.as_str() {
            "User" => Some(subject.name.clone()),
            "ServiceAccount" => {
                let ns = subject
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(&self.id.namespace);
                (!ns.is_empty()).then(|| service_account_user(ns, &subject.name))
            }
            _ => None,
        }
    }

    /// The first subject that `user` is.
    fn subject_of(&self, user: &User) -> Option<&Subject> {
        self.subjects.iter().find(|s| match s.kind.as_str() {
            "Group" => user.in_group(&s.name),
            _ => self.subject_user(s).is_some_and(|name| name == user.name),
        })
    }

    /// kube's description of the binding granting through `subject`, for reasons:
    /// `ClusterRoleBinding "x" of ClusterRole "y" to User "z"`.
    fn describe(&self, subject: &Subject) -> String {
        let (kind, name) = if self.id.namespace.is_empty() {
            ("ClusterRoleBinding", self.id.name.clone())
        } else {
            (
                "RoleBinding",
                format!("{}/{}", self.id.name, self.id.namespace),
            )
        };
        let role_kind = if self.cluster_role {
            "ClusterRole"
        } else {
            "Role"
        };
        let mut who = subject.name.clone();
        if subject.kind == "ServiceAccount" {
            match subject.namespace.as_deref().filter(|ns| !ns.is_empty()) {
                Some(ns) => who = format!("{who}/{ns}"),
                None if !self.id.namespace.is_empty() => {
                    who = format!("{who}/{}", self.id.namespace)
                }
                None => {}
            }
        }
        format!(
            "{kind} {name:?} of {role_kind} {:?} to {} {who:?}",
            self.role, subject.kind
        )
    }
}

/// Every RBAC object, indexed.
#[derive(Debug, Default)]
pub(crate) struct Index {
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    bindings: HashMap<BindingId, Arc<Binding>>,
    by_user: HashMap<String, BTreeSet<BindingId>>,
    by_group: HashMap<String, BTreeSet<BindingId>>,
}

impl Index {
    /// Applies one object of `kind` as now stored (`Some`) or deleted (`None`, with the last
    /// state in `old`); objects that do not decode are treated as absent.
    pub(crate) fn apply(&mut self, kind: Kind, object: Option<&[u8]>, old: Option<&[u8]>) {
        match kind {
            Kind::Role => {
                let key = |o: &Role| {
                    (
                        o.metadata.namespace.clone().unwrap_or_default(),
                        o.metadata.name.clone().unwrap_or_default(),
                    )
                };
                if let Some(old) = old.and_then(|b| serde_json::from_slice::<Role>(b).ok()) {
                    self.roles.remove(&key(&old));
                }
                if let Some(new) = object.and_then(|b| serde_json::from_slice::<Role>(b).ok()) {
                    self.roles
                        .insert(key(&new), Arc::new(new.rules.unwrap_or_default()));
                }
            }
            Kind::ClusterRole => {
                if let Some(old) = old.and_then(|b| serde_json::from_slice::<ClusterRole>(b).ok()) {
                    self.cluster_roles
                        .remove(&old.metadata.name.unwrap_or_default());
                }
                if let Some(new) =
                    object.and_then(|b| serde_json::from_slice::<ClusterRole>(b).ok())
                {
                    self.cluster_roles.insert(
                        new.metadata.name.unwrap_or_default(),
                        Arc::new(new.rules.unwrap_or_default()),
                    );
                }
            }
            Kind::RoleBinding => {
                if let Some(old) = old.and_then(|b| serde_json::from_slice::<RoleBinding>(b).ok()) {
                    self.remove_binding(&BindingId {
                        namespace: old.metadata.namespace.unwrap_or_default(),
                        name: old.metadata.name.unwrap_or_default(),
                    });
                }
                if let Some(new) =
                    object.and_then(|b| serde_json::from_slice::<RoleBinding>(b).ok())
                {
                    self.insert_binding(Binding {
                        id: BindingId {
                            namespace: new.metadata.namespace.unwrap_or_default(),
                            name: new.metadata.name.unwrap_or_default(),
                        },
                        cluster_role: new.role_ref.kind == "ClusterRole",
                        role: new.role_ref.name,
                        subjects: new.subjects.unwrap_or_default(),
                    });
                }
            }
            Kind::ClusterRoleBinding => {
                if let Some(old) =
                    old.and_then(|b| serde_json::from_slice::<ClusterRoleBinding>(b).ok())
                {
                    self.remove_binding(&BindingId {
                        namespace: String::new(),
                        name: old.metadata.name.unwrap_or_default(),
                    });
                }
                if let Some(new) =
                    object.and_then(|b| serde_json::from_slice::<ClusterRoleBinding>(b).ok())
                {
                    self.insert_binding(Binding {
                        id: BindingId {
                            namespace: String::new(),
                            name: new.metadata.name.unwrap_or_default(),
                        },
                        cluster_role: true,
                        role: new.role_ref.name,
                        subjects: new.subjects.unwrap_or_default(),
                    });
                }
            }
        }
    }

    /// Forgets every object of `kind` (before it is loaded again whole).
    pub(crate) fn clear(&mut self, kind: Kind) {
        match kind {
            Kind::Role => self.roles.clear(),
            Kind::ClusterRole => self.cluster_roles.clear(),
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                let cluster = kind == Kind::ClusterRoleBinding;
                let gone: Vec<BindingId> = self
                    .bindings
                    .keys()
                    .filter(|id| id.namespace.is_empty() == cluster)
                    .cloned()
                    .collect();
                for id in gone {
                    self.remove_binding(&id);
                }
            }
        }
    }

    fn insert_binding(&mut self, binding: Binding) {
        self.remove_binding(&binding.id);
        for subject in &binding.subjects {
            let entry = if subject.kind == "Group" {
                self.by_group.entry(subject.name.clone())
            } else if let Some(user) = binding.subject_user(subject) {
                self.by_user.entry(user)
            } else {
                continue;
            };
            entry.or_default().insert(binding.id.clone());
        }
        self.bindings.insert(binding.id.clone(), Arc::new(binding));
    }

    fn remove_binding(&mut self, id: &BindingId) {
        let Some(binding) = self.bindings.remove(id) else {
            return;
        };
        for subject in &binding.subjects {
            let (map, key) = if subject.kind == "Group" {
                (&mut self.by_group, subject.name.clone())
            } else if let Some(user) = binding.subject_user(subject) {
                (&mut self.by_user, user)
            } else {
                continue;
            };
            if let Some(set) = map.get_mut(&key) {
                set.remove(id);
                if set.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    /// The bindings naming `user` (by name, ServiceAccount or group) that apply in `namespace`
    /// (`""`: ClusterRoleBindings only), ClusterRoleBindings first.
    fn bindings_of<'a>(&'a self, user: &User, namespace: &str) -> Vec<&'a Arc<Binding>> {
        let mut ids: Vec<&BindingId> = Vec::new();
        let sets = std::iter::once(self.by_user.get(&user.name))
            .chain(user.groups.iter().map(|g| self.by_group.get(g)))
            .flatten();
        for set in sets {
            ids.extend(
                set.iter()
                    .filter(|id| id.namespace.is_empty() || id.namespace == namespace),
            );
        }
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| self.bindings.get(id))
            .collect()
    }

    /// The rules of the role `binding` refers to, or kube's "not found" error.
    fn rules_of(&self, binding: &Binding) -> Result<&Arc<Vec<PolicyRule>>, String> {
        if binding.cluster_role {
            self.cluster_roles.get(&binding.role).ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {:?} not found",
                    binding.role
                )
            })
        } else {
            self.roles
                .get(&(binding.id.namespace.clone(), binding.role.clone()))
                .ok_or_else(|| {
                    format!(
                        "role.rbac.authorization.k8s.io {:?} not found",
                        binding.role
                    )
                })
        }
    }

    /// RBAC's decision on `attributes`: allowed by the first binding of the asker whose role
    /// has a rule allowing it; else no opinion, naming the roles that were not found.
    pub(crate) fn authorize(&self, attributes: &Attributes) -> Decision {
        let mut errors = Vec::new();
        for binding in self.bindings_of(&attributes.user, &attributes.namespace) {
            let Some(subject) = binding.subject_of(&attributes.user) else {
                continue;
            };
            match self.rules_of(binding) {
                Ok(rules) => {
                    if rules.iter().any(|rule| rules::allows(attributes, rule)) {
                        return Decision::Allow(format!(
                            "RBAC: allowed by {}",
                            binding.describe(subject)
                        ));
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        Decision::NoOpinion(match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        })
    }

    /// Every rule granted to `user` in `namespace` (`""`: cluster-wide only), and the errors
    /// of roles not found.
    pub(crate) fn rules_for(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for binding in self.bindings_of(user, namespace) {
            if binding.subject_of(user).is_none() {
                continue;
            }
            match self.rules_of(binding) {
                Ok(rules) => out.extend(rules.iter().cloned()),
                Err(e) => errors.push(e),
            }
        }
        (out, errors)
    }
}
