//! Descriptor tables for Pod and what it embeds (`k8s.io/api/core/v1`, proto package
//! `api.core.v1`): the pod spec and container fields kubectl's `run` and
//! `create deployment` generators can set, and the scalar parts of the status.
//! Field numbers are those of that package's `generated.proto`.
//!
//! Not decoded (a body carrying them is rejected with the field named): in `PodSpec`,
//! `volumes` (1), `securityContext` (14), `affinity` (18), `dnsConfig` (26),
//! `topologySpreadConstraints` (33), `ephemeralContainers` (34), `resourceClaims` (39),
//! `workloadRef` (42); in `Container`, probes (10, 11, 22), `lifecycle` (12), `envFrom` (19),
//! `volumeDevices` (21), `resizePolicy` (23), `restartPolicyRules` (25); `EnvVar.valueFrom`
//! (3); the nested parts of `SecurityContext` (1, 3, 10, 11, 12); and in `PodStatus`, the
//! container, claim and IP statuses and allocated resources (8, 10, 12, 13, 15, 16, 18, 19,
//! 20).

use super::core_v1::LOCAL_OBJECT_REFERENCE;
use super::meta_v1::OBJECT_META;
use super::schema::{field, kept, list, map, Kind, Message};

/// `Pod`.
pub(crate) static POD: Message = Message {
    name: "Pod",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&POD_SPEC)),
        field(3, "status", Kind::Message(&POD_STATUS)),
    ],
};

/// `PodTemplateSpec`.
pub(crate) static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&POD_SPEC)),
    ],
};

/// `PodSpec`. The `kept` scalars are Go pointers.
static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        list(2, "containers", Kind::Message(&CONTAINER)),
        field(3, "restartPolicy", Kind::String),
        kept(4, "terminationGracePeriodSeconds", Kind::Int64),
        kept(5, "activeDeadlineSeconds", Kind::Int64),
        field(6, "dnsPolicy", Kind::String),
        map(7, "nodeSelector", Kind::String),
        field(8, "serviceAccountName", Kind::String),
        field(9, "serviceAccount", Kind::String),
        field(10, "nodeName", Kind::String),
        field(11, "hostNetwork", Kind::Bool),
        field(12, "hostPID", Kind::Bool),
        field(13, "hostIPC", Kind::Bool),
        list(
            15,
            "imagePullSecrets",
            Kind::Message(&LOCAL_OBJECT_REFERENCE),
        ),
        field(16, "hostname", Kind::String),
        field(17, "subdomain", Kind::String),
        field(19, "schedulerName", Kind::String),
        list(20, "initContainers", Kind::Message(&CONTAINER)),
        kept(21, "automountServiceAccountToken", Kind::Bool),
        list(22, "tolerations", Kind::Message(&TOLERATION)),
        list(23, "hostAliases", Kind::Message(&HOST_ALIAS)),
        field(24, "priorityClassName", Kind::String),
        kept(25, "priority", Kind::Int32),
        kept(27, "shareProcessNamespace", Kind::Bool),
        list(28, "readinessGates", Kind::Message(&POD_READINESS_GATE)),
        kept(29, "runtimeClassName", Kind::String),
        kept(30, "enableServiceLinks", Kind::Bool),
        kept(31, "preemptionPolicy", Kind::String),
        map(32, "overhead", Kind::Quantity),
        kept(35, "setHostnameAsFQDN", Kind::Bool),
        field(36, "os", Kind::Message(&POD_OS)),
        kept(37, "hostUsers", Kind::Bool),
        list(38, "schedulingGates", Kind::Message(&POD_SCHEDULING_GATE)),
        field(40, "resources", Kind::Message(&RESOURCE_REQUIREMENTS)),
        kept(41, "hostnameOverride", Kind::String),
    ],
};

