//! The default roles and bindings, with kube-apiserver's names, labels and rule sets (read from
//! its bootstrap policy's semantics): `cluster-admin` (bound to `system:masters`), the
//! aggregated user-facing `admin` / `edit` / `view` and the `system:aggregate-to-*` roles they
//! gather, what every authenticated user may do (`system:basic-user`, `system:discovery`,
//! `system:public-info-viewer`), ServiceAccount issuer discovery, node bootstrap and the
//! certificates roles, and a few of kube's unbound system roles.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::authz::rbac::rules::{rule, url_rule};

/// The annotation marking a default object to be reconciled at every start.
pub(crate) const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The label every default object has.
const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The label that aggregates a role into `admin`, `edit` or `view`.
fn aggregate_to(role: &str) -> String {
    format!("rbac.authorization.k8s.io/aggregate-to-{role}")
}

fn meta(name: &str, labels: &[(String, &str)]) -> ObjectMeta {
    let mut all: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.clone(), (*v).to_owned()))
        .collect();
    all.insert(BOOTSTRAPPING.0.to_owned(), BOOTSTRAPPING.1.to_owned());
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(all),
        annotations: Some(BTreeMap::from([(AUTOUPDATE.to_owned(), "true".to_owned())])),
        ..ObjectMeta::default()
    }
}

/// A default ClusterRole.
pub(crate) fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, &[]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

fn labelled(name: &str, label: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, &[(aggregate_to(label), "true")]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// An aggregated role gathering the roles labelled `aggregate-to-<name>`, itself labelled to
/// aggregate into `into`.
fn aggregated(name: &str, into: Option<&str>) -> ClusterRole {
    let labels: Vec<(String, &str)> = into
        .map(|i| (aggregate_to(i), "true"))
        .into_iter()
        .collect();
    ClusterRole {
        metadata: meta(name, &labels),
        rules: Some(Vec::new()),
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(BTreeMap::from([(aggregate_to(name), "true".to_owned())])),
                match_expressions: None,
            }]),
        }),
    }
}

fn named(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
    r.resource_names = Some(names.iter().map(|n| (*n).to_owned()).collect());
    r
}

/// A default ClusterRoleBinding of the ClusterRole of the same name to `groups`.
pub(crate) fn binding(name: &str, groups: &[&str]) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name, &[]),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(
            groups
                .iter()
                .map(|g| Subject {
                    api_group: Some("rbac.authorization.k8s.io".to_owned()),
                    kind: "Group".to_owned(),
                    name: (*g).to_owned(),
                    namespace: None,
                })
                .collect(),
        ),
    }
}

