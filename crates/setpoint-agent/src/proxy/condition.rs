//! The Node condition `ServiceProxy` saying how this node proxies Services, so `kubectl
//! describe node` shows it: `True`/`Nftables`, or `False`/`Userspace` with why (ClusterIPs
//! are unreachable then), or `False`/`Off`.

use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

/// The condition's type.
pub(crate) const CONDITION: &str = "ServiceProxy";

/// Sets the condition on `node` (retried until it is written or `shutdown`).
pub(crate) async fn publish(
    client: Client,
    node: String,
    said: (&'static str, &'static str, String),
    shutdown: CancellationToken,
) {
    crate::node::publish_condition(client, node, CONDITION, said, shutdown).await;
}
