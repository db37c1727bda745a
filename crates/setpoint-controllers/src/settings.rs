//! Tunables of the built-in loops, with kube-controller-manager's defaults.

use std::path::PathBuf;
use std::time::Duration;

/// Tunables of the built-in loops. `Default` gives kube-controller-manager's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopSettings {
    /// How long a node may stay silent (no Lease renewal, no status update) before it is
    /// marked `Ready=Unknown` and tainted unreachable (`--node-monitor-grace-period`, 40 s).
    pub node_monitor_grace_period: Duration,
    /// How often each HorizontalPodAutoscaler (and PIDAutoscaler) is evaluated
    /// (`--horizontal-pod-autoscaler-sync-period`, 15 s).
    pub hpa_sync_period: Duration,
    /// The CA bundle (PEM) that verifies the API server, published in every namespace as
    /// `kube-root-ca.crt` (`--root-ca-file`); none publishes nothing.
    pub root_ca: Option<String>,
    /// The most endpoints one EndpointSlice holds (`--max-endpoints-per-slice`, 100).
    pub max_endpoints_per_slice: usize,
    /// The range node IPAM cuts the Nodes' pod ranges from (`--cluster-cidr`,
    /// `10.244.0.0/16`); `None` assigns none.
    pub cluster_cidr: Option<setpoint_core::cidr::Ipv4Cidr>,
    /// The prefix length of each Node's pod range (`--node-cidr-mask-size`, 24).
    pub node_cidr_mask_size: u8,
    /// The CA the certificate signer signs approved CertificateSigningRequests with
    /// (`--cluster-signing-cert-file`/`--cluster-signing-key-file`); `None` signs nothing.
    pub signing_ca: Option<crate::SigningCa>,
    /// The longest a signed certificate lasts (`--cluster-signing-duration`, one year).
    pub cluster_signing_duration: Duration,
    /// Where the GitOps loops keep their git mirrors and artifacts (`setpoint server`:
    /// `<data dir>/gitops`); `None`, a fresh directory under the system's temporary directory.
    pub gitops_dir: Option<PathBuf>,
    /// The providers' tunables (`setpoint server`: their directory is
    /// `<data dir>/providers`).
    pub providers: setpoint_providers::ProviderSettings,
}

impl Default for LoopSettings {
    fn default() -> LoopSettings {
        LoopSettings {
            node_monitor_grace_period: Duration::from_secs(40),
            hpa_sync_period: Duration::from_secs(15),
            root_ca: None,
            max_endpoints_per_slice: 100,
            cluster_cidr: Some(setpoint_core::cidr::Ipv4Cidr::DEFAULT_CLUSTER),
            node_cidr_mask_size: 24,
            signing_ca: None,
            cluster_signing_duration: Duration::from_secs(365 * 24 * 3600),
            gitops_dir: None,
            providers: setpoint_providers::ProviderSettings::default(),
        }
    }
}
