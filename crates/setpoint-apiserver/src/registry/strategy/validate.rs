//! Validation of built-in objects, with the field paths and messages of kube-apiserver's
//! validation, for the rules clients hit in practice: names, labels, owner references,
//! containers, selectors that must match their templates, replica counts, immutable fields.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use setpoint_core::{Cause, LabelSelector};

use super::names::{validate_name, NameRule};
use super::Kind;

/// Every problem with `object` (an update also checks what changed from `old`).
pub(super) fn validate(kind: Kind, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    metadata(&object["metadata"], &mut causes);
    // CRDs are validated by apiextensions with apimachinery's generic metadata rules.
    finalizers(
        &object["metadata"],
        !matches!(kind, Kind::Custom | Kind::CustomResourceDefinition),
        &mut causes,
    );
    match kind {
        Kind::Pod => {
            pod_spec(&object["spec"], "spec", &mut causes);
            if let Some(old) = old {
                pod_update(&object["spec"], &old["spec"], &mut causes);
            }
        }
        Kind::Deployment | Kind::ReplicaSet => {
            workload(object, &mut causes);
            if let Some(old) = old {
                if old["spec"]["selector"] != object["spec"]["selector"] {
                    causes.push(Cause::invalid(
                        "spec.selector",
                        &object["spec"]["selector"],
                        "field is immutable",
                    ));
                }
            }
        }
        Kind::ConfigMap | Kind::Secret => {
            data_keys(object, &mut causes);
            data_size(kind, object, &mut causes);
            if kind == Kind::Secret {
                if let Some(old) = old {
                    if old["type"] != object["type"] {
                        causes.push(Cause::invalid(
                            "type",
                            &object["type"],
                            "field is immutable",
                        ));
                    }
                }
            }
        }
        Kind::Service => {
            service(&object["spec"], &mut causes);
            if let Some(old) = old {
                let (new_ip, old_ip) = (&object["spec"]["clusterIP"], &old["spec"]["clusterIP"]);
                if !old_ip.is_null() && new_ip != old_ip {
                    causes.push(Cause::invalid(
                        "spec.clusterIPs[0]",
                        new_ip,
                        "may not change once set",
                    ));
                }
            }
        }
        Kind::HorizontalPodAutoscaler => crate::registry::hpa::validate_v2(object, &mut causes),
        Kind::HorizontalPodAutoscalerV1 => crate::registry::hpa::validate_v1(object, &mut causes),
        Kind::Namespace
        | Kind::Node
        | Kind::ServiceAccount
        | Kind::CoreEvent
        | Kind::Event
        | Kind::Lease
        | Kind::Custom => {}
        Kind::CustomResourceDefinition => {
            causes.extend(crate::crd::validate_definition(object, old));
        }
    }
    causes
}

fn metadata(meta: &Value, causes: &mut Vec<Cause>) {
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for problem in label_key_problems(k) {
                causes.push(Cause::invalid("metadata.labels", &json!(k), &problem));
            }
            let value = v.as_str().unwrap_or_default();
            if !is_label_value(value) {
                causes.push(Cause::invalid(
                    "metadata.labels",
                    v,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ));
            }
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if total > 256 * 1024 {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                format!(
                    "metadata.annotations: Too long: must have at most {} bytes",
                    256 * 1024
                ),
            ));
        }
    }
    if let Some(refs) = meta["ownerReferences"].as_array() {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r[field].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!(
                        "metadata.ownerReferences[{i}].{field}"
                    )));
                }
            }
            if r["controller"] == json!(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            causes.push(Cause::invalid(
                "metadata.ownerReferences",
                &meta["ownerReferences"],
                "Only one reference can have Controller set to true",
            ));
        }
    }
}

