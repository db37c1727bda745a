//! The RBAC index: every Role, ClusterRole, RoleBinding and ClusterRoleBinding, decoded once,
//! with the bindings indexed by the users and groups they name (a ServiceAccount subject by
//! its user name `system:serviceaccount:<ns>:<name>`), so a decision looks only at the
//! bindings of the asker. Changed one object at a time as the watch caches' events arrive.

use std::collections::HashMap;
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
    /// Per subject, the user name it stands for (`None` for a group or an unknown kind),
    /// resolved once here so a decision compares names without building any.
    users: Vec<Option<String>>,
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
    /// A binding of `subjects`; resolves the subjects' user names.
    fn new(id: BindingId, cluster_role: bool, role: String, subjects: Vec<Subject>) -> Binding {
        let mut binding = Binding {
            id,
            cluster_role,
            role,
            subjects,
            users: Vec::new(),
        };
        binding.users = binding
            .subjects
            .iter()
            .map(|s| binding.subject_user(s))
            .collect();
        binding
    }

    fn subject_of(&self, user: &User) -> Option<&Subject> {
        self.subjects
            .iter()
            .zip(&self.users)
            .find(|(s, name)| match s.kind.as_str() {
                "Group" => user.in_group(&s.name),
                _ => name.as_deref() == Some(user.name.as_str()),
            })
            .map(|(s, _)| s)
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
    /// Roles by namespace, then name (looked up without building a key).
    roles: HashMap<String, HashMap<String, Arc<Vec<PolicyRule>>>>,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    bindings: HashMap<BindingId, Arc<Binding>>,
    /// The bindings naming each user (ServiceAccounts by their user name), by namespace.
    by_user: HashMap<String, Scoped>,
    /// The bindings naming each group, by namespace.
    by_group: HashMap<String, Scoped>,
}

/// The bindings naming one subject, by the namespace they apply in (`""`: the
/// ClusterRoleBindings), each list sorted by name: a decision reads two lists and builds nothing.
#[derive(Debug, Default)]
struct Scoped {
    by_namespace: HashMap<String, Vec<Arc<Binding>>>,
}

impl Scoped {
    fn insert(&mut self, binding: &Arc<Binding>) {
        let list = self
            .by_namespace
            .entry(binding.id.namespace.clone())
            .or_default();
        if list.iter().any(|b| b.id == binding.id) {
            return; // named twice in one binding's subjects
        }
        let at = list.partition_point(|b| b.id.name < binding.id.name);
        list.insert(at, binding.clone());
    }

    /// Removes the binding `id`; whether nothing is left.
    fn remove(&mut self, id: &BindingId) -> bool {
        if let Some(list) = self.by_namespace.get_mut(&id.namespace) {
            list.retain(|b| b.id != *id);
            if list.is_empty() {
                self.by_namespace.remove(&id.namespace);
            }
        }
        self.by_namespace.is_empty()
    }

    fn get(&self, namespace: &str) -> &[Arc<Binding>] {
        self.by_namespace.get(namespace).map_or(&[], Vec::as_slice)
    }
}

impl Index {
    /// Applies one object of `kind` as now stored (`Some`) or deleted (`None`, with the last
    /// state in `old`); objects that do not decode are treated as absent.
    pub(crate) fn apply(&mut self, kind: Kind, object: Option<&[u8]>, old: Option<&[u8]>) {
        match kind {
            Kind::Role => {
                if let Some(old) = old.and_then(|b| serde_json::from_slice::<Role>(b).ok()) {
                    let namespace = old.metadata.namespace.unwrap_or_default();
                    if let Some(roles) = self.roles.get_mut(&namespace) {
                        roles.remove(&old.metadata.name.unwrap_or_default());
                        if roles.is_empty() {
                            self.roles.remove(&namespace);
                        }
                    }
                }
                if let Some(new) = object.and_then(|b| serde_json::from_slice::<Role>(b).ok()) {
                    self.roles
                        .entry(new.metadata.namespace.unwrap_or_default())
                        .or_default()
                        .insert(
                            new.metadata.name.unwrap_or_default(),
                            Arc::new(new.rules.unwrap_or_default()),
                        );
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
                    self.insert_binding(Binding::new(
                        BindingId {
                            namespace: new.metadata.namespace.unwrap_or_default(),
                            name: new.metadata.name.unwrap_or_default(),
                        },
                        new.role_ref.kind == "ClusterRole",
                        new.role_ref.name,
                        new.subjects.unwrap_or_default(),
                    ));
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
                    self.insert_binding(Binding::new(
                        BindingId {
                            namespace: String::new(),
                            name: new.metadata.name.unwrap_or_default(),
                        },
                        true,
                        new.role_ref.name,
                        new.subjects.unwrap_or_default(),
                    ));
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
        let binding = Arc::new(binding);
        for (subject, user) in binding.subjects.iter().zip(&binding.users) {
            let scoped = if subject.kind == "Group" {
                self.by_group.entry(subject.name.clone())
            } else if let Some(user) = user {
                self.by_user.entry(user.clone())
            } else {
                continue;
            };
            scoped.or_default().insert(&binding);
        }
        self.bindings.insert(binding.id.clone(), binding);
    }

    fn remove_binding(&mut self, id: &BindingId) {
        let Some(binding) = self.bindings.remove(id) else {
            return;
        };
        for (subject, user) in binding.subjects.iter().zip(&binding.users) {
            let (map, key) = if subject.kind == "Group" {
                (&mut self.by_group, &subject.name)
            } else if let Some(user) = user {
                (&mut self.by_user, user)
            } else {
                continue;
            };
            if map.get_mut(key).is_some_and(|scoped| scoped.remove(id)) {
                map.remove(key);
            }
        }
    }

    /// The bindings naming `user` (by name, ServiceAccount or group) that apply in `namespace`
    /// (`""`: ClusterRoleBindings only): ClusterRoleBindings first, each binding once.
    fn bindings_of<'a>(&'a self, user: &User, namespace: &str) -> Vec<&'a Arc<Binding>> {
        let scopes: Vec<&Scoped> = std::iter::once(self.by_user.get(&user.name))
            .chain(user.groups.iter().map(|g| self.by_group.get(g)))
            .flatten()
            .collect();
        let mut out: Vec<&Arc<Binding>> = Vec::new();
        let namespaces: &[&str] = if namespace.is_empty() {
            &[""]
        } else {
            &["", namespace]
        };
        for ns in namespaces {
            let start = out.len();
            for scoped in &scopes {
                for binding in scoped.get(ns) {
                    // A binding reached through the user and a group, or two groups: once.
                    if !out[start..].iter().any(|b| Arc::ptr_eq(b, binding)) {
                        out.push(binding);
                    }
                }
            }
        }
        out
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
                .get(&binding.id.namespace)
                .and_then(|roles| roles.get(&binding.role))
                .ok_or_else(|| {
                    format!(
                        "role.rbac.authorization.k8s.io {:?} not found",
                        binding.role
                    )
                })
        }
    }

