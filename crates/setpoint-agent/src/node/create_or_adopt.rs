//! Registering in the API: create the Node of a [`NodeRegistration`], or — if a Node of that
//! name exists (the agent restarted) — adopt it: make it ours again by setting our labels on it. Other fields of an existing Node (taints,
//! `unschedulable`, others' labels) are left as they are; status is posted separately.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;

use super::NodeRegistration;

/// Creates the Node of `reg`, or updates the labels of the existing one; returns the Node as
/// the API has it afterwards.
pub(crate) async fn register(api: &Api<Node>, reg: &NodeRegistration) -> Result<Node, kube::Error> {
    match api.create(&PostParams::default(), &reg.node()).await {
        Ok(node) => return Ok(node),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e),
    }
    let existing = api.get(&reg.name).await?;
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    let ours_present = reg
        .labels
        .iter()
        .all(|(k, v)| labels.get(k).is_some_and(|have| have == v));
    if ours_present {
        return Ok(existing);
    }
    let patch = serde_json::json!({ "metadata": { "labels": reg.labels } });
    api.patch(&reg.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}