/// `Container`: `name` has no `omitempty`; `restartPolicy` is a pointer.
static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        kept(1, "name", Kind::String),
        field(2, "image", Kind::String),
        list(3, "command", Kind::String),
        list(4, "args", Kind::String),
        field(5, "workingDir", Kind::String),
        list(6, "ports", Kind::Message(&CONTAINER_PORT)),
        list(7, "env", Kind::Message(&ENV_VAR)),
        field(8, "resources", Kind::Message(&RESOURCE_REQUIREMENTS)),
        list(9, "volumeMounts", Kind::Message(&VOLUME_MOUNT)),
        field(13, "terminationMessagePath", Kind::String),
        field(14, "imagePullPolicy", Kind::String),
        field(15, "securityContext", Kind::Message(&SECURITY_CONTEXT)),
        field(16, "stdin", Kind::Bool),
        field(17, "stdinOnce", Kind::Bool),
        field(18, "tty", Kind::Bool),
        field(20, "terminationMessagePolicy", Kind::String),
        kept(24, "restartPolicy", Kind::String),
    ],
};

/// `ContainerPort`: `containerPort` has no `omitempty`.
static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        field(1, "name", Kind::String),
        field(2, "hostPort", Kind::Int32),
        kept(3, "containerPort", Kind::Int32),
        field(4, "protocol", Kind::String),
        field(5, "hostIP", Kind::String),
    ],
};

/// `EnvVar`: `name` has no `omitempty`.
static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        kept(1, "name", Kind::String),
        field(2, "value", Kind::String),
    ],
};

/// `ResourceRequirements`.
static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        map(1, "limits", Kind::Quantity),
        map(2, "requests", Kind::Quantity),
        list(3, "claims", Kind::Message(&RESOURCE_CLAIM)),
    ],
};

/// `ResourceClaim` (a container's claim on a pod resource claim).
static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[
        kept(1, "name", Kind::String),
        field(2, "request", Kind::String),
    ],
};

/// `VolumeMount`: `name` and `mountPath` have no `omitempty`; `mountPropagation` and
/// `recursiveReadOnly` are pointers.
static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        kept(1, "name", Kind::String),
        field(2, "readOnly", Kind::Bool),
        kept(3, "mountPath", Kind::String),
        field(4, "subPath", Kind::String),
        kept(5, "mountPropagation", Kind::String),
        field(6, "subPathExpr", Kind::String),
        kept(7, "recursiveReadOnly", Kind::String),
    ],
};

/// `SecurityContext`, its scalar fields (all Go pointers), as `kubectl run --privileged` sets.
static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        kept(2, "privileged", Kind::Bool),
        kept(4, "runAsUser", Kind::Int64),
        kept(5, "runAsNonRoot", Kind::Bool),
        kept(6, "readOnlyRootFilesystem", Kind::Bool),
        kept(7, "allowPrivilegeEscalation", Kind::Bool),
        kept(8, "runAsGroup", Kind::Int64),
        kept(9, "procMount", Kind::String),
    ],
};

/// `Toleration`: `tolerationSeconds` is a pointer.
static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        field(1, "key", Kind::String),
        field(2, "operator", Kind::String),
        field(3, "value", Kind::String),
        field(4, "effect", Kind::String),
        kept(5, "tolerationSeconds", Kind::Int64),
    ],
};

/// `HostAlias`.
static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[
        kept(1, "ip", Kind::String),
        list(2, "hostnames", Kind::String),
    ],
};

/// `PodReadinessGate`.
static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[kept(1, "conditionType", Kind::String)],
};

/// `PodSchedulingGate`.
static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[kept(1, "name", Kind::String)],
};

/// `PodOS`.
static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[kept(1, "name", Kind::String)],
};

/// `PodStatus`, its scalar fields and conditions.
static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        field(1, "phase", Kind::String),
        list(2, "conditions", Kind::Message(&POD_CONDITION)),
        field(3, "message", Kind::String),
        field(4, "reason", Kind::String),
        field(5, "hostIP", Kind::String),
        field(6, "podIP", Kind::String),
        field(7, "startTime", Kind::Time),
        field(9, "qosClass", Kind::String),
        field(11, "nominatedNodeName", Kind::String),
        field(14, "resize", Kind::String),
        field(17, "observedGeneration", Kind::Int64),
    ],
};

/// `PodCondition`.
static POD_CONDITION: Message = Message {
    name: "PodCondition",
    fields: &[
        kept(1, "type", Kind::String),
        kept(2, "status", Kind::String),
        field(3, "lastProbeTime", Kind::Time),
        field(4, "lastTransitionTime", Kind::Time),
        field(5, "reason", Kind::String),
        field(6, "message", Kind::String),
        field(7, "observedGeneration", Kind::Int64),
    ],
};
