//! Carrying out a decision, off the deciding task so many run at once: [`bind`] posts the
//! pod's `binding` (the server sets `spec.nodeName` and `PodScheduled=True`); [`unschedulable`]
//! sets `PodScheduled=False` (reason `Unschedulable`, kube-scheduler's message) and records a
//! `FailedScheduling` Warning Event.
//!
//! Each holds the pod's queue [`Claim`] until done, so the pod is not decided on again
//! meanwhile. A failed binding drops the pod's assumption and retries it with backoff
//! (1 s doubling to 10 s) — except when the pod is gone (404) or was assigned by someone else
//! or is being deleted (409): the informer will show that, and nothing is retried. An
//! unschedulable pod is retried when the cluster changes (see `handlers`) and after
//! [`UNSCHEDULABLE_RETRY`] in any case.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use parking_lot::Mutex;
use setpoint_runtime::{
    update_status, Claim, Client, EventDetails, EventRecorder, ObjectKey, WorkQueue,
};

use super::cache::Cache;
use super::node_info::{assigned_node, PodInfo};

/// The longest an unschedulable pod waits before it is tried again even if nothing changed.
pub(super) const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(60);

/// The `PodScheduled` condition's type.
const POD_SCHEDULED: &str = "PodScheduled";
/// The condition reason and Event action of a pod no node can take.
const UNSCHEDULABLE: &str = "Unschedulable";
/// The Event reason of a failed scheduling attempt.
const FAILED_SCHEDULING: &str = "FailedScheduling";

/// What carrying out decisions needs.
pub(super) struct Outcomes {
    /// Where writes go.
    pub(super) client: Client,
    /// The cache holding the assumptions.
    pub(super) cache: Arc<Mutex<Cache>>,
    /// The scheduling queue, for the delayed retry of unschedulable pods.
    pub(super) queue: WorkQueue<ObjectKey>,
    /// `FailedScheduling` Events.
    pub(super) recorder: EventRecorder,
}

/// Binds `pod` to `node`; on failure drops the assumption and retries (see the module docs).
pub(super) async fn bind(out: Arc<Outcomes>, pod: PodInfo, node: String, claim: Claim<ObjectKey>) {
    let namespace = pod.key.namespace.as_deref().unwrap_or("default");
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.key.name.clone()),
            namespace: Some(namespace.to_owned()),
            uid: Some(pod.uid.clone()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.clone()),
            ..Default::default()
        },
    };
    let result = out
        .client
        .namespaced_api::<Pod>(namespace)
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.key.name,
            &PostParams::default(),
            &binding,
        )
        .await;
    match result {
        Ok(_) => {
            tracing::debug!(pod = %pod.key, %node, "bound");
            claim.done();
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            tracing::debug!(pod = %pod.key, %node, reason = %status.message, "not bound");
            out.cache.lock().forget(&pod.uid);
            claim.done();
        }
        Err(error) => {
            tracing::warn!(pod = %pod.key, %node, %error, "binding failed; retrying");
            out.cache.lock().forget(&pod.uid);
            out.recorder.publish_for(
                pod.pod.as_ref(),
                EventDetails::warning(FAILED_SCHEDULING, "Binding")
                    .with_note(format!("Binding rejected: {error}")),
            );
            claim.retry();
        }
    }
}

/// Gives up a decision before its binding was sent (the pod's claims could not be annotated):
/// drops the assumption and retries the pod with backoff.
pub(super) fn retry(out: &Outcomes, pod: &PodInfo, claim: Claim<ObjectKey>) {
    out.cache.lock().forget(&pod.uid);
    claim.retry();
}

/// Reports that no node can take `pod`, then queues it again after [`UNSCHEDULABLE_RETRY`]
/// (sooner if the cluster changes).
pub(super) async fn unschedulable(
    out: Arc<Outcomes>,
    pod: PodInfo,
    message: String,
    claim: Claim<ObjectKey>,
) {
    tracing::debug!(pod = %pod.key, %message, "unschedulable");
    out.recorder.publish_for(
        pod.pod.as_ref(),
        EventDetails::warning(FAILED_SCHEDULING, "Scheduling").with_note(message.clone()),
    );
    if !has_condition(&pod.pod, &message) {
        let namespace = pod.key.namespace.as_deref().unwrap_or("default");
        let api = out.client.namespaced_api::<Pod>(namespace);
        let written = update_status(&api, &pod.key.name, |p: &mut Pod| {
            if assigned_node(p).is_none() && p.metadata.uid.as_deref() == Some(pod.uid.as_str()) {
                set_unschedulable(p, &message);
            }
        })
        .await;
        if let Err(error) = written {
            tracing::warn!(pod = %pod.key, %error, "could not write PodScheduled=False");
        }
    }
    claim.done();
    out.queue.add_after(pod.key, UNSCHEDULABLE_RETRY);
}

/// Whether the pod already says it is unschedulable with this message.
fn has_condition(pod: &Pod, message: &str) -> bool {
    scheduled_condition(pod).is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(UNSCHEDULABLE)
            && c.message.as_deref() == Some(message)
    })
}

fn scheduled_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == POD_SCHEDULED)
}

/// Sets `PodScheduled=False`, reason `Unschedulable`, with `message`; the transition time
/// moves only if the status changes.
fn set_unschedulable(pod: &mut Pod, message: &str) {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let condition = match conditions.iter().position(|c| c.type_ == POD_SCHEDULED) {
        Some(i) => &mut conditions[i],
        None => {
            conditions.push(PodCondition {
                type_: POD_SCHEDULED.into(),
                status: String::new(),
                ..Default::default()
            });
            let last = conditions.len() - 1;
            &mut conditions[last]
        }
    };
    if condition.status != "False" {
        condition.status = "False".into();
        condition.last_transition_time = Some(now);
    }
    condition.reason = Some(UNSCHEDULABLE.into());
    condition.message = Some(message.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::resources::testing::pod;

    #[test]
    fn set_unschedulable_should_add_then_update_the_condition() {
        let mut p = pod("p", &[]);
        set_unschedulable(&mut p, "0/1 nodes are available: 1 Too many pods.");
        assert!(has_condition(
            &p,
            "0/1 nodes are available: 1 Too many pods."
        ));
        let first = scheduled_condition(&p)
            .and_then(|c| c.last_transition_time.clone())
            .expect("transition time");
        set_unschedulable(&mut p, "no nodes available to schedule pods");
        let c = scheduled_condition(&p).expect("condition");
        assert_eq!(
            c.message.as_deref(),
            Some("no nodes available to schedule pods")
        );
        assert_eq!(c.last_transition_time.as_ref(), Some(&first), "still False");
        assert_eq!(
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(Vec::len),
            Some(1)
        );
        assert!(!has_condition(&p, "other"));
    }
}
