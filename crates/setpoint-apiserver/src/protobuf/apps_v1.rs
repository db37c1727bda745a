//! Descriptor tables for Deployment (`k8s.io/api/apps/v1`, proto package `api.apps.v1`), as
//! `kubectl create deployment` sends it. Field numbers are those of that package's
//! `generated.proto`.

use super::meta_v1::{LABEL_SELECTOR, OBJECT_META};
use super::pod_v1::POD_TEMPLATE_SPEC;
use super::schema::{field, kept, list, Kind, Message};

/// `Deployment`.
pub(crate) static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&DEPLOYMENT_SPEC)),
        field(3, "status", Kind::Message(&DEPLOYMENT_STATUS)),
    ],
};

/// `DeploymentSpec`: `replicas`, `revisionHistoryLimit` and `progressDeadlineSeconds` are
/// pointers (an explicit 0 is kept).
static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        kept(1, "replicas", Kind::Int32),
        field(2, "selector", Kind::Message(&LABEL_SELECTOR)),
        field(3, "template", Kind::Message(&POD_TEMPLATE_SPEC)),
        field(4, "strategy", Kind::Message(&DEPLOYMENT_STRATEGY)),
        field(5, "minReadySeconds", Kind::Int32),
        kept(6, "revisionHistoryLimit", Kind::Int32),
        field(7, "paused", Kind::Bool),
        kept(9, "progressDeadlineSeconds", Kind::Int32),
    ],
};

/// `DeploymentStrategy`.
static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        field(1, "type", Kind::String),
        field(
            2,
            "rollingUpdate",
            Kind::Message(&ROLLING_UPDATE_DEPLOYMENT),
        ),
    ],
};

/// `RollingUpdateDeployment`: both fields are pointers.
static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        kept(1, "maxUnavailable", Kind::IntOrString),
        kept(2, "maxSurge", Kind::IntOrString),
    ],
};

/// `DeploymentStatus`: `terminatingReplicas` and `collisionCount` are pointers.
static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        field(1, "observedGeneration", Kind::Int64),
        field(2, "replicas", Kind::Int32),
        field(3, "updatedReplicas", Kind::Int32),
        field(4, "availableReplicas", Kind::Int32),
        field(5, "unavailableReplicas", Kind::Int32),
        list(6, "conditions", Kind::Message(&DEPLOYMENT_CONDITION)),
        field(7, "readyReplicas", Kind::Int32),
        kept(8, "collisionCount", Kind::Int32),
        kept(9, "terminatingReplicas", Kind::Int32),
    ],
};

/// `DeploymentCondition`.
static DEPLOYMENT_CONDITION: Message = Message {
    name: "DeploymentCondition",
    fields: &[
        kept(1, "type", Kind::String),
        kept(2, "status", Kind::String),
        field(4, "reason", Kind::String),
        field(5, "message", Kind::String),
        field(6, "lastUpdateTime", Kind::Time),
        field(7, "lastTransitionTime", Kind::Time),
    ],
};
