//! The node's status as the agent posts it, and when to post it — the kubelet's
//! `nodeStatusUpdateFrequency` / `nodeStatusReportFrequency` behaviour: the agent compares
//! what it would post with the Node as the API has it at every heartbeat, and posts when
//! something differs (including when the node lifecycle controller marked it `Unknown`) or
//! when [`REPORT_INTERVAL`] passed since its last post. Liveness itself is carried by the
//! Lease (see `lease`), not by these posts.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::Api;
use tokio::time::Instant;

use super::NodeRegistration;

/// At most this long between two status posts even if nothing changed (the kubelet's
/// `nodeStatusReportFrequency`).
pub(crate) const REPORT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// Whether the node can run pods, as its agent sees it; becomes the `Ready` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeReadiness {
    /// `Ready=True`, reason `KubeletReady`.
    Ready,
    /// `Ready=False` with this reason and message (the kubelet uses reason `KubeletNotReady`).
    // Not yet reported by the real agent (tests construct it).
    #[cfg_attr(not(test), allow(dead_code))]
    NotReady {
        /// A CamelCase reason.
        reason: String,
        /// For humans.
        message: String,
    },
}

/// The conditions the agent owns, in the kubelet's order, as `(type, status, reason,
/// message)` for a node that is `readiness`.
fn wanted_conditions(
    readiness: &NodeReadiness,
) -> [(&'static str, &'static str, String, String); 4] {
    let ready = match readiness {
        NodeReadiness::Ready => (
            "Ready",
            "True",
            "KubeletReady".to_owned(),
            "setpoint agent is posting ready status".to_owned(),
        ),
        NodeReadiness::NotReady { reason, message } => {
            ("Ready", "False", reason.clone(), message.clone())
        }
    };
    [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory".to_owned(),
            "kubelet has sufficient memory available".to_owned(),
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure".to_owned(),
            "kubelet has no disk pressure".to_owned(),
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID".to_owned(),
            "kubelet has sufficient PID available".to_owned(),
        ),
        ready,
    ]
}

