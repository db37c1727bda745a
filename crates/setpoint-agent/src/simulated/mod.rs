//! Simulated nodes (as KWOK does): Nodes that register and keep their Leases like real agents,
//! and whose pods become `Running` without processes — for scale tests of the control plane.
//!
//! Each node is labelled [`SIMULATED_LABEL`]`=true`, has a fake `InternalIP` (`172.16.x.y`)
//! and gives its pods addresses from its own `/24` of `10.244.0.0/14`. One task renews every
//! node's Lease; one pod watch (bound pods, filtered by node name) serves every node, and a
//! bounded pool of workers posts pod statuses, so thousands of pods a second are handled
//! without a timer or task per pod. Pods with `restartPolicy` `Never` or `OnFailure` run to
//! completion after a run time and with an exit code their annotations may set
//! ([`SIMULATED_RUN_TIME`], [`SIMULATED_EXIT_CODE`]; see `completion`).

mod completion;
mod nodes;
mod pod_status;
mod pods;

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use parking_lot::Mutex;
use setpoint_runtime::{Client, InformerFactory, InformerOptions};
use tokio_util::sync::CancellationToken;

use crate::node::NodeRegistration;
use crate::AgentError;
use pods::{PodContext, PodHost};

pub use completion::{EXIT_CODE as SIMULATED_EXIT_CODE, RUN_TIME as SIMULATED_RUN_TIME};

/// The label every simulated Node carries (value `true`).
pub const SIMULATED_LABEL: &str = "setpoint.dev/simulated";

/// How many simulated nodes to run, and how they behave. Built with [`SimulatedNodes::new`] or
/// [`SimulatedNodes::named`], then adjusted with the builder methods.
///
/// ```no_run
/// use std::time::Duration;
/// use setpoint_agent::SimulatedNodes;
///
/// let nodes = SimulatedNodes::new(100)
///     .max_pods(200)
///     .cpu("64")
///     .memory("512Gi")
///     .start_delay(Duration::from_millis(500));
/// # let _ = nodes;
/// ```
#[derive(Debug, Clone)]
pub struct SimulatedNodes {
    /// `(name, index)`: the index picks the node's addresses.
    nodes: Vec<(String, u32)>,
    /// `status.capacity` (= allocatable) of every node.
    capacity: BTreeMap<String, Quantity>,
    /// Labels besides the well-known ones and [`SIMULATED_LABEL`].
    labels: BTreeMap<String, String>,
    /// How long a pod stays `Pending` on its node before it runs.
    start_delay: Duration,
    /// Pod status patches and deletes in flight at once.
    concurrency: usize,
}

impl SimulatedNodes {
    /// `count` nodes named `sim-0`, `sim-1`, …, each with cpu 32, memory 256Gi, pods 110, no
    /// start-up delay.
    pub fn new(count: u32) -> SimulatedNodes {
        SimulatedNodes::with_nodes((0..count).map(|i| (format!("sim-{i}"), i)).collect())
    }

    /// One node with this name (`setpoint agent --simulated`). Its addresses are picked from
    /// a hash of the name, so differently named nodes usually get different ones.
    pub fn named(name: &str) -> SimulatedNodes {
        // FNV-1a: stable across runs and platforms.
        let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        SimulatedNodes::with_nodes(vec![(name.to_owned(), 1024 + hash % 3072)])
    }

    fn with_nodes(nodes: Vec<(String, u32)>) -> SimulatedNodes {
        SimulatedNodes {
            nodes,
            capacity: BTreeMap::from([
                ("cpu".to_owned(), Quantity("32".to_owned())),
                ("memory".to_owned(), Quantity("256Gi".to_owned())),
                ("ephemeral-storage".to_owned(), Quantity("1Ti".to_owned())),
                ("pods".to_owned(), Quantity("110".to_owned())),
            ]),
            labels: BTreeMap::new(),
            start_delay: Duration::ZERO,
            concurrency: 48,
        }
    }

    /// Each node's `cpu` capacity, a quantity such as `"32"` or `"500m"`.
    #[must_use]
    pub fn cpu(mut self, quantity: &str) -> SimulatedNodes {
        self.capacity
            .insert("cpu".to_owned(), Quantity(quantity.to_owned()));
        self
    }

    /// Each node's `memory` capacity, a quantity such as `"256Gi"`.
    #[must_use]
    pub fn memory(mut self, quantity: &str) -> SimulatedNodes {
        self.capacity
            .insert("memory".to_owned(), Quantity(quantity.to_owned()));
        self
    }

    /// How many pods each node accepts (its `pods` capacity; 110 by default, as the kubelet).
    #[must_use]
    pub fn max_pods(mut self, pods: u32) -> SimulatedNodes {
        self.capacity
            .insert("pods".to_owned(), Quantity(pods.to_string()));
        self
    }

    /// An extra label on every node.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> SimulatedNodes {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// How long a pod bound to a node stays `Pending` before it runs (default none), counted
    /// from when the nodes first see it bound.
    #[must_use]
    pub fn start_delay(mut self, delay: Duration) -> SimulatedNodes {
        self.start_delay = delay;
        self
    }

