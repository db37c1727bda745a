//! One sync of one DaemonSet: claim its pods, find or make its update revision, plan and make
//! the pod writes if its expectations allow ([`super::plan`]), write its status, truncate its
//! history.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, Preconditions};
use setpoint_core::LabelSelector;
use setpoint_runtime::{update_status, Action, EventDetails, ObjectKey};

use super::error::DaemonSetError;
use super::placement::{node_of, pod_for_node, template_pod};
use super::plan::{plan, Plan};
use super::status;
use super::watch::BY_CONTROLLER_UID;
use super::Context;
use crate::history::{self, Owner, CONTROLLER_REVISION_HASH};
use crate::pod_state::sooner;

/// Margin added to a wait, so the next sync finds the pod available or the record expired.
const WAIT_MARGIN: Duration = Duration::from_millis(50);

/// The most pods created or deleted for one DaemonSet in one sync (Kubernetes'
/// `BurstReplicas`); the rest wait for the next sync.
const BURST: usize = 500;

/// Pod writes in flight at once.
const CONCURRENT_WRITES: usize = 64;

/// The DaemonSet's selector; `None` if it has none or it is invalid or empty.
pub(super) fn selector_of(ds: &DaemonSet) -> Option<LabelSelector> {
    let selector = serde_json::to_value(&ds.spec.as_ref()?.selector).ok()?;
    let selector = LabelSelector::from_structured(&selector).ok()?;
    (!selector.is_everything() && !selector.is_nothing()).then_some(selector)
}

/// Syncs `ds`. A cancelled sync may have made some of its writes; the expectations account
/// for them.
pub(super) async fn reconcile(
    ds: Arc<DaemonSet>,
    ctx: Arc<Context>,
) -> Result<Action, DaemonSetError> {
    let key = ObjectKey::of(ds.as_ref());
    let Some(selector) = selector_of(&ds) else {
        tracing::warn!(daemonset = %key, "ignoring a DaemonSet with an empty or invalid selector");
        return Ok(Action::await_change());
    };
    // Read before listing pods: writes observed after this are in the list or the next one.
    let writes_observed = ctx.expectations.satisfied(&key);
    let pods = claim_pods(&ctx, &ds, &selector).await?;
    let revisions =
        history::claim_revisions(&ctx.client, &ctx.revisions, ds.as_ref(), &selector).await?;
    let (update, collision_count) =
        history::update_revision(&ctx.client, ds.as_ref(), &revisions).await?;
    let hash = update
        .metadata
        .name
        .as_deref()
        .and_then(|n| n.strip_prefix(ds.metadata.name.as_deref().unwrap_or_default()))
        .and_then(|h| h.strip_prefix('-'))
        .unwrap_or_default()
        .to_owned();
    let nodes = ctx.nodes.list();
    let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in &pods {
        if let Some(node) = node_of(pod) {
            by_node
                .entry(node.to_owned())
                .or_default()
                .push(pod.clone());
        }
    }
    let template = template_pod(&ds, &hash);
    let now = Timestamp::now();
    let mut requeue = None;
    let mut failure = None;
    if writes_observed && ds.metadata.deletion_timestamp.is_none() {
        let planned = plan(&ds, &template, &nodes, &by_node, &hash, now);
        requeue = planned.requeue_after;
        failure = execute(&ctx, &ds, &key, &template, planned).await.err();
    }
    let computed = status::compute(
        &ds,
        &template,
        &nodes,
        &by_node,
        &hash,
        collision_count,
        now,
    );
    write_status(&ctx, &ds, computed).await?;
    let owner_name = ds.metadata.name.as_deref().unwrap_or_default();
    let mut live: HashSet<String> = [format!("{owner_name}-{hash}")].into();
    live.extend(pods.iter().filter_map(|p| {
        let hash = p.metadata.labels.as_ref()?.get(CONTROLLER_REVISION_HASH)?;
        Some(format!("{owner_name}-{hash}"))
    }));
    history::truncate(&ctx.client, &revisions, &live, ds.history_limit()).await?;
    if let Some(error) = failure {
        return Err(error);
    }
    if !writes_observed {
        requeue = sooner(requeue, ctx.expectations.expires_in(&key));
    }
    Ok(requeue.map_or(Action::await_change(), |d| Action::requeue(d + WAIT_MARGIN)))
}

