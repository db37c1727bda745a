//! How many pods a PodDisruptionBudget expects and how many must stay healthy, as
//! kube-controller-manager's disruption controller counts them.
//!
//! `minAvailable` as a count needs nothing but the budget's pods (expected = how many there
//! are). A percentage, or any `maxUnavailable`, is taken of the pods' controllers' scale: the
//! sum of `spec.replicas` over the distinct controllers of the pods — a ReplicationController,
//! the Deployment of a ReplicaSet (or the ReplicaSet itself), a StatefulSet, read from the
//! shared caches; any other kind through its `scale` subresource, found by discovery (a custom
//! resource with scale). A pod whose controller cannot be found fails the sync; a pod without
//! a controller is left out of the sum (the budget's status may then be wrong, as on kube).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DynamicObject;
use kube::Api;
use setpoint_runtime::owner::controller_ref;
use setpoint_runtime::{Client, ObjectCache, ObjectKey};

/// The caches of the kinds whose scale is read without a request.
pub(super) struct Workloads {
    pub(super) replication_controllers: ObjectCache<ReplicationController>,
    pub(super) replica_sets: ObjectCache<ReplicaSet>,
    pub(super) deployments: ObjectCache<Deployment>,
    pub(super) stateful_sets: ObjectCache<StatefulSet>,
}

/// What a budget's pods come to: expected pods, the healthy pods wanted, and the names of the
/// pods without a controller.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Expected {
    pub(super) expected: i32,
    pub(super) desired_healthy: i32,
    pub(super) unmanaged: Vec<String>,
}

/// `value` of `total`: a count as is, a percentage rounded up (`"50%"` of 3 is 2). `Err` for a
/// string that is not a percentage.
pub(super) fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let product = percent * i64::from(total);
            Ok(i32::try_from((product + 99).div_euclid(100)).unwrap_or(i32::MAX))
        }
    }
}

/// The expected and desired-healthy counts of a budget with `min_available` or
/// `max_unavailable` over `pods`.
pub(super) async fn expected(
    client: &Client,
    workloads: &Workloads,
    min_available: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    pods: &[std::sync::Arc<Pod>],
) -> Result<Expected, String> {
    if let Some(max) = max_unavailable {
        let (expected, unmanaged) = scale_of(client, workloads, pods).await?;
        let unavailable = scaled(max, expected)?;
        return Ok(Expected {
            expected,
            desired_healthy: (expected - unavailable).max(0),
            unmanaged,
        });
    }
    match min_available {
        Some(IntOrString::Int(n)) => Ok(Expected {
            expected: i32::try_from(pods.len()).unwrap_or(i32::MAX),
            desired_healthy: *n,
            unmanaged: Vec::new(),
        }),
        Some(min) => {
            let (expected, unmanaged) = scale_of(client, workloads, pods).await?;
            Ok(Expected {
                expected,
                desired_healthy: scaled(min, expected)?,
                unmanaged,
            })
        }
        None => Ok(Expected::default()),
    }
}

/// The sum of the scales of the pods' distinct controllers, and the pods without one.
async fn scale_of(
    client: &Client,
    workloads: &Workloads,
    pods: &[std::sync::Arc<Pod>],
) -> Result<(i32, Vec<String>), String> {
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    let mut unmanaged = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(owner) = controller_ref(&pod.metadata) else {
            unmanaged.push(name);
            continue;
        };
        if scales.contains_key(&owner.uid) {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        match controller_scale(client, workloads, owner, &namespace).await? {
            Some((uid, scale)) => {
                scales.insert(uid, scale);
            }
            None => return Err(format!("found no controllers for pod {name:?}")),
        }
    }
    Ok((scales.values().sum(), unmanaged))
}

/// The group of an `apiVersion` (`""` for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// The UID and `spec.replicas` of the controller `owner` names (in `namespace`), trying the
/// cached kinds first and a scale subresource last; `None` when it is not there (or has
/// another UID).
async fn controller_scale(
    client: &Client,
    workloads: &Workloads,
    owner: &OwnerReference,
    namespace: &str,
) -> Result<Option<(String, i32)>, String> {
    let key = ObjectKey::namespaced(namespace, owner.name.clone());
    let group = group_of(&owner.api_version);
    let same = |uid: Option<&String>| uid.is_some_and(|u| *u == owner.uid);
    match (group, owner.kind.as_str()) {
        ("", "ReplicationController") => {
            return Ok(workloads
                .replication_controllers
                .get(&key)
                .filter(|rc| same(rc.metadata.uid.as_ref()))
                .map(|rc| {
                    let replicas = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    (owner.uid.clone(), replicas)
                }));
        }
        ("apps" | "extensions", "ReplicaSet") => {
            let Some(rs) = workloads
                .replica_sets
                .get(&key)
                .filter(|rs| same(rs.metadata.uid.as_ref()))
            else {
                return Ok(None);
            };
            if let Some(parent) = controller_ref(&rs.metadata).filter(|r| r.kind == "Deployment") {
                // A Deployment's ReplicaSet counts as its Deployment.
                let key = ObjectKey::namespaced(namespace, parent.name.clone());
                return Ok(workloads
                    .deployments
                    .get(&key)
                    .filter(|d| d.metadata.uid.as_deref() == Some(parent.uid.as_str()))
                    .map(|d| {
                        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                        (parent.uid.clone(), replicas)
                    }));
            }
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            return Ok(Some((owner.uid.clone(), replicas)));
        }
        ("apps", "StatefulSet") => {
            return Ok(workloads
                .stateful_sets
                .get(&key)
                .filter(|ss| same(ss.metadata.uid.as_ref()))
                .map(|ss| {
                    let replicas = ss.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    (owner.uid.clone(), replicas)
                }));
        }
        _ => {}
    }
    // Any other kind: its scale subresource, if it has one.
    let Some((resource, _)) =
        crate::hpa::target::discover(client, &owner.api_version, |r| r.kind == owner.kind).await
    else {
        return Err(format!(
            "no matches for kind {:?} in version {:?}",
            owner.kind, owner.api_version
        ));
    };
    let api = Api::<DynamicObject>::namespaced_with(client.kube().clone(), namespace, &resource);
    match api.get_scale(&owner.name).await {
        Ok(scale) if scale.metadata.uid.as_deref() == Some(owner.uid.as_str()) => Ok(Some((
            owner.uid.clone(),
            scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        ))),
        Ok(_) => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            if has_scale(client, &owner.api_version, &resource.plural).await {
                Ok(None)
            } else {
                Err(format!(
                    "{}.{} does not implement the scale subresource",
                    resource.plural,
                    group_of(&owner.api_version)
                ))
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Whether discovery lists `plural/scale` in `api_version`.
async fn has_scale(client: &Client, api_version: &str, plural: &str) -> bool {
    let scale = format!("{plural}/scale");
    let list = if api_version.contains('/') {
        client.kube().list_api_group_resources(api_version).await
    } else {
        client.kube().list_core_api_resources(api_version).await
    };
    list.is_ok_and(|l| l.resources.iter().any(|r| r.name == scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_should_round_up_as_kube_does() {
        let p = |s: &str| IntOrString::String(s.to_owned());
        assert_eq!(scaled(&p("50%"), 3), Ok(2));
        assert_eq!(scaled(&p("10%"), 10), Ok(1));
        assert_eq!(scaled(&p("0%"), 10), Ok(0));
        assert_eq!(scaled(&p("100%"), 7), Ok(7));
        assert_eq!(scaled(&IntOrString::Int(4), 10), Ok(4));
        assert!(scaled(&p("half"), 10).is_err());
    }
}