    /// Pod status patches and deletes in flight at once (default 48; at least 1).
    #[must_use]
    pub fn concurrency(mut self, in_flight: usize) -> SimulatedNodes {
        self.concurrency = in_flight.max(1);
        self
    }

    /// The node names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|(name, _)| name.as_str())
    }

    /// Node `index`'s `InternalIP`: `172.16.0.0` + 1 + index.
    fn host_ip(index: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(172, 16, 0, 1)) + index)
    }

    /// Node `index`'s pod network: the `index`-th /24 from `10.244.0.0`.
    fn pod_net(index: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 244, 0, 0)) + (index % 1024) * 256)
    }

    fn registrations(&self) -> Vec<NodeRegistration> {
        let info = NodeSystemInfo {
            architecture: crate::node::architecture().to_owned(),
            container_runtime_version: "simulated://1".to_owned(),
            kernel_version: "simulated".to_owned(),
            kube_proxy_version: crate::node::KUBELET_VERSION.to_owned(),
            kubelet_version: crate::node::KUBELET_VERSION.to_owned(),
            operating_system: "linux".to_owned(),
            os_image: "Setpoint simulated node".to_owned(),
            ..NodeSystemInfo::default()
        };
        let mut labels = self.labels.clone();
        labels.insert(SIMULATED_LABEL.to_owned(), "true".to_owned());
        self.nodes
            .iter()
            .map(|(name, index)| {
                let mut info = info.clone();
                info.machine_id = format!("sim-{index}");
                info.system_uuid = format!("sim-{index}");
                info.boot_id = format!("sim-{index}");
                NodeRegistration::new(
                    name,
                    IpAddr::V4(SimulatedNodes::host_ip(*index)),
                    self.capacity.clone(),
                    info,
                )
                .with_labels(&labels)
            })
            .collect()
    }
}

/// Runs the simulated nodes until `shutdown` is cancelled: registers them, keeps their Leases
/// and status, and starts (marks `Running`) and removes their pods. API errors are logged and
/// retried; nothing but shutdown ends it.
///
/// Cancel-safe: dropping the future stops everything; the Nodes stay and their Leases expire.
pub async fn run_simulated(
    client: Client,
    nodes: SimulatedNodes,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let factory = InformerFactory::new(client.clone());
    let node_cache = factory
        .informer_with::<Node>(
            InformerOptions {
                label_selector: Some(format!("{SIMULATED_LABEL}=true")),
                ..InformerOptions::default()
            }
            .strip_managed_fields(),
        )
        .store();
    factory.start();

    let registered = CancellationToken::new();
    let keeper = tokio::spawn(nodes::keep_nodes(
        client.clone(),
        nodes.registrations(),
        node_cache,
        registered.clone(),
        shutdown.clone(),
    ));
    // Pods are started once every node had its first registration attempt.
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = registered.cancelled() => {}
    }
    let hosts: HashMap<String, PodHost> = nodes
        .nodes
        .iter()
        .map(|(name, index)| {
            let host = PodHost {
                host_ip: SimulatedNodes::host_ip(*index),
                pod_net: SimulatedNodes::pod_net(*index),
                started: AtomicU32::new(0),
            };
            (name.clone(), host)
        })
        .collect();
    tracing::info!(nodes = hosts.len(), "simulated nodes running");
    let ctx = Arc::new(PodContext {
        client,
        hosts,
        start_delay: nodes.start_delay,
        first_seen: Mutex::new(HashMap::new()),
        started: Mutex::new(HashMap::new()),
    });
    if !shutdown.is_cancelled() {
        pods::run_pods(&factory, ctx, nodes.concurrency, shutdown.clone()).await;
    }
    if let Err(error) = keeper.await {
        tracing::error!(%error, "the simulated nodes' keeper failed");
    }
    factory.shut_down();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_should_get_distinct_addresses_and_the_simulated_label() {
        let nodes = SimulatedNodes::new(300).max_pods(200);
        let regs = nodes.registrations();
        assert_eq!(regs.len(), 300);
        assert_eq!(regs[0].name, "sim-0");
        assert_eq!(regs[0].labels[SIMULATED_LABEL], "true");
        assert_eq!(regs[0].capacity["pods"], Quantity("200".to_owned()));
        let ips: std::collections::HashSet<_> = regs.iter().map(|r| r.node_ip).collect();
        assert_eq!(ips.len(), 300);
        assert_eq!(SimulatedNodes::pod_net(1), Ipv4Addr::new(10, 244, 1, 0));
        assert_eq!(SimulatedNodes::pod_net(257), Ipv4Addr::new(10, 245, 1, 0));
    }

    #[test]
    fn named_nodes_should_pick_stable_addresses_from_the_name() {
        let a = SimulatedNodes::named("edge-a").registrations();
        let again = SimulatedNodes::named("edge-a").registrations();
        assert_eq!(a[0].node_ip, again[0].node_ip);
        assert_eq!(a[0].name, "edge-a");
    }
}
