//! One sync of one ReplicaSet (kube-controller-manager's `syncReplicaSet`): claim its pods,
//! create or delete pods if its expectations allow, then write the status it has now.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use setpoint_runtime::{Action, ObjectKey};

use super::claim::claim_pods;
use super::error::ReplicaSetError;
use super::manage::manage_replicas;
use super::status;
use super::watch::selector_of;
use super::Context;

/// How soon a ReplicaSet whose writes are not all observed yet is looked at again, in case the
/// pod event that completes them was handled just before the expectations were lowered (the
/// two are separate handlers of the pod informer, see `docs/design/controllers.md`).
pub(super) const EXPECTATIONS_POLL: Duration = Duration::from_millis(500);

/// Margin added to a wait for `minReadySeconds`, so the next sync finds the pod available.
const AVAILABILITY_MARGIN: Duration = Duration::from_millis(50);

/// Syncs `rs`. Cancel-safe in the SDK's sense: a cancelled sync may have created or deleted
/// some pods, which the expectations already account for.
pub(super) async fn reconcile(
    rs: Arc<ReplicaSet>,
    ctx: Arc<Context>,
) -> Result<Action, ReplicaSetError> {
    let key = ObjectKey::of(rs.as_ref());
    let Some(selector) = selector_of(&rs) else {
        tracing::warn!(replicaset = %key, "ignoring a ReplicaSet with an empty or invalid selector");
        return Ok(Action::await_change());
    };
    // Read before listing pods: writes observed after this point are in the list, or will be
    // by the next sync.
    let writes_observed = ctx.expectations.satisfied(&key);
    let pods = claim_pods(&ctx, &rs, &selector).await?;
    let failure = if writes_observed && rs.metadata.deletion_timestamp.is_none() {
        manage_replicas(&ctx, &rs, &pods).await.err()
    } else {
        None
    };
    let computed = status::compute(
        &rs,
        &pods,
        failure.as_ref(),
        k8s_openapi::jiff::Timestamp::now(),
    );
    status::write(&ctx, &rs, computed.status).await?;
    if let Some(failure) = failure {
        return Err(failure.error);
    }
    if !writes_observed {
        return Ok(Action::requeue(EXPECTATIONS_POLL));
    }
    Ok(computed
        .next_available_in
        .map_or(Action::await_change(), |d| {
            Action::requeue(d + AVAILABILITY_MARGIN)
        }))
}
