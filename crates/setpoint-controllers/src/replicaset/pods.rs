//! What the loop reads off a pod: whether it counts (active), whether it is ready and since
//! when, whether it is available, which ReplicaSet controls it, and how a new one is made from a
//! ReplicaSet's template.

use std::collections::BTreeMap;
use std::time::Duration;

#[cfg(test)]
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use setpoint_runtime::{owner, ObjectKey};

use super::kind::Replicated;

/// Whether a pod counts toward its ReplicaSet's replicas: not finished (Succeeded or Failed)
/// and not being deleted.
pub(super) fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The pod's `Ready` condition, if any.
fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Whether the pod's `Ready` condition is `True`.
pub(super) fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Since when a ready pod has been ready (its `Ready` condition's last transition); `None` for
/// a pod that is not ready or does not say.
pub(super) fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// Whether a pod is available at `now`: ready for at least `min_ready` (just ready if that is
/// zero). Otherwise, for a ready pod, how long until it becomes available.
pub(super) fn availability(pod: &Pod, min_ready: Duration, now: Timestamp) -> Availability {
    if !is_ready(pod) {
        return Availability::NotReady;
    }
    if min_ready.is_zero() {
        return Availability::Available;
    }
    let Some(since) = ready_since(pod) else {
        // Ready with no transition time: Kubernetes never counts such a pod available.
        return Availability::NotReady;
    };
    let min_ready = SignedDuration::try_from(min_ready).unwrap_or(SignedDuration::MAX);
    let at = since.checked_add(min_ready).unwrap_or(Timestamp::MAX);
    if at < now {
        Availability::Available
    } else {
        let wait = Duration::try_from(at.duration_since(now)).unwrap_or_default();
        Availability::ReadyFor { available_in: wait }
    }
}

/// A pod's availability (see [`availability`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Availability {
    /// Not ready.
    NotReady,
    /// Ready, but not yet for `minReadySeconds`.
    ReadyFor {
        /// How long until it is available.
        available_in: Duration,
    },
    /// Ready for at least `minReadySeconds`.
    Available,
}

/// The key of the `K` (a ReplicaSet of any version of `apps`, or a ReplicationController)
/// controlling `pod`, if one controls it.
pub(super) fn replicaset_of<K: Replicated>(pod: &Pod) -> Option<ObjectKey> {
    let owner = owner::controller_ref_of_kind::<K>(&pod.metadata)?;
    Some(ObjectKey {
        namespace: pod.metadata.namespace.clone(),
        name: owner.name.clone(),
    })
}

/// A new pod for `rs`: the template's labels, annotations, finalizers and spec, a generated
/// name prefixed `<rs-name>-`, and `rs` as its controller.
pub(super) fn pod_from_template<K: Replicated>(rs: &K) -> Pod {
    let template = rs.template();
    let template_meta = template.and_then(|t| t.metadata.as_ref());
    let name = rs.meta().name.as_deref().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: rs.meta().namespace.clone(),
            labels: template_meta.and_then(|m| m.labels.clone()),
            annotations: template_meta.and_then(|m| m.annotations.clone()),
            finalizers: template_meta.and_then(|m| m.finalizers.clone()),
            owner_references: Some(vec![owner::controller_ref_to(rs)]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    }
}

/// Whether the pod carries every label of the ReplicaSet's template, with the same values
/// (what `fullyLabeledReplicas` counts).
pub(super) fn has_template_labels<K: Replicated>(pod: &Pod, rs: &K) -> bool {
    let empty = BTreeMap::new();
    let wanted = rs
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
pub(super) mod testing {
    //! Pods in given states, for the tests of this module's siblings.

    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A pod named `name`, created `age_s` seconds before a fixed instant, in `phase`.
    pub(crate) fn pod(name: &str, phase: &str, created_s: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                creation_timestamp: Some(Time(at(created_s))),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    /// A fixed instant the tests measure from.
    pub(crate) fn base() -> Timestamp {
        Timestamp::from_second(1_700_000_000).expect("valid timestamp")
    }

    /// `s` seconds after [`base`].
    pub(crate) fn at(s: i64) -> Timestamp {
        base() + SignedDuration::from_secs(s)
    }

    /// `pod` scheduled to `node`.
    pub(crate) fn on_node(mut pod: Pod, node: &str) -> Pod {
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        pod
    }

    /// `pod` ready since `ready_s` seconds after [`base`].
    pub(crate) fn ready(mut pod: Pod, ready_s: i64) -> Pod {
        let status = pod.status.get_or_insert_with(Default::default);
        status.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(at(ready_s))),
            ..Default::default()
        }]);
        pod
    }

    /// `pod` with one container restarted `restarts` times.
    pub(crate) fn restarted(mut pod: Pod, restarts: i32) -> Pod {
        let status = pod.status.get_or_insert_with(Default::default);
        status.container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: restarts,
            ..Default::default()
        }]);
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn finished_and_terminating_pods_should_not_be_active() {
        assert!(is_active(&pod("a", "Pending", 0)));
        assert!(is_active(&pod("a", "Running", 0)));
        assert!(!is_active(&pod("a", "Succeeded", 0)));
        assert!(!is_active(&pod("a", "Failed", 0)));
        let mut terminating = pod("a", "Running", 0);
        terminating.metadata.deletion_timestamp = Some(Time(base()));
        assert!(!is_active(&terminating));
    }

    #[test]
    fn availability_should_wait_for_min_ready_seconds() {
        let p = ready(pod("a", "Running", 0), 10);
        let now = at(15);
        assert_eq!(
            availability(&p, Duration::ZERO, now),
            Availability::Available
        );
        assert_eq!(
            availability(&p, Duration::from_secs(10), now),
            Availability::ReadyFor {
                available_in: Duration::from_secs(5)
            }
        );
        assert_eq!(
            availability(&p, Duration::from_secs(4), now),
            Availability::Available
        );
        assert_eq!(
            availability(&pod("b", "Running", 0), Duration::ZERO, now),
            Availability::NotReady
        );
    }

    #[test]
    fn replicaset_of_should_only_name_replicaset_controllers() {
        let mut p = pod("a", "Pending", 0);
        assert_eq!(replicaset_of::<ReplicaSet>(&p), None);
        let mut owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        p.metadata.owner_references = Some(vec![owner.clone()]);
        assert_eq!(
            replicaset_of::<ReplicaSet>(&p),
            Some(ObjectKey::namespaced("ns", "web"))
        );
        owner.kind = "StatefulSet".into();
        p.metadata.owner_references = Some(vec![owner.clone()]);
        assert_eq!(replicaset_of::<ReplicaSet>(&p), None);
        owner.kind = "ReplicaSet".into();
        owner.controller = None;
        p.metadata.owner_references = Some(vec![owner]);
        assert_eq!(replicaset_of::<ReplicaSet>(&p), None, "not the controller");
    }
}
