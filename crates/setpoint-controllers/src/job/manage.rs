//! Bringing a Job's running pods to what it wants now: none while suspended or once its outcome
//! is decided; otherwise up to `parallelism` at once, no more than the completions still
//! missing (NonIndexed), or one per index neither completed nor failed (Indexed) — each index
//! at most once, lowest first. New pods wait out the failure backoff ([`backoff`]); with
//! `podReplacementPolicy: Failed` a pod still terminating holds its place until it has failed.
//! At most [`BURST`] pods are created or deleted per sync.
//!
//! [`backoff`]: super::backoff

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::backoff;
use super::conditions::Outcome;
use super::error::JobError;
use super::indexes;
use super::pods::{
    completion_index, index_failure_count, is_active, is_failed, is_ready, is_succeeded,
    is_terminating, pod_for,
};
use super::writes;
use super::Context;

/// The most pods created or deleted for one Job in one sync (Kubernetes' `burstReplicas`).
pub(crate) const BURST: usize = 500;

/// Creates or deletes pods of `job` (as just written) so its running pods are what it wants;
/// returns how long until a pod waiting out its backoff may be created.
pub(crate) async fn manage(
    ctx: &Context,
    job: &Job,
    pods: &[Arc<Pod>],
    outcome: Option<&Outcome>,
    now: Timestamp,
) -> Result<Option<Duration>, JobError> {
    let Some(spec) = job.spec.as_ref() else {
        return Ok(None);
    };
    let active: Vec<Arc<Pod>> = pods.iter().filter(|p| is_active(p)).cloned().collect();
    if outcome.is_some() || spec.suspend == Some(true) {
        // Pods the loop deletes are released first: they count neither as succeeded nor as
        // failed (as kube-controller-manager's `deleteJobPods`).
        writes::delete(ctx, job, &active[..active.len().min(BURST)], true).await?;
        return Ok(None);
    }
    let parallelism = usize::try_from(spec.parallelism.unwrap_or(1)).unwrap_or(0);
    let failed_only = spec.pod_replacement_policy.as_deref() == Some("Failed");
    let terminating = pods.iter().filter(|p| is_terminating(p)).count();
    if spec.completion_mode.as_deref() == Some("Indexed") {
        return manage_indexed(ctx, job, pods, &active, parallelism, failed_only, now).await;
    }
    let status = job.status.clone().unwrap_or_default();
    let succeeded = status.succeeded.unwrap_or(0)
        + status
            .uncounted_terminated_pods
            .and_then(|u| u.succeeded)
            .map_or(0, |s| i32::try_from(s.len()).unwrap_or(i32::MAX));
    let want = match spec.completions {
        Some(c) => usize::try_from(c.saturating_sub(succeeded))
            .unwrap_or(0)
            .min(parallelism),
        // A work queue: once one pod succeeded, no new ones.
        None if succeeded > 0 => active.len(),
        None => parallelism,
    };
    let occupied = active.len() + if failed_only { terminating } else { 0 };
    if occupied < want {
        let finished: Vec<(&Arc<Pod>, bool)> = pods
            .iter()
            .filter(|p| is_succeeded(p) || is_failed(p, job))
            .map(|p| (p, !is_succeeded(p)))
            .collect();
        if let Some(wait) = backoff::wait(&finished, now) {
            return Ok(Some(wait));
        }
        let count = (want - occupied).min(BURST);
        writes::create(ctx, job, (0..count).map(|_| pod_for(job, None)).collect()).await?;
    } else if active.len() > want {
        let victims = deletion_order(active, active_len_minus(want));
        writes::delete(ctx, job, &victims, true).await?;
    }
    Ok(None)
}

fn active_len_minus(want: usize) -> impl Fn(usize) -> usize {
    move |len| len.saturating_sub(want).min(BURST)
}

