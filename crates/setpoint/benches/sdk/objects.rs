//! The objects the benchmarks cache: ConfigMaps holding 1 KiB of data, and a Pod as a
//! Deployment's ReplicaSet creates it on a real cluster, with the status its kubelet reports
//! and the `managedFields` kube-apiserver records for both writers.

use serde_json::{json, Map, Value};

/// Bytes of data in each benchmark ConfigMap.
pub(crate) const CONFIGMAP_DATA_BYTES: usize = 1024;

/// The name of benchmark ConfigMap `i`.
pub(crate) fn configmap_name(i: usize) -> String {
    format!("bench-{i:06}")
}

/// The JSON of benchmark ConfigMap `i`: a label and one 1 KiB value.
pub(crate) fn configmap(i: usize) -> (String, Vec<u8>) {
    let name = configmap_name(i);
    // Printable and varied, so nothing is shared or compressed by accident.
    let payload: String = (0..CONFIGMAP_DATA_BYTES)
        .map(|k| char::from(b'a' + ((i + k * 7) % 26) as u8))
        .collect();
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"payload": payload},
    });
    (name, body.to_string().into_bytes())
}

/// The ReplicaSet the Pods belong to (`<deployment>-<pod-template-hash>`).
const REPLICASET: &str = "checkout-7d9c6b5f4d";
/// The ReplicaSet's uid, in the Pods' owner reference.
const REPLICASET_UID: &str = "3f6b2c1e-8a4d-4c1b-9e7f-5d2a1b0c9e84";
/// When the benchmark Pods were "created" (all timestamps derive from it).
const CREATED: &str = "2026-11-20T08:14:03Z";
const STARTED: &str = "2026-11-20T08:14:07Z";
const READY: &str = "2026-11-20T08:14:19Z";

/// The name of benchmark Pod `i`: the ReplicaSet's name and five random-looking characters.
pub(crate) fn pod_name(i: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = i;
    let mut suffix = String::new();
    for _ in 0..5 {
        suffix.push(char::from(ALPHABET[n % ALPHABET.len()]));
        n /= ALPHABET.len();
    }
    format!("{REPLICASET}-{suffix}")
}

/// The JSON a ReplicaSet controller posts for Pod `i` (no status: the server sets it).
pub(crate) fn pod(i: usize) -> (String, Vec<u8>) {
    let name = pod_name(i);
    let body = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_metadata(&name),
        "spec": pod_spec(i),
    });
    (name, body.to_string().into_bytes())
}

/// The status the kubelet reports for Pod `i`, as a merge patch of the `status` subresource.
pub(crate) fn pod_status_patch(i: usize) -> Vec<u8> {
    json!({ "status": pod_status(i) }).to_string().into_bytes()
}

fn pod_metadata(name: &str) -> Value {
    json!({
        "name": name,
        "generateName": format!("{REPLICASET}-"),
        "labels": {
            "app.kubernetes.io/name": "checkout",
            "app.kubernetes.io/instance": "checkout",
            "app.kubernetes.io/version": "1.14.2",
            "app.kubernetes.io/component": "api",
            "app.kubernetes.io/part-of": "shop",
            "pod-template-hash": "7d9c6b5f4d",
        },
        "annotations": {
            "kubectl.kubernetes.io/restartedAt": "2026-11-19T17:02:41Z",
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9090",
            "prometheus.io/path": "/metrics",
        },
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": REPLICASET,
            "uid": REPLICASET_UID,
            "controller": true,
            "blockOwnerDeletion": true,
        }],
    })
}

fn probe(path: &str, initial_delay: u32) -> Value {
    json!({
        "httpGet": {"path": path, "port": "http", "scheme": "HTTP"},
        "initialDelaySeconds": initial_delay,
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "successThreshold": 1,
        "failureThreshold": 3,
    })
}

fn field_ref(path: &str) -> Value {
    json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}})
}