/// The default ClusterRoles (without the components').
pub(crate) fn cluster_roles() -> Vec<ClusterRole> {
    let health = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let discovery = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let csr = "certificates.k8s.io";
    vec![
        role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        aggregated("admin", None),
        aggregated("edit", Some("admin")),
        aggregated("view", Some("edit")),
        labelled("system:aggregate-to-admin", "admin", admin_rules()),
        labelled("system:aggregate-to-edit", "edit", edit_rules()),
        labelled("system:aggregate-to-view", "view", view_rules()),
        role("system:discovery", vec![url_rule(&["get"], &discovery)]),
        role(
            "system:public-info-viewer",
            vec![url_rule(&["get"], &health)],
        ),
        role(
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        role(
            "system:service-account-issuer-discovery",
            vec![url_rule(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
        role(
            "system:monitoring",
            vec![url_rule(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
        ),
        role(
            "system:auth-delegator",
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        role(
            "system:node-bootstrapper",
            vec![rule(
                &["create", "get", "list", "watch"],
                &[csr],
                &["certificatesigningrequests"],
            )],
        ),
        role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(
                &["create"],
                &[csr],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(
                &["create"],
                &[csr],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "kubernetes.io/kube-apiserver-client",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
        approver(
            "system:certificates.k8s.io:kubelet-serving-approver",
            "kubernetes.io/kubelet-serving",
        ),
        approver(
            "system:certificates.k8s.io:legacy-unknown-approver",
            "kubernetes.io/legacy-unknown",
        ),
        role(
            "system:heapster",
            vec![
                rule(READ, &[""], &["events", "namespaces", "nodes", "pods"]),
                rule(READ, &["extensions", "apps"], &["deployments"]),
            ],
        ),
        role(
            "system:kube-dns",
            vec![rule(&["list", "watch"], &[""], &["endpoints", "services"])],
        ),
        role(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"], &[""], &["endpoints", "services"]),
                rule(READ, &[""], &["nodes"]),
                rule(
                    &["create", "patch", "update"],
                    &["", "events.k8s.io"],
                    &["events"],
                ),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        role("system:node", node_rules()),
    ]
}

/// The default ClusterRoleBindings (without the components').
pub(crate) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding("system:discovery", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        binding(
            "system:service-account-issuer-discovery",
            &["system:serviceaccounts"],
        ),
        binding("system:monitoring", &["system:monitoring"]),
        binding("system:node-bootstrapper", &["system:bootstrappers"]),
        binding(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &["system:bootstrappers"],
        ),
        binding(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &["system:nodes"],
        ),
    ]
}

fn approver(name: &str, signer: &str) -> ClusterRole {
    role(
        name,
        vec![named(
            rule(&["approve"], &["certificates.k8s.io"], &["signers"]),
            &[signer],
        )],
    )
}

/// `admin` beyond `edit`: roles and bindings in the namespace, local access reviews.
fn admin_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
        rule(
            READ_WRITE,
            &["rbac.authorization.k8s.io"],
            &["rolebindings", "roles"],
        ),
    ]
}

/// `edit` beyond `view`: writing workloads and their configuration, reading secrets, exec and
/// friends, impersonating the namespace's ServiceAccounts — not roles or bindings.
fn edit_rules() -> Vec<PolicyRule> {
    let pods = [
        "pods",
        "pods/attach",
        "pods/exec",
        "pods/portforward",
        "pods/proxy",
    ];
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(WRITE, &[""], &pods),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(
            WRITE,
            &["extensions"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "ingresses",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
            ],
        ),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(WRITE, &["coordination.k8s.io"], &["leases"]),
    ]
}

/// `view`: reading most namespaced objects — not secrets, roles or bindings.
fn view_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            &["extensions"],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
            ],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
        rule(READ, &["coordination.k8s.io"], &["leases"]),
    ]
}

/// `system:node`: what a kubelet needs, cluster-wide (kube keeps it unbound: the node
/// authorizer decides for nodes).
fn node_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews", "subjectaccessreviews"],
        ),
        rule(READ, &[""], &["services"]),
        rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
        rule(&["patch", "update"], &[""], &["nodes/status"]),
        rule(&["patch", "update"], &[""], &["nodes"]),
        rule(
            &["create", "patch", "update"],
            &["", "events.k8s.io"],
            &["events"],
        ),
        rule(READ, &[""], &["pods"]),
        rule(&["create", "delete"], &[""], &["pods"]),
        rule(&["patch", "update"], &[""], &["pods/status"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(&["get"], &[""], &["configmaps", "secrets"]),
        rule(
            &["get"],
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], &[""], &["endpoints"]),
        rule(
            &["create", "get", "list", "watch"],
            &["certificates.k8s.io"],
            &["certificatesigningrequests"],
        ),
        rule(
            &["delete", "get", "create", "update"],
            &["coordination.k8s.io"],
            &["leases"],
        ),
        rule(&["get"], &["storage.k8s.io"], &["volumeattachments"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            &["get", "patch", "update"],
            &[""],
            &["persistentvolumeclaims/status"],
        ),
        rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
        rule(READ, &["storage.k8s.io"], &["csidrivers"]),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &["storage.k8s.io"],
            &["csinodes"],
        ),
    ]
}
