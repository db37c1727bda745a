//! What the agent is told at start.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// How to run the agent for one node.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node's name.
    pub node_name: String,
    /// Where pods' working directories, logs and the agent's own state live.
    pub root_dir: PathBuf,
    /// The node's address: the Node's `InternalIP`, and every pod's `hostIP` and `podIP`
    /// (pods are processes on the host's network).
    pub node_ip: IpAddr,
    /// Where the agent's HTTPS endpoint (container logs, for the API server's `pods/log`)
    /// listens; port 0 picks a free one. The port is published in the Node's
    /// `status.daemonEndpoints.kubeletEndpoint`.
    pub listen: SocketAddr,
    /// PEM of the CA whose client certificates may call that endpoint: the cluster's CA (the
    /// API server calls with a client certificate it signed).
    pub client_ca_pem: String,
    /// How to start a container's shim (the small supervisor that owns the container's
    /// process, writes its log and records its exit): the program and its leading arguments,
    /// e.g. `["/usr/bin/setpoint", "agent-shim"]`.
    pub shim: Vec<OsString>,
    /// Resources to report instead of the machine's own (`cpu`, `memory`, `pods`, …).
    pub capacity_override: BTreeMap<String, Quantity>,
    /// How often the node's and its containers' CPU and memory are sampled for
    /// `/metrics/resource` (`kubectl top`); [`DEFAULT_METRICS_INTERVAL`](crate::DEFAULT_METRICS_INTERVAL)
    /// unless there is a reason to change it.
    pub metrics_interval: std::time::Duration,
    /// How the agent finds every process a container started, to kill them all when the
    /// container ends or its pod is deleted.
    pub container_tracking: ContainerTracking,
    /// How containers see their volumes: mounted in a mount namespace of their own (as root),
    /// or through environment variables (`docs/design/volumes.md`).
    pub mount_mode: crate::MountMode,
    /// Service proxying and the cluster DNS resolver on this node.
    pub services: crate::ServicesConfig,
    /// How pods get their network: a namespace each on the agent's bridge (as root), or the
    /// host's (`docs/design/pod-network.md`).
    pub pod_network: crate::PodNetworkMode,
}

/// How the agent tracks the processes a container starts (see `docs/design/agent.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContainerTracking {
    /// A cgroup per container run where the agent can create one (a cgroup v2 mount, else a
    /// v1 hierarchy, preferring the freezer's; as root), else as [`Subreaper`](Self::Subreaper).
    #[default]
    Auto,
    /// No cgroups (so no resource limits either: the behaviour without root): the shim is a
    /// child subreaper, so what the container starts stays its
    /// descendant, and it kills all its descendants when the container ends. (A run whose
    /// shim is killed loses track of processes that left the shim's session.)
    Subreaper,
}
