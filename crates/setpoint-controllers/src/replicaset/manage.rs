//! Bringing a ReplicaSet's pod count to `spec.replicas`: creating the missing pods in
//! slow-start batches (1, 2, 4, … stopping at the first failure, so a ReplicaSet whose pods are
//! all rejected costs one failed request per sync, not hundreds), or deleting the surplus in
//! [`deletion_order`](super::ranking::deletion_order) all at once; at most [`BURST_REPLICAS`]
//! of either per sync. Every write is recorded in the expectations before it is made, and
//! every write that fails or is never made is taken out again.

use std::future::Future;
use std::sync::Arc;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams, Preconditions};
use setpoint_runtime::{EventDetails, ObjectKey};

use super::error::ReplicaSetError;
use super::kind::Replicated;
use super::pods::pod_from_template;
use super::ranking::pods_to_delete;
use super::Context;

/// The most pods created or deleted for one ReplicaSet in one sync (Kubernetes'
/// `burstReplicas`).
pub(super) const BURST_REPLICAS: usize = 500;

/// The first slow-start batch (Kubernetes' `SlowStartInitialBatchSize`).
const INITIAL_BATCH: usize = 1;

/// Which way a sync changed the pod count, for the `ReplicaFailure` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scaling {
    /// Pods were being created.
    Up,
    /// Pods were being deleted.
    Down,
}

/// A failed [`manage_replicas`]: the direction and the first error.
#[derive(Debug)]
pub(super) struct ManageFailure {
    pub(super) scaling: Scaling,
    pub(super) error: ReplicaSetError,
}

/// Calls `call` `count` times, in batches of 1, 2, 4, … (from `initial`), each batch
/// concurrently, stopping after the first batch with a failure. Returns how many calls
/// succeeded and the first error.
pub(super) async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial: usize,
    mut call: F,
) -> (usize, Option<E>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut remaining = count;
    let mut batch = remaining.min(initial.max(1));
    let mut successes = 0;
    while batch > 0 {
        let results = join_all((0..batch).map(|_| call())).await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => successes += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
        remaining -= batch;
        batch = remaining.min(batch.saturating_mul(2));
    }
    (successes, None)
}

/// Creates or deletes pods of `rs` so that `pods` (its active, claimed pods) number
/// `spec.replicas`.
pub(super) async fn manage_replicas<K: Replicated>(
    ctx: &Context,
    rs: &K,
    pods: &[Arc<Pod>],
) -> Result<(), ManageFailure> {
    let key = ObjectKey::of(rs);
    let wanted = rs.replicas();
    let wanted = usize::try_from(wanted).unwrap_or(0);
    if pods.len() < wanted {
        let count = (wanted - pods.len()).min(BURST_REPLICAS);
        create_pods(ctx, rs, &key, count)
            .await
            .map_err(|error| ManageFailure {
                scaling: Scaling::Up,
                error,
            })
    } else if pods.len() > wanted {
        let count = (pods.len() - wanted).min(BURST_REPLICAS);
        delete_pods(ctx, rs, &key, pods_to_delete(pods, count))
            .await
            .map_err(|error| ManageFailure {
                scaling: Scaling::Down,
                error,
            })
    } else {
        Ok(())
    }
}

async fn create_pods<K: Replicated>(
    ctx: &Context,
    rs: &K,
    key: &ObjectKey,
    count: usize,
) -> Result<(), ReplicaSetError> {
    ctx.expectations.expect_creations(key, count);
    let namespace = rs.meta().namespace.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<Pod>(namespace);
    let pod = pod_from_template(rs);
    let (created, error) = slow_start_batch(count, INITIAL_BATCH, || {
        let (api, pod) = (&api, &pod);
        async move {
            let created = api.create(&PostParams::default(), pod).await?;
            let name = created.metadata.name.unwrap_or_default();
            ctx.recorder.publish_for(
                rs,
                EventDetails::normal("SuccessfulCreate", "Create")
                    .with_note(format!("Created pod: {name}")),
            );
            Ok::<(), kube::Error>(())
        }
    })
    .await;
    tracing::debug!(replicaset = %key, wanted = count, created, "created pods");
    if created < count {
        // Neither the failed creates nor the ones never attempted will show up in the cache.
        ctx.expectations.lower_creations(key, count - created);
    }
    match error {
        None => Ok(()),
        Some(source) => {
            ctx.recorder.publish_for(
                rs,
                EventDetails::warning("FailedCreate", "Create")
                    .with_note(format!("Error creating: {source}")),
            );
            Err(ReplicaSetError::Create {
                replicaset: key.to_string(),
                source,
            })
        }
    }
}

async fn delete_pods<K: Replicated>(
    ctx: &Context,
    rs: &K,
    key: &ObjectKey,
    victims: Vec<Arc<Pod>>,
) -> Result<(), ReplicaSetError> {
    ctx.expectations
        .expect_deletions(key, victims.iter().map(|p| ObjectKey::of(p.as_ref())));
    let namespace = rs.meta().namespace.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<Pod>(namespace);
    let results = join_all(victims.iter().map(|pod| {
        let api = &api;
        async move {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            let result = api.delete(name, &params).await;
            (pod, result)
        }
    }))
    .await;
    let mut first_error = None;
    for (pod, result) in results {
        let name = pod.metadata.name.clone().unwrap_or_default();
        match result {
            Ok(_) => ctx.recorder.publish_for(
                rs,
                EventDetails::normal("SuccessfulDelete", "Delete")
                    .with_note(format!("Deleted pod: {name}")),
            ),
            Err(source) => {
                // The cache will not show this deletion: do not wait for it.
                ctx.expectations
                    .deletion_observed(key, &ObjectKey::of(pod.as_ref()));
                let gone = matches!(&source, kube::Error::Api(e) if e.code == 404 || e.code == 409);
                if !gone && first_error.is_none() {
                    first_error = Some(ReplicaSetError::Delete {
                        replicaset: key.to_string(),
                        pod: name,
                        source,
                    });
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[tokio::test]
    async fn slow_start_should_double_batches_until_done() {
        let sizes = Mutex::new(Vec::new());
        let in_batch = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, 1, || {
            in_batch.fetch_add(1, Ordering::SeqCst);
            let sizes = &sizes;
            let in_batch = &in_batch;
            async move {
                // The last call of a batch to run records the batch's size.
                tokio::task::yield_now().await;
                let n = in_batch.swap(0, Ordering::SeqCst);
                if n > 0 {
                    sizes.lock().expect("not poisoned").push(n);
                }
                Ok::<(), ()>(())
            }
        })
        .await;
        assert_eq!((ok, err), (10, None));
        assert_eq!(*sizes.lock().expect("not poisoned"), [1, 2, 4, 3]);
    }

    #[tokio::test]
    async fn slow_start_should_stop_after_the_first_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(100, 1, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            // Calls 0..3 (batches 1 and 2) succeed; the batch of 4 has one failure.
            async move {
                if n == 4 {
                    Err("quota exceeded")
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            7,
            "batches 1, 2 and 4, then stop"
        );
        assert_eq!(ok, 6);
        assert_eq!(err, Some("quota exceeded"));
    }

    #[tokio::test]
    async fn slow_start_of_nothing_should_call_nothing() {
        let (ok, err) = slow_start_batch(0, 1, || async { Err::<(), _>("called") }).await;
        assert_eq!((ok, err), (0, None));
    }
}
