//! Defaults kube-apiserver applies to built-in objects (the `SetDefaults_*` functions of the
//! core and apps groups, for the fields clients and controllers rely on), and the initial
//! status of new pods and namespaces.

use serde_json::{json, Map, Value};

use super::Kind;

/// Sets `map[key]` to `value` if absent or null.
fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

fn object_at<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object_mut()?.get_mut(*p)?;
    }
    cur.as_object_mut()
}

/// Applies the kind's defaults.
pub(super) fn apply(kind: Kind, object: &mut Value) {
    match kind {
        Kind::Pod => {
            if let Some(spec) = object_at(object, &["spec"]) {
                pod_spec(spec);
                // A pod's negative grace period is stored as 1 s, as kube-apiserver converts
                // it (only for pods; templates keep theirs).
                let grace = spec.get("terminationGracePeriodSeconds");
                if grace.and_then(Value::as_i64).is_some_and(|g| g < 0) {
                    spec.insert("terminationGracePeriodSeconds".into(), json!(1));
                }
            }
        }
        Kind::Deployment => {
            if let Some(spec) = object_at(object, &["spec"]) {
                default(spec, "replicas", json!(1));
                default(spec, "revisionHistoryLimit", json!(10));
                default(spec, "progressDeadlineSeconds", json!(600));
                default(spec, "strategy", json!({"type": "RollingUpdate"}));
                if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
                    default(strategy, "type", json!("RollingUpdate"));
                    if strategy.get("type") == Some(&json!("RollingUpdate")) {
                        default(strategy, "rollingUpdate", json!({}));
                        if let Some(ru) = strategy
                            .get_mut("rollingUpdate")
                            .and_then(Value::as_object_mut)
                        {
                            default(ru, "maxUnavailable", json!("25%"));
                            default(ru, "maxSurge", json!("25%"));
                        }
                    }
                }
            }
            template(object);
        }
        Kind::ReplicaSet => {
            if let Some(spec) = object_at(object, &["spec"]) {
                default(spec, "replicas", json!(1));
            }
            template(object);
        }
        Kind::Namespace => {
            if let Some(map) = object.as_object_mut() {
                default(map, "spec", json!({}));
            }
            if let Some(spec) = object_at(object, &["spec"]) {
                default(spec, "finalizers", json!(["kubernetes"]));
            }
        }
        Kind::Secret => {
            if let Some(map) = object.as_object_mut() {
                default(map, "type", json!("Opaque"));
            }
        }
        Kind::Service => {
            if let Some(spec) = object_at(object, &["spec"]) {
                default(spec, "type", json!("ClusterIP"));
                default(spec, "sessionAffinity", json!("None"));
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                        default(port, "protocol", json!("TCP"));
                        if let Some(p) = port.get("port").cloned() {
                            default(port, "targetPort", p);
                        }
                    }
                }
            }
        }
        Kind::HorizontalPodAutoscaler => crate::registry::hpa::default_v2(object),
        Kind::HorizontalPodAutoscalerV1 => crate::registry::hpa::default_v1(object),
        Kind::Node
        | Kind::ConfigMap
        | Kind::ServiceAccount
        | Kind::CoreEvent
        | Kind::Event
        | Kind::Lease
        | Kind::Custom => {}
        Kind::CustomResourceDefinition => crate::crd::default_definition(object),
    }
}

fn template(object: &mut Value) {
    if let Some(spec) = object_at(object, &["spec", "template", "spec"]) {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "enableServiceLinks", json!(true));
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

/// What a new object starts with: its status, and for a pod the tolerations kube-apiserver's
/// `DefaultTolerationSeconds` admission adds (this runs on create only).
pub(super) fn initial_status(kind: Kind, object: &mut Value) {
    if kind == Kind::Pod {
        if let Some(spec) = object_at(object, &["spec"]) {
            default_toleration_seconds(spec);
        }
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match kind {
        Kind::Pod => {
            let qos = qos_class(map.get("spec"));
            map.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": qos}),
            );
        }
        Kind::Namespace => {
            map.insert("status".into(), json!({"phase": "Active"}));
        }
        Kind::Deployment | Kind::ReplicaSet | Kind::Service | Kind::Node => {
            map.insert("status".into(), json!({}));
        }
        Kind::HorizontalPodAutoscaler | Kind::HorizontalPodAutoscalerV1 => {
            map.insert(
                "status".into(),
                json!({"currentReplicas": 0, "desiredReplicas": 0}),
            );
        }
        Kind::CustomResourceDefinition => {
            // As kube-apiserver's CRD strategy: no names accepted yet, the storage version
            // recorded as stored. The create answer carries this status (kube-rs' `crd_api`
            // example unwraps it); the CRD controller then fills in names and conditions.
            let stored: Vec<Value> = map
                .get("spec")
                .and_then(|s| s["versions"].as_array())
                .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
                .map(|v| v["name"].clone())
                .into_iter()
                .collect();
            map.insert(
                "status".into(),
                json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored}),
            );
        }
        _ => {}
    }
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

    #[test]
    fn deployment_defaults_should_match_kube_apiserver() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}});
        apply(Kind::Deployment, &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }

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

    #[test]
    fn new_pods_should_tolerate_node_failure_for_five_minutes() {
        let mut p = json!({"spec": {"containers": [{"name": "c"}]}});
        initial_status(Kind::Pod, &mut p);
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
        initial_status(Kind::Pod, &mut p);
        let tolerations = p["spec"]["tolerations"].as_array().expect("kept");
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0], own);
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/not-ready");
        let mut all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        initial_status(Kind::Pod, &mut all);
        assert_eq!(all["spec"]["tolerations"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn pod_status_should_start_pending_with_its_qos_class() {
        let mut p = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        initial_status(Kind::Pod, &mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
    }
}