/// The pods `ds` manages after adopting and releasing, terminating ones included.
async fn claim_pods(
    ctx: &Context,
    ds: &DaemonSet,
    selector: &LabelSelector,
) -> Result<Vec<Arc<Pod>>, DaemonSetError> {
    Ok(
        crate::owned_pods::claim_pods(&ctx.client, &ctx.pods, BY_CONTROLLER_UID, ds, selector)
            .await?,
    )
}

/// Makes the planned writes (at most [`BURST`] of each), recorded in the expectations first;
/// a write that fails is taken out of them again.
async fn execute(
    ctx: &Context,
    ds: &DaemonSet,
    key: &ObjectKey,
    template: &Pod,
    mut planned: Plan,
) -> Result<(), DaemonSetError> {
    planned.create.truncate(BURST);
    planned.delete.truncate(BURST);
    if planned.create.is_empty() && planned.delete.is_empty() {
        return Ok(());
    }
    ctx.expectations.expect(
        key,
        planned.create.len(),
        planned.delete.iter().map(|p| ObjectKey::of(p.as_ref())),
    );
    let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<Pod>(namespace);
    let writes = planned
        .create
        .into_iter()
        .map(Write::Create)
        .chain(planned.delete.into_iter().map(Write::Delete));
    let results: Vec<Result<(), DaemonSetError>> = stream::iter(writes)
        .map(|w| write(ctx, ds, key, template, &api, w))
        .buffer_unordered(CONCURRENT_WRITES)
        .collect()
        .await;
    results.into_iter().collect()
}

/// One pod write.
enum Write {
    /// A pod for this node.
    Create(String),
    /// This pod deleted.
    Delete(Arc<Pod>),
}

/// Makes one write; a failed one is taken out of the expectations.
async fn write(
    ctx: &Context,
    ds: &DaemonSet,
    key: &ObjectKey,
    template: &Pod,
    api: &kube::Api<Pod>,
    w: Write,
) -> Result<(), DaemonSetError> {
    match w {
        Write::Create(node) => {
            let pod = pod_for_node(template, &node);
            match api.create(&PostParams::default(), &pod).await {
                Ok(created) => {
                    let name = created.metadata.name.unwrap_or_default();
                    ctx.recorder.publish_for(
                        ds,
                        EventDetails::normal("SuccessfulCreate", "Create")
                            .with_note(format!("Created pod: {name}")),
                    );
                    Ok(())
                }
                Err(source) => {
                    ctx.expectations.creations_observed(key, 1);
                    ctx.recorder.publish_for(
                        ds,
                        EventDetails::warning("FailedCreate", "Create")
                            .with_note(format!("Error creating: {source}")),
                    );
                    Err(DaemonSetError::Create { node, source })
                }
            }
        }
        Write::Delete(pod) => {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    ctx.recorder.publish_for(
                        ds,
                        EventDetails::normal("SuccessfulDelete", "Delete")
                            .with_note(format!("Deleted pod: {name}")),
                    );
                    Ok(())
                }
                Err(source) => {
                    ctx.expectations
                        .deletion_observed(key, &ObjectKey::of(pod.as_ref()));
                    match source {
                        kube::Error::Api(e) if e.code == 404 || e.code == 409 => Ok(()),
                        source => Err(DaemonSetError::Delete { pod: name, source }),
                    }
                }
            }
        }
    }
}

/// Writes `computed` unless the cached status already says it.
async fn write_status(
    ctx: &Context,
    ds: &DaemonSet,
    computed: DaemonSetStatus,
) -> Result<(), DaemonSetError> {
    if ds.status.as_ref() == Some(&computed) {
        return Ok(());
    }
    let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<DaemonSet>(namespace);
    update_status(&api, name, |live: &mut DaemonSet| {
        let mut status = computed.clone();
        status.conditions = live.status.as_ref().and_then(|s| s.conditions.clone());
        live.status = Some(status);
    })
    .await?;
    Ok(())
}
