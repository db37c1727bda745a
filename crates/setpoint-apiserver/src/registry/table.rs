//! `Table` rendering for `kubectl get`: the column sets kube-apiserver prints for each built-in
//! kind (wide columns have priority 1), and a name + age table for everything else.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use setpoint_core::LabelSelector;

use super::strategy::Kind;

/// One column of a table.
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) format: &'static str,
    pub(crate) priority: u8,
    pub(crate) description: &'static str,
}

const fn col(name: &'static str, priority: u8) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        priority,
        description: "",
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};

/// The columns of a kind's table.
pub(crate) fn columns(kind: Option<Kind>) -> Vec<Column> {
    let Some(kind) = kind else {
        return vec![NAME, col("Age", 0)];
    };
    match kind {
        Kind::Pod => vec![
            NAME,
            col("Ready", 0),
            col("Status", 0),
            Column {
                kind: "integer",
                ..col("Restarts", 0)
            },
            col("Age", 0),
            col("IP", 1),
            col("Node", 1),
            col("Nominated Node", 1),
            col("Readiness Gates", 1),
        ],
        Kind::Namespace => vec![NAME, col("Status", 0), col("Age", 0)],
        Kind::Node => vec![
            NAME,
            col("Status", 0),
            col("Roles", 0),
            col("Age", 0),
            col("Version", 0),
            col("Internal-IP", 1),
            col("External-IP", 1),
            col("OS-Image", 1),
            col("Kernel-Version", 1),
            col("Container-Runtime", 1),
        ],
        Kind::ConfigMap => vec![
            NAME,
            Column {
                kind: "integer",
                ..col("Data", 0)
            },
            col("Age", 0),
        ],
        Kind::Secret => vec![
            NAME,
            col("Type", 0),
            Column {
                kind: "integer",
                ..col("Data", 0)
            },
            col("Age", 0),
        ],
        Kind::ServiceAccount => vec![
            NAME,
            Column {
                kind: "integer",
                ..col("Secrets", 0)
            },
            col("Age", 0),
        ],
        Kind::Service => vec![
            NAME,
            col("Type", 0),
            col("Cluster-IP", 0),
            col("External-IP", 0),
            col("Port(s)", 0),
            col("Age", 0),
            col("Selector", 1),
        ],
        Kind::CoreEvent | Kind::Event => vec![
            col("Last Seen", 0),
            col("Type", 0),
            col("Reason", 0),
            col("Object", 0),
            col("Message", 0),
        ],
        Kind::Lease => vec![NAME, col("Holder", 0), col("Age", 0)],
        Kind::CustomResourceDefinition => vec![
            NAME,
            Column {
                format: "date-time",
                ..col("Created At", 0)
            },
        ],
        Kind::Custom => vec![NAME, col("Age", 0)],
        Kind::HorizontalPodAutoscaler | Kind::HorizontalPodAutoscalerV1 => vec![
            NAME,
            col("Reference", 0),
            col("Targets", 0),
            Column {
                kind: "integer",
                ..col("MinPods", 0)
            },
            Column {
                kind: "integer",
                ..col("MaxPods", 0)
            },
            Column {
                kind: "integer",
                ..col("Replicas", 0)
            },
            col("Age", 0),
        ],
        Kind::Deployment => vec![
            NAME,
            col("Ready", 0),
            Column {
                kind: "integer",
                ..col("Up-to-date", 0)
            },
            Column {
                kind: "integer",
                ..col("Available", 0)
            },
            col("Age", 0),
            col("Containers", 1),
            col("Images", 1),
            col("Selector", 1),
        ],
        Kind::ReplicaSet => vec![
            NAME,
            Column {
                kind: "integer",
                ..col("Desired", 0)
            },
            Column {
                kind: "integer",
                ..col("Current", 0)
            },
            Column {
                kind: "integer",
                ..col("Ready", 0)
            },
            col("Age", 0),
            col("Containers", 1),
            col("Images", 1),
            col("Selector", 1),
        ],
    }
}

