//! Descriptor tables for the `k8s.io/api/core/v1` (proto package `api.core.v1`) kinds other
//! than Pod (see `pod_v1.rs`): Namespace, ConfigMap, Secret, ServiceAccount and Service, as
//! kubectl's `create namespace|configmap|secret|serviceaccount|service` generators send them.
//! Field numbers are those of that package's `generated.proto`.
//!
//! Not decoded (a body carrying them is rejected): `ServiceSpec.sessionAffinityConfig` (14).

use super::meta_v1::{CONDITION, OBJECT_META};
use super::schema::{field, kept, list, map, Kind, Message};

/// `Namespace`.
pub(crate) static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&NAMESPACE_SPEC)),
        field(3, "status", Kind::Message(&NAMESPACE_STATUS)),
    ],
};

/// `NamespaceSpec`.
static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[list(1, "finalizers", Kind::String)],
};

/// `NamespaceStatus`.
static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        field(1, "phase", Kind::String),
        list(2, "conditions", Kind::Message(&NAMESPACE_CONDITION)),
    ],
};

/// `NamespaceCondition`.
static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        kept(1, "type", Kind::String),
        kept(2, "status", Kind::String),
        field(4, "lastTransitionTime", Kind::Time),
        field(5, "reason", Kind::String),
        field(6, "message", Kind::String),
    ],
};

/// `ConfigMap`.
pub(crate) static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        map(2, "data", Kind::String),
        map(3, "binaryData", Kind::Bytes),
        // *bool
        kept(4, "immutable", Kind::Bool),
    ],
};

/// `Secret`.
pub(crate) static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        map(2, "data", Kind::Bytes),
        field(3, "type", Kind::String),
        map(4, "stringData", Kind::String),
        // *bool
        kept(5, "immutable", Kind::Bool),
    ],
};

/// `ServiceAccount`.
pub(crate) static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        list(2, "secrets", Kind::Message(&OBJECT_REFERENCE)),
        list(
            3,
            "imagePullSecrets",
            Kind::Message(&LOCAL_OBJECT_REFERENCE),
        ),
        // *bool
        kept(4, "automountServiceAccountToken", Kind::Bool),
    ],
};

/// `ObjectReference`: every field `omitempty`.
static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        field(1, "kind", Kind::String),
        field(2, "namespace", Kind::String),
        field(3, "name", Kind::String),
        field(4, "uid", Kind::String),
        field(5, "apiVersion", Kind::String),
        field(6, "resourceVersion", Kind::String),
        field(7, "fieldPath", Kind::String),
    ],
};

/// `LocalObjectReference`. `name` is kept: the typed decoding requires it.
pub(crate) static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[kept(1, "name", Kind::String)],
};

/// `Service`.
pub(crate) static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&SERVICE_SPEC)),
        field(3, "status", Kind::Message(&SERVICE_STATUS)),
    ],
};

/// `ServiceSpec`. The `kept` strings and bools are Go pointers.
static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        list(1, "ports", Kind::Message(&SERVICE_PORT)),
        map(2, "selector", Kind::String),
        field(3, "clusterIP", Kind::String),
        field(4, "type", Kind::String),
        list(5, "externalIPs", Kind::String),
        field(7, "sessionAffinity", Kind::String),
        field(8, "loadBalancerIP", Kind::String),
        list(9, "loadBalancerSourceRanges", Kind::String),
        field(10, "externalName", Kind::String),
        field(11, "externalTrafficPolicy", Kind::String),
        field(12, "healthCheckNodePort", Kind::Int32),
        field(13, "publishNotReadyAddresses", Kind::Bool),
        kept(17, "ipFamilyPolicy", Kind::String),
        list(18, "clusterIPs", Kind::String),
        list(19, "ipFamilies", Kind::String),
        kept(20, "allocateLoadBalancerNodePorts", Kind::Bool),
        kept(21, "loadBalancerClass", Kind::String),
        kept(22, "internalTrafficPolicy", Kind::String),
        kept(23, "trafficDistribution", Kind::String),
    ],
};

/// `ServicePort`: `port` has no `omitempty`; `appProtocol` is a pointer.
static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        field(1, "name", Kind::String),
        field(2, "protocol", Kind::String),
        kept(3, "port", Kind::Int32),
        field(4, "targetPort", Kind::IntOrString),
        field(5, "nodePort", Kind::Int32),
        kept(6, "appProtocol", Kind::String),
    ],
};

/// `ServiceStatus`.
static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        field(1, "loadBalancer", Kind::Message(&LOAD_BALANCER_STATUS)),
        list(2, "conditions", Kind::Message(&CONDITION)),
    ],
};

/// `LoadBalancerStatus`.
static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[list(1, "ingress", Kind::Message(&LOAD_BALANCER_INGRESS))],
};

/// `LoadBalancerIngress`: `ipMode` is a pointer.
static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[
        field(1, "ip", Kind::String),
        field(2, "hostname", Kind::String),
        kept(3, "ipMode", Kind::String),
        list(4, "ports", Kind::Message(&PORT_STATUS)),
    ],
};

/// `PortStatus`: `port` and `protocol` have no `omitempty`; `error` is a pointer.
static PORT_STATUS: Message = Message {
    name: "PortStatus",
    fields: &[
        kept(1, "port", Kind::Int32),
        kept(2, "protocol", Kind::String),
        kept(3, "error", Kind::String),
    ],
};
