//! Whether a node is still talking: the last time (on this process's clock) that its Lease's
//! `renewTime` or its `Ready` condition's `lastHeartbeatTime` was seen to change — kube's
//! `probeTimestamp`. Measuring with local observation times, not the timestamps' values, makes
//! the judgement immune to clock skew between node and controller.
//!
//! Also the status of a node judged silent: every condition `Unknown`.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use parking_lot::Mutex;
use tokio::time::Instant;

/// The conditions the agent posts, which are set `Unknown` when it falls silent.
const AGENT_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What was last seen of one node's heartbeats.
#[derive(Debug, Clone)]
struct Observed {
    /// `lastHeartbeatTime` of the `Ready` condition.
    heartbeat: Option<Time>,
    /// `renewTime` of the node's Lease.
    renewed: Option<MicroTime>,
    /// When either was last seen to change (or the node first seen).
    probe: Instant,
}

/// The heartbeats of every node, as this process has observed them.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// By node name. Entries of deleted nodes are removed by [`Health::retain`].
    nodes: Mutex<HashMap<String, Observed>>,
}

impl Health {
    /// Records what `node` and its Lease (`renewed`) show now, and returns when the node was
    /// last heard from: `now` if this is the first observation or a heartbeat advanced.
    pub(super) fn observe(&self, node: &Node, renewed: Option<MicroTime>, now: Instant) -> Instant {
        let heartbeat = ready_heartbeat(node);
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut nodes = self.nodes.lock();
        match nodes.get_mut(&name) {
            Some(seen) => {
                if seen.heartbeat != heartbeat || (renewed.is_some() && seen.renewed != renewed) {
                    seen.probe = now;
                }
                seen.heartbeat = heartbeat;
                if renewed.is_some() {
                    seen.renewed = renewed;
                }
                seen.probe
            }
            None => {
                nodes.insert(
                    name,
                    Observed {
                        heartbeat,
                        renewed,
                        probe: now,
                    },
                );
                now
            }
        }
    }

    /// Forgets nodes for which `keep` is false.
    pub(super) fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.nodes.lock().retain(|name, _| keep(name));
    }

    /// How many nodes are tracked.
    pub(super) fn len(&self) -> usize {
        self.nodes.lock().len()
    }
}

/// `lastHeartbeatTime` of the node's `Ready` condition.
pub(super) fn ready_heartbeat(node: &Node) -> Option<Time> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_heartbeat_time
        .clone()
}

/// Whether every agent condition of `node` is already `Unknown`.
pub(super) fn all_unknown(node: &Node) -> bool {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    AGENT_CONDITIONS.iter().all(|type_| {
        conditions
            .iter()
            .any(|c| c.type_ == *type_ && c.status == "Unknown")
    })
}

/// Sets every agent condition of `node` to `Unknown` (kube's `NodeStatusUnknown`, or
/// `NodeStatusNeverUpdated` for a condition never reported, whose heartbeat is then the Node's
/// creation time), transition time `now`, heartbeat kept. Conditions already `Unknown` are
/// left as they are.
pub(super) fn mark_unknown(node: &mut Node, now: &Time) {
    let created = node.metadata.creation_timestamp.clone();
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for type_ in AGENT_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".to_owned();
                c.reason = Some("NodeStatusUnknown".to_owned());
                c.message = Some("Kubelet stopped posting node status.".to_owned());
                c.last_transition_time = Some(now.clone());
            }
            None => conditions.push(NodeCondition {
                type_: type_.to_owned(),
                status: "Unknown".to_owned(),
                reason: Some("NodeStatusNeverUpdated".to_owned()),
                message: Some("Kubelet never posted node status.".to_owned()),
                last_heartbeat_time: created.clone(),
                last_transition_time: Some(now.clone()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid"))
    }

    fn micro(secs: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid"))
    }

    fn node(heartbeat: i64) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".to_owned()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    last_heartbeat_time: Some(time(heartbeat)),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn probe_should_advance_only_when_a_heartbeat_changes() {
        let health = Health::default();
        let t0 = Instant::now();
        assert_eq!(health.observe(&node(1), Some(micro(1)), t0), t0);
        tokio::time::advance(Duration::from_secs(5)).await;
        // Nothing new: still t0, however much time passed.
        assert_eq!(health.observe(&node(1), Some(micro(1)), Instant::now()), t0);
        // The lease was renewed — even to an earlier time (skewed clock): heard from now.
        let t1 = Instant::now();
        assert_eq!(health.observe(&node(1), Some(micro(0)), t1), t1);
        tokio::time::advance(Duration::from_secs(5)).await;
        let t2 = Instant::now();
        assert_eq!(health.observe(&node(2), Some(micro(0)), t2), t2);
        // A node whose Lease is not in the cache keeps the last renewal seen.
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(health.observe(&node(2), None, Instant::now()), t2);
        health.retain(|_| false);
        assert_eq!(health.len(), 0);
    }

    #[test]
    fn mark_unknown_should_set_every_agent_condition() {
        let mut n = node(7);
        assert!(!all_unknown(&n));
        mark_unknown(&mut n, &time(100));
        assert!(all_unknown(&n));
        let conditions = n.status.and_then(|s| s.conditions).expect("conditions");
        let ready = conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("ready");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(ready.last_heartbeat_time, Some(time(7)));
        assert_eq!(ready.last_transition_time, Some(time(100)));
        let memory = conditions
            .iter()
            .find(|c| c.type_ == "MemoryPressure")
            .expect("memory");
        assert_eq!(memory.reason.as_deref(), Some("NodeStatusNeverUpdated"));
    }
}
