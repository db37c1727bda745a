//! The fields each kind exposes to field selectors, as kube-apiserver's per-kind field-label
//! conversions and `GetAttrs` functions define them.

use std::collections::BTreeMap;

use serde_json::Value;
use setpoint_core::SelectableFields;

use super::strategy::Kind;

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// Per kind: `(field label, JSON pointer into the object)`, beyond `metadata.name` and
/// `metadata.namespace`.
fn kind_fields(kind: Kind) -> &'static [(&'static str, &'static str)] {
    match kind {
        Kind::Pod => &[
            ("spec.nodeName", "/spec/nodeName"),
            ("spec.restartPolicy", "/spec/restartPolicy"),
            ("spec.schedulerName", "/spec/schedulerName"),
            ("spec.serviceAccountName", "/spec/serviceAccountName"),
            ("spec.hostNetwork", "/spec/hostNetwork"),
            ("status.phase", "/status/phase"),
            ("status.podIP", "/status/podIP"),
            ("status.nominatedNodeName", "/status/nominatedNodeName"),
        ],
        Kind::Node => &[("spec.unschedulable", "/spec/unschedulable")],
        Kind::Namespace => &[("status.phase", "/status/phase")],
        Kind::Secret => &[("type", "/type")],
        Kind::Service => &[
            ("spec.clusterIP", "/spec/clusterIP"),
            ("spec.type", "/spec/type"),
        ],
        Kind::ReplicaSet => &[("status.replicas", "/status/replicas")],
        Kind::CoreEvent => &[
            ("involvedObject.kind", "/involvedObject/kind"),
            ("involvedObject.namespace", "/involvedObject/namespace"),
            ("involvedObject.name", "/involvedObject/name"),
            ("involvedObject.uid", "/involvedObject/uid"),
            ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
            (
                "involvedObject.resourceVersion",
                "/involvedObject/resourceVersion",
            ),
            ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
            ("reason", "/reason"),
            ("reportingComponent", "/reportingComponent"),
            ("source", "/source/component"),
            ("type", "/type"),
        ],
        Kind::ConfigMap
        | Kind::ServiceAccount
        | Kind::Event
        | Kind::Lease
        | Kind::Deployment
        | Kind::HorizontalPodAutoscaler
        | Kind::HorizontalPodAutoscalerV1
        | Kind::CustomResourceDefinition
        | Kind::Custom => &[],
    }
}

/// The field labels a kind accepts, for checking a selector before it is used.
pub(crate) fn selectable(kind: Kind, namespaced: bool) -> SelectableFields {
    let extra = kind_fields(kind);
    if extra.is_empty() {
        // Kinds without a field-label conversion of their own accept only the metadata fields.
        return SelectableFields::metadata_only();
    }
    let mut labels: Vec<&str> = vec!["metadata.name"];
    if namespaced {
        labels.push("metadata.namespace");
    }
    labels.extend(extra.iter().map(|(label, _)| *label));
    let fields = SelectableFields::for_kind(labels);
    if kind == Kind::Pod {
        fields.with_alias("spec.host", "spec.nodeName")
    } else {
        fields
    }
}

/// The values of every selectable field of `object`.
pub(crate) fn field_set(kind: Kind, object: &Value) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    fields.insert(
        "metadata.name".to_owned(),
        text(&object["metadata"]["name"]),
    );
    fields.insert(
        "metadata.namespace".to_owned(),
        text(&object["metadata"]["namespace"]),
    );
    for (label, pointer) in kind_fields(kind) {
        let value = object.pointer(pointer).map(text).unwrap_or_default();
        fields.insert((*label).to_owned(), value);
    }
    fields
}
