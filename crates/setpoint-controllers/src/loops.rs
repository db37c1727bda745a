//! The list of built-in loops, selection by name, and running the selected ones together.

use std::fmt;
use std::str::FromStr;

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// A built-in control loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loop {
    /// Deletes everything in a `Terminating` namespace, then finalizes it.
    Namespace,
    /// Deletes dependents whose owners are gone; carries out foreground and orphan deletion.
    GarbageCollector,
    /// Keeps each ReplicaSet's pods at its replica count.
    ReplicaSet,
    /// Rolls each Deployment's template out through ReplicaSets.
    Deployment,
    /// Runs each Job's pods to completion.
    Job,
    /// Deletes finished Jobs once their `ttlSecondsAfterFinished` has passed.
    TtlAfterFinished,
    /// Creates Jobs from CronJobs on their schedules.
    CronJob,
    /// Binds unscheduled pods to nodes.
    Scheduler,
    /// Marks silent nodes unreachable and evicts their pods.
    NodeLifecycle,
    /// Scales the targets of HorizontalPodAutoscalers to their metrics.
    HorizontalPodAutoscaler,
    /// Scales the targets of PIDAutoscalers with a PID law (installs their CRD).
    PidAutoscaler,
    /// Keeps each PodDisruptionBudget's status (the disruptions evictions may spend) true.
    Disruption,
    /// Creates the `default` ServiceAccount in every namespace.
    ServiceAccount,
    /// Publishes the cluster CA bundle as `kube-root-ca.crt` in every namespace.
    RootCaPublisher,
    /// Keeps each StatefulSet's ordinal pods and their claims, rolls them by revision.
    StatefulSet,
    /// Runs one pod of each DaemonSet on every eligible node, rolls them by revision.
    DaemonSet,
    /// Binds PersistentVolumeClaims to PersistentVolumes and reclaims released volumes.
    PersistentVolumeBinder,
    /// Provisions `setpoint.dev/local-path` volumes on the node chosen for their claim.
    LocalPathProvisioner,
    /// Keeps claims in use by pods (`kubernetes.io/pvc-protection`).
    PvcProtection,
    /// Keeps bound volumes (`kubernetes.io/pv-protection`).
    PvProtection,
    /// Counts what each ResourceQuota's namespace uses into its status.
    ResourceQuota,
    /// Keeps each ReplicationController's pods at its replica count.
    ReplicationController,
    /// Keeps each selector Service's EndpointSlices (`discovery.k8s.io/v1`).
    EndpointSlice,
    /// Keeps each selector Service's legacy `Endpoints`.
    Endpoint,
    /// Gives each Node a pod range (`spec.podCIDR`) from the cluster CIDR.
    NodeIpam,
    /// Signs approved CertificateSigningRequests of the built-in signers with the cluster CA.
    CsrSigning,
    /// Approves node agents' client CertificateSigningRequests their requester may make.
    CsrApproving,
    /// Deletes old CertificateSigningRequests.
    CsrCleaner,
    /// Resolves each GitRepository to a commit and exports its files as an artifact (installs
    /// the GitRepository CRD; `setpoint-gitops`).
    GitopsSource,
    /// Applies each Sync's path of its source's artifact, prunes, checks health and corrects
    /// drift (installs the Sync CRD; `setpoint-gitops`).
    GitopsSync,
    /// Runs a balancer process for each `LoadBalancer` Service, on an address from the pool,
    /// forwarding to its ready endpoints (`setpoint-providers`).
    ServiceLb,
    /// Reconciles PostgreSQL Databases, Roles and Grants with the servers their ProviderConfigs
    /// name (installs their CRDs; `setpoint-providers`).
    ProviderPostgresql,
    /// Issues Certificates from Issuers and ClusterIssuers into Secrets and files, and renews
    /// them (installs cert-manager's CRDs; `setpoint-providers`).
    CertManager,
    /// Cluster API: installs the CRDs of `cluster.x-k8s.io/v1beta2` (Cluster, Machine,
    /// MachineSet, MachineDeployment, MachineHealthCheck); its controllers are not written yet
    /// (`setpoint-capi`). Off by default ([`Loop::OFF_BY_DEFAULT`]).
    ClusterApi,
}

