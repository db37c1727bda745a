//! One pass over a StatefulSet's pods (kube-controller-manager's `updateStatefulSet`): replace
//! finished pods, create missing ordinals (claims first), delete ordinals out of range
//! (highest first), then roll outdated pods to the update revision (highest ordinal first,
//! down to `partition`, at most `maxUnavailable` unavailable at a time). Under `OrderedReady`
//! every step waits for the pods before it to be running and available and makes one change
//! per pass; under `Parallel` every step acts on all pods at once.
//!
//! Names are stable, so a write made from a stale cache is harmless: creating a pod that
//! exists answers 409 and deleting one that is gone answers 404 (deletes are conditional on
//! the pod's UID), both taken as done.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, Preconditions};
use setpoint_runtime::EventDetails;

use super::claims::ensure_claims;
use super::error::StatefulSetError;
use super::identity::{new_pod, ordinal_of, replicas, revision_of, start_ordinal};
use super::Context;
use crate::pod_state::{
    availability, is_finished, is_terminating, min_ready, sooner, Availability,
};

/// Creates or deletes in flight at once under `Parallel`.
const PARALLEL_WRITES: usize = 64;

/// The revisions a pass works with: the current one (pods below the partition are made from
/// it) and the update one.
pub(super) struct Revisions {
    pub(super) current_name: String,
    pub(super) current_template: PodTemplateSpec,
    pub(super) update_name: String,
    pub(super) update_template: PodTemplateSpec,
}

/// A StatefulSet's pods sorted into its ordinal slots and the ones out of range.
pub(super) struct Slots {
    /// Index `i` holds the pod with ordinal `start + i`, if there is one.
    pub(super) replicas: Vec<Option<Arc<Pod>>>,
    /// Pods whose ordinal is out of range, highest ordinal first.
    pub(super) condemned: Vec<(i64, Arc<Pod>)>,
}

impl Slots {
    /// Sorts `pods` (the set's, claimed) by ordinal; pods whose names are not `SET-N` are left
    /// out.
    pub(super) fn of(set: &StatefulSet, pods: &[Arc<Pod>]) -> Slots {
        let set_name = set.metadata.name.as_deref().unwrap_or_default();
        let start = start_ordinal(set);
        let count = replicas(set);
        let mut slots = Slots {
            replicas: vec![None; count],
            condemned: Vec::new(),
        };
        for pod in pods {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let Some(ordinal) = ordinal_of(set_name, name) else {
                continue;
            };
            match usize::try_from(ordinal - start) {
                Ok(i) if i < count => slots.replicas[i] = Some(pod.clone()),
                _ => slots.condemned.push((ordinal, pod.clone())),
            }
        }
        slots.condemned.sort_by_key(|c| std::cmp::Reverse(c.0));
        slots
    }
}

/// What a pass left to wait for.
#[derive(Debug, Default)]
pub(super) struct Pass {
    /// A ready pod becomes available after this long (`minReadySeconds`): sync again then.
    pub(super) requeue_after: Option<Duration>,
}

