//! Patch metadata of the built-in kinds Setpoint serves.
//!
//! Every field of these kinds that has an `x-kubernetes-patch-strategy` in the Kubernetes
//! 1.27–1.33 OpenAPI schemas (generated from the `patchStrategy`/`patchMergeKey` struct tags in
//! `k8s.io/api`; walked from each kind's root through every
//! `$ref`). Fields added after 1.27 are included: a field an object does not have never
//! matters. Notably *not* merged (no tag, so replaced whole): `spec.tolerations`,
//! `spec.taints` (Node), `spec.readinessGates`, `status.containerStatuses`, container
//! `envFrom`, `resources.claims` and `resizePolicy`, `status.loadBalancer.ingress`.

use std::sync::OnceLock;

use super::schema::{FieldStrategy, PatchSchema};

type Entries = &'static [(&'static str, FieldStrategy)];

/// `metadata` of every object (`ObjectMeta`).
const OBJECT_META: Entries = &[
    ("ownerReferences", FieldStrategy::by("uid")),
    ("finalizers", FieldStrategy::MergeScalars),
];

/// `Container` and `EphemeralContainer`.
const CONTAINER: Entries = &[
    ("env", FieldStrategy::by("name")),
    ("ports", FieldStrategy::by("containerPort")),
    ("volumeMounts", FieldStrategy::by("mountPath")),
    ("volumeDevices", FieldStrategy::by("devicePath")),
];

/// `PodSpec`, less its containers (see [`CONTAINER`]) and the ephemeral volume claim template's
/// metadata (see [`OBJECT_META`]).
const POD_SPEC: Entries = &[
    ("containers", FieldStrategy::by("name")),
    ("initContainers", FieldStrategy::by("name")),
    ("ephemeralContainers", FieldStrategy::by("name")),
    ("volumes", FieldStrategy::by_retaining_keys("name")),
    ("imagePullSecrets", FieldStrategy::by("name")),
    ("hostAliases", FieldStrategy::by("ip")),
    (
        "topologySpreadConstraints",
        FieldStrategy::by("topologyKey"),
    ),
    ("schedulingGates", FieldStrategy::by("name")),
    ("resourceClaims", FieldStrategy::by_retaining_keys("name")),
];

/// `ContainerStatus` (init, regular and ephemeral).
const CONTAINER_STATUS: Entries = &[
    ("volumeMounts", FieldStrategy::by("mountPath")),
    ("allocatedResourcesStatus", FieldStrategy::by("name")),
];

/// `PodStatus`, less its container statuses (see [`CONTAINER_STATUS`]).
const POD_STATUS: Entries = &[
    ("conditions", FieldStrategy::by("type")),
    ("podIPs", FieldStrategy::by("ip")),
    ("hostIPs", FieldStrategy::by("ip")),
    (
        "resourceClaimStatuses",
        FieldStrategy::by_retaining_keys("name"),
    ),
];

/// Collects `(path, strategy)` entries for one kind.
#[derive(Default)]
struct Table(Vec<(String, FieldStrategy)>);

impl Table {
    fn mount(&mut self, prefix: &str, entries: &[(&str, FieldStrategy)]) -> &mut Self {
        for (path, strategy) in entries {
            self.0.push((join(prefix, path), *strategy));
        }
        self
    }

    fn metadata(&mut self, prefix: &str) -> &mut Self {
        self.mount(&join(prefix, "metadata"), OBJECT_META)
    }

    fn pod_spec(&mut self, prefix: &str) -> &mut Self {
        self.mount(prefix, POD_SPEC);
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            self.mount(&join(prefix, list), CONTAINER);
        }
        self.metadata(&join(prefix, "volumes.ephemeral.volumeClaimTemplate"))
    }

    fn pod_status(&mut self, prefix: &str) -> &mut Self {
        self.mount(prefix, POD_STATUS);
        for list in [
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
        ] {
            self.mount(&join(prefix, list), CONTAINER_STATUS);
        }
        self
    }

    fn build(&self) -> PatchSchema {
        PatchSchema::from_entries(self.0.iter().map(|(p, s)| (p.as_str(), *s)))
    }
}

fn join(prefix: &str, path: &str) -> String {
    if prefix.is_empty() {
        path.to_owned()
    } else {
        format!("{prefix}.{path}")
    }
}

