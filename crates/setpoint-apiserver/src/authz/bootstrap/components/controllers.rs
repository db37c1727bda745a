//! The rules of each built-in loop's ServiceAccount (`system:controller:<sa>`), derived from
//! what each loop's code calls (docs/design/identities.md).

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::{events, named, rule, READ};

/// The rules of each built-in loop's ServiceAccount (`kube-system/<sa>`), by that name.
pub(super) fn controller_rules(service_account: &str) -> Vec<PolicyRule> {
    let mut rules = match service_account {
        "namespace-controller" => vec![
            rule(&["get", "list", "watch", "delete"], &[""], &["namespaces"]),
            rule(
                &["update"],
                &[""],
                &["namespaces/finalize", "namespaces/status"],
            ),
            rule(
                &["get", "list", "delete", "deletecollection"],
                &["*"],
                &["*"],
            ),
        ],
        "generic-garbage-collector" => vec![rule(
            &["get", "list", "watch", "patch", "update", "delete"],
            &["*"],
            &["*"],
        )],
        "replicaset-controller" => workload_controller("apps", "replicasets"),
        "replication-controller" => workload_controller("", "replicationcontrollers"),
        "deployment-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &["apps"],
                &["deployments"],
            ),
            rule(
                &["update"],
                &["apps"],
                &["deployments/status", "deployments/finalizers"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &["apps"],
                &["replicasets"],
            ),
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["pods"],
            ),
        ],
        "job-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &["batch"],
                &["jobs"],
            ),
            rule(
                &["update", "patch"],
                &["batch"],
                &["jobs/status", "jobs/finalizers"],
            ),
            rule(
                &["get", "list", "watch", "create", "delete", "patch"],
                &[""],
                &["pods"],
            ),
        ],
        "cronjob-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &["batch"],
                &["cronjobs"],
            ),
            rule(
                &["update", "patch"],
                &["batch"],
                &["cronjobs/status", "cronjobs/finalizers"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &["batch"],
                &["jobs"],
            ),
            rule(&["list", "delete"], &[""], &["pods"]),
        ],
        "ttl-after-finished-controller" => {
            vec![rule(
                &["get", "list", "watch", "delete"],
                &["batch"],
                &["jobs"],
            )]
        }
        "node-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch", "delete"],
                &[""],
                &["nodes"],
            ),
            rule(
                &["update", "patch"],
                &[""],
                &["nodes/status", "pods/status"],
            ),
            rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
        ],
        "horizontal-pod-autoscaler" => vec![
            rule(READ, &["autoscaling"], &["horizontalpodautoscalers"]),
            rule(
                &["update", "patch"],
                &["autoscaling"],
                &["horizontalpodautoscalers/status"],
            ),
            rule(&["get", "update", "patch"], &["*"], &["*/scale"]),
            rule(&["get"], &["*"], &["*"]),
            rule(&["get", "list"], &[""], &["pods"]),
            rule(&["get", "list"], &["metrics.k8s.io"], &["pods"]),
            // External metrics of Setpoint's own `<resource>:<field>` form list that resource
            // by the metric's selector (docs/control.md); any resource may be named.
            rule(&["list"], &["*"], &["*"]),
            // Object, pods and external metrics (kube's HPA role reads both APIs whole).
            rule(
                &["get", "list"],
                &["custom.metrics.k8s.io", "external.metrics.k8s.io"],
                &["*"],
            ),
        ],
        "pid-autoscaler" => vec![
            rule(
                &["create", "get", "list", "watch"],
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
            ),
            named(
                &["update", "patch"],
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["pidautoscalers.autoscaling.setpoint.dev"],
            ),
            rule(READ, &["autoscaling.setpoint.dev"], &["pidautoscalers"]),
            rule(
                &["update", "patch"],
                &["autoscaling.setpoint.dev"],
                &["pidautoscalers/status"],
            ),
            rule(&["get", "update", "patch"], &["*"], &["*/scale"]),
            rule(&["get"], &["*"], &["*"]),
            rule(&["get", "list"], &[""], &["pods"]),
            rule(&["get", "list"], &["metrics.k8s.io"], &["pods"]),
            // External metrics of Setpoint's own `<resource>:<field>` form list that resource
            // by the metric's selector (docs/control.md); any resource may be named.
            rule(&["list"], &["*"], &["*"]),
            // Object, pods and external metrics (kube's HPA role reads both APIs whole).
            rule(
                &["get", "list"],
                &["custom.metrics.k8s.io", "external.metrics.k8s.io"],
                &["*"],
            ),
        ],
        "disruption-controller" => vec![
            rule(
                READ,
                &["apps"],
                &["deployments", "replicasets", "statefulsets"],
            ),
            rule(READ, &[""], &["replicationcontrollers", "pods"]),
            rule(READ, &["policy"], &["poddisruptionbudgets"]),
            rule(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
            rule(&["get"], &["*"], &["*/scale", "*"]),
        ],
        "service-account-controller" => vec![rule(&["create"], &[""], &["serviceaccounts"])],
        "root-ca-cert-publisher" => {
            vec![rule(&["get", "create", "update"], &[""], &["configmaps"])]
        }
        "statefulset-controller" => vec![
            rule(READ, &["apps"], &["statefulsets"]),
            rule(&["update", "patch"], &["apps"], &["statefulsets"]),
            rule(
                &["update"],
                &["apps"],
                &["statefulsets/status", "statefulsets/finalizers"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ],
                &[""],
                &["pods"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ],
                &["apps"],
                &["controllerrevisions"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[""],
                &["persistentvolumeclaims"],
            ),
        ],
        "daemon-set-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &["apps"],
                &["daemonsets"],
            ),
            rule(
                &["update"],
                &["apps"],
                &["daemonsets/status", "daemonsets/finalizers"],
            ),
            rule(READ, &[""], &["nodes"]),
            rule(
                &["get", "list", "watch", "create", "delete", "patch"],
                &[""],
                &["pods"],
            ),
            rule(&["create"], &[""], &["pods/binding"]),
            rule(
                &[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ],
                &["apps"],
                &["controllerrevisions"],
            ),
        ],
        "persistent-volume-binder" => vec![
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[""],
                &["persistentvolumes"],
            ),
            rule(
                &["update", "patch"],
                &[""],
                &["persistentvolumes/status", "persistentvolumeclaims/status"],
            ),
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(READ, &[""], &["pods", "nodes"]),
            rule(READ, &["storage.k8s.io"], &["storageclasses"]),
        ],
        "local-path-provisioner" => vec![
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[""],
                &["persistentvolumes"],
            ),
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(READ, &[""], &["pods", "nodes"]),
            rule(READ, &["storage.k8s.io"], &["storageclasses"]),
        ],
        "pvc-protection-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(READ, &[""], &["pods"]),
        ],
        "pv-protection-controller" => vec![rule(
            &["get", "list", "watch", "update", "patch"],
            &[""],
            &["persistentvolumes"],
        )],
        "resourcequota-controller" => vec![
            rule(&["list", "watch"], &["*"], &["*"]),
            rule(&["get"], &[""], &["resourcequotas"]),
            rule(&["update"], &[""], &["resourcequotas/status"]),
        ],
        "endpointslice-controller" => vec![
            rule(READ, &[""], &["services", "pods", "nodes"]),
            rule(&["update"], &[""], &["services/finalizers"]),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &["discovery.k8s.io"],
                &["endpointslices"],
            ),
        ],
        "endpoint-controller" => vec![
            rule(READ, &[""], &["services", "pods"]),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[""],
                &["endpoints"],
            ),
        ],
        "node-ipam-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["nodes"],
            ),
            rule(&["update", "patch"], &[""], &["nodes/status"]),
        ],
        // The CSR signer, approver and cleaner (kube's csrsigning, csrapproving, csrcleaner).
        "certificate-controller" => vec![
            rule(
                &["get", "list", "watch", "delete"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            ),
            rule(
                &["update"],
                &["certificates.k8s.io"],
                &[
                    "certificatesigningrequests/approval",
                    "certificatesigningrequests/status",
                ],
            ),
            named(
                &["sign"],
                &["certificates.k8s.io"],
                &["signers"],
                &[
                    "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "kubernetes.io/kubelet-serving",
                ],
            ),
            named(
                &["approve"],
                &["certificates.k8s.io"],
                &["signers"],
                &["kubernetes.io/kube-apiserver-client-kubelet"],
            ),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
        ],
        // The GitOps source loop (setpoint-gitops): its CRD, its objects' status, the Secrets
        // of `spec.secretRef`.
        "gitops-source" => vec![
            rule(
                &["create"],
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
            ),
            named(
                &["get", "update"],
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["gitrepositories.gitops.setpoint.dev"],
            ),
            rule(READ, &["gitops.setpoint.dev"], &["gitrepositories"]),
            rule(
                &["update", "patch"],
                &["gitops.setpoint.dev"],
                &["gitrepositories/status"],
            ),
            rule(&["get"], &[""], &["secrets"]),
        ],
        // The GitOps sync loop applies whatever git holds (as Flux's kustomize-controller is
        // cluster-admin), and impersonates a Sync's `serviceAccountName`. Listed in
        // CONTROLLER_SERVICE_ACCOUNTS with its loop.
        "gitops-sync" => vec![
            rule(&["*"], &["*"], &["*"]),
            PolicyRule {
                non_resource_urls: Some(vec!["*".to_owned()]),
                verbs: vec!["*".to_owned()],
                ..PolicyRule::default()
            },
            rule(&["impersonate"], &[""], &["serviceaccounts"]),
        ],
        // The balancers of LoadBalancer Services (setpoint-providers `lb`): the Services, their
        // status and finalizer, the endpoints they forward to.
        "service-lb-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &[""],
                &["services"],
            ),
            rule(&["update", "patch"], &[""], &["services/status"]),
            rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        ],
        // The PostgreSQL provider: its CRDs, its objects and their status, the credentials and
        // connection-details Secrets.
        "provider-postgresql" => managed_provider(
            "postgresql.sql.crossplane.io",
            &["databases", "roles", "grants", "providerconfigs"],
        ),
        // Certificates (cert-manager's kinds): the CRDs, the objects and their status, the
        // Secrets they are issued into.
        "cert-manager" => managed_provider(
            "cert-manager.io",
            &[
                "certificates",
                "certificaterequests",
                "issuers",
                "clusterissuers",
            ],
        ),
        // Cluster API (setpoint-capi): its CRDs, its objects and their status and finalizers,
        // and Secrets (bootstrap data and kubeconfigs, once its controllers run).
        "cluster-api" => managed_provider(
            "cluster.x-k8s.io",
            &[
                "clusters",
                "machines",
                "machinesets",
                "machinedeployments",
                "machinehealthchecks",
            ],
        ),
        _ => Vec::new(),
    };
    rules.push(events());
    rules
}

