//! The Job loop's writes to pods: creating them (slow-start batches 1, 2, 4, … stopping after a
//! batch with a failure), deleting them (uid precondition), and removing their tracking
//! finalizer (a strategic-merge patch deleting just that entry). Each is recorded in the
//! expectations before it is made and taken out again if it fails.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::join_all;
use futures::{stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use setpoint_runtime::{EventDetails, ObjectKey};

use super::error::JobError;
use super::pods::TRACKING_FINALIZER;
use super::Context;

/// Finalizer removals and deletes in flight at once for one Job.
const IN_FLIGHT: usize = 64;

/// Creates `pods` for `job`, in slow-start batches.
pub(crate) async fn create(ctx: &Context, job: &Job, pods: Vec<Pod>) -> Result<(), JobError> {
    let key = ObjectKey::of(job);
    let total = pods.len();
    if total == 0 {
        return Ok(());
    }
    ctx.expectations.expect_creations(&key, total);
    let api = ctx
        .client
        .namespaced_api::<Pod>(job.metadata.namespace.as_deref().unwrap_or_default());
    let params = PostParams::default();
    let mut pods = pods.into_iter();
    let mut batch = 1;
    let mut created = 0;
    let mut first_error = None;
    loop {
        let chunk: Vec<Pod> = pods.by_ref().take(batch).collect();
        if chunk.is_empty() {
            break;
        }
        let results = join_all(chunk.iter().map(|p| api.create(&params, p))).await;
        for result in results {
            match result {
                Ok(pod) => {
                    created += 1;
                    let name = pod.metadata.name.unwrap_or_default();
                    ctx.recorder.publish_for(
                        job,
                        EventDetails::normal("SuccessfulCreate", "Create")
                            .with_note(format!("Created pod: {name}")),
                    );
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if first_error.is_some() {
            break;
        }
        batch *= 2;
    }
    if created < total {
        ctx.expectations.lower_creations(&key, total - created);
    }
    match first_error {
        None => Ok(()),
        Some(source) => {
            ctx.recorder.publish_for(
                job,
                EventDetails::warning("FailedCreate", "Create")
                    .with_note(format!("Error creating: {source}")),
            );
            Err(JobError::Create {
                job: key.to_string(),
                source,
            })
        }
    }
}

/// Removes the tracking finalizer of `pods`; returns the uids whose finalizer is now gone
/// (removed, or the pod is gone), and the first error.
pub(crate) async fn release(
    ctx: &Context,
    job: &Job,
    pods: &[Arc<Pod>],
) -> (HashSet<String>, Option<JobError>) {
    let key = ObjectKey::of(job);
    let api = ctx
        .client
        .namespaced_api::<Pod>(job.metadata.namespace.as_deref().unwrap_or_default());
    let patch = serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER] }
    });
    let results: Vec<_> = stream::iter(pods.to_vec())
        .map(|pod: Arc<Pod>| {
            let (api, patch, key) = (&api, &patch, &key);
            async move {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                ctx.expectations.expect_finalizer_removal(key, &uid);
                let result = api
                    .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await;
                (uid, name, result)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut removed = HashSet::new();
    let mut first_error = None;
    for (uid, name, result) in results {
        match result {
            Ok(_) => {
                removed.insert(uid);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                removed.insert(uid);
            }
            Err(source) => {
                ctx.expectations.finalizer_observed(&key, &uid);
                first_error.get_or_insert(JobError::Finalizer {
                    job: key.to_string(),
                    pod: name,
                    source,
                });
            }
        }
    }
    (removed, first_error)
}

/// Deletes `pods` of `job` (after removing their tracking finalizer if `release_first`, so the
/// Job does not count them).
pub(crate) async fn delete(
    ctx: &Context,
    job: &Job,
    pods: &[Arc<Pod>],
    release_first: bool,
) -> Result<(), JobError> {
    if pods.is_empty() {
        return Ok(());
    }
    let key = ObjectKey::of(job);
    if release_first {
        let (_, error) = release(ctx, job, pods).await;
        if let Some(e) = error {
            return Err(e);
        }
    }
    let api = ctx
        .client
        .namespaced_api::<Pod>(job.metadata.namespace.as_deref().unwrap_or_default());
    let results: Vec<_> = stream::iter(pods.to_vec())
        .map(|pod: Arc<Pod>| {
            let (api, key) = (&api, &key);
            async move {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                ctx.expectations.expect_deletion(key, &uid);
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                let result = api.delete(&name, &params).await;
                (uid, name, result)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut first_error = None;
    for (uid, name, result) in results {
        match result {
            Ok(_) => ctx.recorder.publish_for(
                job,
                EventDetails::normal("SuccessfulDelete", "Delete")
                    .with_note(format!("Deleted pod: {name}")),
            ),
            Err(source) => {
                ctx.expectations.deletion_observed(&key, &uid);
                let gone = matches!(&source, kube::Error::Api(e) if e.code == 404 || e.code == 409);
                if !gone {
                    first_error.get_or_insert(JobError::Delete {
                        job: key.to_string(),
                        pod: name,
                        source,
                    });
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}
