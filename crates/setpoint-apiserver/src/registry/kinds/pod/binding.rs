//! `pods/binding`: what a scheduler posts to assign a pod to a node, once. A change the server
//! makes ([`Scope::Full`]): `spec.nodeName`, which no client update may change, is set here,
//! with the `PodScheduled` condition.

use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::meta::{self, meta_str};
use crate::registry::store::{RegistryStore, Scope, Updated};

/// Binds the pod `name` of `namespace` to the node `binding` (a `Binding`) names; returns the
/// pod's uid.
pub(crate) async fn bind(
    pods: &RegistryStore,
    namespace: Option<&str>,
    name: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<String, ApiError> {
    let node = binding["target"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Binding", "", name, vec![Cause::required("target.name")]))?;
    let gr = pods.def.group_resource();
    let updated = pods
        .update(namespace, name, Scope::Full, dry_run, &|current| {
            if let Some(existing) = current["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    &gr,
                    name,
                    &format!("pod {name} is already assigned to node {existing:?}"),
                ));
            }
            if !current["metadata"]["deletionTimestamp"].is_null() {
                return Err(ApiError::conflict(
                    &gr,
                    name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            let mut next = current.clone();
            next["spec"]["nodeName"] = json!(node);
            meta::metadata(&mut next).remove("resourceVersion");
            let mut conditions: Vec<Value> = next["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c["type"] != "PodScheduled");
            conditions.push(json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": meta::now(), "lastProbeTime": null}));
            next["status"]["conditions"] = json!(conditions);
            Ok(next)
        })
        .await?;
    Ok(match &updated {
        Updated::Stored(o) | Updated::Deleted(o) => {
            meta_str(o, "uid").unwrap_or_default().to_owned()
        }
    })
}
