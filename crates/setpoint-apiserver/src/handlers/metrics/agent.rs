//! Asking node agents for their resource reports: `GET /metrics/resource` on the agent's HTTPS
//! endpoint (the same client and address as `pods/log`), answered in the agent's own JSON
//! shape, which these types read.
//!
//! Every node is asked at once (a bounded number in flight), each within [`AGENT_TIMEOUT`]; a
//! node that cannot be asked (no address or port, unreachable, an error, a body that does not
//! decode) is left out of the answer, as metrics-server leaves out nodes it cannot scrape.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Limited};
use serde::Deserialize;

use crate::node_client::NodeClient;

/// How long one agent may take to answer.
const AGENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a report read.
const MAX_REPORT_BYTES: usize = 32 * 1024 * 1024;
/// Agents asked at once.
const IN_FLIGHT: usize = 32;

/// An agent's report (see the agent's `metrics` module).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AgentReport {
    /// The node's usage, if the agent could measure it.
    #[serde(default)]
    pub(super) node: Option<NodeUsage>,
    /// Pods with running containers.
    #[serde(default)]
    pub(super) pods: Vec<PodUsage>,
}

/// A node's usage.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NodeUsage {
    /// The end of the window, RFC 3339.
    pub(super) timestamp: String,
    /// The window's length.
    pub(super) window_millis: u64,
    /// CPU in nanocores.
    pub(super) cpu_nano_cores: u64,
    /// Memory working set, bytes.
    pub(super) memory_working_set_bytes: u64,
}

/// A pod's usage.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodUsage {
    /// Its namespace.
    pub(super) namespace: String,
    /// Its name.
    pub(super) name: String,
    /// Its UID (a pod deleted and made again under the same name is another pod).
    pub(super) uid: String,
    /// The end of the window, RFC 3339.
    pub(super) timestamp: String,
    /// The window's length.
    pub(super) window_millis: u64,
    /// Its running containers.
    pub(super) containers: Vec<ContainerUsage>,
}

/// A container's usage.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ContainerUsage {
    /// Its name.
    pub(super) name: String,
    /// CPU in nanocores.
    pub(super) cpu_nano_cores: u64,
    /// Memory working set, bytes.
    pub(super) memory_working_set_bytes: u64,
}

/// The reports of the agents at `addresses` (node name, address), by node name; nodes whose
/// agent did not answer are missing. Cancel-safe.
pub(super) async fn reports(
    client: &NodeClient,
    addresses: Vec<(String, SocketAddr)>,
) -> Vec<(String, AgentReport)> {
    futures::stream::iter(addresses)
        .map(|(node, address)| async move {
            match tokio::time::timeout(AGENT_TIMEOUT, report(client, address)).await {
                Ok(Ok(report)) => Some((node, report)),
                Ok(Err(message)) => {
                    tracing::debug!(%node, %address, %message, "no resource metrics from the node's agent");
                    None
                }
                Err(_) => {
                    tracing::debug!(%node, %address, "the node's agent did not send resource metrics in time");
                    None
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(std::future::ready)
        .collect()
        .await
}

async fn report(client: &NodeClient, address: SocketAddr) -> Result<AgentReport, String> {
    let response = client
        .get(address, "/metrics/resource")
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_REPORT_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the report: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "the agent answered {status}: {}",
            String::from_utf8_lossy(&body).trim()
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("the report does not decode: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_report_should_decode() {
        let body = r#"{"node":{"name":"n","timestamp":"2026-01-01T00:00:00Z","windowMillis":10000,"cpuNanoCores":5,"memoryWorkingSetBytes":6},
            "pods":[{"namespace":"ns","name":"p","uid":"u","timestamp":"2026-01-01T00:00:00Z","windowMillis":10000,
            "containers":[{"name":"c","cpuNanoCores":1,"memoryWorkingSetBytes":2}]}]}"#;
        let report: AgentReport = serde_json::from_str(body).expect("decodes");
        assert_eq!(report.node.map(|n| n.cpu_nano_cores), Some(5));
        assert_eq!(report.pods[0].containers[0].memory_working_set_bytes, 2);
        let empty: AgentReport = serde_json::from_str("{}").expect("decodes");
        assert_eq!(empty, AgentReport::default());
    }
}
