//! Setpoint's built-in control loops. Each is a separate controller written with the SDK
//! (`setpoint-runtime`) that talks to the API only through its [`Client`]: no loop calls
//! another, and every one of them could run against any Kubernetes API server.
//!
//! The GitOps loops of `setpoint-gitops` (`gitops-source`, `gitops-sync`) run here too, as
//! built-in loops, and so do the providers of `setpoint-providers` and Cluster API
//! (`setpoint-capi`, the `cluster-api` loop).
//!
//! `setpoint server` starts the enabled loops in-process ([`run`]); each can be switched off by
//! name (`--controllers=*,-garbage-collector`, as kube-controller-manager's flag works).

mod capi;
mod certificates;

mod cronjob;
mod daemonset;
mod deployment;
mod disruption;
mod endpointslice;
mod garbage_collector;
mod gitops;
mod history;
mod hpa;
mod identity;
mod job;
mod loops;
mod namespace;
mod namespace_defaults;
mod node_lifecycle;
mod nodeipam;
mod owned_pods;
mod pid_autoscaler;
mod pod_state;
mod providers;
mod replicaset;
mod resourcequota;
mod scheduler;
mod semantic;
mod settings;
mod statefulset;
mod ttl_after_finished;
mod volume;

pub use certificates::{issue_client_certificate, IssueError, SigningCa};
pub use identity::LoopClients;
pub use loops::{run, Loop, LoopError, LoopSelection, UnknownLoop};
pub use pid_autoscaler::{
    Gains, PIDAutoscaler, PidAutoscalerSpec, PidAutoscalerStatus, Terms as PidTerms,
};
pub use setpoint_runtime::Clock;
pub use settings::LoopSettings;
pub use volume::{
    DEFAULT_CLASS_ANNOTATION, LOCAL_PATH_CLEANUP, LOCAL_PATH_PROVISIONER, LOCAL_PATH_ROOT,
};

use setpoint_runtime::{Client, InformerFactory, Metrics};

/// What every loop gets: a client and the informer factory all loops of the process share, so
/// one watch per resource serves all of them.
#[derive(Clone, Debug)]
pub struct LoopContext {
    /// Where writes go.
    pub client: Client,
    /// Shared informers.
    pub factory: InformerFactory,
    /// Tunables (grace periods, …), as kube-controller-manager's flags set them.
    pub settings: LoopSettings,
    /// Where the loops' controllers, queues and informers report (`/metrics`).
    pub metrics: Metrics,
    /// The time the time-driven loops (CronJob) go by.
    pub clock: Clock,
    /// The client each loop writes with, when loops act as identities of their own
    /// (`identity.rs`); unset, every loop writes with `client`.
    pub clients: Option<LoopClients>,
}

impl LoopContext {
    /// A context over `client` with a fresh informer factory.
    pub fn new(client: Client) -> LoopContext {
        LoopContext {
            factory: InformerFactory::new(client.clone()),
            client,
            settings: LoopSettings::default(),
            metrics: Metrics::new(),
            clock: Clock::real(),
            clients: None,
        }
    }

    /// The same context whose loops each write with the client `clients` makes for them
    /// (the informers keep reading with `client`).
    pub fn with_clients(mut self, clients: LoopClients) -> LoopContext {
        self.clients = Some(clients);
        self
    }

    /// The context loop `l` runs with: `client` is the one it writes with.
    fn for_loop(mut self, l: Loop) -> LoopContext {
        if let Some(clients) = &self.clients {
            self.client = clients.client_for(l);
        }
        self
    }

    /// The same context reporting to `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> LoopContext {
        self.metrics = metrics;
        self
    }

    /// The same context on another clock (a manual one, in tests).
    pub fn with_clock(mut self, clock: Clock) -> LoopContext {
        self.clock = clock;
        self
    }

    /// The same context with other settings.
    pub fn with_settings(mut self, settings: LoopSettings) -> LoopContext {
        self.settings = settings;
        self
    }
}
