//! Descriptor tables for HorizontalPodAutoscaler (`k8s.io/api/autoscaling/v1`, proto package
//! `api.autoscaling.v1`), as `kubectl autoscale` (1.32) sends it. Field numbers are those of
//! that package's `generated.proto`.

use super::meta_v1::OBJECT_META;
use super::schema::{field, kept, Kind, Message};

/// `HorizontalPodAutoscaler`.
pub(crate) static HORIZONTAL_POD_AUTOSCALER: Message = Message {
    name: "HorizontalPodAutoscaler",
    fields: &[
        field(1, "metadata", Kind::Message(&OBJECT_META)),
        field(2, "spec", Kind::Message(&SPEC)),
        field(3, "status", Kind::Message(&STATUS)),
    ],
};

/// `HorizontalPodAutoscalerSpec`: `minReplicas` and `targetCPUUtilizationPercentage` are
/// pointers (an explicit 0 is kept, and rejected by validation).
static SPEC: Message = Message {
    name: "HorizontalPodAutoscalerSpec",
    fields: &[
        field(
            1,
            "scaleTargetRef",
            Kind::Message(&CROSS_VERSION_OBJECT_REFERENCE),
        ),
        kept(2, "minReplicas", Kind::Int32),
        kept(3, "maxReplicas", Kind::Int32),
        kept(4, "targetCPUUtilizationPercentage", Kind::Int32),
    ],
};

/// `CrossVersionObjectReference`.
static CROSS_VERSION_OBJECT_REFERENCE: Message = Message {
    name: "CrossVersionObjectReference",
    fields: &[
        kept(1, "kind", Kind::String),
        kept(2, "name", Kind::String),
        field(3, "apiVersion", Kind::String),
    ],
};

/// `HorizontalPodAutoscalerStatus`.
static STATUS: Message = Message {
    name: "HorizontalPodAutoscalerStatus",
    fields: &[
        kept(1, "observedGeneration", Kind::Int64),
        field(2, "lastScaleTime", Kind::Time),
        kept(3, "currentReplicas", Kind::Int32),
        kept(4, "desiredReplicas", Kind::Int32),
        kept(5, "currentCPUUtilizationPercentage", Kind::Int32),
    ],
};