/// Finalizers that built-in kinds accept without a domain prefix.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// `metadata.finalizers`: each a qualified name (`example.com/cleanup`); on built-in kinds a
/// name without a `/` only from [`STANDARD_FINALIZERS`]; never both `orphan` and
/// `foregroundDeletion` (apimachinery's `ValidateFinalizers` and core's
/// `validateKubeFinalizerName`).
pub(crate) fn finalizers(meta: &Value, builtin: bool, causes: &mut Vec<Cause>) {
    let Some(list) = meta["finalizers"].as_array() else {
        return;
    };
    let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for (i, name) in names.iter().enumerate() {
        let field = format!("metadata.finalizers[{i}]");
        for problem in label_key_problems(name) {
            causes.push(Cause::invalid(field.clone(), &json!(name), &problem));
        }
        if builtin && !name.contains('/') && !STANDARD_FINALIZERS.contains(name) {
            causes.push(Cause::invalid(
                field,
                &json!(name),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        causes.push(Cause::invalid(
            "metadata.finalizers",
            &meta["finalizers"],
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

fn label_key_problems(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut problems = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() || !validate_name(p, NameRule::Subdomain).is_empty() {
            problems.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_owned());
        }
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if !ok {
        problems.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_owned());
    }
    problems
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

fn pod_spec(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let containers = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        causes.push(Cause::required(format!("{path}.containers")));
    }
    let mut names = BTreeSet::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let at = format!("{path}.{list}[{i}]");
            match c["name"].as_str() {
                None | Some("") => causes.push(Cause::required(format!("{at}.name"))),
                Some(name) => {
                    if !validate_name(name, NameRule::Label).is_empty() {
                        causes.push(Cause::invalid(format!("{at}.name"), &c["name"], "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"));
                    }
                    if !names.insert(name.to_owned()) {
                        causes.push(Cause::duplicate(format!("{at}.name"), &c["name"]));
                    }
                }
            }
            if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
                causes.push(Cause::required(format!("{at}.image")));
            }
            for (j, p) in c["ports"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let port = p["containerPort"].as_i64().unwrap_or(0);
                if !(1..=65535).contains(&port) {
                    causes.push(Cause::invalid(
                        format!("{at}.ports[{j}].containerPort"),
                        &p["containerPort"],
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
    let policy = &spec["restartPolicy"];
    if !policy.is_null()
        && !["Always", "OnFailure", "Never"].contains(&policy.as_str().unwrap_or(""))
    {
        causes.push(Cause::not_supported(
            format!("{path}.restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
}

/// A pod's spec may change only in container images, `activeDeadlineSeconds`, added
/// tolerations and `terminationGracePeriodSeconds`.
fn pod_update(new: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let mask = |spec: &Value| {
        let mut s = spec.clone();
        if let Some(map) = s.as_object_mut() {
            for key in [
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
            ] {
                map.remove(key);
            }
            for list in ["initContainers", "containers"] {
                if let Some(cs) = map.get_mut(list).and_then(Value::as_array_mut) {
                    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                        c.remove("image");
                    }
                }
            }
        }
        s
    };
    if mask(new) != mask(old) {
        causes.push(Cause::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}

fn workload(object: &Value, causes: &mut Vec<Cause>) {
    let spec = &object["spec"];
    if let Some(r) = spec["replicas"].as_i64() {
        if r < 0 {
            causes.push(Cause::invalid(
                "spec.replicas",
                &spec["replicas"],
                "must be greater than or equal to 0",
            ));
        }
    }
    let selector = &spec["selector"];
    if selector.is_null() {
        causes.push(Cause::required("spec.selector"));
    } else {
        match LabelSelector::from_structured(selector) {
            Err(e) => causes.push(Cause::invalid("spec.selector", selector, &e.to_string())),
            Ok(sel) if sel.is_everything() => causes.push(Cause::invalid(
                "spec.selector",
                selector,
                "empty selector is invalid for deployment",
            )),
            Ok(sel) => {
                if !sel.matches_object(&spec["template"]) {
                    causes.push(Cause::invalid(
                        "spec.template.metadata.labels",
                        &spec["template"]["metadata"]["labels"],
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    if spec["template"].is_null() {
        causes.push(Cause::required("spec.template"));
    } else {
        pod_spec(&spec["template"]["spec"], "spec.template.spec", causes);
    }
}

fn data_keys(object: &Value, causes: &mut Vec<Cause>) {
    let mut seen = BTreeSet::new();
    for field in ["data", "binaryData", "stringData"] {
        for key in object[field].as_object().into_iter().flat_map(|m| m.keys()) {
            let ok = !key.is_empty()
                && key.len() <= 253
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !ok {
                causes.push(Cause::invalid(
                    field,
                    &json!(key),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
            if field != "stringData" && !seen.insert(key.clone()) {
                causes.push(Cause::invalid(
                    field,
                    &json!(key),
                    "duplicate of key present in data",
                ));
            }
        }
    }
}

/// The most bytes of data a ConfigMap or Secret may hold (kube-apiserver's `MaxSecretSize`).
const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The bytes a ConfigMap's `data` and `binaryData` (a Secret's `data` and `stringData`) hold
/// together, decoded, at most [`MAX_DATA_BYTES`]. kube-apiserver reports a ConfigMap's excess
/// on the whole object (its field path prints as `[]`) and a Secret's on `data`.
fn data_size(kind: Kind, object: &Value, causes: &mut Vec<Cause>) {
    let mut total: usize = 0;
    for (field, encoded) in [
        ("data", kind == Kind::Secret),
        ("binaryData", true),
        ("stringData", false),
    ] {
        for value in object[field]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            let text = value.as_str().unwrap_or_default();
            let size = if encoded {
                base64_decoded_len(text)
            } else {
                text.len()
            };
            total = total.saturating_add(size);
        }
    }
    if total > MAX_DATA_BYTES {
        let field = if kind == Kind::Secret { "data" } else { "[]" };
        causes.push(Cause::new(
            "FieldValueTooLong",
            field,
            format!("{field}: Too long: must have at most {MAX_DATA_BYTES} bytes"),
        ));
    }
}

/// The length of what standard base64 `text` decodes to (exact for valid padded base64).
fn base64_decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4).saturating_mul(3).saturating_sub(padding)
}

fn service(spec: &Value, causes: &mut Vec<Cause>) {
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let ports = spec["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.is_empty() && kind != "ExternalName" && spec["clusterIP"] != json!("None") {
        causes.push(Cause::required("spec.ports"));
    }
    for (i, p) in ports.iter().enumerate() {
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(
                format!("spec.ports[{i}].port"),
                &p["port"],
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    let types = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
    if !types.contains(&kind) {
        causes.push(Cause::not_supported("spec.type", &spec["type"], &types));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_selector_must_match_template_labels() {
        let d = json!({"metadata": {"name": "d"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let fields: Vec<_> = validate(Kind::Deployment, &d, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["spec.replicas", "spec.template.metadata.labels"]
        );
    }

    #[test]
    fn pods_need_named_containers_with_images() {
        let p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "i"}]}});
        let fields: Vec<_> = validate(Kind::Pod, &p, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["spec.containers[0].image", "spec.containers[1].name"]
        );
        let empty = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            validate(Kind::Pod, &empty, None)[0].message,
            "spec.containers: Required value"
        );
    }

    #[test]
    fn pod_spec_changes_other_than_images_should_be_forbidden() {
        let old = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
        let image = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "b"}]}});
        assert!(validate(Kind::Pod, &image, Some(&old)).is_empty());
        let cmd = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "a", "command": ["x"]}]}});
        assert_eq!(
            validate(Kind::Pod, &cmd, Some(&old))[0].reason,
            "FieldValueForbidden"
        );
    }

    #[test]
    fn bad_labels_should_be_invalid() {
        let c = json!({"metadata": {"name": "c", "labels": {"-bad": "ok", "good": "not ok!"}}});
        assert_eq!(validate(Kind::ConfigMap, &c, None).len(), 2);
    }
}
