//! The cluster DNS resolver (CoreDNS's `kubernetes` plugin's part of the agent): answers
//! names of the cluster domain from the agent's Service and EndpointSlice caches, over UDP
//! and TCP on one address (the pod bridge's gateway on port 53 when pods have their own
//! network, or a configured address). Records: [`records`]; sockets: [`server`]. Names
//! outside the cluster domain are forwarded to the node's upstream resolvers ([`forward`]),
//! or REFUSED when there are none (see `docs/design/services.md`, "Cluster DNS").

pub(crate) mod forward;
pub(crate) mod records;
pub(crate) mod server;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use setpoint_runtime::ObjectKey;

use crate::proxy::model::SERVICE_NAME_LABEL;
use crate::proxy::ServiceInformers;

impl records::Directory for ServiceInformers {
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services
            .store()
            .get(&ObjectKey::namespaced(namespace, name))
    }

    fn slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>> {
        self.slices
            .store()
            .list_namespace(namespace)
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .map(String::as_str)
                    == Some(service)
            })
            .collect()
    }
}
