//! What the Cluster API loop runs with: where it writes, the shared informers, where it
//! reports, and the clock its timeouts will be measured by.

use setpoint_runtime::{Client, Clock, InformerFactory, Metrics};

/// The context the `cluster-api` loop runs in (built by `setpoint-controllers` from its own,
/// or by a standalone process from a kubeconfig).
#[derive(Clone)]
pub struct CapiContext {
    /// Where the loop writes (its own identity in `setpoint server`).
    pub client: Client,
    /// Shared informers (they read with the process's client).
    pub factory: InformerFactory,
    /// Where controllers, queues and informers report (`/metrics`).
    pub metrics: Metrics,
    /// The time node-startup, drain and health-check timeouts are measured by.
    pub clock: Clock,
}
