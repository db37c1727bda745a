//! The built-in kinds: one file each (a folder for a kind with more to it), holding what
//! discovery says about the kind and its [`Strategy`]. Adding a kind is adding its file and
//! one line to the `kinds!` list below; discovery, the REST paths, tables, field selectors
//! and the OpenAPI documents follow from it.

mod custom_resource_definition;

use std::sync::Arc;

use super::strategy::Strategy;
use super::ResourceDef;

/// Declares each kind's module and [`registered`], their resources in this order.
macro_rules! kinds {
    ($($kind:ident),* $(,)?) => {
        $(mod $kind;)*

        /// The resources of the kinds listed, in order.
        fn registered() -> Vec<ResourceDef> {
            [$($kind::resources()),*].into_iter().flatten().collect()
        }
    };
}

kinds! {
    namespace,
    pod,
    node,
    config_map,
    secret,
    service_account,
    service,
    event,
    lease,
    deployment,
    replica_set,
    hpa,
    limit_range,
    controller_revision,
    pod_disruption_budget,
    pod_template,
    replication_controller,
    resource_quota,
    persistent_volume,
    persistent_volume_claim,
    endpoints,
    stateful_set,
    daemon_set,
    job,
    cron_job,
    endpoint_slice,
    ingress,
    ingress_class,
    network_policy,
    service_cidr,
    ip_address,
    priority_class,
    storage_class,
    csi_driver,
    csi_node,
    csi_storage_capacity,
    volume_attachment,
    runtime_class,
    rbac,
    flowcontrol,
    certificate_signing_request,
    api_service,
    review,
    token_review,
    binding,
    validating_webhook_configuration,
    mutating_webhook_configuration,
    validating_admission_policy,
    validating_admission_policy_binding,
    component_status,
}

/// Subresources whose storage rules belong to one kind.
pub(crate) use component_status::{component_status, COMPONENTS, COMPONENT_STATUS_DEPRECATED};
pub(crate) use namespace::finalize as finalize_namespace;
pub(crate) use pod::{bind as bind_pod, evict as evict_pod};
pub(crate) use priority_class::{system_class, SYSTEM_CLASSES as SYSTEM_PRIORITY_CLASSES};
pub(crate) use service_cidr::{default_service_cidr, with_ready_condition, DEFAULT_SERVICE_CIDR};

/// The resources of the kinds above, without CustomResourceDefinitions (the OpenAPI
/// documents' typed schemas come from these).
pub(crate) fn registered_resources() -> Vec<ResourceDef> {
    registered()
}

/// Every built-in resource: the kinds above, then CustomResourceDefinitions, whose strategy
/// (`definitions`) `crd/` provides because it compiles their schemas.
pub(crate) fn builtin_resources(definitions: Arc<dyn Strategy>) -> Vec<ResourceDef> {
    let mut resources = registered();
    resources.extend(custom_resource_definition::resources(definitions));
    resources
}
