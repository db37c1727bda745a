//! Pod specs as pods and workload templates (Deployment, ReplicaSet) share them: the
//! defaults kube-apiserver's `SetDefaults_PodSpec` and `SetDefaults_Container` apply, their
//! validation (named containers with images, ports, restart policy), a workload's selector,
//! template and replica count, the wide table columns of a workload, and its `scale` view
//! (`spec.replicas`).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use setpoint_core::{Cause, LabelSelector};

use super::defaults::{default, object_at};
use super::strategy::{scale_document, validate_name, NameRule, ScaleView};
use super::table::{selector_string, Column};

/// Applies the pod defaults to a workload's `spec.template.spec`.
pub(crate) fn default_template(object: &mut Value) {
    if let Some(spec) = object_at(object, &["spec", "template", "spec"]) {
        default_pod_spec(spec);
    }
}

/// Applies the pod spec defaults.
pub(crate) fn default_pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "enableServiceLinks", json!(true));
    super::token_projection::default_projections(spec);
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                container(c);
            }
        }
    }
}

fn container(c: &mut Map<String, Value>) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    default(c, "resources", json!({}));
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let tag = image.rsplit('/').next().unwrap_or("");
    let latest = !image.contains('@') && (!tag.contains(':') || tag.ends_with(":latest"));
    default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(port, "protocol", json!("TCP"));
        }
    }
}

/// The problems of a pod spec at `path` (`spec`, `spec.template.spec`).
pub(crate) fn validate_pod_spec(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
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
    super::token_projection::validate_projections(spec, path, causes);
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

/// The problems of a workload (Deployment, ReplicaSet): replicas, selector, template; on
/// update, a changed selector.
pub(crate) fn validate_workload(object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    workload(object, causes);
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
        validate_pod_spec(&spec["template"]["spec"], "spec.template.spec", causes);
    }
}

/// The wide columns of a workload's table.
pub(crate) fn template_columns() -> [Column; 3] {
    [
        Column::new("Containers", 1),
        Column::new("Images", 1),
        Column::new("Selector", 1),
    ]
}

/// The wide cells of a workload's row: its containers, images and selector.
pub(crate) fn template_cells(o: &Value) -> [Value; 3] {
    let spec = &o["spec"];
    let containers = spec["template"]["spec"]["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    [
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector_string(&spec["selector"])),
    ]
}

/// The `scale` view of a workload: `spec.replicas`, `status.replicas`, the selector.
#[derive(Debug)]
pub(crate) struct SpecReplicas;

impl ScaleView for SpecReplicas {
    fn scale_of(&self, o: &Value) -> Value {
        let selector = LabelSelector::from_structured(&o["spec"]["selector"])
            .map(|s| s.to_string())
            .unwrap_or_default();
        scale_document(
            o,
            o["spec"]["replicas"].as_i64().unwrap_or(0),
            json!({"replicas": o["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector}),
        )
    }

    fn set_replicas(&self, o: &mut Value, replicas: i64) {
        o["spec"]["replicas"] = json!(replicas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_images_should_default_to_always_pull() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("reg:5000/nginx", "Always"),
            ("reg:5000/nginx:1", "IfNotPresent"),
        ] {
            let mut c = Map::new();
            c.insert("image".into(), json!(image));
            container(&mut c);
            assert_eq!(c["imagePullPolicy"], policy, "{image}");
        }
    }
}
