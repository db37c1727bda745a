//! How informer events reach the scheduler: [`PodEvents`] keeps the cache's placed pods in step
//! with the pod informer and queues pods that need a node; [`NodeEvents`] keeps the cache's
//! nodes in step with the node informer. Every change that may make room for a pod — a node
//! added, a scheduling-relevant node change, a placed pod deleted or finished — moves every
//! unschedulable pod back to the queue (kube-scheduler's "move to active").

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::Mutex;
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, ObjectKey};

use super::cache::Cache;
use super::node_info::{assigned_node, is_finished, needs_scheduling};
use super::resources::PodRequest;

/// Queues every pod the cache holds as unschedulable.
fn requeue_unschedulable(cache: &Mutex<Cache>, queue: &Enqueuer<ObjectKey>) {
    let keys = cache.lock().take_unschedulable();
    for key in keys {
        queue.add(key);
    }
}

/// The pod informer's handler.
pub(super) struct PodEvents {
    pub(super) cache: Arc<Mutex<Cache>>,
    pub(super) queue: Enqueuer<ObjectKey>,
}

impl PodEvents {
    /// Brings the cache in line with `pod`'s current state; queues it if it needs a node.
    /// `changed` is false for an update that touched only the status (e.g. our own
    /// `PodScheduled=False`), which must not retry an unschedulable pod.
    fn observe(&self, pod: &Pod, changed: bool) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        match assigned_node(pod) {
            Some(_) if is_finished(pod) => {
                let freed = self.cache.lock().remove_pod(uid);
                if freed {
                    requeue_unschedulable(&self.cache, &self.queue);
                }
            }
            Some(node) => {
                let mut cache = self.cache.lock();
                cache.observe_assigned(uid, node, PodRequest::of(pod));
                cache.drop_unschedulable(&ObjectKey::of(pod));
            }
            None if needs_scheduling(pod) => {
                if changed {
                    self.queue.add(ObjectKey::of(pod));
                }
            }
            None => self.cache.lock().drop_unschedulable(&ObjectKey::of(pod)),
        }
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        self.observe(pod, true);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        let changed = Arc::ptr_eq(old, new)
            || old.spec != new.spec
            || old.metadata.labels != new.metadata.labels
            || !needs_scheduling(old);
        self.observe(new, changed);
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        let pod = deleted.object();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let freed = {
            let mut cache = self.cache.lock();
            cache.drop_unschedulable(&ObjectKey::of(pod.as_ref()));
            cache.remove_pod(uid)
        };
        if freed {
            requeue_unschedulable(&self.cache, &self.queue);
        }
    }
}

/// The node informer's handler.
pub(super) struct NodeEvents {
    pub(super) cache: Arc<Mutex<Cache>>,
    pub(super) queue: Enqueuer<ObjectKey>,
}

impl EventHandler<Node> for NodeEvents {
    fn on_add(&self, node: &Arc<Node>, _in_initial_list: bool) {
        self.cache.lock().set_node(node.clone());
        requeue_unschedulable(&self.cache, &self.queue);
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        self.cache.lock().set_node(new.clone());
        if Arc::ptr_eq(old, new) || may_make_room(old, new) {
            requeue_unschedulable(&self.cache, &self.queue);
        }
    }

    fn on_delete(&self, deleted: &Deleted<Node>) {
        let name = deleted
            .object()
            .metadata
            .name
            .as_deref()
            .unwrap_or_default();
        self.cache.lock().remove_node(name);
    }
}

/// Whether a node update changed what filters look at (labels, taints, cordon, allocatable,
/// readiness) — not a mere heartbeat.
fn may_make_room(old: &Node, new: &Node) -> bool {
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    let spec = |n: &Node| n.spec.as_ref().map(|s| (s.taints.clone(), s.unschedulable));
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    old.metadata.labels != new.metadata.labels
        || spec(old) != spec(new)
        || allocatable(old) != allocatable(new)
        || ready(old) != ready(new)
}