impl Loop {
    /// Every loop, in start order.
    pub const ALL: &'static [Loop] = &[
        Loop::Namespace,
        Loop::GarbageCollector,
        Loop::ReplicaSet,
        Loop::Deployment,
        Loop::Job,
        Loop::TtlAfterFinished,
        Loop::CronJob,
        Loop::Scheduler,
        Loop::NodeLifecycle,
        Loop::HorizontalPodAutoscaler,
        Loop::PidAutoscaler,
        Loop::Disruption,
        Loop::ServiceAccount,
        Loop::RootCaPublisher,
        Loop::StatefulSet,
        Loop::DaemonSet,
        Loop::PersistentVolumeBinder,
        Loop::LocalPathProvisioner,
        Loop::PvcProtection,
        Loop::PvProtection,
        Loop::ResourceQuota,
        Loop::ReplicationController,
        Loop::EndpointSlice,
        Loop::Endpoint,
        Loop::NodeIpam,
        Loop::CsrSigning,
        Loop::CsrApproving,
        Loop::CsrCleaner,
        Loop::GitopsSource,
        Loop::GitopsSync,
        Loop::ServiceLb,
        Loop::ProviderPostgresql,
        Loop::CertManager,
        Loop::ClusterApi,
    ];

    /// Loops that `*` leaves out: they run only when named (`*,cluster-api`), as
    /// kube-controller-manager's disabled-by-default controllers. `cluster-api`: its five CRDs
    /// would lengthen every server's start-up (the API server establishes CRDs one at a time,
    /// about a second each in a debug build) while nothing acts on them yet.
    pub const OFF_BY_DEFAULT: &'static [Loop] = &[Loop::ClusterApi];

    /// Whether `*` selects this loop.
    pub fn on_by_default(self) -> bool {
        !Loop::OFF_BY_DEFAULT.contains(&self)
    }

    /// The loop's name on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            Loop::Namespace => "namespace",
            Loop::GarbageCollector => "garbage-collector",
            Loop::ReplicaSet => "replicaset",
            Loop::Deployment => "deployment",
            Loop::Job => "job",
            Loop::TtlAfterFinished => "ttl-after-finished",
            Loop::CronJob => "cronjob",
            Loop::Scheduler => "scheduler",
            Loop::NodeLifecycle => "node-lifecycle",
            Loop::HorizontalPodAutoscaler => "horizontal-pod-autoscaler",
            Loop::PidAutoscaler => "pid-autoscaler",
            Loop::Disruption => "disruption",
            Loop::ServiceAccount => "serviceaccount",
            Loop::RootCaPublisher => "root-ca-cert-publisher",
            Loop::StatefulSet => "statefulset",
            Loop::DaemonSet => "daemonset",
            Loop::PersistentVolumeBinder => "persistentvolume-binder",
            Loop::LocalPathProvisioner => "local-path-provisioner",
            Loop::PvcProtection => "pvc-protection",
            Loop::PvProtection => "pv-protection",
            Loop::ResourceQuota => "resourcequota",
            Loop::ReplicationController => "replicationcontroller",
            Loop::EndpointSlice => "endpointslice",
            Loop::Endpoint => "endpoint",
            Loop::NodeIpam => "node-ipam",
            Loop::CsrSigning => "csrsigning",
            Loop::CsrApproving => "csrapproving",
            Loop::CsrCleaner => "csrcleaner",
            Loop::GitopsSource => "gitops-source",
            Loop::GitopsSync => "gitops-sync",
            Loop::ServiceLb => "service-lb",
            Loop::ProviderPostgresql => "provider-postgresql",
            Loop::CertManager => "cert-manager",
            Loop::ClusterApi => "cluster-api",
        }
    }

    async fn run(
        self,
        ctx: LoopContext,
        shutdown: CancellationToken,
    ) -> Result<(), ControllerError> {
        let ctx = ctx.for_loop(self);
        match self {
            Loop::Namespace => crate::namespace::run(ctx, shutdown).await,
            Loop::GarbageCollector => crate::garbage_collector::run(ctx, shutdown).await,
            Loop::ReplicaSet => crate::replicaset::run(ctx, shutdown).await,
            Loop::Deployment => crate::deployment::run(ctx, shutdown).await,
            Loop::Job => crate::job::run(ctx, shutdown).await,
            Loop::TtlAfterFinished => crate::ttl_after_finished::run(ctx, shutdown).await,
            Loop::CronJob => crate::cronjob::run(ctx, shutdown).await,
            Loop::Scheduler => crate::scheduler::run(ctx, shutdown).await,
            Loop::NodeLifecycle => crate::node_lifecycle::run(ctx, shutdown).await,
            Loop::HorizontalPodAutoscaler => crate::hpa::run(ctx, shutdown).await,
            Loop::PidAutoscaler => crate::pid_autoscaler::run(ctx, shutdown).await,
            Loop::Disruption => crate::disruption::run(ctx, shutdown).await,
            Loop::ServiceAccount => {
                crate::namespace_defaults::service_account::run(ctx, shutdown).await
            }
            Loop::RootCaPublisher => crate::namespace_defaults::root_ca::run(ctx, shutdown).await,
            Loop::StatefulSet => crate::statefulset::run(ctx, shutdown).await,
            Loop::DaemonSet => crate::daemonset::run(ctx, shutdown).await,
            Loop::PersistentVolumeBinder => crate::volume::binder::run(ctx, shutdown).await,
            Loop::LocalPathProvisioner => crate::volume::provisioner::run(ctx, shutdown).await,
            Loop::PvcProtection => crate::volume::protection::run_claims(ctx, shutdown).await,
            Loop::PvProtection => crate::volume::protection::run_volumes(ctx, shutdown).await,
            Loop::ResourceQuota => crate::resourcequota::run(ctx, shutdown).await,
            Loop::ReplicationController => {
                crate::replicaset::run_replication_controllers(ctx, shutdown).await
            }
            Loop::EndpointSlice => crate::endpointslice::run(ctx, shutdown).await,
            Loop::Endpoint => crate::endpointslice::run_endpoints(ctx, shutdown).await,
            Loop::NodeIpam => crate::nodeipam::run(ctx, shutdown).await,
            Loop::CsrSigning => crate::certificates::run_signer(ctx, shutdown).await,
            Loop::CsrApproving => crate::certificates::run_approver(ctx, shutdown).await,
            Loop::CsrCleaner => crate::certificates::run_cleaner(ctx, shutdown).await,
            Loop::GitopsSource => {
                setpoint_gitops::source::run(crate::gitops::context(&ctx), shutdown).await
            }
            Loop::GitopsSync => {
                setpoint_gitops::sync::run(crate::gitops::context(&ctx), shutdown).await
            }
            Loop::ServiceLb => {
                setpoint_providers::lb::run(crate::providers::context(&ctx), shutdown).await
            }
            Loop::ProviderPostgresql => {
                setpoint_providers::postgres::run(crate::providers::context(&ctx), shutdown).await
            }
            Loop::CertManager => {
                setpoint_providers::certs::run(crate::providers::context(&ctx), shutdown).await
            }
            Loop::ClusterApi => setpoint_capi::run(crate::capi::context(&ctx), shutdown).await,
        }
    }
}