/// The rules of a provider of the managed-resource loop whose kinds are `resources` of `group`:
/// install and update their CRDs; read, write and finalize the objects and their status; keep
/// Secrets (credentials read, connection details and certificates written).
fn managed_provider(group: &str, resources: &[&str]) -> Vec<PolicyRule> {
    let crds: Vec<String> = resources.iter().map(|r| format!("{r}.{group}")).collect();
    let crds: Vec<&str> = crds.iter().map(String::as_str).collect();
    let subresources: Vec<String> = resources
        .iter()
        .flat_map(|r| [format!("{r}/status"), format!("{r}/finalizers")])
        .collect();
    let subresources: Vec<&str> = subresources.iter().map(String::as_str).collect();
    vec![
        rule(
            &["create"],
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
        ),
        named(
            &["get", "update"],
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &crds,
        ),
        rule(
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
            &[group],
            resources,
        ),
        rule(&["update", "patch"], &[group], &subresources),
        rule(
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
            &[""],
            &["secrets"],
        ),
    ]
}

/// The rules of the ReplicaSet and ReplicationController loops, on `group`'s `resource`.
fn workload_controller(group: &str, resource: &str) -> Vec<PolicyRule> {
    vec![
        rule(
            &["get", "list", "watch", "update", "patch"],
            &[group],
            &[resource],
        ),
        rule(
            &["update"],
            &[group],
            &[
                &format!("{resource}/status"),
                &format!("{resource}/finalizers"),
            ],
        ),
        rule(
            &["get", "list", "watch", "create", "delete", "patch"],
            &[""],
            &["pods"],
        ),
    ]
}
