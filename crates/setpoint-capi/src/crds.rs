//! The five CRDs, generated from the types of `api/`, and installing them.
//!
//! Promises: [`install_crds`] is idempotent (it leaves a CRD alone whose spec already holds
//! every field of the generated one) and returns once every CRD is `Established`.

use std::time::Duration;

use futures::future::try_join_all;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use setpoint_runtime::{install_crd, Client, CrdError};

use crate::api::{Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet};

/// The CRDs of the core kinds: Cluster, Machine, MachineSet, MachineDeployment,
/// MachineHealthCheck (in that order).
pub fn crds() -> [CustomResourceDefinition; 5] {
    [
        Cluster::crd(),
        Machine::crd(),
        MachineSet::crd(),
        MachineDeployment::crd(),
        MachineHealthCheck::crd(),
    ]
}

/// Creates or updates the five CRDs, all at once, and waits (at most `timeout` each) until
/// every one is `Established`. Cancel-safe in effect: a cancelled call may have written some
/// CRDs, and calling again finishes the job.
pub async fn install_crds(client: &Client, timeout: Duration) -> Result<(), CrdError> {
    let crds = crds();
    try_join_all(crds.iter().map(|crd| install_crd(client, crd, timeout))).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceColumnDefinition, CustomResourceDefinitionVersion,
    };

    use super::*;

    fn crd(plural: &str) -> CustomResourceDefinition {
        crds()
            .into_iter()
            .find(|c| c.spec.names.plural == plural)
            .expect("no such CRD")
    }

    fn version(crd: &CustomResourceDefinition) -> &CustomResourceDefinitionVersion {
        assert_eq!(crd.spec.versions.len(), 1, "only v1beta2 is served");
        &crd.spec.versions[0]
    }

    /// The printer columns as (name, type, JSONPath, priority).
    fn columns(plural: &str) -> Vec<(String, String, String, i32)> {
        let crd = crd(plural);
        version(&crd)
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c: CustomResourceColumnDefinition| {
                (c.name, c.type_, c.json_path, c.priority.unwrap_or(0))
            })
            .collect()
    }

    fn col(name: &str, kind: &str, path: &str, priority: i32) -> (String, String, String, i32) {
        (name.to_owned(), kind.to_owned(), path.to_owned(), priority)
    }

    #[test]
    fn every_crd_should_be_namespaced_v1beta2_in_the_cluster_api_category() {
        for crd in crds() {
            let plural = crd.spec.names.plural.clone();
            assert_eq!(crd.spec.group, "cluster.x-k8s.io", "{plural}");
            assert_eq!(
                crd.metadata.name.as_deref(),
                Some(format!("{plural}.cluster.x-k8s.io").as_str())
            );
            assert_eq!(crd.spec.scope, "Namespaced", "{plural}");
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["cluster-api".to_owned()][..]),
                "{plural}"
            );
            let v = version(&crd);
            assert_eq!(v.name, "v1beta2");
            assert!(v.served && v.storage, "{plural}");
            let subresources = v.subresources.as_ref().expect("subresources");
            assert!(
                subresources.status.is_some(),
                "{plural} has a status subresource"
            );
        }
    }

    #[test]
    fn names_and_short_names_should_be_upstreams() {
        let names: Vec<(String, String, Vec<String>)> = crds()
            .into_iter()
            .map(|c| {
                (
                    c.spec.names.kind,
                    c.spec.names.plural,
                    c.spec.names.short_names.unwrap_or_default(),
                )
            })
            .collect();
        let expected = [
            ("Cluster", "clusters", vec!["cl"]),
            ("Machine", "machines", vec!["ma"]),
            ("MachineSet", "machinesets", vec!["ms"]),
            ("MachineDeployment", "machinedeployments", vec!["md"]),
            (
                "MachineHealthCheck",
                "machinehealthchecks",
                vec!["mhc", "mhcs"],
            ),
        ];
        let expected: Vec<(String, String, Vec<String>)> = expected
            .into_iter()
            .map(|(k, p, s)| {
                (
                    k.to_owned(),
                    p.to_owned(),
                    s.into_iter().map(str::to_owned).collect(),
                )
            })
            .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn machine_sets_and_deployments_should_have_upstreams_scale_subresource() {
        for plural in ["machinesets", "machinedeployments"] {
            let crd = crd(plural);
            let scale = version(&crd)
                .subresources
                .as_ref()
                .and_then(|s| s.scale.clone())
                .expect("scale subresource");
            assert_eq!(scale.spec_replicas_path, ".spec.replicas");
            assert_eq!(scale.status_replicas_path, ".status.replicas");
            assert_eq!(
                scale.label_selector_path.as_deref(),
                Some(".status.selector")
            );
        }
        for plural in ["clusters", "machines", "machinehealthchecks"] {
            let crd = crd(plural);
            let subresources = version(&crd).subresources.clone().expect("subresources");
            assert!(
                subresources.scale.is_none(),
                "{plural} has no scale subresource"
            );
        }
    }

    #[test]
    fn cluster_columns_should_be_upstreams() {
        let ready = |t: &str| format!(".status.conditions[?(@.type==\"{t}\")].status");
        assert_eq!(
            columns("clusters"),
            vec![
                col("ClusterClass", "string", ".spec.topology.classRef.name", 0),
                col("Available", "string", &ready("Available"), 0),
                col(
                    "CP Desired",
                    "integer",
                    ".status.controlPlane.desiredReplicas",
                    0
                ),
                col("CP Current", "integer", ".status.controlPlane.replicas", 10),
                col(
                    "CP Ready",
                    "integer",
                    ".status.controlPlane.readyReplicas",
                    10
                ),
                col(
                    "CP Available",
                    "integer",
                    ".status.controlPlane.availableReplicas",
                    0
                ),
                col(
                    "CP Up-to-date",
                    "integer",
                    ".status.controlPlane.upToDateReplicas",
                    0
                ),
                col("W Desired", "integer", ".status.workers.desiredReplicas", 0),
                col("W Current", "integer", ".status.workers.replicas", 10),
                col("W Ready", "integer", ".status.workers.readyReplicas", 10),
                col(
                    "W Available",
                    "integer",
                    ".status.workers.availableReplicas",
                    0
                ),
                col(
                    "W Up-to-date",
                    "integer",
                    ".status.workers.upToDateReplicas",
                    0
                ),
                col("Paused", "string", &ready("Paused"), 10),
                col("Phase", "string", ".status.phase", 0),
                col("Age", "date", ".metadata.creationTimestamp", 0),
                col("Version", "string", ".spec.topology.version", 0),
            ]
        );
    }

    #[test]
    fn machine_columns_should_be_upstreams() {
        let cond = |t: &str| format!(".status.conditions[?(@.type==\"{t}\")].status");
        let address = |t: &str| format!(".status.addresses[?(@.type==\"{t}\")].address");
        assert_eq!(
            columns("machines"),
            vec![
                col("Cluster", "string", ".spec.clusterName", 0),
                col("Node Name", "string", ".status.nodeRef.name", 0),
                col("Provider ID", "string", ".spec.providerID", 10),
                col("Failure domain", "string", ".status.failureDomain", 0),
                col("Ready", "string", &cond("Ready"), 0),
                col("Available", "string", &cond("Available"), 0),
                col("Up-to-date", "string", &cond("UpToDate"), 0),
                col("Internal-IP", "string", &address("InternalIP"), 10),
                col("External-IP", "string", &address("ExternalIP"), 10),
                col("OS-Image", "string", ".status.nodeInfo.osImage", 10),
                col("Paused", "string", &cond("Paused"), 10),
                col("Phase", "string", ".status.phase", 0),
                col("Age", "date", ".metadata.creationTimestamp", 0),
                col("Version", "string", ".spec.version", 0),
            ]
        );
    }

    #[test]
    fn machine_set_and_deployment_columns_should_be_upstreams() {
        let cond = |t: &str| format!(".status.conditions[?(@.type==\"{t}\")].status");
        let counts = [
            col("Desired", "integer", ".spec.replicas", 0),
            col("Current", "integer", ".status.replicas", 0),
            col("Ready", "integer", ".status.readyReplicas", 0),
            col("Available", "integer", ".status.availableReplicas", 0),
            col("Up-to-date", "integer", ".status.upToDateReplicas", 0),
            col("Paused", "string", &cond("Paused"), 10),
        ];
        let version = col("Version", "string", ".spec.template.spec.version", 0);
        let age = col("Age", "date", ".metadata.creationTimestamp", 0);
        let cluster = col("Cluster", "string", ".spec.clusterName", 0);

        let mut set = vec![cluster.clone()];
        set.extend(counts.iter().cloned());
        set.extend([age.clone(), version.clone()]);
        assert_eq!(columns("machinesets"), set);

        let mut deployment = vec![cluster, col("Available", "string", &cond("Available"), 0)];
        deployment.extend(counts.iter().cloned());
        deployment.extend([col("Phase", "string", ".status.phase", 0), age, version]);
        assert_eq!(columns("machinedeployments"), deployment);
    }

    #[test]
    fn machine_health_check_columns_should_be_upstreams() {
        assert_eq!(
            columns("machinehealthchecks"),
            vec![
                col("Cluster", "string", ".spec.clusterName", 0),
                col("Replicas", "integer", ".status.expectedMachines", 0),
                col("Healthy", "integer", ".status.currentHealthy", 0),
                col(
                    "Paused",
                    "string",
                    ".status.conditions[?(@.type==\"Paused\")].status",
                    10
                ),
                col("Age", "date", ".metadata.creationTimestamp", 0),
            ]
        );
    }

    #[test]
    fn required_fields_and_enums_should_be_in_the_schema() {
        let schema = |plural: &str| {
            let crd = crd(plural);
            serde_json::to_value(&version(&crd).schema).expect("schema")["openAPIV3Schema"].clone()
        };
        let machine = schema("machines");
        let spec = &machine["properties"]["spec"];
        assert_eq!(
            spec["required"],
            serde_json::json!(["bootstrap", "clusterName", "infrastructureRef"])
        );
        assert_eq!(spec["properties"]["clusterName"]["maxLength"], 63);
        assert_eq!(
            machine["properties"]["status"]["properties"]["phase"]["enum"],
            serde_json::json!([
                "Pending",
                "Provisioning",
                "Provisioned",
                "Running",
                "Updating",
                "Deleting",
                "Deleted",
                "Failed",
                "Unknown"
            ])
        );
        let set = schema("machinesets");
        assert_eq!(
            set["properties"]["spec"]["properties"]["deletion"]["properties"]["order"]["enum"],
            serde_json::json!(["Random", "Newest", "Oldest"])
        );
        let mhc = schema("machinehealthchecks");
        let rule = &mhc["properties"]["spec"]["properties"]["checks"]["properties"]
            ["unhealthyMachineConditions"]["items"]["properties"]["type"]
            ["x-kubernetes-validations"][0]["rule"];
        assert!(rule
            .as_str()
            .is_some_and(|r| r.contains("HealthCheckSucceeded")));
    }
}
