//! Conditions other parts of the agent own on its Node (`PodNetworkIsolated` from the pod
//! network, `ServiceProxy` from the Service proxy): written beside the agent's own by a
//! strategic merge of `status.conditions` (merged by `type`), so no writer replaces another's.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

/// Sets condition `type_` on `node` to `(status, reason, message)`, retrying every 500 ms
/// until it is written or `shutdown`.
pub(crate) async fn publish_condition(
    client: Client,
    node: String,
    type_: &'static str,
    (status, reason, message): (&'static str, &'static str, String),
    shutdown: CancellationToken,
) {
    let api = client.api::<Node>();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
    loop {
        match api
            .patch_status(&node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(error = %e, condition = type_, "setting a node condition; retrying")
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}
