//! How pod events reach the Job loop: the pod index by controller UID, and the handler that
//! lowers the expectations as creates, deletes and finalizer removals show up in the cache and
//! then enqueues the pod's Job. Pods no Job controls are ignored: the loop does not adopt
//! orphans (a generated selector names the Job's uid, which no orphan carries).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::owner::controller_ref_of_kind;
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, IndexFn, ObjectKey};

use super::expectations::Expectations;
use super::pods::job_of;

/// The pod cache index filing each pod under the uid of the Job controlling it.
pub(crate) const BY_JOB_UID: &str = "job.setpoint.dev/controller-uid";

/// The index function of [`BY_JOB_UID`].
pub(crate) fn job_uid_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        controller_ref_of_kind::<Job>(&pod.metadata)
            .map(|r| vec![r.uid.clone()])
            .unwrap_or_default()
    })
}

/// The loop's pod handler.
pub(crate) struct PodEvents {
    pub(crate) expectations: Arc<Expectations>,
    pub(crate) enqueuer: Enqueuer<ObjectKey>,
}

impl PodEvents {
    fn observe(&self, job: &ObjectKey, pod: &Pod, deleted: bool) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if deleted || pod.metadata.deletion_timestamp.is_some() {
            self.expectations.deletion_observed(job, uid);
        }
        // A removed finalizer is remembered until the pod is gone, not just until the cache
        // shows it removed: a sync holding an older list of pods must not count it again.
        if deleted {
            self.expectations.finalizer_observed(job, uid);
        }
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        let Some(job) = job_of(pod) else { return };
        if pod.metadata.deletion_timestamp.is_none() {
            self.expectations.creation_observed(&job);
        }
        self.observe(&job, pod, false);
        self.enqueuer.add(job);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if let Some(job) = job_of(new) {
            self.observe(&job, new, false);
            self.enqueuer.add(job);
        }
        if let Some(job) = job_of(old).filter(|j| job_of(new).as_ref() != Some(j)) {
            self.enqueuer.add(job);
        }
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        let pod = deleted.object();
        let Some(job) = job_of(pod) else { return };
        self.observe(&job, pod, true);
        self.enqueuer.add(job);
    }
}

/// Forgets the expectations of deleted Jobs.
pub(crate) struct ForgetDeleted {
    pub(crate) expectations: Arc<Expectations>,
}

impl EventHandler<Job> for ForgetDeleted {
    fn on_add(&self, _job: &Arc<Job>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<Job>, _new: &Arc<Job>) {}

    fn on_delete(&self, deleted: &Deleted<Job>) {
        self.expectations
            .forget(&ObjectKey::of(deleted.object().as_ref()));
    }
}
