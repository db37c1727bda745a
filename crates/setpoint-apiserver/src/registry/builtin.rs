//! The built-in resources, with the names, scopes, verbs and subresources kube-apiserver
//! advertises for them.

use setpoint_core::GroupVersionKind;

use super::strategy::Kind;
use super::{Representation, ResourceDef, Subresource};

pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
pub(crate) const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind::new(group, version, kind)
}

fn status(of: &GroupVersionKind) -> Subresource {
    Subresource {
        name: "status",
        kind: of.clone(),
        verbs: STATUS_VERBS,
    }
}

fn scale() -> Subresource {
    Subresource {
        name: "scale",
        kind: gvk("autoscaling", "v1", "Scale"),
        verbs: STATUS_VERBS,
    }
}

struct Def {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    namespaced: bool,
    verbs: &'static [&'static str],
    strategy: Kind,
}

impl Def {
    fn build(
        self,
        subresources: impl FnOnce(&GroupVersionKind) -> Vec<Subresource>,
    ) -> ResourceDef {
        let gvk = gvk(self.group, self.version, self.kind);
        // Storage keys as kube-apiserver lays them out: `/registry/<plural>/` (CRDs under their
        // group, `/registry/apiextensions.k8s.io/customresourcedefinitions/`), one storage for
        // both Event APIs (events.k8s.io/v1 objects are converted to and from core/v1).
        let key_prefix = if self.group == "apiextensions.k8s.io" {
            format!("/registry/{}/{}/", self.group, self.plural)
        } else {
            format!("/registry/{}/", self.plural)
        };
        let representation = match (self.group, self.version) {
            ("events.k8s.io", _) => Representation::EventsV1,
            ("autoscaling", "v1") => Representation::AutoscalingV1,
            _ => Representation::Native,
        };
        ResourceDef {
            subresources: subresources(&gvk),
            gvk,
            plural: self.plural.to_owned(),
            singular: self.singular.to_owned(),
            short_names: self.short_names.iter().map(|s| (*s).to_owned()).collect(),
            categories: self.categories.iter().map(|s| (*s).to_owned()).collect(),
            namespaced: self.namespaced,
            verbs: self.verbs,
            key_prefix,
            strategy: self.strategy,
            representation,
            custom: None,
        }
    }
}

/// Every built-in resource.
pub(crate) fn builtin_resources() -> Vec<ResourceDef> {
    vec![
        Def {
            group: "",
            version: "v1",
            kind: "Namespace",
            plural: "namespaces",
            singular: "namespace",
            short_names: &["ns"],
            categories: &[],
            namespaced: false,
            verbs: NAMESPACE_VERBS,
            strategy: Kind::Namespace,
        }
        .build(|g| {
            vec![
                Subresource {
                    name: "finalize",
                    kind: g.clone(),
                    verbs: &["update"],
                },
                status(g),
            ]
        }),
        Def {
            group: "",
            version: "v1",
            kind: "Pod",
            plural: "pods",
            singular: "pod",
            short_names: &["po"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Pod,
        }
        .build(|g| {
            vec![
                Subresource {
                    name: "binding",
                    kind: gvk("", "v1", "Binding"),
                    verbs: &["create"],
                },
                Subresource {
                    name: "eviction",
                    kind: gvk("policy", "v1", "Eviction"),
                    verbs: &["create"],
                },
                Subresource {
                    name: "log",
                    kind: g.clone(),
                    verbs: &["get"],
                },
                status(g),
            ]
        }),
        Def {
            group: "",
            version: "v1",
            kind: "Node",
            plural: "nodes",
            singular: "node",
            short_names: &["no"],
            categories: &[],
            namespaced: false,
            verbs: ALL_VERBS,
            strategy: Kind::Node,
        }
        .build(|g| vec![status(g)]),
        Def {
            group: "",
            version: "v1",
            kind: "ConfigMap",
            plural: "configmaps",
            singular: "configmap",
            short_names: &["cm"],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::ConfigMap,
        }
        .build(|_| vec![]),
        Def {
            group: "",
            version: "v1",
            kind: "Secret",
            plural: "secrets",
            singular: "secret",
            short_names: &[],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Secret,
        }
        .build(|_| vec![]),
        Def {
            group: "",
            version: "v1",
            kind: "ServiceAccount",
            plural: "serviceaccounts",
            singular: "serviceaccount",
            short_names: &["sa"],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::ServiceAccount,
        }
        .build(|_| vec![]),
        Def {
            group: "",
            version: "v1",
            kind: "Service",
            plural: "services",
            singular: "service",
            short_names: &["svc"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Service,
        }
        .build(|g| vec![status(g)]),
        Def {
            group: "",
            version: "v1",
            kind: "Event",
            plural: "events",
            singular: "event",
            short_names: &["ev"],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::CoreEvent,
        }
        .build(|_| vec![]),
        Def {
            group: "events.k8s.io",
            version: "v1",
            kind: "Event",
            plural: "events",
            singular: "event",
            short_names: &["ev"],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Event,
        }
        .build(|_| vec![]),
        Def {
            group: "coordination.k8s.io",
            version: "v1",
            kind: "Lease",
            plural: "leases",
            singular: "lease",
            short_names: &[],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Lease,
        }
        .build(|_| vec![]),
        Def {
            group: "apps",
            version: "v1",
            kind: "Deployment",
            plural: "deployments",
            singular: "deployment",
            short_names: &["deploy"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::Deployment,
        }
        .build(|g| vec![scale(), status(g)]),
        Def {
            group: "apps",
            version: "v1",
            kind: "ReplicaSet",
            plural: "replicasets",
            singular: "replicaset",
            short_names: &["rs"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::ReplicaSet,
        }
        .build(|g| vec![scale(), status(g)]),
        Def {
            group: "autoscaling",
            version: "v2",
            kind: "HorizontalPodAutoscaler",
            plural: "horizontalpodautoscalers",
            singular: "horizontalpodautoscaler",
            short_names: &["hpa"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::HorizontalPodAutoscaler,
        }
        .build(|g| vec![status(g)]),
        Def {
            group: "autoscaling",
            version: "v1",
            kind: "HorizontalPodAutoscaler",
            plural: "horizontalpodautoscalers",
            singular: "horizontalpodautoscaler",
            short_names: &["hpa"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
            strategy: Kind::HorizontalPodAutoscalerV1,
        }
        .build(|g| vec![status(g)]),
        Def {
            group: "apiextensions.k8s.io",
            version: "v1",
            kind: "CustomResourceDefinition",
            plural: "customresourcedefinitions",
            singular: "customresourcedefinition",
            short_names: &["crd", "crds"],
            categories: &["api-extensions"],
            namespaced: false,
            verbs: ALL_VERBS,
            strategy: Kind::CustomResourceDefinition,
        }
        .build(|g| vec![status(g)]),
    ]
}
