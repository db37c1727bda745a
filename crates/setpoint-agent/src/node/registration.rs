//! [`NodeRegistration`]: what a node tells the API about itself — name, address, labels,
//! resources, system info and the port of its daemon endpoint — and the Node object and status
//! built from it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::machine;

/// The well-known label holding the node's name.
pub(crate) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The well-known label holding the node's operating system.
pub(crate) const LABEL_OS: &str = "kubernetes.io/os";
/// The well-known label holding the node's architecture.
pub(crate) const LABEL_ARCH: &str = "kubernetes.io/arch";

/// What a node registers as. Built once at start ([`NodeRegistration::for_this_machine`] for a
/// real agent; simulated nodes fill it themselves) and never changed while the node runs.
///
/// Invariant: `labels` holds [`LABEL_HOSTNAME`] (= `name`), [`LABEL_OS`] and [`LABEL_ARCH`];
/// `allocatable` has the same keys as `capacity` (the agent reserves nothing).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeRegistration {
    /// The Node's name (also its Lease's name and its `Hostname` address).
    pub(crate) name: String,
    /// The Node's `InternalIP`.
    pub(crate) node_ip: IpAddr,
    /// `status.capacity`.
    pub(crate) capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable`.
    pub(crate) allocatable: BTreeMap<String, Quantity>,
    /// Labels the node sets on itself (others' labels on the Node are left alone).
    pub(crate) labels: BTreeMap<String, String>,
    /// `status.daemonEndpoints.kubeletEndpoint.port`: where the agent serves container logs.
    pub(crate) daemon_port: Option<i32>,
    /// `status.nodeInfo`.
    pub(crate) system_info: NodeSystemInfo,
}

impl NodeRegistration {
    /// This machine as node `name` at `node_ip`: its resources (see [`machine::capacity`]),
    /// with `overrides` replacing or adding entries (`cpu`, `memory`, `pods`, …), and its
    /// system info. `daemon_port` is `None`; set it once the endpoint listens.
    pub(crate) fn for_this_machine(
        name: &str,
        node_ip: IpAddr,
        overrides: &BTreeMap<String, Quantity>,
    ) -> NodeRegistration {
        let mut capacity = machine::capacity();
        capacity.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
        NodeRegistration::new(name, node_ip, capacity, machine::system_info())
    }

    /// A node with exactly these resources and system info, and the well-known labels.
    pub(crate) fn new(
        name: &str,
        node_ip: IpAddr,
        capacity: BTreeMap<String, Quantity>,
        system_info: NodeSystemInfo,
    ) -> NodeRegistration {
        let labels = BTreeMap::from([
            (LABEL_HOSTNAME.to_owned(), name.to_owned()),
            (LABEL_OS.to_owned(), system_info.operating_system.clone()),
            (LABEL_ARCH.to_owned(), system_info.architecture.clone()),
        ]);
        NodeRegistration {
            name: name.to_owned(),
            node_ip,
            allocatable: capacity.clone(),
            capacity,
            labels,
            daemon_port: None,
            system_info,
        }
    }

    /// This registration with `labels` added (the well-known ones cannot be overridden).
    #[must_use]
    pub(crate) fn with_labels(mut self, labels: &BTreeMap<String, String>) -> NodeRegistration {
        for (k, v) in labels {
            if ![LABEL_HOSTNAME, LABEL_OS, LABEL_ARCH].contains(&k.as_str()) {
                self.labels.insert(k.clone(), v.clone());
            }
        }
        self
    }

    /// This registration with its daemon endpoint's port.
    #[must_use]
    pub(crate) fn with_daemon_port(mut self, port: u16) -> NodeRegistration {
        self.daemon_port = Some(i32::from(port));
        self
    }

    /// The Node to create: name and labels only (status is written through `nodes/status`).
    pub(crate) fn node(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: None,
        }
    }

    /// The status fields this node owns, without conditions: addresses, capacity,
    /// allocatable, daemon endpoints, node info.
    pub(crate) fn status_without_conditions(&self) -> NodeStatus {
        NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: self.node_ip.to_string(),
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: self.name.clone(),
                },
            ]),
            capacity: Some(self.capacity.clone()),
            allocatable: Some(self.allocatable.clone()),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: self.daemon_port.map(|port| DaemonEndpoint { port }),
            }),
            node_info: Some(self.system_info.clone()),
            ..NodeStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn registration_should_carry_well_known_labels_and_overrides() {
        let overrides = BTreeMap::from([("pods".to_owned(), Quantity("7".to_owned()))]);
        let reg =
            NodeRegistration::for_this_machine("n1", IpAddr::V4(Ipv4Addr::LOCALHOST), &overrides)
                .with_labels(&BTreeMap::from([
                    ("team".to_owned(), "a".to_owned()),
                    (LABEL_HOSTNAME.to_owned(), "spoof".to_owned()),
                ]));
        assert_eq!(reg.labels[LABEL_HOSTNAME], "n1");
        assert_eq!(reg.labels[LABEL_OS], "linux");
        assert_eq!(reg.labels["team"], "a");
        assert_eq!(reg.capacity["pods"], Quantity("7".to_owned()));
        assert_eq!(reg.allocatable, reg.capacity);
        assert_eq!(reg.system_info.kubelet_version, machine::KUBELET_VERSION);
    }

    #[test]
    fn status_should_list_internal_ip_and_hostname_and_port() {
        let reg = NodeRegistration::new(
            "n1",
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            BTreeMap::new(),
            NodeSystemInfo::default(),
        )
        .with_daemon_port(10250);
        let status = reg.status_without_conditions();
        let addresses = status.addresses.expect("addresses");
        assert_eq!(addresses[0].type_, "InternalIP");
        assert_eq!(addresses[0].address, "10.0.0.1");
        assert_eq!(addresses[1].address, "n1");
        let port = status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port);
        assert_eq!(port, Some(10250));
    }
}
