//! What the providers' loops run with: their client (their own identity in `setpoint
//! server`), the shared informers, where they report, the clock, and their settings.

use std::path::PathBuf;
use std::time::Duration;

use setpoint_runtime::{managed::DEFAULT_POLL_INTERVAL, Client, Clock, InformerFactory, Metrics};

use crate::lb::config::Forwarding;

/// The context a provider's loops run in (built by `setpoint-controllers` from its own, or by
/// a standalone process from a kubeconfig).
#[derive(Clone)]
pub struct ProviderContext {
    /// Where the loop writes (its own identity in `setpoint server`).
    pub client: Client,
    /// Shared informers (they read with the process's client).
    pub factory: InformerFactory,
    /// Where controllers, queues and informers report (`/metrics`).
    pub metrics: Metrics,
    /// The time certificates are issued and renewed by (tests use a manual clock).
    pub clock: Clock,
    /// Tunables.
    pub settings: ProviderSettings,
}

/// Tunables of the providers (`setpoint server` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSettings {
    /// How often each external object is observed when nothing changes
    /// (`--managed-poll-interval`, 1 minute).
    pub poll_interval: Duration,
    /// Where the providers keep their state on this machine (`<data dir>/providers`; the
    /// balancers' configurations and pid files); `None`, a fresh temporary directory.
    pub dir: Option<PathBuf>,
    /// The addresses LoadBalancer Services get, as `FIRST-LAST` or a CIDR
    /// (`--lb-address-pool`, default `127.0.100.1-127.0.100.254`: loopback, no root needed).
    pub lb_address_pool: String,
    /// The command that runs one balancer process (argv before its own arguments); `None`:
    /// this executable with `lb-proxy` (`setpoint lb-proxy`).
    pub lb_proxy_command: Option<Vec<String>>,
    /// Who moves a balancer's bytes (`--lb-forwarding`, default kernel: nftables DNAT where the
    /// kernel can, needing root and `nft`; user space for the rest).
    pub lb_forwarding: Forwarding,
}

impl Default for ProviderSettings {
    fn default() -> ProviderSettings {
        ProviderSettings {
            poll_interval: DEFAULT_POLL_INTERVAL,
            dir: None,
            lb_address_pool: "127.0.100.1-127.0.100.254".to_owned(),
            lb_proxy_command: None,
            lb_forwarding: Forwarding::Kernel,
        }
    }
}