/// The first `count(len)` of `pods` in the order they are best deleted: not ready first, then
/// not yet running, then the newest.
fn deletion_order(mut pods: Vec<Arc<Pod>>, count: impl Fn(usize) -> usize) -> Vec<Arc<Pod>> {
    let n = count(pods.len());
    pods.sort_by_key(|p| {
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (is_ready(p), running, std::cmp::Reverse(created))
    });
    pods.truncate(n);
    pods
}

async fn manage_indexed(
    ctx: &Context,
    job: &Job,
    pods: &[Arc<Pod>],
    active: &[Arc<Pod>],
    parallelism: usize,
    failed_only: bool,
    now: Timestamp,
) -> Result<Option<Duration>, JobError> {
    let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
    let status = job.status.clone().unwrap_or_default();
    let completed = indexes::parse(status.completed_indexes.as_deref(), Some(completions));
    let failed_ix = indexes::parse(status.failed_indexes.as_deref(), Some(completions));
    // Active pods by index; pods with no valid index, of a finished index, or a second pod of
    // an index are surplus.
    let mut running: BTreeMap<i32, Arc<Pod>> = BTreeMap::new();
    let mut surplus = Vec::new();
    for pod in active {
        match completion_index(pod, completions) {
            Some(i) if !completed.contains(&i) && !failed_ix.contains(&i) => {
                if let std::collections::btree_map::Entry::Vacant(slot) = running.entry(i) {
                    slot.insert(pod.clone());
                } else {
                    surplus.push(pod.clone());
                }
            }
            _ => surplus.push(pod.clone()),
        }
    }
    if running.len() > parallelism {
        // The highest indexes go first.
        let extra = running.len() - parallelism;
        let highest: Vec<i32> = running.keys().rev().take(extra).copied().collect();
        surplus.extend(highest.iter().filter_map(|i| running.remove(i)));
    }
    if !surplus.is_empty() {
        surplus.truncate(BURST);
        writes::delete(ctx, job, &surplus, true).await?;
        return Ok(None);
    }
    // Finished pods by index, for the per-index failure count and backoff.
    let mut finished: HashMap<i32, Vec<(&Arc<Pod>, bool)>> = HashMap::new();
    let mut held: HashSet<i32> = running.keys().copied().collect();
    for pod in pods {
        let Some(i) = completion_index(pod, completions) else {
            continue;
        };
        if is_succeeded(pod) || is_failed(pod, job) {
            finished
                .entry(i)
                .or_default()
                .push((pod, !is_succeeded(pod)));
        }
        if failed_only && is_terminating(pod) {
            held.insert(i);
        }
    }
    let room = parallelism.saturating_sub(running.len()).min(BURST);
    let mut soonest: Option<Duration> = None;
    let mut new = Vec::new();
    for i in 0..completions {
        if new.len() >= room {
            break;
        }
        if completed.contains(&i) || failed_ix.contains(&i) || held.contains(&i) {
            continue;
        }
        let history = finished.get(&i).map(Vec::as_slice).unwrap_or_default();
        if let Some(wait) = backoff::wait(history, now) {
            soonest = Some(soonest.map_or(wait, |s| s.min(wait)));
            continue;
        }
        let failures = history
            .iter()
            .filter(|(_, failed)| *failed)
            .map(|(p, _)| index_failure_count(p).saturating_add(1))
            .max()
            .unwrap_or(0);
        new.push(pod_for(job, Some((i, failures))));
    }
    writes::create(ctx, job, new).await?;
    Ok(soonest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::pods::testing::pod;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn deletion_order_should_prefer_unready_then_pending_then_newest() {
        let mut ready = pod("ready", "Running");
        ready.status.as_mut().expect("status").conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]);
        let running = pod("running", "Running");
        let mut old = pod("old-pending", "Pending");
        old.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1).expect("valid")));
        let mut new = pod("new-pending", "Pending");
        new.metadata.creation_timestamp = Some(Time(Timestamp::from_second(2).expect("valid")));
        let pods = [ready, running, old, new].map(Arc::new).to_vec();
        let names: Vec<String> = deletion_order(pods, |_| 3)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["new-pending", "old-pending", "running"]);
    }
}
