//! The clients `setpoint server`'s components act through, each as its own user
//! (`setpoint_apiserver::identities`): in the API server's process, every built-in loop writes
//! as its `kube-system` ServiceAccount, the loops' shared informers and their Lease as
//! `system:kube-controller-manager`, the scheduler as `system:kube-scheduler`, the local node
//! agent as `system:node:<node>`, the simulated nodes as `setpoint:simulated-nodes`; each
//! request is authorized as that user's would be over HTTPS. Without the apiserver role
//! (`--kubeconfig`), every component keeps the kubeconfig's one identity: give each process a
//! kubeconfig of the identity it should have (`setpoint kubeconfig …`).
//!
//! The ServiceAccount objects of the loops are not created: an in-process identity needs no
//! token, and kube-controller-manager's own accounts exist only to hold their tokens.

use std::sync::Arc;

use setpoint_apiserver::{identities, Api, User};
use setpoint_controllers::{Loop, LoopClients};
use setpoint_runtime::Client;

/// How the components get their clients.
#[derive(Clone)]
pub(crate) enum Identities {
    /// In the API server's process: an in-process client per user.
    InProcess(Arc<Api>),
    /// Through a kubeconfig: its identity for everything.
    Kubeconfig(Client),
}

impl Identities {
    /// A client acting as `user` (the kubeconfig's identity through a kubeconfig).
    fn client_as(&self, user: User) -> Client {
        match self {
            Identities::InProcess(api) => {
                let api = api.clone();
                Client::in_process(move |request| {
                    let api = api.clone();
                    let user = user.clone();
                    async move { api.handle_as(user, request).await }
                })
            }
            Identities::Kubeconfig(client) => client.clone(),
        }
    }

    /// The controller manager's client: its loops' shared informers and its Lease.
    pub(crate) fn controller_manager(&self) -> Client {
        self.client_as(identities::controller_manager_user())
    }

    /// The client of each controller-manager loop, writing as its ServiceAccount; `None`
    /// through a kubeconfig (every loop uses the kubeconfig's client).
    pub(crate) fn loops(&self) -> Option<LoopClients> {
        match self {
            Identities::InProcess(_) => {
                let this = self.clone();
                Some(LoopClients::new(move |l: Loop| {
                    this.client_as(identities::controller_user(l.service_account()))
                }))
            }
            Identities::Kubeconfig(_) => None,
        }
    }

    /// The scheduler's client (its informers, bindings and Lease).
    pub(crate) fn scheduler(&self) -> Client {
        self.client_as(identities::scheduler_user())
    }

    /// The client of the node agent of `node`.
    pub(crate) fn node(&self, node: &str) -> Client {
        self.client_as(identities::node_user(node))
    }

    /// The simulated nodes' client.
    pub(crate) fn simulated_nodes(&self) -> Client {
        self.client_as(identities::simulated_nodes_user())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_loop_should_have_a_bootstrap_role() {
        let mut loops: Vec<&str> = Loop::ALL
            .iter()
            .filter(|l| **l != Loop::Scheduler)
            .map(|l| l.service_account())
            .collect();
        let mut bound = identities::CONTROLLER_SERVICE_ACCOUNTS.to_vec();
        loops.sort_unstable();
        loops.dedup(); // the three CSR loops share `certificate-controller`, as in kube
        bound.sort_unstable();
        assert_eq!(loops, bound);
    }
}