impl fmt::Display for Loop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A loop name that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("unknown controller {name:?}; known: {known}")]
pub struct UnknownLoop {
    name: String,
    known: String,
}

/// Which loops run: a comma-separated list of names, `*` for every loop on by default (all but
/// [`Loop::OFF_BY_DEFAULT`]), `-name` to leave one out (`*,-namespace`), `name` to add one
/// (`*,cluster-api`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopSelection(Vec<Loop>);

impl LoopSelection {
    /// Every loop on by default: what `*` selects.
    pub fn all() -> LoopSelection {
        LoopSelection(
            Loop::ALL
                .iter()
                .copied()
                .filter(|l| l.on_by_default())
                .collect(),
        )
    }

    /// The selected loops, in start order.
    pub fn loops(&self) -> &[Loop] {
        &self.0
    }
}

impl FromStr for LoopSelection {
    type Err = UnknownLoop;

    fn from_str(s: &str) -> Result<LoopSelection, UnknownLoop> {
        let lookup = |name: &str| {
            Loop::ALL
                .iter()
                .copied()
                .find(|l| l.name() == name)
                .ok_or_else(|| UnknownLoop {
                    name: name.to_owned(),
                    known: Loop::ALL
                        .iter()
                        .map(|l| l.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        };
        let mut selected: Vec<Loop> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "*" {
                selected = LoopSelection::all().0;
            } else if let Some(name) = part.strip_prefix('-') {
                let l = lookup(name)?;
                selected.retain(|x| *x != l);
            } else {
                let l = lookup(part)?;
                if !selected.contains(&l) {
                    selected.push(l);
                }
            }
        }
        selected.sort();
        Ok(LoopSelection(selected))
    }
}

/// Why a loop stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("controller {name}: {source}")]
pub struct LoopError {
    /// The loop.
    pub name: &'static str,
    /// What went wrong.
    #[source]
    pub source: ControllerError,
}

/// Runs the selected loops until `shutdown` is cancelled; each stops gracefully (reconciles in
/// flight finish). Returns the first loop error, after every loop has stopped.
pub async fn run(
    ctx: LoopContext,
    selection: &LoopSelection,
    shutdown: CancellationToken,
) -> Result<(), LoopError> {
    let ctx = crate::gitops::with_artifact_dir(ctx, selection);
    let mut tasks = tokio::task::JoinSet::new();
    for &l in selection.loops() {
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move { (l, l.run(ctx, shutdown).await) });
        tracing::info!(controller = %l, "started");
    }
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((_, Ok(()))) => {}
            Ok((l, Err(source))) => {
                tracing::error!(controller = %l, error = %source, "controller stopped");
                first_error.get_or_insert(LoopError {
                    name: l.name(),
                    source,
                });
            }
            Err(e) => tracing::error!(error = %e, "controller task failed"),
        }
    }
    ctx.factory.shut_down();
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_should_parse_star_and_exclusions() {
        let all: LoopSelection = "*".parse().expect("parses");
        assert_eq!(all, LoopSelection::all());
        let every_one_out: Vec<String> =
            Loop::ALL.iter().map(|l| format!("-{}", l.name())).collect();
        let none: LoopSelection = format!("*,{}", every_one_out.join(","))
            .parse()
            .expect("parses");
        assert!(none.loops().is_empty());
        assert!(!all.loops().contains(&Loop::ClusterApi));
        let with_capi: LoopSelection = "*,cluster-api".parse().expect("parses");
        assert_eq!(with_capi.loops().len(), all.loops().len() + 1);
        assert!(with_capi.loops().contains(&Loop::ClusterApi));
        let err = "nope".parse::<LoopSelection>().expect_err("unknown");
        assert!(err.to_string().contains("namespace"), "{err}");
    }
}
