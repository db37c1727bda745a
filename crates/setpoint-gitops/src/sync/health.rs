//! Whether an applied object is healthy, as Flux's kstatus judges (ours, written from its
//! documented rules): a status that describes an older generation is never healthy; a
//! Deployment is rolled out when its updated, available and total replicas equal the wanted
//! count (and failed when its progress deadline passed); a StatefulSet when its ready, updated
//! and current replicas do; a DaemonSet when its updated and available pods cover every node it
//! wants; a Job when `Complete` (failed when `Failed`); any other object with a `Ready`
//! condition when it is `True` (`Unknown` is never healthy; `Stalled=True` is a failure); any
//! other object once it exists.

use serde_json::Value;

use crate::manifests::ObjectId;

/// What a look at an object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// Ready for use.
    Healthy,
    /// Not yet: why.
    Progressing(String),
    /// Will not get there without a change: why.
    Failed(String),
}

fn int(object: &Value, pointer: &str) -> Option<i64> {
    object.pointer(pointer).and_then(Value::as_i64)
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn status_of(condition: &Value) -> &str {
    condition
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The health of `object` (whose identity is `id`).
pub(crate) fn assess(id: &ObjectId, object: &Value) -> Health {
    let generation = int(object, "/metadata/generation");
    let observed = int(object, "/status/observedGeneration");
    if let (Some(generation), Some(observed)) = (generation, observed) {
        if observed < generation {
            return Health::Progressing(format!(
                "status describes generation {observed}, not {generation}"
            ));
        }
    }
    let replicas = int(object, "/spec/replicas").unwrap_or(1);
    let count = |field: &str| int(object, &format!("/status/{field}")).unwrap_or(0);
    match (id.group.as_str(), id.kind.as_str()) {
        ("apps", "Deployment") => {
            if observed.is_none() {
                return Health::Progressing("no status yet".to_owned());
            }
            if let Some(progressing) = condition(object, "Progressing") {
                if progressing.get("reason").and_then(Value::as_str)
                    == Some("ProgressDeadlineExceeded")
                {
                    return Health::Failed("progress deadline exceeded".to_owned());
                }
            }
            let (updated, available, total) = (
                count("updatedReplicas"),
                count("availableReplicas"),
                count("replicas"),
            );
            if updated == replicas && available == replicas && total == replicas {
                Health::Healthy
            } else {
                Health::Progressing(format!(
                    "{updated} updated, {available} available of {replicas} replicas ({total} in all)"
                ))
            }
        }
        ("apps", "StatefulSet") => {
            if observed.is_none() {
                return Health::Progressing("no status yet".to_owned());
            }
            let (ready, updated, current) = (
                count("readyReplicas"),
                count("updatedReplicas"),
                count("currentReplicas"),
            );
            let revisions_equal = object.pointer("/status/currentRevision")
                == object.pointer("/status/updateRevision");
            if ready == replicas && (updated == replicas || current == replicas) && revisions_equal
            {
                Health::Healthy
            } else {
                Health::Progressing(format!(
                    "{ready} ready, {updated} updated of {replicas} replicas"
                ))
            }
        }
        ("apps", "DaemonSet") => {
            if observed.is_none() {
                return Health::Progressing("no status yet".to_owned());
            }
            let desired = count("desiredNumberScheduled");
            let (updated, available) = (count("updatedNumberScheduled"), count("numberAvailable"));
            if updated == desired && available == desired {
                Health::Healthy
            } else {
                Health::Progressing(format!(
                    "{updated} updated, {available} available of {desired} pods"
                ))
            }
        }
        ("batch", "Job") => {
            if condition(object, "Failed").is_some_and(|c| status_of(c) == "True") {
                Health::Failed("the Job failed".to_owned())
            } else if condition(object, "Complete").is_some_and(|c| status_of(c) == "True") {
                Health::Healthy
            } else {
                Health::Progressing("the Job is not complete".to_owned())
            }
        }
        _ => generic(object, generation),
    }
}

/// An object with a `Ready` condition, or any other.
fn generic(object: &Value, generation: Option<i64>) -> Health {
    if condition(object, "Stalled").is_some_and(|c| status_of(c) == "True") {
        let message = condition(object, "Stalled")
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("stalled");
        return Health::Failed(message.to_owned());
    }
    let Some(ready) = condition(object, "Ready") else {
        return Health::Healthy;
    };
    if let (Some(generation), Some(observed)) = (
        generation,
        ready.get("observedGeneration").and_then(Value::as_i64),
    ) {
        if observed < generation {
            return Health::Progressing(format!(
                "Ready describes generation {observed}, not {generation}"
            ));
        }
    }
    let message = ready.get("message").and_then(Value::as_str).unwrap_or("");
    match status_of(ready) {
        "True" => Health::Healthy,
        "False" => Health::Progressing(format!("Ready=False: {message}")),
        _ => Health::Progressing(format!("Ready=Unknown: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(api_version: &str, kind: &str) -> ObjectId {
        ObjectId::of(&json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}))
            .expect("id")
    }

    #[test]
    fn deployments_should_be_healthy_only_when_rolled_out() {
        let deploy = id("apps/v1", "Deployment");
        let mut d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}});
        assert!(matches!(assess(&deploy, &d), Health::Progressing(_)));
        d["status"]["observedGeneration"] = json!(2);
        assert_eq!(assess(&deploy, &d), Health::Healthy);
        d["status"]["availableReplicas"] = json!(1);
        assert!(matches!(assess(&deploy, &d), Health::Progressing(_)));
        d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
            "reason": "ProgressDeadlineExceeded"}]);
        assert!(matches!(assess(&deploy, &d), Health::Failed(_)));
    }

    #[test]
    fn jobs_and_ready_conditions_should_be_judged() {
        let job = id("batch/v1", "Job");
        let failed = json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}});
        assert!(matches!(assess(&job, &failed), Health::Failed(_)));
        let done = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(assess(&job, &done), Health::Healthy);
        let thing = id("example.com/v1", "Thing");
        let unknown = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert!(matches!(assess(&thing, &unknown), Health::Progressing(_)));
        let stale = json!({"metadata": {"generation": 3}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "observedGeneration": 2}]}});
        assert!(matches!(assess(&thing, &stale), Health::Progressing(_)));
        let ready = json!({"metadata": {"generation": 3}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "observedGeneration": 3}]}});
        assert_eq!(assess(&thing, &ready), Health::Healthy);
        assert_eq!(assess(&id("v1", "ConfigMap"), &json!({})), Health::Healthy);
    }
}
