//! Choosing the node's network mode at agent start, and saying so: a warning in the log and
//! the Node condition `PodNetworkIsolated` (`True` in bridge mode; `False` with the reason —
//! `HostNetwork`, `NoPodCIDR`, `NetworkSetupFailed` — when pods share the host's network),
//! visible in `kubectl describe node`. Not kube's `NetworkUnavailable`: that one taints the
//! node, and pods on the host's network work.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

use super::{wait_for_pod_cidr, NodeNetwork, PodNetworkMode, ISOLATION_CONDITION, POD_CIDR_WAIT};

/// What the decision needs.
pub(crate) struct Startup<'a> {
    /// The API.
    pub(crate) client: &'a Client,
    /// The Node.
    pub(crate) node_name: &'a str,
    /// The agent's root directory.
    pub(crate) root_dir: &'a std::path::Path,
    /// How to start a shim (which also pins namespaces).
    pub(crate) shim: &'a [std::ffi::OsString],
    /// The configured mode.
    pub(crate) mode: PodNetworkMode,
    /// How long to wait for the Node's pod range.
    pub(crate) cidr_wait: Duration,
}

/// Sets up bridge mode if wanted and possible; otherwise warns. Publishes the Node condition
/// in the background either way. `None`: host-network mode.
pub(crate) async fn start(
    startup: Startup<'_>,
    shutdown: &CancellationToken,
) -> Option<Arc<NodeNetwork>> {
    let outcome = decide(&startup, shutdown).await;
    let (network, status, reason, message) = match outcome {
        Ok(network) => {
            let message = format!(
                "each pod has a network namespace on bridge {} ({}, gateway {})",
                network.bridge, network.pod_cidr, network.gateway
            );
            tracing::info!(bridge = %network.bridge, pod_cidr = %network.pod_cidr, "pods get network namespaces of their own");
            (Some(Arc::new(network)), "True", "BridgeNetwork", message)
        }
        Err((reason, why)) => {
            let message =
                format!("pods share the host's network (no isolation, ports may clash): {why}");
            tracing::warn!(reason, "{message}");
            (None, "False", reason, message)
        }
    };
    tokio::spawn(crate::node::publish_condition(
        startup.client.clone(),
        startup.node_name.to_owned(),
        ISOLATION_CONDITION,
        (status, reason, message),
        shutdown.clone(),
    ));
    network
}

async fn decide(
    startup: &Startup<'_>,
    shutdown: &CancellationToken,
) -> Result<NodeNetwork, (&'static str, String)> {
    startup
        .mode
        .wants_bridge()
        .map_err(|why| ("HostNetwork", why.to_owned()))?;
    let cidr = wait_for_pod_cidr(
        startup.client,
        startup.node_name,
        startup.cidr_wait,
        shutdown,
    )
    .await
    .ok_or_else(|| {
        (
            "NoPodCIDR",
            format!(
                "the Node got no spec.podCIDR within {:?} (is the node-ipam controller running?)",
                startup.cidr_wait
            ),
        )
    })?;
    let root: PathBuf = startup.root_dir.to_owned();
    let node = startup.node_name.to_owned();
    let shim = startup.shim.to_vec();
    tokio::task::spawn_blocking(move || NodeNetwork::start(&root, &node, cidr, shim))
        .await
        .map_err(|e| ("NetworkSetupFailed", e.to_string()))?
        .map_err(|e| ("NetworkSetupFailed", e.to_string()))
}

/// The default wait for the pod range.
pub(crate) const DEFAULT_CIDR_WAIT: Duration = POD_CIDR_WAIT;
