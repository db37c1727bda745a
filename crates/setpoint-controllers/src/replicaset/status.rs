//! A ReplicaSet's status, computed from its claimed pods, and written through the status
//! subresource only when it differs from the cached one.
//!
//! - `replicas`: active pods it manages; `fullyLabeledReplicas`: those carrying every template
//!   label; `readyReplicas`: those ready; `availableReplicas`: those ready for at least
//!   `minReadySeconds`; `observedGeneration`: the generation this sync acted on.
//! - Condition `ReplicaFailure` (`FailedCreate` / `FailedDelete`) while creates or deletes
//!   fail; removed by the first sync whose writes succeed (or that had none to make).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use setpoint_runtime::{update_status, ObjectKey};

use super::error::ReplicaSetError;
use super::kind::Replicated;
use super::manage::{ManageFailure, Scaling};
use super::pods::{availability, has_template_labels, is_ready, Availability};
use super::Context;

/// The condition type set while pods cannot be created or deleted.
const REPLICA_FAILURE: &str = "ReplicaFailure";

/// The status a sync computed, and when to look again for pods becoming available.
#[derive(Debug)]
pub(super) struct Computed {
    pub(super) status: ReplicaSetStatus,
    /// The soonest a ready pod becomes available, if one is waiting on `minReadySeconds`.
    pub(super) next_available_in: Option<Duration>,
}

/// The status of `rs` with `pods` (its active, claimed pods) after a sync that ended with
/// `failure`.
pub(super) fn compute<K: Replicated>(
    rs: &K,
    pods: &[Arc<Pod>],
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> Computed {
    let min_ready = Duration::from_secs(u64::try_from(rs.min_ready_seconds()).unwrap_or(0));
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let mut next_available_in: Option<Duration> = None;
    let mut available = 0;
    for pod in pods {
        match availability(pod, min_ready, now) {
            Availability::Available => available += 1,
            Availability::ReadyFor { available_in } => {
                next_available_in =
                    Some(next_available_in.map_or(available_in, |d| d.min(available_in)));
            }
            Availability::NotReady => {}
        }
    }
    let old = rs.replica_status().unwrap_or_default();
    let status = ReplicaSetStatus {
        replicas: count(&|_| true),
        fully_labeled_replicas: Some(count(&|p| has_template_labels(p, rs))),
        ready_replicas: Some(count(&is_ready)),
        available_replicas: Some(available),
        observed_generation: rs.meta().generation,
        conditions: conditions(old.conditions.unwrap_or_default(), failure, now),
        ..old
    };
    Computed {
        status,
        next_available_in,
    }
}

/// `existing` conditions with `ReplicaFailure` set (kept as is if already there) on a failure,
/// removed otherwise; `None` if none remain.
fn conditions(
    mut existing: Vec<ReplicaSetCondition>,
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> Option<Vec<ReplicaSetCondition>> {
    let present = existing.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match failure {
        Some(failure) if !present => existing.push(ReplicaSetCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(
                match failure.scaling {
                    Scaling::Up => "FailedCreate",
                    Scaling::Down => "FailedDelete",
                }
                .into(),
            ),
            message: Some(error_chain(&failure.error)),
            last_transition_time: Some(Time(now)),
        }),
        Some(_) => {}
        None => existing.retain(|c| c.type_ != REPLICA_FAILURE),
    }
    (!existing.is_empty()).then_some(existing)
}

/// An error and its sources, `: `-separated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

/// Writes `status` unless the cached ReplicaSet already has it. On a conflict the status is
/// re-applied to the fresh object; `observedGeneration` stays the generation this sync saw.
pub(super) async fn write<K: Replicated>(
    ctx: &Context,
    rs: &K,
    status: ReplicaSetStatus,
) -> Result<(), ReplicaSetError> {
    if rs.replica_status().as_ref() == Some(&status) {
        return Ok(());
    }
    let (namespace, name) = namespace_and_name(rs);
    let api = ctx.client.namespaced_api::<K>(namespace);
    update_status(&api, name, |fresh: &mut K| {
        fresh.set_replica_status(status.clone());
    })
    .await
    .map_err(|source| ReplicaSetError::Status {
        replicaset: ObjectKey::of(rs).to_string(),
        source,
    })?;
    Ok(())
}

/// The ReplicaSet's namespace and name.
fn namespace_and_name<K: Replicated>(rs: &K) -> (&str, &str) {
    (
        rs.meta().namespace.as_deref().unwrap_or_default(),
        rs.meta().name.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::pods::testing::{at, base, pod, ready};
    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rs(min_ready_seconds: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                generation: Some(4),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                min_ready_seconds: Some(min_ready_seconds),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [
                                ("app".to_owned(), "web".to_owned()),
                                ("tier".to_owned(), "fe".to_owned()),
                            ]
                            .into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn labelled(p: Pod, labels: &[(&str, &str)]) -> Arc<Pod> {
        let mut p = p;
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        Arc::new(p)
    }

    #[test]
    fn compute_should_count_labelled_ready_and_available_pods() {
        let pods = vec![
            labelled(
                ready(pod("a", "Running", 0), 0),
                &[("app", "web"), ("tier", "fe")],
            ),
            labelled(
                ready(pod("b", "Running", 0), 95),
                &[("app", "web"), ("tier", "fe")],
            ),
            labelled(pod("c", "Pending", 0), &[("app", "web")]),
        ];
        let now = at(100);
        let computed = compute(&rs(10), &pods, None, now);
        let s = computed.status;
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(s.available_replicas, Some(1), "b is ready for 5 s of 10");
        assert_eq!(s.observed_generation, Some(4));
        assert_eq!(computed.next_available_in, Some(Duration::from_secs(5)));
    }

    #[test]
    fn replica_failure_should_be_set_once_and_cleared_on_success() {
        let failure = ManageFailure {
            scaling: Scaling::Up,
            error: ReplicaSetError::Create {
                replicaset: "ns/web".into(),
                source: kube::Error::LinesCodecMaxLineLengthExceeded,
            },
        };
        let first = conditions(Vec::new(), Some(&failure), base()).expect("set");
        assert_eq!(first[0].reason.as_deref(), Some("FailedCreate"));
        let later = at(60);
        let again = conditions(first.clone(), Some(&failure), later).expect("kept");
        assert_eq!(again, first, "an ongoing failure keeps its transition time");
        assert_eq!(conditions(again, None, later), None);
    }
}