    /// The rules of a ClusterRole (`cluster`) or of a Role in `namespace`.
    pub(crate) fn role_rules(
        &self,
        cluster: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        let probe = Binding {
            id: BindingId {
                namespace: namespace.to_owned(),
                name: String::new(),
            },
            cluster_role: cluster,
            role: name.to_owned(),
            subjects: Vec::new(),
            users: Vec::new(),
        };
        self.rules_of(&probe).map(|rules| rules.as_ref().clone())
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn apply(index: &mut Index, kind: Kind, object: serde_json::Value) {
        index.apply(kind, Some(object.to_string().as_bytes()), None);
    }

    fn delete(index: &mut Index, kind: Kind, object: serde_json::Value) {
        index.apply(kind, None, Some(object.to_string().as_bytes()));
    }

    fn binding(name: &str, namespace: Option<&str>, role: (&str, &str)) -> serde_json::Value {
        json!({
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
            "subjects": [
                {"kind": "User", "name": "jane"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "robot"}
            ],
        })
    }

    fn names(index: &Index, user: &User, namespace: &str) -> Vec<String> {
        index
            .bindings_of(user, namespace)
            .iter()
            .map(|b| format!("{}/{}", b.id.namespace, b.id.name))
            .collect()
    }

    #[test]
    fn bindings_of_should_find_each_binding_once_cluster_wide_first_and_forget_deleted_ones() {
        let mut index = Index::default();
        apply(
            &mut index,
            Kind::ClusterRole,
            json!({"metadata": {"name": "reader"},
                   "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
        );
        apply(
            &mut index,
            Kind::Role,
            json!({"metadata": {"name": "writer", "namespace": "a"},
                   "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]}]}),
        );
        apply(
            &mut index,
            Kind::RoleBinding,
            binding("z-writes", Some("a"), ("Role", "writer")),
        );
        apply(
            &mut index,
            Kind::RoleBinding,
            binding("b-reads", Some("a"), ("ClusterRole", "reader")),
        );
        apply(
            &mut index,
            Kind::RoleBinding,
            binding("elsewhere", Some("b"), ("ClusterRole", "reader")),
        );
        apply(
            &mut index,
            Kind::ClusterRoleBinding,
            binding("everywhere", None, ("ClusterRole", "reader")),
        );
        // Named as a user and through a group: each binding once, cluster-wide first.
        let jane = User::new("jane", ["devs".to_owned()]);
        assert_eq!(
            names(&index, &jane, "a"),
            ["/everywhere", "a/b-reads", "a/z-writes"]
        );
        assert_eq!(names(&index, &jane, ""), ["/everywhere"]);
        // A ServiceAccount subject stands for the user of the binding's namespace only.
        let robot = User::new("system:serviceaccount:a:robot", []);
        assert_eq!(names(&index, &robot, "a"), ["a/b-reads", "a/z-writes"]);
        let create = Attributes::resource(&robot, "create", "", "pods", "a", "");
        assert!(matches!(index.authorize(&create), Decision::Allow(_)));

        delete(
            &mut index,
            Kind::Role,
            json!({"metadata": {"name": "writer", "namespace": "a"}}),
        );
        match index.authorize(&create) {
            Decision::NoOpinion(why) => assert!(why.contains("\"writer\" not found"), "{why}"),
            other => panic!("{other:?}"),
        }
        delete(
            &mut index,
            Kind::RoleBinding,
            binding("z-writes", Some("a"), ("Role", "writer")),
        );
        delete(
            &mut index,
            Kind::ClusterRoleBinding,
            binding("everywhere", None, ("ClusterRole", "reader")),
        );
        assert_eq!(names(&index, &jane, "a"), ["a/b-reads"]);
        index.clear(Kind::RoleBinding);
        assert!(names(&index, &jane, "a").is_empty());
        assert!(index.by_user.is_empty() && index.by_group.is_empty());
    }
}
