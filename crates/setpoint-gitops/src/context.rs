//! What the GitOps loops run with: where they write, the shared informers, where they report,
//! and the artifact store the source loop fills and the sync loop reads.

use setpoint_runtime::{Client, InformerFactory, Metrics};

use crate::ArtifactStore;

/// The context both GitOps loops run in (built by `setpoint-controllers` from its own, or by a
/// standalone process from a kubeconfig).
#[derive(Clone)]
pub struct GitopsContext {
    /// Where the loop writes (its own identity in `setpoint server`).
    pub client: Client,
    /// Shared informers (they read with the process's client).
    pub factory: InformerFactory,
    /// Where controllers, queues and informers report (`/metrics`).
    pub metrics: Metrics,
    /// Artifacts: written by the source loop, read by the sync loop.
    pub artifacts: ArtifactStore,
}
