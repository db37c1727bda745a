//! One sync of one ReplicaSet (kube-controller-manager's `syncReplicaSet`): claim its pods,
//! create or delete pods if its expectations allow, then write the status it has now.

use std::sync::Arc;
use std::time::Duration;

use setpoint_runtime::{Action, ObjectKey};

use super::claim::claim_pods;
use super::error::ReplicaSetError;
use super::kind::Replicated;
use super::manage::manage_replicas;
use super::status;
use super::watch::selector_of;
use super::Context;

/// Margin added to a wait (for `minReadySeconds`, or for expectations to expire), so the next
/// sync finds the pod available or the record expired.
const WAIT_MARGIN: Duration = Duration::from_millis(50);

/// Syncs `rs`. Cancel-safe in the SDK's sense: a cancelled sync may have created or deleted
/// some pods, which the expectations already account for.
pub(super) async fn reconcile<K: Replicated>(
    rs_arc: Arc<K>,
    ctx: Arc<Context>,
) -> Result<Action, ReplicaSetError> {
    let rs: &K = rs_arc.as_ref();
    let key = ObjectKey::of(rs);
    let Some(selector) = selector_of(rs) else {
        tracing::warn!(replicaset = %key, "ignoring a ReplicaSet with an empty or invalid selector");
        return Ok(Action::await_change());
    };
    // Read before listing pods: writes observed after this point are in the list, or will be
    // by the next sync.
    let writes_observed = ctx.expectations.satisfied(&key);
    let pods = claim_pods(&ctx, rs, &selector).await?;
    let failure = if writes_observed && rs.meta().deletion_timestamp.is_none() {
        manage_replicas(&ctx, rs, &pods).await.err()
    } else {
        None
    };
    let computed = status::compute(
        rs,
        &pods,
        failure.as_ref(),
        k8s_openapi::jiff::Timestamp::now(),
    );
    status::write(&ctx, rs, computed.status).await?;
    if let Some(failure) = failure {
        return Err(failure.error);
    }
    if !writes_observed {
        // The pod events that complete the record enqueue this ReplicaSet after lowering it;
        // should one be lost, the record expires and the sync after that acts.
        if let Some(wait) = ctx.expectations.expires_in(&key) {
            return Ok(Action::requeue(wait + WAIT_MARGIN));
        }
    }
    Ok(computed
        .next_available_in
        .map_or(Action::await_change(), |d| Action::requeue(d + WAIT_MARGIN)))
}
