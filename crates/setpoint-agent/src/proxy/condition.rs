//! The Node condition `ServiceProxy` saying how this node proxies Services, so `kubectl
//! describe node` shows it: `True`/`Nftables`, or `False`/`Userspace` with why (ClusterIPs
//! are unreachable then), or `False`/`Off`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

/// The condition's type.
pub(crate) const CONDITION: &str = "ServiceProxy";

/// Sets the condition on `node` (retried until it is written or `shutdown`).
pub(crate) async fn publish(
    client: Client,
    node: String,
    (status, reason, message): (&'static str, &'static str, String),
    shutdown: CancellationToken,
) {
    let api = client.api::<Node>();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": CONDITION, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
    loop {
        match api
            .patch_status(&node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(error = %e, "setting the node's ServiceProxy condition; retrying")
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}