fn parallel(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

/// `updateStrategy.rollingUpdate` — `(partition, maxUnavailable)` — or `None` under
/// `OnDelete`.
fn rolling(set: &StatefulSet, replicas: usize) -> Option<(usize, usize)> {
    let strategy = set.spec.as_ref()?.update_strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return None;
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let partition = rolling.and_then(|r| r.partition).unwrap_or(0);
    let max_unavailable = rolling
        .and_then(|r| r.max_unavailable.as_ref())
        .map_or(1, |v| crate::pod_state::int_or_percent(v, replicas))
        .max(1);
    Some((usize::try_from(partition).unwrap_or(0), max_unavailable))
}

/// Runs one pass. `now` judges availability.
pub(super) async fn pass(
    ctx: &Context,
    set: &StatefulSet,
    slots: &Slots,
    revisions: &Revisions,
    now: Timestamp,
) -> Result<Pass, StatefulSetError> {
    let ordered = !parallel(set);
    let min_ready = min_ready(set.spec.as_ref().and_then(|s| s.min_ready_seconds));
    let start = start_ordinal(set);
    let count = slots.replicas.len();
    let (partition, _) = rolling(set, count).unwrap_or((0, 1));
    let mut result = Pass::default();

    // 1. Every ordinal in range: a pod, running and available (in order, under OrderedReady).
    let mut to_create = Vec::new();
    for (i, slot) in slots.replicas.iter().enumerate() {
        let ordinal = start + i64::try_from(i).unwrap_or(i64::MAX);
        match slot {
            None => {
                // Pods below the partition keep the current revision; the rest get the update.
                let (template, revision) = if i < partition {
                    (&revisions.current_template, &revisions.current_name)
                } else {
                    (&revisions.update_template, &revisions.update_name)
                };
                to_create.push((ordinal, new_pod(set, template, revision, ordinal)));
                if ordered {
                    break;
                }
            }
            Some(pod) if is_finished(pod) && !is_terminating(pod) => {
                // A failed (or completed) member is deleted and made again.
                delete_pod(ctx, set, pod).await?;
                if ordered {
                    return Ok(result);
                }
            }
            Some(pod) if is_terminating(pod) => {
                if ordered {
                    return Ok(result);
                }
            }
            Some(pod) => {
                ensure_claims(ctx, set, ordinal, Some(pod), false).await?;
                if ordered {
                    match availability(pod, min_ready, now) {
                        Availability::Available => {}
                        Availability::ReadyFor(wait) => {
                            result.requeue_after = sooner(result.requeue_after, Some(wait));
                            return Ok(result);
                        }
                        Availability::NotReady => return Ok(result),
                    }
                }
            }
        }
    }
    if !to_create.is_empty() {
        create_pods(ctx, set, to_create).await?;
        if ordered {
            return Ok(result);
        }
    }

    // 2. Ordinals out of range, highest first.
    let unavailable = slots
        .replicas
        .iter()
        .filter(|slot| {
            !slot.as_ref().is_some_and(|p| {
                !is_terminating(p) && availability(p, min_ready, now) == Availability::Available
            })
        })
        .count();
    let mut condemned = Vec::new();
    for (ordinal, pod) in &slots.condemned {
        if is_terminating(pod) {
            if ordered {
                return Ok(result);
            }
            continue;
        }
        if ordered && unavailable > 0 {
            // Scale down only once the remaining pods are all available.
            return Ok(result);
        }
        ensure_claims(ctx, set, *ordinal, Some(pod), true).await?;
        condemned.push(pod.clone());
        if ordered {
            break;
        }
    }
    if !condemned.is_empty() {
        delete_pods(ctx, set, condemned).await?;
        if ordered {
            return Ok(result);
        }
    }

    // 3. Rolling update, highest ordinal first, down to the partition.
    let Some((partition, max_unavailable)) = rolling(set, count) else {
        return Ok(result);
    };
    let mut budget = max_unavailable.saturating_sub(unavailable);
    let mut outdated = Vec::new();
    for slot in slots.replicas.iter().skip(partition).rev() {
        let Some(pod) = slot else { continue };
        if is_terminating(pod) || revision_of(pod) == Some(revisions.update_name.as_str()) {
            continue;
        }
        if availability(pod, min_ready, now) == Availability::Available {
            if budget == 0 {
                break;
            }
            budget -= 1;
        }
        outdated.push(pod.clone());
    }
    delete_pods(ctx, set, outdated).await?;
    Ok(result)
}

async fn create_pods(
    ctx: &Context,
    set: &StatefulSet,
    pods: Vec<(i64, Pod)>,
) -> Result<(), StatefulSetError> {
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<Pod>(namespace);
    let results: Vec<Result<(), StatefulSetError>> = stream::iter(pods)
        .map(|(ordinal, pod)| {
            let api = &api;
            async move {
                // The claims come first, so the pod finds its volumes bound to it.
                ensure_claims(ctx, set, ordinal, None, false).await?;
                let name = pod.metadata.name.clone().unwrap_or_default();
                match api.create(&PostParams::default(), &pod).await {
                    Ok(_) => {
                        ctx.recorder.publish_for(
                            set,
                            EventDetails::normal("SuccessfulCreate", "Create").with_note(format!(
                                "create Pod {name} in StatefulSet {} successful",
                                set.metadata.name.as_deref().unwrap_or_default()
                            )),
                        );
                        Ok(())
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    Err(source) => {
                        ctx.recorder.publish_for(
                            set,
                            EventDetails::warning("FailedCreate", "Create")
                                .with_note(format!("create Pod {name} failed error: {source}")),
                        );
                        Err(StatefulSetError::Create { pod: name, source })
                    }
                }
            }
        })
        .buffer_unordered(PARALLEL_WRITES)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn delete_pods(
    ctx: &Context,
    set: &StatefulSet,
    pods: Vec<Arc<Pod>>,
) -> Result<(), StatefulSetError> {
    let results: Vec<Result<(), StatefulSetError>> = stream::iter(pods)
        .map(|pod| async move { delete_pod(ctx, set, &pod).await })
        .buffer_unordered(PARALLEL_WRITES)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn delete_pod(ctx: &Context, set: &StatefulSet, pod: &Pod) -> Result<(), StatefulSetError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match ctx
        .client
        .namespaced_api::<Pod>(namespace)
        .delete(&name, &params)
        .await
    {
        Ok(_) => {
            ctx.recorder.publish_for(
                set,
                EventDetails::normal("SuccessfulDelete", "Delete").with_note(format!(
                    "delete Pod {name} in StatefulSet {} successful",
                    set.metadata.name.as_deref().unwrap_or_default()
                )),
            );
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(source) => Err(StatefulSetError::Delete { pod: name, source }),
    }
}
