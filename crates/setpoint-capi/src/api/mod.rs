//! The core kinds of Cluster API, `cluster.x-k8s.io/v1beta2`, one module each, with the types
//! they share in `common.rs` and the Cluster's ClusterClass topology in `topology.rs`.
//!
//! Field names, optionality, validation, printer columns, short names, categories and the
//! status and scale subresources are upstream's (`api/core/v1beta2/*_types.go` in
//! kubernetes-sigs/cluster-api), so a manifest written for upstream applies unchanged and
//! keeps every field. Each kind's CRD is generated from these types (`Cluster::crd()`, …;
//! all five: [`crate::crds`]).

mod cluster;
mod common;
mod machine;
mod machine_deployment;
mod machine_health_check;
mod machine_set;
mod topology;

pub use cluster::{
    ApiEndpoint, Cluster, ClusterAvailabilityGate, ClusterDeprecatedStatus,
    ClusterInitializationStatus, ClusterNetwork, ClusterPhase, ClusterReplicasStatus, ClusterSpec,
    ClusterStatus, ClusterV1Beta1DeprecatedStatus, FailureDomain, NetworkRanges,
};
pub use common::{
    ConditionPolarity, ContractVersionedObjectReference, MachineAddress, MachineAddressType,
    MachineTaint, MachineTaintPropagation, ObjectMeta, StatusUpgradePlanVersion, StatusVersion,
    TaintEffect, V1Beta1Condition,
};
pub use machine::{
    Bootstrap, Machine, MachineDeletionSpec, MachineDeletionStatus, MachineDeprecatedStatus,
    MachineInitializationStatus, MachineNodeReference, MachinePhase, MachineReadinessGate,
    MachineSpec, MachineStatus, MachineV1Beta1DeprecatedStatus,
};
pub use machine_deployment::{
    MachineDeployment, MachineDeploymentDeletionSpec, MachineDeploymentDeprecatedStatus,
    MachineDeploymentPhase, MachineDeploymentRemediationSpec, MachineDeploymentRolloutSpec,
    MachineDeploymentRolloutStrategy, MachineDeploymentRolloutStrategyRollingUpdate,
    MachineDeploymentRolloutStrategyType, MachineDeploymentSpec, MachineDeploymentStatus,
    MachineDeploymentV1Beta1DeprecatedStatus,
};
pub use machine_health_check::{
    ConditionStatus, MachineHealthCheck, MachineHealthCheckChecks,
    MachineHealthCheckDeprecatedStatus, MachineHealthCheckRemediation,
    MachineHealthCheckRemediationTemplateReference, MachineHealthCheckRemediationTriggerIf,
    MachineHealthCheckSpec, MachineHealthCheckStatus, MachineHealthCheckV1Beta1DeprecatedStatus,
    UnhealthyMachineCondition, UnhealthyNodeCondition,
};
pub use machine_set::{
    MachineNamingSpec, MachineSet, MachineSetDeletionOrder, MachineSetDeletionSpec,
    MachineSetDeprecatedStatus, MachineSetSpec, MachineSetStatus,
    MachineSetV1Beta1DeprecatedStatus, MachineTemplateSpec,
};
pub use topology::{
    ClusterClassRef, ClusterVariable, ControlPlaneTopology, ControlPlaneTopologyRolloutSpec,
    MachineDeploymentTopology, MachineDeploymentTopologyMachineDeletionSpec,
    MachineDeploymentTopologyRemediation, MachinePoolTopology, Topology, TopologyHealthCheck,
    TopologyRemediation, TopologyVariables, WorkersTopology,
};

/// The API group of every kind.
pub const GROUP: &str = "cluster.x-k8s.io";
/// The version served and stored.
pub const VERSION: &str = "v1beta2";
/// The category every kind is in (`kubectl get cluster-api`).
pub const CATEGORY: &str = "cluster-api";
/// Label on every object of a cluster (machines, sets, …): the Cluster's name.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label on a control-plane machine.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Label on a MachineSet's machines: the set's name.
pub const MACHINE_SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// Label on a MachineDeployment's sets and machines: the deployment's name.
pub const MACHINE_DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// Annotation that pauses the controllers for one object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde::Deserialize as _;
    use serde::Serialize;
    use serde_json::Value;

    use super::*;

    /// Reads an upstream-style manifest into `T` and writes it back: nothing may be lost,
    /// added or changed.
    fn round_trip<T: DeserializeOwned + Serialize>(manifest: &str) {
        let original: Value = serde_yaml_ng::from_str(manifest).expect("YAML");
        let typed: T = serde_json::from_value(original.clone()).expect("typed");
        let written = serde_json::to_value(&typed).expect("JSON");
        assert_eq!(
            written,
            original,
            "written:\n{}",
            serde_json::to_string_pretty(&written).unwrap_or_default()
        );
    }

    #[test]
    fn a_cluster_should_round_trip_with_every_field() {
        round_trip::<Cluster>(include_str!("../../testdata/cluster.yaml"));
    }

    #[test]
    fn a_machine_should_round_trip_with_every_field() {
        round_trip::<Machine>(include_str!("../../testdata/machine.yaml"));
    }

    #[test]
    fn a_machine_set_should_round_trip_with_every_field() {
        round_trip::<MachineSet>(include_str!("../../testdata/machineset.yaml"));
    }

    #[test]
    fn a_machine_deployment_should_round_trip_with_every_field() {
        round_trip::<MachineDeployment>(include_str!("../../testdata/machinedeployment.yaml"));
    }

    #[test]
    fn a_machine_health_check_should_round_trip_with_every_field() {
        round_trip::<MachineHealthCheck>(include_str!("../../testdata/machinehealthcheck.yaml"));
    }

    #[test]
    fn the_example_manifest_should_read_into_the_types_unchanged() {
        let manifest = include_str!("../../../../examples/cluster-api/core-objects.yaml");
        let mut kinds = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_str(manifest) {
            let value = Value::deserialize(document).expect("YAML");
            let kind = value["kind"].as_str().unwrap_or_default().to_owned();
            let doc = serde_json::to_string(&value).expect("JSON");
            match kind.as_str() {
                "Cluster" => round_trip::<Cluster>(&doc),
                "Machine" => round_trip::<Machine>(&doc),
                "MachineSet" => round_trip::<MachineSet>(&doc),
                "MachineDeployment" => round_trip::<MachineDeployment>(&doc),
                "MachineHealthCheck" => round_trip::<MachineHealthCheck>(&doc),
                other => panic!("unexpected kind {other:?}"),
            }
            kinds.push(kind);
        }
        kinds.sort();
        assert_eq!(
            kinds,
            [
                "Cluster",
                "Machine",
                "MachineDeployment",
                "MachineHealthCheck",
                "MachineSet"
            ]
        );
    }
}
