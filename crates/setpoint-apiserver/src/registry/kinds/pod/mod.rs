//! core/v1 Pod: defaults (the pod spec's, a negative grace period stored as 1 s, the
//! `DefaultTolerationSeconds` tolerations), a new pod's `Pending` status with its QoS class,
//! what an update may change, the `kubectl get pods` row, the field selectors the kubelet and
//! scheduler use, and graceful deletion of a scheduled pod (marked, for its node to stop it).

mod binding;
mod budget;
mod eviction;

pub(crate) use binding::bind;
pub(crate) use eviction::evict;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Map, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::defaults::object_at;
use crate::registry::fields::{self, Field};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::pod_template::{default_pod_spec, validate_pod_spec};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::{ResourceDef, Subresource};

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Pods), |g| {
        vec![
            Subresource {
                name: "attach",
                kind: setpoint_core::GroupVersionKind::new("", "v1", "PodAttachOptions"),
                verbs: &["create", "get"],
            },
            Subresource {
                name: "binding",
                kind: setpoint_core::GroupVersionKind::new("", "v1", "Binding"),
                verbs: &["create"],
            },
            Subresource {
                name: "eviction",
                kind: setpoint_core::GroupVersionKind::new("policy", "v1", "Eviction"),
                verbs: &["create"],
            },
            Subresource {
                name: "exec",
                kind: setpoint_core::GroupVersionKind::new("", "v1", "PodExecOptions"),
                verbs: &["create", "get"],
            },
            Subresource {
                name: "log",
                kind: g.clone(),
                verbs: &["get"],
            },
            Subresource {
                name: "portforward",
                kind: setpoint_core::GroupVersionKind::new("", "v1", "PodPortForwardOptions"),
                verbs: &["create", "get"],
            },
            status(g),
        ]
    })]
}