fn pod_spec(i: usize) -> Value {
    let token_volume = "kube-api-access-x7k2q";
    json!({
        "containers": [
            {
                "name": "app",
                "image": "registry.example.com/shop/checkout:1.14.2",
                "imagePullPolicy": "IfNotPresent",
                "args": ["--config=/etc/checkout/config.yaml", "--listen=:8080"],
                "ports": [
                    {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                    {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                ],
                "env": [
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "POD_NAME", "valueFrom": field_ref("metadata.name")},
                    {"name": "POD_NAMESPACE", "valueFrom": field_ref("metadata.namespace")},
                    {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "checkout-db", "key": "url"}}},
                    {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1"}}},
                ],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "256Mi"},
                    "limits": {"cpu": "1", "memory": "512Mi"},
                },
                "livenessProbe": probe("/healthz", 10),
                "readinessProbe": probe("/readyz", 5),
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/checkout", "readOnly": true},
                    {"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]},
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            },
            {
                "name": "log-shipper",
                "image": "registry.example.com/infra/fluent-bit:3.1.9",
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": "20m", "memory": "32Mi"},
                    "limits": {"memory": "64Mi"},
                },
                "volumeMounts": [
                    {"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            },
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": true,
        "nodeName": format!("worker-{}", i % 50),
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {"runAsNonRoot": true, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "serviceAccount": "checkout",
        "serviceAccountName": "checkout",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": "checkout-config", "defaultMode": 420}},
            {"name": token_volume, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
        ],
    })
}

fn pod_ip(i: usize) -> String {
    format!("10.244.{}.{}", (i / 250) % 250, i % 250 + 2)
}

fn pod_status(i: usize) -> Value {
    let condition = |kind: &str, at: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": at});
    let host_ip = format!("10.0.3.{}", i % 50 + 10);
    let container = |name: &str, image: &str, digest: &str, id: usize| {
        json!({
            "name": name,
            "state": {"running": {"startedAt": STARTED}},
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": image,
            "imageID": format!("{}@sha256:{digest}", image.split(':').next().unwrap_or(image)),
            "containerID": format!("containerd://{:064x}", id),
            "started": true,
        })
    };
    json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers", STARTED),
            condition("Initialized", CREATED),
            condition("Ready", READY),
            condition("ContainersReady", READY),
            condition("PodScheduled", CREATED),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip(i),
        "podIPs": [{"ip": pod_ip(i)}],
        "startTime": CREATED,
        "qosClass": "Burstable",
        "containerStatuses": [
            container("app", "registry.example.com/shop/checkout:1.14.2",
                "9b1e6f0c5d2a4e7b8c3f1a0d6e5b4c2a9f8e7d6c5b4a39281706f5e4d3c2b1a0", i * 2),
            container("log-shipper", "registry.example.com/infra/fluent-bit:3.1.9",
                "4c2a9f8e7d6c5b4a39281706f5e4d3c2b1a09b1e6f0c5d2a4e7b8c3f1a0d6e5b", i * 2 + 1),
        ],
    })
}

/// The `managedFields` kube-apiserver records for Pod `i`: the ReplicaSet controller's
/// create (metadata and spec, by `kube-controller-manager`) and the kubelet's status
/// updates. Setpoint's server does not record managed fields, so the Pod benchmark adds these
/// to every Pod it lists, as kube-apiserver would serve them.
pub(crate) fn pod_managed_fields(i: usize) -> Value {
    let (_, body) = pod(i);
    let created: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut meta = fields_of(&created["metadata"], 1);
    if let Some(m) = meta.as_object_mut() {
        m.remove("f:name");
    }
    let spec = fields_of(&created["spec"], 1);
    let status = fields_of(&pod_status(i), 1);
    json!([
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": CREATED,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": meta, "f:spec": spec},
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": READY,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": status},
            "subresource": "status",
        },
    ])
}

/// Fields kube-apiserver's schema marks atomic although their items have a name.
const ATOMIC: &[&str] = &["containerStatuses", "initContainerStatuses"];

/// The field set (FieldsV1) of `value` as server-side apply writes it: `f:<field>` for map
/// fields, `k:{…}` for list items keyed by their merge key, `.` for a nested map or item
/// itself, and `{}` for leaves and atomic lists.
fn fields_of(value: &Value, depth: usize) -> Value {
    let mut out = Map::new();
    match value {
        Value::Object(map) => {
            if depth > 1 {
                out.insert(".".into(), json!({}));
            }
            for (k, v) in map {
                let fields = if ATOMIC.contains(&k.as_str()) {
                    json!({})
                } else {
                    fields_of(v, depth + 1)
                };
                out.insert(format!("f:{k}"), fields);
            }
        }
        Value::Array(items) => {
            for item in items {
                let Some(key) = merge_key(item) else {
                    // An atomic list (args, tolerations, ...): owned as a whole.
                    return json!({});
                };
                out.insert(format!("k:{key}"), fields_of(item, depth + 1));
            }
            if !items.is_empty() {
                out.insert(".".into(), json!({}));
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// The merge key of a list item, as `{"field":value}` JSON, for the keyed lists of a Pod.
fn merge_key(item: &Value) -> Option<String> {
    let map = item.as_object()?;
    let key = if map.contains_key("containerPort") {
        json!({"containerPort": map["containerPort"], "protocol": map.get("protocol").cloned().unwrap_or(json!("TCP"))})
    } else if let Some(v) = map.get("mountPath") {
        json!({"mountPath": v})
    } else if let Some(v) = map.get("type") {
        json!({"type": v})
    } else if let Some(v) = map.get("uid") {
        json!({"uid": v})
    } else if let Some(v) = map.get("ip") {
        json!({"ip": v})
    } else if let Some(v) = map.get("name") {
        json!({"name": v})
    } else {
        return None;
    };
    Some(key.to_string())
}
