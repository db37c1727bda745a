//! One pass over one bound pod: taint-based eviction (kube's `taint-eviction-controller`) and
//! orphan collection (kube's pod GC for pods bound to nodes that no longer exist).
//!
//! - The pod's node has a `NoExecute` taint the pod does not tolerate: delete it now (a normal,
//!   graceful delete; the node's agent, if alive, finishes it).
//! - Every such taint is tolerated, some for `tolerationSeconds`: delete it when the shortest
//!   runs out after the taint's `timeAdded` — the pass is requeued for that moment.
//! - The node is gone (not in the cache, and a read confirms it): delete the pod at once
//!   (`gracePeriodSeconds=0`: no agent will ever finish it).
//!
//! Deletes carry the pod's uid as precondition, so a new pod of the same name is never hit.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Preconditions};
use kube::Api;
use setpoint_runtime::{Action, EventDetails, ObjectKey};

use super::taints::{eviction, Eviction};
use super::{Context, NodeLifecycleError};

/// How long to wait before looking again at a pod whose node is missing from the cache but
/// still readable (the cache lags behind a new node).
const ORPHAN_RECHECK: Duration = Duration::from_secs(5);

/// Reconciles one pod; see the module docs.
pub(super) async fn reconcile_pod(
    pod: Arc<Pod>,
    ctx: Arc<Context>,
) -> Result<Action, NodeLifecycleError> {
    let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        return Ok(Action::await_change());
    };
    let node = ctx.nodes.get(&ObjectKey {
        namespace: None,
        name: node_name.clone(),
    });
    let Some(node) = node else {
        return collect_orphan(&pod, &node_name, &ctx).await;
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let now_ms = chrono::Utc::now().timestamp_millis();
    match eviction(taints, tolerations, now_ms.div_euclid(1000)) {
        Eviction::Keep => Ok(Action::await_change()),
        Eviction::At(secs) => {
            let wait_ms = secs.saturating_mul(1000).saturating_sub(now_ms).max(1);
            Ok(Action::requeue(Duration::from_millis(
                u64::try_from(wait_ms).unwrap_or(1),
            )))
        }
        Eviction::Now => {
            delete(&pod, &ctx, None).await?;
            tracing::info!(pod = %ObjectKey::of(pod.as_ref()), node = %node_name, "evicted: the node has a NoExecute taint the pod no longer tolerates");
            ctx.recorder.publish_for(
                pod.as_ref(),
                EventDetails::normal("TaintManagerEviction", "Delete").with_note(format!(
                    "Marking for deletion Pod {}",
                    ObjectKey::of(pod.as_ref())
                )),
            );
            Ok(Action::await_change())
        }
    }
}

/// Deletes a pod bound to `node_name` if that node truly is gone.
async fn collect_orphan(
    pod: &Pod,
    node_name: &str,
    ctx: &Context,
) -> Result<Action, NodeLifecycleError> {
    let nodes: Api<Node> = ctx.client.api();
    let exists = nodes
        .get_opt(node_name)
        .await
        .map_err(|source| NodeLifecycleError::ReadNode {
            node: node_name.to_owned(),
            source,
        })?
        .is_some();
    if exists {
        return Ok(Action::requeue(ORPHAN_RECHECK));
    }
    delete(pod, ctx, Some(0)).await?;
    tracing::info!(pod = %ObjectKey::of(pod), node = %node_name, "deleted a pod bound to a node that no longer exists");
    Ok(Action::await_change())
}

/// Deletes `pod` (uid precondition) with `grace` seconds, or its own grace period.
async fn delete(pod: &Pod, ctx: &Context, grace: Option<u32>) -> Result<(), NodeLifecycleError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = ctx.client.namespaced_api(&namespace);
    let params = DeleteParams {
        grace_period_seconds: grace,
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        // Gone already, or replaced by another pod of that name.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(source) => Err(NodeLifecycleError::Delete {
            pod: format!("{namespace}/{name}"),
            source,
        }),
    }
}
