//! The pod network benchmark's measurement (`setpoint bench pod-network`): set up and tear
//! down the network of `n` pods on a bridge of its own, timing each pod.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use setpoint_core::cidr::Ipv4Cidr;

use super::NodeNetwork;

/// What one run measured: per pod, the setup (namespace, veth, address, routes) and the
/// teardown.
#[derive(Debug, Clone, Default)]
pub struct PodNetworkTimes {
    /// Setup time of each pod, in order.
    pub setup: Vec<Duration>,
    /// Teardown time of each pod, in order.
    pub teardown: Vec<Duration>,
}

/// Sets up and tears down the network of `pods` pods in `pod_cidr` under `root` (a scratch
/// directory), with `shim` pinning namespaces; removes the bridge afterwards. Needs root.
pub fn bench_pod_network(
    root: &Path,
    pod_cidr: Ipv4Cidr,
    pods: usize,
    shim: Vec<OsString>,
) -> Result<PodNetworkTimes, String> {
    if !rustix::process::geteuid().is_root() {
        return Err("needs root (network namespaces, a bridge)".to_owned());
    }
    let network = NodeNetwork::start(root, "bench", pod_cidr, shim).map_err(|e| e.to_string())?;
    let uids: Vec<String> = (0..pods)
        .map(|i| format!("00000000-0000-4000-8000-{i:012x}"))
        .collect();
    let mut times = PodNetworkTimes::default();
    let mut result = Ok(());
    for uid in &uids {
        let start = Instant::now();
        if let Err(e) = network.add_pod(uid) {
            result = Err(e.to_string());
            break;
        }
        times.setup.push(start.elapsed());
    }
    for uid in &uids {
        let start = Instant::now();
        network.remove_pod(uid);
        times.teardown.push(start.elapsed());
    }
    super::remove_all(root);
    result.map(|()| times)
}
