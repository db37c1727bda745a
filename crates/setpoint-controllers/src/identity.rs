//! Which identity each built-in loop writes as. kube-controller-manager with
//! `--use-service-account-credentials` gives every controller a ServiceAccount of its own in
//! `kube-system` (`deployment-controller`, `replicaset-controller`, …) and reads through its
//! shared informers with its own credential; [`Loop::service_account`] names those accounts,
//! and a [`LoopClients`] in the [`crate::LoopContext`] makes the client of each loop. How a
//! client acts as someone is the embedding process's business: `setpoint server` builds
//! in-process clients for each user; a process with a kubeconfig keeps the kubeconfig's one
//! identity for every loop (the default: [`LoopClients`] unset).

use std::fmt;
use std::sync::Arc;

use setpoint_runtime::Client;

use crate::Loop;

/// Makes the client each loop writes with.
#[derive(Clone)]
pub struct LoopClients(Arc<dyn Fn(Loop) -> Client + Send + Sync>);

impl LoopClients {
    /// Clients made by `make` for each loop.
    pub fn new(make: impl Fn(Loop) -> Client + Send + Sync + 'static) -> LoopClients {
        LoopClients(Arc::new(make))
    }

    /// The client `l` writes with.
    pub fn client_for(&self, l: Loop) -> Client {
        (self.0)(l)
    }
}

impl fmt::Debug for LoopClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoopClients(..)")
    }
}

impl Loop {
    /// The `kube-system` ServiceAccount kube-controller-manager runs this controller as, or
    /// for the loops kube has not, ours (`pid-autoscaler`, `local-path-provisioner`). The
    /// scheduler is not a controller-manager loop: `kube-scheduler`, whose user is
    /// `system:kube-scheduler`, not a ServiceAccount.
    pub fn service_account(self) -> &'static str {
        match self {
            Loop::Namespace => "namespace-controller",
            Loop::GarbageCollector => "generic-garbage-collector",
            Loop::ReplicaSet => "replicaset-controller",
            Loop::Deployment => "deployment-controller",
            Loop::Job => "job-controller",
            Loop::TtlAfterFinished => "ttl-after-finished-controller",
            Loop::CronJob => "cronjob-controller",
            Loop::Scheduler => "kube-scheduler",
            Loop::NodeLifecycle => "node-controller",
            Loop::HorizontalPodAutoscaler => "horizontal-pod-autoscaler",
            Loop::PidAutoscaler => "pid-autoscaler",
            Loop::Disruption => "disruption-controller",
            Loop::ServiceAccount => "service-account-controller",
            Loop::RootCaPublisher => "root-ca-cert-publisher",
            Loop::StatefulSet => "statefulset-controller",
            Loop::DaemonSet => "daemon-set-controller",
            Loop::PersistentVolumeBinder => "persistent-volume-binder",
            Loop::LocalPathProvisioner => "local-path-provisioner",
            Loop::PvcProtection => "pvc-protection-controller",
            Loop::PvProtection => "pv-protection-controller",
            Loop::ResourceQuota => "resourcequota-controller",
            Loop::ReplicationController => "replication-controller",
            Loop::EndpointSlice => "endpointslice-controller",
            Loop::Endpoint => "endpoint-controller",
            Loop::NodeIpam => "node-ipam-controller",
            // kube-controller-manager runs its three CSR controllers as one ServiceAccount.
            Loop::CsrSigning | Loop::CsrApproving | Loop::CsrCleaner => "certificate-controller",
            Loop::GitopsSource => "gitops-source",
            Loop::GitopsSync => "gitops-sync",
            Loop::ServiceLb => "service-lb-controller",
            Loop::ProviderPostgresql => "provider-postgresql",
            Loop::CertManager => "cert-manager",
            Loop::ClusterApi => "cluster-api",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_loop_should_have_its_own_service_account() {
        // …except the CSR loops, which share kube's `certificate-controller`.
        let mut names: Vec<&str> = Loop::ALL.iter().map(|l| l.service_account()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Loop::ALL.len() - 2);
        let csr = [Loop::CsrSigning, Loop::CsrApproving, Loop::CsrCleaner];
        assert!(csr
            .iter()
            .all(|l| l.service_account() == "certificate-controller"));
    }
}
