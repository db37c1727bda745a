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

/// Per kind: `(field label, JSON pointer into the object, value when absent)`, beyond
/// `metadata.name` and `metadata.namespace`. kube-apiserver builds a field set from the typed
/// object, so an absent field has its type's zero value: a bool formats as `false`
/// (`spec.unschedulable` of a schedulable node), an integer as `0`, a string as empty.
fn kind_fields(kind: Kind) -> &'static [(&'static str, &'static str, &'static str)] {
    match kind {
        Kind::Pod => &[
            ("spec.nodeName", "/spec/nodeName", ""),
            ("spec.restartPolicy", "/spec/restartPolicy", ""),
            ("spec.schedulerName", "/spec/schedulerName", ""),
            ("spec.serviceAccountName", "/spec/serviceAccountName", ""),
            ("spec.hostNetwork", "/spec/hostNetwork", "false"),
            ("status.phase", "/status/phase", ""),
            ("status.podIP", "/status/podIP", ""),
            ("status.nominatedNodeName", "/status/nominatedNodeName", ""),
        ],
        Kind::Node => &[("spec.unschedulable", "/spec/unschedulable", "false")],
        Kind::Namespace => &[("status.phase", "/status/phase", "")],
        Kind::Secret => &[("type", "/type", "")],
        Kind::Service => &[
            ("spec.clusterIP", "/spec/clusterIP", ""),
            ("spec.type", "/spec/type", ""),
        ],
        Kind::ReplicaSet => &[("status.replicas", "/status/replicas", "0")],
        Kind::CoreEvent => &[
            ("involvedObject.kind", "/involvedObject/kind", ""),
            ("involvedObject.namespace", "/involvedObject/namespace", ""),
            ("involvedObject.name", "/involvedObject/name", ""),
            ("involvedObject.uid", "/involvedObject/uid", ""),
            (
                "involvedObject.apiVersion",
                "/involvedObject/apiVersion",
                "",
            ),
            (
                "involvedObject.resourceVersion",
                "/involvedObject/resourceVersion",
                "",
            ),
            ("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
            ("reason", "/reason", ""),
            ("reportingComponent", "/reportingComponent", ""),
            ("source", "/source/component", ""),
            ("type", "/type", ""),
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
    labels.extend(extra.iter().map(|(label, _, _)| *label));
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
    for (label, pointer, absent) in kind_fields(kind) {
        let value = match object.pointer(pointer) {
            None | Some(Value::Null) => (*absent).to_owned(),
            Some(v) => text(v),
        };
        fields.insert((*label).to_owned(), value);
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_bool_and_integer_fields_should_read_as_their_zero_values() {
        // Regression (issue 14.11c): `spec.unschedulable=false` did not match a node without
        // the field; kube-apiserver formats the absent bool as `false`.
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert_eq!(field_set(Kind::Node, &node)["spec.unschedulable"], "false");
        let cordoned = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            field_set(Kind::Node, &cordoned)["spec.unschedulable"],
            "true"
        );
        let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {}});
        assert_eq!(field_set(Kind::Pod, &pod)["spec.hostNetwork"], "false");
        assert_eq!(field_set(Kind::Pod, &pod)["spec.nodeName"], "");
        let rs = json!({"metadata": {"name": "r", "namespace": "d"}, "status": {}});
        assert_eq!(field_set(Kind::ReplicaSet, &rs)["status.replicas"], "0");
    }
}
