//! Per-kind behaviour of built-in objects, as kube-apiserver's registry strategies have it:
//! decoding into the typed Kubernetes struct (which rejects wrong types and shows which
//! fields are unknown), defaulting, what a create or update may change (status is reset on
//! create and kept on a spec update; the `status` subresource changes only status),
//! `metadata.generation`, and validation with field paths.

mod defaults;
mod names;
mod validate;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use setpoint_core::Cause;

pub(crate) use names::{validate_name, NameRule};
pub(crate) use validate::finalizers as validate_finalizers;

/// The built-in kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Namespace,
    Pod,
    Node,
    ConfigMap,
    Secret,
    ServiceAccount,
    Service,
    /// core/v1 Event.
    CoreEvent,
    /// events.k8s.io/v1 Event.
    Event,
    Lease,
    Deployment,
    ReplicaSet,
    /// autoscaling/v2 HorizontalPodAutoscaler (the stored form).
    HorizontalPodAutoscaler,
    /// autoscaling/v1 HorizontalPodAutoscaler (stored as v2).
    HorizontalPodAutoscalerV1,
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    CustomResourceDefinition,
    /// A custom resource: its definition's schema does the work (see
    /// [`crate::crd::CustomResource`]), reached through the resource's `custom` field.
    Custom,
}

/// Decodes `value` as `T` and encodes it again: the typed view of the object.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

impl Kind {
    /// The object as the typed struct sees it: fields of the wrong type are an error, unknown
    /// fields are dropped (see [`unknown_fields`] to find them).
    pub(crate) fn normalize(self, value: &Value) -> Result<Value, String> {
        use k8s_openapi::api::{apps, autoscaling, coordination, core, events};
        match self {
            Kind::Namespace => round_trip::<core::v1::Namespace>(value),
            Kind::Pod => round_trip::<core::v1::Pod>(value),
            Kind::Node => round_trip::<core::v1::Node>(value),
            Kind::ConfigMap => round_trip::<core::v1::ConfigMap>(value),
            Kind::Secret => round_trip::<core::v1::Secret>(value),
            Kind::ServiceAccount => round_trip::<core::v1::ServiceAccount>(value),
            Kind::Service => round_trip::<core::v1::Service>(value),
            Kind::CoreEvent => round_trip::<core::v1::Event>(value),
            Kind::Event => round_trip::<events::v1::Event>(value),
            Kind::Lease => round_trip::<coordination::v1::Lease>(value),
            Kind::Deployment => round_trip::<apps::v1::Deployment>(value),
            Kind::ReplicaSet => round_trip::<apps::v1::ReplicaSet>(value),
            Kind::HorizontalPodAutoscaler => {
                round_trip::<autoscaling::v2::HorizontalPodAutoscaler>(value)
            }
            Kind::HorizontalPodAutoscalerV1 => {
                round_trip::<autoscaling::v1::HorizontalPodAutoscaler>(value)
            }
            Kind::CustomResourceDefinition => round_trip::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(value),
            Kind::Custom => Ok(value.clone()),
        }
    }

    /// Whether `metadata.generation` tracks changes to the spec.
    pub(crate) fn has_generation(self) -> bool {
        matches!(
            self,
            Kind::Deployment
                | Kind::ReplicaSet
                | Kind::HorizontalPodAutoscaler
                | Kind::HorizontalPodAutoscalerV1
                | Kind::CustomResourceDefinition
                | Kind::Custom
        )
    }

    /// Whether the kind has a `status` subresource: status is then kept out of main-resource
    /// writes, and the subresource writes only status.
    pub(crate) fn has_status(self) -> bool {
        matches!(
            self,
            Kind::Namespace
                | Kind::Pod
                | Kind::Node
                | Kind::Service
                | Kind::Deployment
                | Kind::ReplicaSet
                | Kind::HorizontalPodAutoscaler
                | Kind::HorizontalPodAutoscalerV1
                | Kind::CustomResourceDefinition
        )
    }

    /// The rule object names of this kind follow.
    pub(crate) fn name_rule(self) -> NameRule {
        match self {
            Kind::Namespace => NameRule::Label,
            Kind::Service => NameRule::Dns1035Label,
            // core/v1 events keep their legacy freedom; events.k8s.io/v1 checks subdomains.
            Kind::CoreEvent => NameRule::Any,
            _ => NameRule::Subdomain,
        }
    }

    /// Sets what a new object starts with (status of a new pod or namespace) and applies the
    /// defaults.
    pub(crate) fn prepare_create(self, object: &mut Value) {
        if self.has_status() {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        defaults::apply(self, object);
        defaults::initial_status(self, object);
    }

    /// Applies the defaults to an updated object.
    pub(crate) fn prepare_update(self, object: &mut Value) {
        defaults::apply(self, object);
    }

    /// Validates an object (and, for an update, what changed from `old`).
    pub(crate) fn validate(self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        validate::validate(self, object, old)
    }
}

/// The paths of fields in `original` that `normalized` lacks: unknown fields, as kube-apiserver
/// reports them (`spec.foo`, `spec.containers[0].bar`). Nulls are not fields.
pub(crate) fn unknown_fields(original: &Value, normalized: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_unknown(original, normalized, String::new(), &mut out);
    out
}

fn collect_unknown(original: &Value, normalized: &Value, path: String, out: &mut Vec<String>) {
    match (original, normalized) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, v) in o {
                if v.is_null() {
                    continue;
                }
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match n.get(k) {
                    Some(nv) => collect_unknown(v, nv, child, out),
                    None => out.push(child),
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            for (i, (ov, nv)) in o.iter().zip(n).enumerate() {
                collect_unknown(ov, nv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_should_reject_wrong_types_and_drop_unknown_fields() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}], "extra": true}});
        let n = Kind::Pod.normalize(&pod).unwrap();
        assert_eq!(
            unknown_fields(&pod, &n),
            vec!["spec.containers[0].bogus", "spec.extra"]
        );
        let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "x"}});
        assert!(Kind::Pod.normalize(&bad).is_err());
    }
}
