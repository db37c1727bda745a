//! The `PIDAutoscaler` custom resource (`autoscaling.setpoint.dev/v1alpha1`, short name
//! `pida`): an HPA's target reference, metrics, bounds and rate limits (the HPA's own types),
//! plus the PID law's gains, deadband and sample period. Its status reports what the HPA's
//! does and the P, I and D terms (in log-replica units; `exp(output)` is the continuous
//! replica count).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition,
    MetricSpec, MetricStatus,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a PIDAutoscaler asks for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.setpoint.dev",
    version = "v1alpha1",
    kind = "PIDAutoscaler",
    plural = "pidautoscalers",
    namespaced,
    status = "PidAutoscalerStatus",
    shortname = "pida",
    printcolumn = r#"{"name":"Reference","type":"string","jsonPath":".spec.scaleTargetRef.name"}"#,
    printcolumn = r#"{"name":"MinPods","type":"integer","jsonPath":".spec.minReplicas"}"#,
    printcolumn = r#"{"name":"MaxPods","type":"integer","jsonPath":".spec.maxReplicas"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.currentReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PidAutoscalerSpec {
    /// The object to scale (any kind with a `scale` subresource).
    pub scale_target_ref: CrossVersionObjectReference,
    /// Lower bound (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Upper bound.
    pub max_replicas: i32,
    /// The metrics, as an HPA's (`Resource`, `Object` and `External` metrics are evaluated).
    #[serde(default)]
    pub metrics: Vec<MetricSpec>,
    /// Rate policies, as an HPA's `behavior` (the stabilization windows are not used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
    /// PID gains (defaults: the tuned ones of `setpoint-control`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gains: Option<Gains>,
    /// Errors `|ln(usage ratio)|` at most this count as zero (default 0.065).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadband: Option<f64>,
    /// Seconds between samples (default: the HPA sync period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub sample_period_seconds: Option<u32>,
}

/// The PID gains, per sample.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gains {
    /// Proportional gain.
    pub kp: f64,
    /// Integral gain per sample (1 with the others 0 is the HPA's law).
    pub ki: f64,
    /// Derivative gain, in samples.
    pub kd: f64,
}

/// What the loop observed and decided.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PidAutoscalerStatus {
    /// The target's current replica count.
    #[serde(default)]
    pub current_replicas: i32,
    /// The count the law asked for last.
    #[serde(default)]
    pub desired_replicas: i32,
    /// When the target was last rescaled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<String>,
    /// The metric values, as an HPA reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_metrics: Vec<MetricStatus>,
    /// The law's terms at the last sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<Terms>,
    /// `AbleToScale`, `ScalingActive`, `ScalingLimited`, as an HPA's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<HorizontalPodAutoscalerCondition>,
}

/// The P, I, D terms and their clamped sum, in log-replica units.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Terms {
    /// Proportional term.
    pub p: f64,
    /// Integral term.
    pub i: f64,
    /// Derivative term.
    pub d: f64,
    /// `p + i + d`, clamped to `[ln min, ln max]`.
    pub output: f64,
}
