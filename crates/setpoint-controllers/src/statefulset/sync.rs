//! One sync of one StatefulSet: claim its pods, find or make its update revision, run a pass
//! over its pods (unless it is being deleted), write its status and truncate its history.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use setpoint_core::LabelSelector;
use setpoint_runtime::{update_status, Action, ObjectKey};

use super::error::StatefulSetError;
use super::identity::revision_of;
use super::replicas::{pass, Revisions, Slots};
use super::status;
use super::watch::BY_CONTROLLER_UID;
use super::Context;
use crate::history::{self, template_of_revision, Owner};
use crate::pod_state::sooner;

/// Margin added to a `minReadySeconds` wait, so the next sync finds the pod available.
const WAIT_MARGIN: Duration = Duration::from_millis(50);

/// The set's selector; `None` if it has none or it is invalid or empty (such a set selects
/// nothing; the API server refuses all three).
pub(super) fn selector_of(set: &StatefulSet) -> Option<LabelSelector> {
    let selector = serde_json::to_value(&set.spec.as_ref()?.selector).ok()?;
    let selector = LabelSelector::from_structured(&selector).ok()?;
    (!selector.is_everything() && !selector.is_nothing()).then_some(selector)
}

/// Syncs `set`. Not cancel-safe beyond the SDK's sense: a cancelled sync may have made some of
/// its writes, which the next sync sees.
pub(super) async fn reconcile(
    set: Arc<StatefulSet>,
    ctx: Arc<Context>,
) -> Result<Action, StatefulSetError> {
    let key = ObjectKey::of(set.as_ref());
    let Some(selector) = selector_of(&set) else {
        tracing::warn!(statefulset = %key, "ignoring a StatefulSet with an empty or invalid selector");
        return Ok(Action::await_change());
    };
    let pods = claim_pods(&ctx, &set, &selector).await?;
    let revisions =
        history::claim_revisions(&ctx.client, &ctx.revisions, set.as_ref(), &selector).await?;
    let (update, collision_count) =
        history::update_revision(&ctx.client, set.as_ref(), &revisions).await?;
    let update_name = update.metadata.name.clone().unwrap_or_default();
    let current_name = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone())
        .filter(|name| {
            revisions
                .iter()
                .any(|r| r.metadata.name.as_deref() == Some(name))
        })
        .unwrap_or_else(|| update_name.clone());
    let current = revisions
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(&current_name));
    let update_template = set.template();
    let current_template = current
        .and_then(|r| template_of_revision(r))
        .unwrap_or_else(|| update_template.clone());
    let names = Revisions {
        current_name: current_name.clone(),
        current_template,
        update_name: update_name.clone(),
        update_template,
    };
    let now = Timestamp::now();
    let slots = Slots::of(&set, &pods);
    let outcome = if set.metadata.deletion_timestamp.is_none() {
        Some(pass(&ctx, &set, &slots, &names, now).await)
    } else {
        None
    };
    let members: Vec<Arc<Pod>> = slots
        .replicas
        .iter()
        .flatten()
        .chain(slots.condemned.iter().map(|(_, p)| p))
        .cloned()
        .collect();
    let (computed, available_in) = status::compute(
        &set,
        &members,
        &current_name,
        &update_name,
        collision_count,
        now,
    );
    write_status(&ctx, &set, computed).await?;
    let mut live: HashSet<String> = [current_name, update_name].into();
    live.extend(
        pods.iter()
            .filter_map(|p| revision_of(p).map(str::to_owned)),
    );
    history::truncate(&ctx.client, &revisions, &live, set.history_limit()).await?;
    let requeue = match outcome {
        Some(Err(error)) => return Err(error),
        Some(Ok(pass)) => sooner(pass.requeue_after, available_in),
        None => available_in,
    };
    Ok(requeue.map_or(Action::await_change(), |d| Action::requeue(d + WAIT_MARGIN)))
}

/// The pods `set` manages after adopting selected orphans and releasing unselected pods,
/// including terminating and finished ones.
async fn claim_pods(
    ctx: &Context,
    set: &StatefulSet,
    selector: &LabelSelector,
) -> Result<Vec<Arc<Pod>>, StatefulSetError> {
    Ok(
        crate::owned_pods::claim_pods(&ctx.client, &ctx.pods, BY_CONTROLLER_UID, set, selector)
            .await?,
    )
}

/// Writes `computed` unless the cached status already says it.
async fn write_status(
    ctx: &Context,
    set: &StatefulSet,
    computed: StatefulSetStatus,
) -> Result<(), StatefulSetError> {
    if set.status.as_ref() == Some(&computed) {
        return Ok(());
    }
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let api = ctx.client.namespaced_api::<StatefulSet>(namespace);
    update_status(&api, name, |live: &mut StatefulSet| {
        let mut status = computed.clone();
        status.conditions = live.status.as_ref().and_then(|s| s.conditions.clone());
        live.status = Some(status);
    })
    .await?;
    Ok(())
}
