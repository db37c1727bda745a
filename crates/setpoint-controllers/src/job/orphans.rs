//! Pods whose Job is gone. A Job deleted in the background (the usual `kubectl delete job`)
//! vanishes at once, its pods still holding `batch.kubernetes.io/job-tracking`: nothing would
//! ever count them, and the finalizer would keep them terminating forever. So when the loop
//! sees a Job deleted, or a pod with the finalizer whose Job is not cached, it removes the
//! finalizer — after a live read confirms no Job with that uid exists (a cache behind its
//! watch must never release the pods of a live Job).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use setpoint_runtime::owner::controller_ref_of_kind;
use setpoint_runtime::Client;

use super::pods::{has_tracking_finalizer, TRACKING_FINALIZER};

/// Removes the tracking finalizer of `pod` in the background if its Job no longer exists.
pub(crate) fn release_if_orphaned(client: &Client, pod: &Arc<Pod>) {
    if !has_tracking_finalizer(pod) {
        return;
    }
    let Some(owner) = controller_ref_of_kind::<Job>(&pod.metadata) else {
        return;
    };
    let (client, pod, job_uid, job_name) = (
        client.clone(),
        pod.clone(),
        owner.uid.clone(),
        owner.name.clone(),
    );
    tokio::spawn(async move {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        // Nothing else would come back to this pod (its Job's events are over), so a failed
        // read or patch (a timeout under load, a restarting store) is tried again.
        let mut delay = RETRY_DELAY;
        for attempt in 1..=ATTEMPTS {
            match release(&client, &namespace, &name, &job_name, &job_uid).await {
                Ok(()) => return,
                Err(error) if attempt == ATTEMPTS => {
                    tracing::warn!(pod = %name, %error, "releasing a pod whose job is gone; giving up");
                }
                Err(error) => {
                    tracing::debug!(pod = %name, %error, attempt, "releasing a pod whose job is gone; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
            }
        }
    });
}

/// How many times a release is tried.
const ATTEMPTS: u32 = 6;
/// The wait after the first failure; doubled after each.
const RETRY_DELAY: Duration = Duration::from_millis(250);

/// One try: a live read of the Job, then the patch if it is gone (or another Job has its name).
async fn release(
    client: &Client,
    namespace: &str,
    name: &str,
    job_name: &str,
    job_uid: &str,
) -> Result<(), kube::Error> {
    let jobs = client.namespaced_api::<Job>(namespace);
    if let Some(job) = jobs.get_opt(job_name).await? {
        if job.metadata.uid.as_deref() == Some(job_uid) {
            return Ok(());
        }
    }
    let patch = serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER] }
    });
    let pods = client.namespaced_api::<Pod>(namespace);
    match pods
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => {
            tracing::debug!(pod = %name, "released a pod whose job is gone");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
