//! Strategic merge patch scenarios: the bodies kubectl sends (the `apply` bodies are the ones
//! captured in the reference traces or built the way kubectl's three-way diff builds them), and
//! the directives and failure modes one by one. Expected results are worked out from upstream's
//! `strategicpatch` algorithm.

mod directives;
mod element_order;
mod failures;
mod kubectl_apply;
mod kubectl_patch;

use serde_json::{json, Value};

use super::{strategic_merge_patch, FieldStrategy, PatchSchema};
use crate::patch::error::{PatchError, PatchErrorKind};

fn smp(api_version: &str, kind: &str, live: Value, patch: Value) -> Result<Value, PatchError> {
    let schema = PatchSchema::for_kind(api_version, kind).expect("built-in kind");
    strategic_merge_patch(live, patch, schema)
}

fn deploy_patch(live: Value, patch: Value) -> Value {
    smp("apps/v1", "Deployment", live, patch).unwrap()
}

fn nginx(image: &str) -> Value {
    json!({
        "name": "nginx",
        "image": image,
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent"
    })
}

/// A Deployment as stored after `kubectl apply` of a one-container manifest.
fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web"},
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}\n"
            }
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": containers,
                    "restartPolicy": "Always",
                    "dnsPolicy": "ClusterFirst"
                }
            }
        },
        "status": {"replicas": 2, "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True"}
        ]}
    })
}

fn containers(obj: &Value) -> &Value {
    &obj["spec"]["template"]["spec"]["containers"]
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
}
