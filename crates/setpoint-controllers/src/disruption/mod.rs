//! The PodDisruptionBudget loop (kube-controller-manager's `disruption` controller): keeps each
//! budget's `status` true so the eviction API (`pods/eviction` in the API server) can spend
//! its `disruptionsAllowed`.
//!
//! Per budget: its pods (the selector in its namespace; in policy/v1 `{}` selects every pod
//! and a missing selector none), the expected and desired-healthy counts ([`expected`]: a
//! count, or a percentage / `maxUnavailable` of the pods' controllers' scale), then the status
//! ([`status`]): `currentHealthy`, `disruptionsAllowed`, the `disruptedPods` the eviction
//! handler recorded (kept until the pod is terminating, and dropped after two minutes if it
//! never is — the budget is synced again then), `observedGeneration` and the
//! `DisruptionAllowed` condition (`SufficientPods` / `InsufficientPods`). A sync that fails
//! for anything but a conflict writes `disruptionsAllowed: 0` with `SyncFailed` (fail safe)
//! and is retried.
//!
//! A second controller in the loop ([`stale`]) clears `DisruptionTarget` conditions of pods
//! the eviction API marked but that were never deleted.
//!
//! Events on the budget say when it selects no pods (`NoPods`), selects pods without a
//! controller under a percentage or `maxUnavailable` (`UnmanagedPods`), or its expected count
//! cannot be computed (`CalculateExpectedPodCountFailed`), as kube's do.
//!
//! Budgets are synced on their own changes, on changes of the pods they select, and on
//! changes of the workloads of their namespace (whose scale feeds percentages).

mod expected;
mod stale;
mod status;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::Resource;
use setpoint_core::LabelSelector;
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, EventDetails, EventRecorder, ObjectCache,
    ObjectKey, Predicate, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use expected::Workloads;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "disruption";
/// The stale-condition controller's name.
const STALE_NAME: &str = "disruption-stale-pod";
/// Budgets synced at once.
const CONCURRENCY: usize = 5;

/// Why one sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// The budget's status could not be computed (the message goes to its `SyncFailed`
    /// condition).
    #[error("{0}")]
    Failed(String),
    /// Writing the status failed (a conflict: the budget changed meanwhile).
    #[error("writing the status of PodDisruptionBudget {0}")]
    Write(String, #[source] kube::Error),
}

/// What every sync shares.
struct Context {
    client: Client,
    /// `NoPods`, `UnmanagedPods`, `CalculateExpectedPodCountFailed` Events on budgets.
    recorder: EventRecorder,
    pods: ObjectCache<Pod>,
    workloads: Workloads,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pdbs = ctx.factory.informer::<PodDisruptionBudget>().store();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, "setpoint")),
        client: ctx.client.clone(),
        pods: ctx.factory.informer::<Pod>().store(),
        workloads: Workloads {
            replication_controllers: ctx.factory.informer::<ReplicationController>().store(),
            replica_sets: ctx.factory.informer::<ReplicaSet>().store(),
            deployments: ctx.factory.informer::<Deployment>().store(),
            stateful_sets: ctx.factory.informer::<StatefulSet>().store(),
        },
    });
    let (by_pod, rc, rs, d, ss) = (
        pdbs.clone(),
        pdbs.clone(),
        pdbs.clone(),
        pdbs.clone(),
        pdbs.clone(),
    );
    let budgets = Controller::<PodDisruptionBudget>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .watches(move |pod: &Pod| covering(&by_pod, pod))
        .watches(move |o: &ReplicationController| in_namespace(&rc, o))
        .watches(move |o: &ReplicaSet| in_namespace(&rs, o))
        .watches(move |o: &Deployment| in_namespace(&d, o))
        .watches(move |o: &StatefulSet| in_namespace(&ss, o))
        .run(reconcile, context, shutdown.clone().cancelled_owned());
    let stale = Controller::<Pod>::new(&ctx.factory)
        .named(STALE_NAME)
        .registered_in(&ctx.metrics)
        .predicate(Predicate::new(|_, pod: &Pod| stale::has_candidate(pod)))
        .run(
            stale::reconcile,
            Arc::new(ctx.client.clone()),
            shutdown.cancelled_owned(),
        );
    let (budgets, stale) = tokio::join!(budgets, stale);
    budgets.and(stale)
}

/// An object's namespace.
fn namespace_of<K: Resource>(object: &K) -> &str {
    object.meta().namespace.as_deref().unwrap_or_default()
}

/// Every budget of the object's namespace (a workload's scale feeds their percentages).
fn in_namespace<K: Resource>(
    pdbs: &ObjectCache<PodDisruptionBudget>,
    object: &K,
) -> Vec<ObjectKey> {
    pdbs.list_namespace(namespace_of(object))
        .iter()
        .map(|p| ObjectKey::of(p.as_ref()))
        .collect()
}

