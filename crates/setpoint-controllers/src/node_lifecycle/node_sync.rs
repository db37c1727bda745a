//! One pass over one node (kube's `monitorNodeHealth` for that node): note whether its Lease
//! or status advanced; if it has been silent for the grace period, set its conditions
//! `Unknown`; bring its taints in line with its conditions; and while it is not `Ready`, mark
//! its pods not ready.
//!
//! The pass is requeued for the moment the grace period would run out; any Lease renewal or
//! Node change reconciles it sooner.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use kube::Api;
use setpoint_runtime::{update_status, Action, ObjectKey};
use tokio::time::Instant;

use super::health::{all_unknown, mark_unknown, ready_heartbeat};
use super::taints::{condition_status, reconciled_taints};
use super::{time_now, Context, NodeLifecycleError, BY_NODE, LEASE_NAMESPACE};

/// Attempts at writing taints when others write the Node at the same time.
const TAINT_ATTEMPTS: u32 = 5;

/// Reconciles one node; see the module docs.
pub(super) async fn reconcile_node(
    node: Arc<Node>,
    ctx: Arc<Context>,
) -> Result<Action, NodeLifecycleError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = Instant::now();
    let renewed = ctx
        .leases
        .get(&ObjectKey {
            namespace: Some(LEASE_NAMESPACE.to_owned()),
            name: name.clone(),
        })
        .and_then(|lease| lease.spec.as_ref().and_then(|s| s.renew_time.clone()));
    let heard = ctx.health.observe(&node, renewed, now);
    if ctx.health.len() > ctx.nodes.len() {
        ctx.health.retain(|n| {
            ctx.nodes
                .get(&ObjectKey {
                    namespace: None,
                    name: n.to_owned(),
                })
                .is_some()
        });
    }
    let deadline = heard + ctx.grace;
    let api: Api<Node> = ctx.client.api();

    let mut current = Node::clone(&node);
    if now >= deadline && !all_unknown(&node) {
        let seen = ready_heartbeat(&node);
        let updated = update_status(&api, &name, |latest: &mut Node| {
            // The agent may have posted since our cache showed the node: then it is alive.
            if ready_heartbeat(latest) == seen {
                mark_unknown(latest, &time_now());
            }
        })
        .await
        .map_err(|source| NodeLifecycleError::Status {
            node: name.clone(),
            source,
        })?;
        current = updated.into_object();
        if all_unknown(&current) {
            tracing::info!(node = %name, grace = ?ctx.grace, "node stopped posting status; marked Unknown");
        }
    }

    if reconciled_taints(&current, &time_now()).is_some() {
        update_taints(&api, &name).await?;
    }

    if condition_status(&current, "Ready").is_some_and(|s| s != "True") {
        mark_pods_not_ready(&ctx, &name).await?;
    }

    Ok(if now < deadline && !all_unknown(&current) {
        Action::requeue(deadline - now)
    } else {
        Action::await_change()
    })
}

/// Writes the taints the node's latest state calls for, re-reading it after a conflict.
async fn update_taints(api: &Api<Node>, name: &str) -> Result<(), NodeLifecycleError> {
    let failed = |source| NodeLifecycleError::Taints {
        node: name.to_owned(),
        source,
    };
    for attempt in 1..=TAINT_ATTEMPTS {
        let Some(mut latest) = api.get_opt(name).await.map_err(failed)? else {
            return Ok(());
        };
        let Some(taints) = reconciled_taints(&latest, &time_now()) else {
            return Ok(());
        };
        let keys: Vec<String> = taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        latest.spec.get_or_insert_with(Default::default).taints = Some(taints);
        match api.replace(name, &PostParams::default(), &latest).await {
            Ok(_) => {
                tracing::info!(node = %name, taints = ?keys, "node taints updated");
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < TAINT_ATTEMPTS => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Ok(())
}

/// Sets `Ready=False` on the node's pods that still say `Ready=True` (kube's
/// `MarkPodsNotReady`), so Services and rollouts stop counting them.
async fn mark_pods_not_ready(ctx: &Context, node: &str) -> Result<(), NodeLifecycleError> {
    let pods = ctx.pods.by_index(BY_NODE, node).unwrap_or_default();
    for pod in pods.iter().filter(|p| pod_ready(p)) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = ctx.client.namespaced_api(&namespace);
        let result = update_status(&api, &name, |latest: &mut Pod| {
            let now = time_now();
            let conditions = latest
                .status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Vec::new);
            if let Some(c) = conditions
                .iter_mut()
                .find(|c| c.type_ == "Ready" && c.status == "True")
            {
                c.status = "False".to_owned();
                c.last_transition_time = Some(Time::clone(&now));
            }
        })
        .await;
        match result {
            Ok(_) => {}
            Err(setpoint_runtime::StatusError::Get { source, .. }) if matches!(&source, kube::Error::Api(s) if s.code == 404) =>
                {}
            Err(source) => {
                return Err(NodeLifecycleError::PodStatus {
                    pod: format!("{namespace}/{name}"),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// Whether the pod's `Ready` condition is `True`.
fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
