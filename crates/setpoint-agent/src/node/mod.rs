//! A node's presence in the API, shared by the real agent and simulated nodes: registration
//! (the Node object, its labels, addresses, resources and system info), the heartbeat Lease
//! `kube-node-lease/<node>`, and the node's status conditions — what the kubelet does for its
//! node, so the node lifecycle controller and the scheduler treat Setpoint nodes like any
//! other.
//!
//! For one node, call [`keep_registered`] with a [`NodeRegistration`] (usually
//! [`NodeRegistration::for_this_machine`]), or [`keep::keep_registered_with_readiness`] with a
//! `watch` of its [`NodeReadiness`] as well:
//!
//! ```text
//! let reg = NodeRegistration::for_this_machine(&name, ip, &overrides).with_daemon_port(port);
//! let (ready_tx, ready_rx) = tokio::sync::watch::channel(NodeReadiness::Ready);
//! tokio::spawn(keep_registered_with_readiness(client.clone(), reg, ready_rx, shutdown.clone()));
//! ```
//!
//! Many nodes (simulated ones) use the parts directly: [`register`], a [`NodeLease`] per node
//! renewed from one task, and a [`StatusReporter`] per node.
//!
//! Layout: `registration` (what a node registers as, [`NodeRegistration`], and the Node built
//! from it), `create_or_adopt` (the API call: create that Node, or take an existing one of the
//! name back), `keep` (the loop keeping it registered), `lease`, `status`, `condition` (conditions other
//! parts of the agent own), `machine`.

mod condition;
mod create_or_adopt;
mod keep;
mod lease;
mod machine;
mod registration;
mod status;

pub(crate) use condition::publish_condition;
pub(crate) use create_or_adopt::register;
pub(crate) use keep::keep_registered;
pub(crate) use lease::{retry_delay, NodeLease, LEASE_NAMESPACE, RENEW_INTERVAL};
pub(crate) use machine::{architecture, capacity as machine_capacity, KUBELET_VERSION};
pub(crate) use registration::NodeRegistration;
pub(crate) use status::{time_now, NodeReadiness, StatusReporter};