/// The selector of a budget; a missing one selects nothing.
fn selector_of(pdb: &PodDisruptionBudget) -> Result<LabelSelector, String> {
    let selector = pdb
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or(serde_json::Value::Null);
    LabelSelector::from_structured(&selector).map_err(|e| e.to_string())
}

/// The budgets of the pod's namespace that select it.
fn covering(pdbs: &ObjectCache<PodDisruptionBudget>, pod: &Pod) -> Vec<ObjectKey> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    pdbs.list_namespace(namespace_of(pod))
        .iter()
        .filter(|p| selector_of(p).is_ok_and(|s| s.matches(&labels)))
        .map(|p| ObjectKey::of(p.as_ref()))
        .collect()
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Context>) -> Result<Action, SyncError> {
    match try_sync(&pdb, &ctx).await {
        Err(SyncError::Failed(message)) => {
            fail_safe(&pdb, &ctx, &message).await;
            Err(SyncError::Failed(message))
        }
        other => other,
    }
}

/// One sync of one budget.
async fn try_sync(pdb: &PodDisruptionBudget, ctx: &Context) -> Result<Action, SyncError> {
    let namespace = namespace_of(pdb);
    let selector = selector_of(pdb).map_err(|e| {
        ctx.recorder.publish_for(
            pdb,
            EventDetails::warning("NoPods", "Sync").with_note(format!("Failed to get pods: {e}")),
        );
        SyncError::Failed(e)
    })?;
    let pods = ctx.pods.list_selected(Some(namespace), &selector);
    if pods.is_empty() {
        ctx.recorder.publish_for(
            pdb,
            EventDetails::normal("NoPods", "Sync").with_note("No matching pods found"),
        );
    }
    let spec = pdb.spec.clone().unwrap_or_default();
    let counts = expected::expected(
        &ctx.client,
        &ctx.workloads,
        spec.min_available.as_ref(),
        spec.max_unavailable.as_ref(),
        &pods,
    )
    .await
    .map_err(|e| {
        ctx.recorder.publish_for(
            pdb,
            EventDetails::warning("CalculateExpectedPodCountFailed", "Sync").with_note(format!(
                "Failed to calculate the number of expected pods: {e}"
            )),
        );
        SyncError::Failed(e)
    })?;
    if !counts.unmanaged.is_empty() {
        tracing::debug!(pdb = %pdb.metadata.name.as_deref().unwrap_or_default(), pods = ?counts.unmanaged, "unmanaged pods selected by the budget");
        let selector = spec
            .selector
            .as_ref()
            .and_then(|s| serde_json::to_string(s).ok())
            .unwrap_or_default();
        ctx.recorder.publish_for(
            pdb,
            EventDetails::warning("UnmanagedPods", "Sync").with_note(format!(
                "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
            )),
        );
    }
    let now = Timestamp::now();
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
    let (disrupted, recheck) = status::disrupted_pods(recorded, &pods, now);
    let current_healthy = status::healthy(&pods, &disrupted, now);
    let counts = status::Counts {
        current_healthy,
        desired_healthy: counts.desired_healthy,
        expected: counts.expected,
    };
    if let Some(next) = status::next(pdb, counts, disrupted, now) {
        write_status(pdb, next, ctx).await?;
    }
    Ok(match recheck {
        Some(at) => Action::requeue(
            std::time::Duration::try_from(at.duration_since(now))
                .unwrap_or_default()
                .max(std::time::Duration::from_secs(1)),
        ),
        None => Action::await_change(),
    })
}

/// Writes `status` to the budget as read (conditional on its resource version).
async fn write_status(
    pdb: &PodDisruptionBudget,
    status: k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus,
    ctx: &Context,
) -> Result<(), SyncError> {
    let namespace = namespace_of(pdb);
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let mut next = pdb.clone();
    next.status = Some(status);
    next.metadata.managed_fields = None;
    ctx.client
        .namespaced_api::<PodDisruptionBudget>(namespace)
        .replace_status(&name, &PostParams::default(), &next)
        .await
        .map(drop)
        .map_err(|e| SyncError::Write(format!("{namespace}/{name}"), e))
}

/// After a failed sync: no disruption allowed, and the `SyncFailed` condition saying why.
async fn fail_safe(pdb: &PodDisruptionBudget, ctx: &Context, message: &str) {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    status::set_condition(
        &mut status,
        "False",
        "SyncFailed",
        message,
        Timestamp::now(),
    );
    if let Err(e) = write_status(pdb, status, ctx).await {
        tracing::warn!(error = %e, "fail-safe status write failed");
    }
}
