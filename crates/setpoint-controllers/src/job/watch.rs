//! How pod events reach the Job loop: the pod index by controller UID, and the handler that
//! lowers the expectations as creates, deletes and finalizer removals show up in the cache and
//! then enqueues the pod's Job. Pods no Job controls are ignored: the loop does not adopt
//! orphans (a generated selector names the Job's uid, which no orphan carries).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::owner::controller_ref_of_kind;
use setpoint_runtime::{Client, Deleted, Enqueuer, EventHandler, IndexFn, ObjectCache, ObjectKey};

use super::expectations::Expectations;
use super::orphans::release_if_orphaned;
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
    /// The Job cache, to notice pods whose Job is gone.
    pub(crate) jobs: ObjectCache<Job>,
    /// Where orphaned pods are released.
    pub(crate) client: Client,
}

impl PodEvents {
    /// Releases `pod` if it holds the finalizer and its Job (by uid) is not cached.
    fn check_orphan(&self, job: &ObjectKey, pod: &Arc<Pod>) {
        if !self.jobs.is_synced() {
            return;
        }
        let uid = controller_ref_of_kind::<Job>(&pod.metadata).map(|r| r.uid.as_str());
        let cached = self.jobs.get(job);
        if cached.is_none_or(|j| j.metadata.uid.as_deref() != uid) {
            release_if_orphaned(&self.client, pod);
        }
    }

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
        self.check_orphan(&job, pod);
        self.enqueuer.add(job);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if let Some(job) = job_of(new) {
            self.observe(&job, new, false);
            self.check_orphan(&job, new);
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

/// Forgets the expectations of deleted Jobs and releases their pods.
pub(crate) struct ForgetDeleted {
    pub(crate) expectations: Arc<Expectations>,
    /// The pod cache, with the [`BY_JOB_UID`] index.
    pub(crate) pods: ObjectCache<Pod>,
    /// Where orphaned pods are released.
    pub(crate) client: Client,
}

impl EventHandler<Job> for ForgetDeleted {
    fn on_add(&self, _job: &Arc<Job>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<Job>, _new: &Arc<Job>) {}

    fn on_delete(&self, deleted: &Deleted<Job>) {
        let job = deleted.object();
        self.expectations.forget(&ObjectKey::of(job.as_ref()));
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        for pod in self.pods.by_index(BY_JOB_UID, uid).unwrap_or_default() {
            release_if_orphaned(&self.client, &pod);
        }
    }
}