/// The current wall-clock time, at the second precision a `Time` is stored with.
pub(crate) fn time_now() -> Time {
    let secs = chrono::Utc::now().timestamp();
    Time(
        k8s_openapi::jiff::Timestamp::from_second(secs)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

/// Decides when one node's status is posted and builds it.
#[derive(Debug, Default)]
pub(crate) struct StatusReporter {
    /// When (local clock) this reporter last posted successfully; `None` before the first.
    last_post: Option<Instant>,
}

impl StatusReporter {
    /// A reporter that has not posted yet (its first check always posts).
    pub(crate) fn new() -> StatusReporter {
        StatusReporter::default()
    }

    /// Whether the status should be posted now, given the Node as the API has it: never
    /// posted by this reporter, [`REPORT_INTERVAL`] since the last post, or the Node's
    /// conditions, addresses, capacity or daemon port differ from what the agent would post.
    pub(crate) fn due(
        &self,
        current: &Node,
        reg: &NodeRegistration,
        readiness: &NodeReadiness,
        now: Instant,
    ) -> bool {
        let Some(last) = self.last_post else {
            return true;
        };
        if now.saturating_duration_since(last) >= REPORT_INTERVAL {
            return true;
        }
        let status = current.status.clone().unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let conditions_differ =
            wanted_conditions(readiness)
                .iter()
                .any(|(type_, want, reason, _)| {
                    !conditions.iter().any(|c| {
                        c.type_ == *type_
                            && c.status == *want
                            && c.reason.as_deref() == Some(reason)
                    })
                });
        let own = reg.status_without_conditions();
        conditions_differ
            || status.addresses != own.addresses
            || status.capacity != own.capacity
            || status.allocatable != own.allocatable
            || status.daemon_endpoints != own.daemon_endpoints
    }

    /// Posts the node's status (a strategic merge patch of `nodes/status`): the registration's fields
    /// and the conditions for `readiness`, heartbeat now, transition time kept from `current`
    /// where a condition's status did not change.
    pub(crate) async fn post(
        &mut self,
        api: &Api<Node>,
        current: Option<&Node>,
        reg: &NodeRegistration,
        readiness: &NodeReadiness,
    ) -> Result<Node, kube::Error> {
        let previous: BTreeMap<String, NodeCondition> = current
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_.clone(), c))
            .collect();
        let now = time_now();
        let conditions = wanted_conditions(readiness)
            .into_iter()
            .map(|(type_, status, reason, message)| {
                let transition = previous
                    .get(type_)
                    .filter(|c| c.status == status)
                    .and_then(|c| c.last_transition_time.clone())
                    .unwrap_or_else(|| now.clone());
                NodeCondition {
                    type_: type_.to_owned(),
                    status: status.to_owned(),
                    reason: Some(reason),
                    message: Some(message),
                    last_heartbeat_time: Some(now.clone()),
                    last_transition_time: Some(transition),
                }
            })
            .collect::<Vec<_>>();
        // A strategic merge patch (conditions merge by `type`, as the kubelet patches them):
        // conditions others own (`PodNetworkIsolated` from the network code, `ServiceProxy`
        // from the proxy) stay as the server has them, even when they were written after
        // `current` was read — a merge patch would replace the list with a stale copy.
        let mut status = reg.status_without_conditions();
        status.conditions = Some(conditions);
        let patch = serde_json::json!({ "status": status });
        let node = api
            .patch_status(
                &reg.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await?;
        self.last_post = Some(Instant::now());
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use k8s_openapi::api::core::v1::{NodeStatus, NodeSystemInfo};

    use super::*;

    fn reg() -> NodeRegistration {
        NodeRegistration::new(
            "n",
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            BTreeMap::new(),
            NodeSystemInfo::default(),
        )
    }

    fn node_with(reg: &NodeRegistration, ready: &str, reason: &str) -> Node {
        let mut status = reg.status_without_conditions();
        status.conditions = Some(
            wanted_conditions(&NodeReadiness::Ready)
                .into_iter()
                .map(|(t, s, r, _)| NodeCondition {
                    type_: t.to_owned(),
                    status: if t == "Ready" { ready } else { s }.to_owned(),
                    reason: Some(if t == "Ready" { reason.to_owned() } else { r }),
                    ..NodeCondition::default()
                })
                .collect(),
        );
        Node {
            status: Some(status),
            ..Node::default()
        }
    }

    #[test]
    fn reporter_should_post_first_then_on_change_or_after_report_interval() {
        let reg = reg();
        let mut reporter = StatusReporter::new();
        let now = Instant::now();
        let posted = node_with(&reg, "True", "KubeletReady");
        assert!(reporter.due(&posted, &reg, &NodeReadiness::Ready, now));
        reporter.last_post = Some(now);
        assert!(!reporter.due(&posted, &reg, &NodeReadiness::Ready, now));
        let later = now + REPORT_INTERVAL;
        assert!(reporter.due(&posted, &reg, &NodeReadiness::Ready, later));
        let not_ready = NodeReadiness::NotReady {
            reason: "KubeletNotReady".to_owned(),
            message: "m".to_owned(),
        };
        assert!(reporter.due(&posted, &reg, &not_ready, now));
    }

    #[test]
    fn reporter_should_post_again_when_the_api_shows_unknown() {
        let reg = reg();
        let mut reporter = StatusReporter::new();
        reporter.last_post = Some(Instant::now());
        let marked = node_with(&reg, "Unknown", "NodeStatusUnknown");
        assert!(reporter.due(&marked, &reg, &NodeReadiness::Ready, Instant::now()));
        let bare = Node {
            status: Some(NodeStatus::default()),
            ..Node::default()
        };
        assert!(reporter.due(&bare, &reg, &NodeReadiness::Ready, Instant::now()));
    }
}