/// The cells of one object's row.
pub(crate) fn cells(kind: Option<Kind>, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(o["metadata"]["name"].as_str().unwrap_or_default());
    let age_cell = json!(age(&o["metadata"]["creationTimestamp"], now));
    let int = |v: &Value| json!(v.as_i64().unwrap_or(0));
    let Some(kind) = kind else {
        return vec![name, age_cell];
    };
    match kind {
        Kind::Pod => {
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
                name,
                json!(format!("{ready}/{total}")),
                json!(pod_status(o)),
                json!(restarts),
                age_cell,
                json!(o["status"]["podIP"].as_str().unwrap_or("<none>")),
                json!(o["spec"]["nodeName"].as_str().unwrap_or("<none>")),
                json!(o["status"]["nominatedNodeName"]
                    .as_str()
                    .unwrap_or("<none>")),
                json!("<none>"),
            ]
        }
        Kind::Namespace => vec![
            name,
            json!(o["status"]["phase"].as_str().unwrap_or("")),
            age_cell,
        ],
        Kind::Node => {
            let ready = o["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .map(|c| {
                    if c["status"] == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                })
                .unwrap_or("Unknown");
            let mut status = ready.to_owned();
            if o["spec"]["unschedulable"] == json!(true) {
                status.push_str(",SchedulingDisabled");
            }
            let address = |t: &str| {
                o["status"]["addresses"]
                    .as_array()
                    .and_then(|a| a.iter().find(|x| x["type"] == t))
                    .and_then(|x| x["address"].as_str())
                    .unwrap_or("<none>")
                    .to_owned()
            };
            let info = &o["status"]["nodeInfo"];
            vec![
                name,
                json!(status),
                json!("<none>"),
                age_cell,
                json!(info["kubeletVersion"].as_str().unwrap_or("")),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(info["osImage"].as_str().unwrap_or("<unknown>")),
                json!(info["kernelVersion"].as_str().unwrap_or("<unknown>")),
                json!(info["containerRuntimeVersion"]
                    .as_str()
                    .unwrap_or("<unknown>")),
            ]
        }
        Kind::ConfigMap => {
            let n = o["data"].as_object().map_or(0, |m| m.len())
                + o["binaryData"].as_object().map_or(0, |m| m.len());
            vec![name, json!(n), age_cell]
        }
        Kind::Secret => {
            let n = o["data"].as_object().map_or(0, |m| m.len());
            vec![
                name,
                json!(o["type"].as_str().unwrap_or("")),
                json!(n),
                age_cell,
            ]
        }
        Kind::ServiceAccount => vec![
            name,
            json!(o["secrets"].as_array().map_or(0, Vec::len)),
            age_cell,
        ],
        Kind::Service => {
            let spec = &o["spec"];
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|p| {
                    let proto = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64() {
                        Some(np) => format!("{}:{np}/{proto}", p["port"]),
                        None => format!("{}/{proto}", p["port"]),
                    }
                })
                .collect();
            let selector = spec["selector"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(spec["type"].as_str().unwrap_or("ClusterIP")),
                json!(spec["clusterIP"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("<none>")),
                json!("<none>"),
                json!(if ports.is_empty() {
                    "<none>".to_owned()
                } else {
                    ports.join(",")
                }),
                age_cell,
                json!(selector),
            ]
        }
        Kind::CoreEvent | Kind::Event => {
            let (object, last) = if kind == Kind::CoreEvent {
                (&o["involvedObject"], o["lastTimestamp"].clone())
            } else {
                (&o["regarding"], o["deprecatedLastTimestamp"].clone())
            };
            let last = if last.is_null() {
                o["eventTime"].clone()
            } else {
                last
            };
            let last = if last.is_null() {
                o["metadata"]["creationTimestamp"].clone()
            } else {
                last
            };
            let obj = format!(
                "{}/{}",
                object["kind"].as_str().unwrap_or("").to_lowercase(),
                object["name"].as_str().unwrap_or("")
            );
            let message = if kind == Kind::CoreEvent {
                &o["message"]
            } else {
                &o["note"]
            };
            vec![
                json!(age(&last, now)),
                json!(o["type"].as_str().unwrap_or("")),
                json!(o["reason"].as_str().unwrap_or("")),
                json!(obj),
                json!(message.as_str().unwrap_or("").trim()),
            ]
        }
        Kind::CustomResourceDefinition => vec![name, o["metadata"]["creationTimestamp"].clone()],
        Kind::Custom => vec![name, age_cell],
        Kind::HorizontalPodAutoscaler | Kind::HorizontalPodAutoscalerV1 => {
            let v2 = if kind == Kind::HorizontalPodAutoscalerV1 {
                super::hpa::v1_to_v2(o.clone())
            } else {
                o.clone()
            };
            vec![
                name,
                json!(super::hpa::reference(&v2)),
                json!(super::hpa::targets(&v2)),
                int(&v2["spec"]["minReplicas"]),
                int(&v2["spec"]["maxReplicas"]),
                int(&v2["status"]["currentReplicas"]),
                age_cell,
            ]
        }
        Kind::Lease => vec![
            name,
            json!(o["spec"]["holderIdentity"].as_str().unwrap_or("")),
            age_cell,
        ],
        Kind::Deployment | Kind::ReplicaSet => {
            let spec = &o["spec"];
            let status = &o["status"];
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
            let selector = selector_string(&spec["selector"]);
            let wide = [
                json!(names.join(",")),
                json!(images.join(",")),
                json!(selector),
            ];
            let mut row = if kind == Kind::Deployment {
                vec![
                    name,
                    json!(format!(
                        "{}/{}",
                        status["readyReplicas"].as_i64().unwrap_or(0),
                        spec["replicas"].as_i64().unwrap_or(0)
                    )),
                    int(&status["updatedReplicas"]),
                    int(&status["availableReplicas"]),
                    age_cell,
                ]
            } else {
                vec![
                    name,
                    int(&spec["replicas"]),
                    int(&status["replicas"]),
                    int(&status["readyReplicas"]),
                    age_cell,
                ]
            };
            row.extend(wide);
            row
        }
    }
}

/// A structured label selector in its string form (`app=web,tier in (a,b)`), as the wide
/// `Selector` column shows it.
fn selector_string(selector: &Value) -> String {
    match LabelSelector::from_structured(selector) {
        Ok(s) if !s.is_everything() => s.to_string(),
        _ => "<none>".into(),
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

/// Age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d3h`, …), from an RFC 3339 timestamp.
pub(crate) fn age(ts: &Value, now: DateTime<Utc>) -> String {
    let Some(t) = ts
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
    else {
        return "<unknown>".into();
    };
    human_duration((now - t.with_timezone(&Utc)).num_seconds())
}

/// apimachinery's `HumanDuration`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d, y) = (s / 60, s / 3600, s / 86400, s / (86400 * 365));
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if y < 2 {
        format!("{d}d")
    } else if y < 8 {
        let rd = d % 365;
        if rd == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{rd}d")
        }
    } else {
        format!("{y}y")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_should_match_kubectl() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
        ] {
            assert_eq!(human_duration(s), want);
        }
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
        let row = cells(Some(Kind::Pod), &p, now);
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
