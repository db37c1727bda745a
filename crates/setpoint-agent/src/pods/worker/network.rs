//! The worker's part of pod networking: set up the pod's own network before its containers
//! start (bridge mode, not `hostNetwork`), remove it with the pod, and the addresses and
//! `/etc` files the containers get.

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::Worker;

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

impl Worker {
    /// Makes sure the pod has its network; false (with a `FailedCreatePodSandBox` event per
    /// distinct error) while it cannot be set up: no container starts without it.
    pub(super) async fn ensure_network(&mut self, pod: &Arc<Pod>) -> bool {
        let Some(network) = self.ctx.network.clone() else {
            return true;
        };
        if host_network(pod) || self.pod_network.is_some() {
            return true;
        }
        let uid = self.uid.clone();
        let added = tokio::task::spawn_blocking(move || network.add_pod(&uid)).await;
        let error = match added {
            Ok(Ok(net)) => {
                tracing::debug!(pod = %self.label, ip = %net.ip, "pod network set up");
                self.pod_network = Some(net);
                self.network_error = None;
                return true;
            }
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        if self.network_error.as_deref() != Some(error.as_str()) {
            tracing::warn!(pod = %self.label, %error, "setting up the pod's network");
            self.ctx.events.publish_for(
                &**pod,
                setpoint_runtime::EventDetails::warning("FailedCreatePodSandBox", "Network")
                    .with_note(format!("Failed to create pod sandbox: {error}")),
            );
            self.network_error = Some(error);
        }
        false
    }

    /// Removes the pod's network (its processes are stopped).
    pub(super) async fn remove_network(&mut self) {
        self.pod_network = None;
        let Some(network) = self.ctx.network.clone() else {
            return;
        };
        let uid = self.uid.clone();
        let _ = tokio::task::spawn_blocking(move || network.remove_pod(&uid)).await;
    }

    /// Removes the network of a pod that has finished (Succeeded or Failed, nothing running),
    /// as the kubelet removes a finished pod's sandbox: its address goes back to the range
    /// (the status keeps showing it).
    pub(super) async fn release_network_when_finished(&mut self) {
        if self.terminal
            && self.pod_network.is_some()
            && self
                .init
                .iter()
                .chain(self.main.iter())
                .all(|s| s.running_process().is_none())
        {
            self.remove_network().await;
        }
    }

    /// Where the pod's ports are: its own address, else the node's.
    pub(super) fn pod_ip(&self) -> IpAddr {
        self.pod_network
            .as_ref()
            .map_or(self.ctx.node_ip, |n| IpAddr::V4(n.ip))
    }

    /// The `podIP` to report: none while the pod waits for its own network.
    pub(super) fn reported_pod_ip(&self, pod: &Pod) -> Option<IpAddr> {
        if self.ctx.network.is_some() && !host_network(pod) && self.pod_network.is_none() {
            return None;
        }
        Some(self.pod_ip())
    }

    /// Adds the pod's `/etc/hosts`, `/etc/hostname` and `/etc/resolv.conf` to the container's
    /// mounts (bridge mode with mount namespaces), unless the container mounts something
    /// there itself.
    pub(super) fn add_network_files(
        &self,
        pod: &Pod,
        container: &Container,
        mounts: &mut Vec<crate::volumes::MountSpec>,
    ) {
        let Some(network) = &self.ctx.network else {
            return;
        };
        if !self.ctx.volumes.mounts {
            return;
        }
        let written = crate::network::files::write(
            pod,
            &self.dir,
            self.pod_ip(),
            Some(IpAddr::V4(network.gateway)),
        );
        match written {
            Ok(files) => {
                let own: Vec<_> = container
                    .volume_mounts
                    .iter()
                    .flatten()
                    .map(|m| std::path::PathBuf::from(&m.mount_path))
                    .collect();
                mounts.extend(files.into_iter().filter(|f| !own.contains(&f.target)));
            }
            Err(e) => {
                tracing::warn!(pod = %self.label, error = %e, "writing the pod's /etc files");
            }
        }
    }
}