/// The kinds with patch metadata, as `(apiVersion, kind)`.
const KINDS: &[(&str, &str)] = &[
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("v1", "Node"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "Event"),
    ("events.k8s.io/v1", "Event"),
    ("coordination.k8s.io/v1", "Lease"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("autoscaling/v1", "Scale"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("v1", "PodTemplate"),
    ("v1", "ReplicationController"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Endpoints"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ControllerRevision"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("autoscaling/v1", "HorizontalPodAutoscaler"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("storage.k8s.io/v1", "CSINode"),
    ("storage.k8s.io/v1", "CSIStorageCapacity"),
    ("storage.k8s.io/v1", "VolumeAttachment"),
    ("node.k8s.io/v1", "RuntimeClass"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
];

fn table(api_version: &str, kind: &str) -> Table {
    let mut t = Table::default();
    t.metadata("");
    match (api_version, kind) {
        ("v1", "Namespace") => {
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("v1", "Pod") => {
            t.pod_spec("spec").pod_status("status");
        }
        ("v1", "Node") => {
            t.mount("spec", &[("podCIDRs", FieldStrategy::MergeScalars)]);
            t.mount(
                "status",
                &[
                    ("addresses", FieldStrategy::by("type")),
                    ("conditions", FieldStrategy::by("type")),
                ],
            );
        }
        ("v1", "ServiceAccount") => {
            t.mount("", &[("secrets", FieldStrategy::by("name"))]);
        }
        ("v1", "Service") => {
            t.mount("spec", &[("ports", FieldStrategy::by("port"))]);
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("apps/v1", "Deployment") => {
            t.mount("spec", &[("strategy", FieldStrategy::RetainKeys)]);
            t.metadata("spec.template").pod_spec("spec.template.spec");
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("apps/v1", "ReplicaSet") => {
            t.metadata("spec.template").pod_spec("spec.template.spec");
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("v1", "PodTemplate") => {
            t.metadata("template").pod_spec("template.spec");
        }
        ("v1", "ReplicationController") | ("apps/v1", "DaemonSet") | ("batch/v1", "Job") => {
            t.metadata("spec.template").pod_spec("spec.template.spec");
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("apps/v1", "StatefulSet") => {
            t.metadata("spec.template").pod_spec("spec.template.spec");
            t.metadata("spec.volumeClaimTemplates");
            t.mount(
                "spec.volumeClaimTemplates.status",
                &[("conditions", FieldStrategy::by("type"))],
            );
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("batch/v1", "CronJob") => {
            t.metadata("spec.jobTemplate");
            t.metadata("spec.jobTemplate.spec.template")
                .pod_spec("spec.jobTemplate.spec.template.spec");
        }
        ("v1", "PersistentVolumeClaim")
        | ("autoscaling/v2", "HorizontalPodAutoscaler")
        | ("policy/v1", "PodDisruptionBudget") => {
            t.mount("status", &[("conditions", FieldStrategy::by("type"))]);
        }
        ("storage.k8s.io/v1", "CSINode") => {
            t.mount("spec", &[("drivers", FieldStrategy::by("name"))]);
        }
        // ConfigMap, Secret, both Events, Lease, Scale, CustomResourceDefinition, and the
        // other kinds listed: only their metadata has tags.
        _ => {}
    }
    t
}

impl PatchSchema {
    /// The patch metadata of a built-in kind, by `apiVersion` (`v1`, `apps/v1`, …) and `kind`.
    /// `None` for kinds without it, e.g. custom resources, for which kube-apiserver refuses
    /// strategic merge patch with 415.
    #[must_use]
    pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static PatchSchema> {
        static SCHEMAS: OnceLock<Vec<PatchSchema>> = OnceLock::new();
        let schemas =
            SCHEMAS.get_or_init(|| KINDS.iter().map(|&(v, k)| table(v, k).build()).collect());
        KINDS
            .iter()
            .position(|&(v, k)| v == api_version && k == kind)
            .and_then(|at| schemas.get(at))
    }

    /// The `(apiVersion, kind)` pairs [`PatchSchema::for_kind`] knows.
    pub fn built_in_kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
        KINDS.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(api_version: &str, kind: &str, path: &str) -> Option<FieldStrategy> {
        PatchSchema::for_kind(api_version, kind)
            .unwrap()
            .strategy(path)
    }

    #[test]
    fn pod_spec_fields_should_be_shared_by_pods_and_workload_templates() {
        for (v, k, prefix) in [
            ("v1", "Pod", "spec"),
            ("apps/v1", "Deployment", "spec.template.spec"),
            ("apps/v1", "ReplicaSet", "spec.template.spec"),
        ] {
            let at = |p: &str| strategy(v, k, &format!("{prefix}.{p}"));
            assert_eq!(at("containers"), Some(FieldStrategy::by("name")));
            assert_eq!(at("initContainers.env"), Some(FieldStrategy::by("name")));
            assert_eq!(
                at("ephemeralContainers.ports"),
                Some(FieldStrategy::by("containerPort"))
            );
            assert_eq!(
                at("containers.volumeMounts"),
                Some(FieldStrategy::by("mountPath"))
            );
            assert_eq!(
                at("containers.volumeDevices"),
                Some(FieldStrategy::by("devicePath"))
            );
            assert_eq!(
                at("volumes"),
                Some(FieldStrategy::by_retaining_keys("name"))
            );
            assert_eq!(at("hostAliases"), Some(FieldStrategy::by("ip")));
            assert_eq!(
                at("topologySpreadConstraints"),
                Some(FieldStrategy::by("topologyKey"))
            );
            assert_eq!(
                at("volumes.ephemeral.volumeClaimTemplate.metadata.finalizers"),
                Some(FieldStrategy::MergeScalars)
            );
            assert_eq!(at("tolerations"), None);
            assert_eq!(at("containers.envFrom"), None);
        }
    }

    #[test]
    fn every_pod_template_should_merge_containers_by_name() {
        for (v, k, prefix) in [
            ("v1", "PodTemplate", "template.spec"),
            ("v1", "ReplicationController", "spec.template.spec"),
            ("apps/v1", "StatefulSet", "spec.template.spec"),
            ("apps/v1", "DaemonSet", "spec.template.spec"),
            ("batch/v1", "Job", "spec.template.spec"),
            ("batch/v1", "CronJob", "spec.jobTemplate.spec.template.spec"),
        ] {
            let at = |p: &str| strategy(v, k, &format!("{prefix}.{p}"));
            assert_eq!(at("containers"), Some(FieldStrategy::by("name")), "{k}");
            assert_eq!(at("containers.env"), Some(FieldStrategy::by("name")), "{k}");
        }
        assert_eq!(
            strategy("batch/v1", "Job", "status.conditions"),
            Some(FieldStrategy::by("type"))
        );
        assert_eq!(strategy("v1", "Endpoints", "subsets"), None);
    }

    #[test]
    fn every_kind_should_merge_owner_references_by_uid_and_finalizers_as_a_set() {
        for (v, k) in PatchSchema::built_in_kinds() {
            assert_eq!(
                strategy(v, k, "metadata.ownerReferences"),
                Some(FieldStrategy::by("uid")),
                "{v} {k}"
            );
            assert_eq!(
                strategy(v, k, "metadata.finalizers"),
                Some(FieldStrategy::MergeScalars),
                "{v} {k}"
            );
        }
    }

    #[test]
    fn status_lists_should_merge_by_their_keys() {
        assert_eq!(
            strategy("v1", "Pod", "status.conditions"),
            Some(FieldStrategy::by("type"))
        );
        assert_eq!(
            strategy("v1", "Pod", "status.initContainerStatuses.volumeMounts"),
            Some(FieldStrategy::by("mountPath"))
        );
        assert_eq!(strategy("v1", "Pod", "status.containerStatuses"), None);
        assert_eq!(
            strategy("v1", "Node", "status.addresses"),
            Some(FieldStrategy::by("type"))
        );
        assert_eq!(strategy("v1", "Node", "spec.taints"), None);
        assert_eq!(
            strategy("v1", "Node", "spec.podCIDRs"),
            Some(FieldStrategy::MergeScalars)
        );
        assert_eq!(
            strategy("apps/v1", "Deployment", "spec.strategy"),
            Some(FieldStrategy::RetainKeys)
        );
        assert_eq!(
            strategy("v1", "Service", "spec.ports"),
            Some(FieldStrategy::by("port"))
        );
        assert_eq!(
            strategy("v1", "ServiceAccount", "secrets"),
            Some(FieldStrategy::by("name"))
        );
    }

    #[test]
    fn custom_resources_and_unknown_versions_should_have_no_schema() {
        assert!(PatchSchema::for_kind("example.com/v1", "Widget").is_none());
        assert!(PatchSchema::for_kind("apps/v1beta1", "Deployment").is_none());
        assert!(PatchSchema::for_kind("v1", "Lease").is_none());
    }

    #[test]
    fn the_deployment_table_should_have_exactly_the_upstream_entries() {
        // 2 metadata + strategy + 2 template metadata + 9 pod spec + 3x4 container
        // + 2 ephemeral claim template metadata + status.conditions.
        let entries = PatchSchema::for_kind("apps/v1", "Deployment")
            .unwrap()
            .entries();
        assert_eq!(entries.len(), 2 + 1 + 2 + 9 + 12 + 2 + 1);
    }
}