#[cfg(test)]
mod tests {
    use setpoint_runtime::WorkQueue;

    use super::*;
    use crate::scheduler::cache::{Decision, Placement};
    use crate::scheduler::node_info::testing::node;
    use crate::scheduler::node_info::PodInfo;
    use crate::scheduler::resources::testing::pod;

    fn setup() -> (Arc<Mutex<Cache>>, WorkQueue<ObjectKey>) {
        (Arc::new(Mutex::new(Cache::default())), WorkQueue::new())
    }

    #[test]
    fn pod_events_should_queue_pending_pods_and_count_assigned_ones() {
        let (cache, queue) = setup();
        let h = PodEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        };
        h.on_add(&Arc::new(pod("pending", &[])), true);
        assert_eq!(queue.len(), 1);
        let mut running = pod("running", &[("cpu", "1")]);
        running.spec.as_mut().expect("spec").node_name = Some("a".into());
        h.on_add(&Arc::new(running.clone()), true);
        assert_eq!(queue.len(), 1, "assigned pods are not queued");
        assert_eq!(
            cache.lock().placement("uid-running"),
            Some(("a", Placement::Bound))
        );
        h.on_delete(&Deleted::Final(Arc::new(running)));
        assert_eq!(cache.lock().placement("uid-running"), None);
        cache.lock().check_invariants();
    }

    #[test]
    fn pod_events_should_not_retry_on_status_only_updates() {
        let (cache, queue) = setup();
        let h = PodEvents {
            cache,
            queue: queue.enqueuer(),
        };
        let old = Arc::new(pod("p", &[]));
        let mut new = pod("p", &[]);
        new.status = Some(Default::default());
        h.on_update(&old, &Arc::new(new));
        assert_eq!(queue.len(), 0);
        let mut relabelled = pod("p", &[]);
        relabelled.metadata.labels = Some([("a".into(), "b".into())].into());
        h.on_update(&old, &Arc::new(relabelled));
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn node_added_or_pod_deleted_should_requeue_unschedulable_pods() {
        let (cache, queue) = setup();
        let nodes = NodeEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        };
        let pods = PodEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        };
        let waiting = PodInfo::of(Arc::new(pod("waiting", &[("cpu", "4")])));
        assert!(matches!(
            cache.lock().schedule(&waiting),
            Decision::Unschedulable(_)
        ));
        nodes.on_add(&Arc::new(node("a")), false);
        assert_eq!(queue.len(), 1, "a new node retries it");

        let (cache, queue) = setup();
        let pods2 = PodEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        };
        drop(pods);
        cache.lock().set_node(Arc::new(node("a")));
        let mut big = pod("big", &[("cpu", "4")]);
        big.spec.as_mut().expect("spec").node_name = Some("a".into());
        let big = Arc::new(big);
        pods2.on_add(&big, true);
        assert!(matches!(
            cache.lock().schedule(&waiting),
            Decision::Unschedulable(_)
        ));
        pods2.on_delete(&Deleted::Final(big));
        assert_eq!(queue.len(), 1, "a freed node retries it");
    }

    #[test]
    fn heartbeats_should_not_requeue_but_readiness_changes_should() {
        let old = node("a");
        let mut heartbeat = old.clone();
        heartbeat
            .status
            .as_mut()
            .expect("status")
            .conditions
            .as_mut()
            .expect("c")[0]
            .reason = Some("KubeletReady".into());
        assert!(!may_make_room(&old, &heartbeat));
        let mut not_ready = old.clone();
        not_ready
            .status
            .as_mut()
            .expect("status")
            .conditions
            .as_mut()
            .expect("c")[0]
            .status = "False".into();
        assert!(may_make_room(&not_ready, &old));
        let mut uncordoned = old.clone();
        uncordoned.spec.as_mut().expect("spec").unschedulable = Some(true);
        assert!(may_make_room(&uncordoned, &old));
    }
}