const FIELDS: &[Field] = &[
    ("spec.nodeName", "/spec/nodeName", ""),
    ("spec.restartPolicy", "/spec/restartPolicy", ""),
    ("spec.schedulerName", "/spec/schedulerName", ""),
    ("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    ("spec.hostNetwork", "/spec/hostNetwork", "false"),
    ("status.phase", "/status/phase", ""),
    ("status.podIP", "/status/podIP", ""),
    ("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];

/// The grace period of a pod that does not give one.
const DEFAULT_GRACE_SECONDS: i64 = 30;

#[derive(Debug)]
pub(crate) struct Pods;

#[async_trait]
impl Strategy for Pods {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Pod>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Pod>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default_pod_spec(spec);
            // A pod's negative grace period is stored as 1 s, as kube-apiserver converts it
            // (only for pods; templates keep theirs).
            let grace = spec.get("terminationGracePeriodSeconds");
            if grace.and_then(Value::as_i64).is_some_and(|g| g < 0) {
                spec.insert("terminationGracePeriodSeconds".into(), json!(1));
            }
        }
    }

    /// The tolerations kube-apiserver's `DefaultTolerationSeconds` admission adds (on create
    /// only), and the `Pending` status with the pod's QoS class.
    fn initialize(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default_toleration_seconds(spec);
        }
        if let Some(map) = object.as_object_mut() {
            let qos = qos_class(map.get("spec"));
            map.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": qos}),
            );
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_pod_spec(&object["spec"], "spec", &mut causes);
        if let Some(old) = old {
            pod_update(&object["spec"], &old["spec"], &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Ready", 0),
            Column::new("Status", 0),
            Column::integer("Restarts", 0),
            Column::new("Age", 0),
            Column::new("IP", 1),
            Column::new("Node", 1),
            Column::new("Nominated Node", 1),
            Column::new("Readiness Gates", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let statuses = o["status"]["containerStatuses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
        let ready = statuses
            .iter()
            .filter(|s| s["ready"] == json!(true))
            .count();
        let restarts: i64 = statuses
            .iter()
            .map(|s| s["restartCount"].as_i64().unwrap_or(0))
            .sum();
        vec![
            name_cell(o),
            json!(format!("{ready}/{total}")),
            json!(pod_status(o)),
            json!(restarts),
            age_cell(o, now),
            json!(o["status"]["podIP"].as_str().unwrap_or("<none>")),
            json!(o["spec"]["nodeName"].as_str().unwrap_or("<none>")),
            json!(o["status"]["nominatedNodeName"]
                .as_str()
                .unwrap_or("<none>")),
            json!("<none>"),
        ]
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced).with_alias("spec.host", "spec.nodeName")
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }

    /// A scheduled pod with a grace period is marked, for its node to stop it.
    fn graceful_deletion_seconds(&self, object: &Value, requested: Option<i64>) -> Option<i64> {
        let scheduled = object["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let seconds = requested
            .or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(DEFAULT_GRACE_SECONDS);
        (scheduled && seconds > 0).then_some(seconds)
    }

    fn delete_returns_object(&self) -> bool {
        true
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

/// What `kubectl get pods` shows as STATUS: the pod's reason, a waiting or terminated
/// container's reason, `Terminating`, or the phase.
fn pod_status(o: &Value) -> String {
    let mut reason = o["status"]["reason"]
        .as_str()
        .or_else(|| o["status"]["phase"].as_str())
        .unwrap_or("Pending")
        .to_owned();
    for s in o["status"]["containerStatuses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .rev()
    {
        if let Some(r) = s["state"]["waiting"]["reason"].as_str() {
            reason = r.to_owned();
        } else if let Some(r) = s["state"]["terminated"]["reason"].as_str() {
            reason = r.to_owned();
        }
    }
    if !o["metadata"]["deletionTimestamp"].is_null() {
        reason = "Terminating".into();
    }
    reason
}

/// How long a pod tolerates its node being not ready or unreachable unless it says otherwise
/// (kube-apiserver's `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`).
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// kube-apiserver's `DefaultTolerationSeconds` admission: a pod that does not already tolerate
/// the `NoExecute` taints `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable`
/// gets a toleration of each for [`DEFAULT_TOLERATION_SECONDS`], so that it is evicted five
/// minutes after its node fails rather than at once.
fn default_toleration_seconds(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if tolerations.is_null() {
        *tolerations = json!([]);
    }
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = list.iter().any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            let t_key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let operator = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (effect.is_empty() || effect == "NoExecute")
                && (t_key == key || (t_key.is_empty() && operator == "Exists"))
        });
        if !tolerated {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

/// The pod's quality-of-service class from its containers' requests and limits.
fn qos_class(spec: Option<&Value>) -> &'static str {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        if requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(res));
            let request = requests.and_then(|r| r.get(res)).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(object: &Value, old: Option<&Value>) -> Vec<Cause> {
        futures::executor::block_on(Pods.validate(object, old))
    }

    #[test]
    fn pods_need_named_containers_with_images() {
        let p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "i"}]}});
        let fields: Vec<_> = validate(&p, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["spec.containers[0].image", "spec.containers[1].name"]
        );
        let empty = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            validate(&empty, None)[0].message,
            "spec.containers: Required value"
        );
    }

    #[test]
    fn pod_spec_changes_other_than_images_should_be_forbidden() {
        let old = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "a"}]}});
        let image = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "b"}]}});
        assert!(validate(&image, Some(&old)).is_empty());
        let cmd = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "a", "command": ["x"]}]}});
        assert_eq!(
            validate(&cmd, Some(&old))[0].reason,
            "FieldValueForbidden"
        );
    }

    #[test]
    fn new_pods_should_tolerate_node_failure_for_five_minutes() {
        let mut p = json!({"spec": {"containers": [{"name": "c"}]}});
        Pods.prepare_create(&mut p);
        let tolerations = p["spec"]["tolerations"].as_array().expect("added");
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0]["key"], "node.kubernetes.io/not-ready");
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/unreachable");
        assert!(tolerations
            .iter()
            .all(|t| t["tolerationSeconds"] == 300 && t["effect"] == "NoExecute"));
    }

    #[test]
    fn pods_tolerating_node_failure_should_keep_their_own_tolerations() {
        let own = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 2});
        let mut p = json!({"spec": {"tolerations": [own.clone()]}});
        Pods.prepare_create(&mut p);
        let tolerations = p["spec"]["tolerations"].as_array().expect("kept");
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0], own);
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/not-ready");
        let mut all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        Pods.prepare_create(&mut all);
        assert_eq!(all["spec"]["tolerations"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn pod_status_should_start_pending_with_its_qos_class() {
        let mut p = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        Pods.prepare_create(&mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
    }

    #[test]
    fn absent_bool_and_string_fields_should_read_as_their_zero_values() {
        let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {}});
        assert_eq!(Pods.field_set(&pod)["spec.hostNetwork"], "false");
        assert_eq!(Pods.field_set(&pod)["spec.nodeName"], "");
    }

    #[test]
    fn pod_rows_should_show_ready_status_and_restarts() {
        let p = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"ready": true, "restartCount": 2, "state": {"running": {}}},
                {"ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:30Z")
            .unwrap()
            .with_timezone(&Utc);
        let row = Pods.cells(&p, now);
        assert_eq!(
            &row[..5],
            &[
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!(3),
                json!("30s")
            ]
        );
    }
}
