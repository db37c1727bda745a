//! Which ReplicaSets a Deployment manages, and making the ownerReferences say so — the SDK's
//! claim step ([`setpoint_runtime::owner::claim`]) over the ReplicaSets of the Deployment's
//! namespace: those it controls and still selects are its own, a selected orphan is adopted,
//! one it controls but no longer selects is released, another controller's is never touched.
//! Every ReplicaSet written is recorded as expected, so the next sync waits for the cache to
//! show it.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use setpoint_core::LabelSelector;
use setpoint_runtime::{owner, ObjectKey};

use super::error::DeploymentError;
use super::Context;

/// The ReplicaSets `d` manages after adopting and releasing (copies of the cached ones, or
/// the adopted ones as the server returned them).
pub(super) async fn claim_replicasets(
    ctx: &Context,
    d: &Deployment,
    selector: &LabelSelector,
) -> Result<Vec<ReplicaSet>, DeploymentError> {
    let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
    let key = ObjectKey::of(d);
    let candidates = ctx.replicasets.list_namespace(namespace);
    let claimed = owner::claim(&ctx.client, d, selector, candidates, |written| {
        ctx.expect_written(&key, written)
    })
    .await?;
    Ok(claimed.into_iter().map(Arc::unwrap_or_clone).collect())
}
