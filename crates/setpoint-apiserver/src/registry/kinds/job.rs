//! batch/v1 Job: pods run to completion. Defaults as kube-apiserver's: one completion and
//! parallelism 1 when neither is given, a backoff limit of 6 (unlimited with a per-index limit),
//! `NonIndexed` completions, not suspended, pods replaced once `TerminatingOrFailed` (`Failed`
//! with a pod failure policy), the object's labels from the template's. Unless the client
//! manages the selector (`manualSelector`), the server makes one from the job's uid and labels
//! the template to match. Its pods restart `OnFailure` or `Never`; selector, completion mode and
//! template never change. `generation`, the `status` subresource, `status.successful` for
//! field selectors and the `kubectl get jobs` row.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::fields::{self, Field};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::pod_template::{
    default_template, template_cells, template_columns, validate_workload,
};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age, age_cell, human_duration, name_cell, Column};
use crate::registry::validation::{at_least, immutable, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        short_names: &[],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Jobs), |g| vec![status(g)])]
}

const FIELDS: &[Field] = &[("status.successful", "/status/succeeded", "0")];

/// The label a generated selector matches on.
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

#[derive(Debug)]
struct Jobs;

/// The job defaults of a job spec (`spec` of a Job).
fn default_spec(spec: &mut serde_json::Map<String, Value>) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    let per_index = spec.get("backoffLimitPerIndex").is_some_and(|v| !v.is_null());
    default(spec, "backoffLimit", json!(if per_index { i32::MAX } else { 6 }));
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let with_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    default(
        spec,
        "podReplacementPolicy",
        json!(if with_policy { "Failed" } else { "TerminatingOrFailed" }),
    );
}

#[async_trait]
impl Strategy for Jobs {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Job>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Job>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        let template_labels = object["spec"]["template"]["metadata"]["labels"].clone();
        if template_labels.is_object()
            && object["metadata"]["labels"].as_object().is_none_or(|l| l.is_empty())
        {
            if let Some(meta) = object_at(object, &["metadata"]) {
                meta.insert("labels".into(), template_labels);
            }
        }
        if let Some(spec) = object_at(object, &["spec"]) {
            default_spec(spec);
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({}));
        if object["spec"]["manualSelector"] == json!(true) {
            return;
        }
        let uid = object["metadata"]["uid"].clone();
        let name = object["metadata"]["name"].clone();
        if let Some(template) = object_at(object, &["spec", "template"]) {
            default(template, "metadata", json!({}));
            if let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut) {
                default(meta, "labels", json!({}));
                if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                    labels.insert(CONTROLLER_UID.into(), uid.clone());
                    labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
                    labels.insert("controller-uid".into(), uid.clone());
                    labels.insert("job-name".into(), name);
                }
            }
        }
        if let Some(spec) = object_at(object, &["spec"]) {
            spec.insert("selector".into(), json!({"matchLabels": {CONTROLLER_UID: uid}}));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_workload(object, old, &mut causes);
        let spec = &object["spec"];
        if spec["template"]["spec"]["restartPolicy"].as_str() == Some("Always") {
            causes.push(Cause::not_supported(
                "spec.template.spec.restartPolicy",
                &spec["template"]["spec"]["restartPolicy"],
                &["OnFailure", "Never"],
            ));
        }
        for field in ["parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"] {
            at_least(object, &format!("/spec/{field}"), 0, &mut causes);
        }
        at_least(object, "/spec/activeDeadlineSeconds", 1, &mut causes);
        one_of(object, "/spec/completionMode", &["NonIndexed", "Indexed"], &mut causes);
        one_of(object, "/spec/podReplacementPolicy", &["TerminatingOrFailed", "Failed"], &mut causes);
        if spec["completionMode"] == json!("Indexed") && spec["completions"].is_null() {
            causes.push(Cause::required("spec.completions"));
        }
        immutable(object, old, "/spec/completionMode", &mut causes);
        immutable(object, old, "/spec/template", &mut causes);
        if spec["completionMode"] != json!("Indexed") {
            immutable(object, old, "/spec/completions", &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::new("Status", 0),
            Column::new("Completions", 0),
            Column::new("Duration", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let mut row = vec![
            name_cell(o),
            json!(job_status(o)),
            json!(completions(o)),
            json!(duration(&o["status"], now)),
            age_cell(o, now),
        ];
        row.extend(template_cells(o));
        row
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }
}

/// Whether the job has condition `kind` with status `True`.
fn has_condition(o: &Value, kind: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The `Status` cell, from the job's conditions in kubectl's order.
fn job_status(o: &Value) -> &'static str {
    if has_condition(o, "Complete") {
        "Complete"
    } else if has_condition(o, "Failed") {
        "Failed"
    } else if !o["metadata"]["deletionTimestamp"].is_null() {
        "Terminating"
    } else if has_condition(o, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(o, "Suspended") {
        "Suspended"
    } else if has_condition(o, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

/// The `Completions` cell: `succeeded/completions`, or `succeeded/1 of parallelism` for a
/// job without a completion count.
fn completions(o: &Value) -> String {
    let succeeded = o["status"]["succeeded"].as_i64().unwrap_or(0);
    match o["spec"]["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => match o["spec"]["parallelism"].as_i64().unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

/// The `Duration` cell: from the start to completion (or now); empty before the start.
fn duration(status: &Value, now: DateTime<Utc>) -> String {
    let parse = |v: &Value| {
        v.as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    match (parse(&status["startTime"]), parse(&status["completionTime"])) {
        (None, _) => String::new(),
        (Some(_), None) => age(&status["startTime"], now),
        (Some(start), Some(end)) => human_duration((end - start).num_seconds()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "namespace": "d", "uid": "u-1"}, "spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl:5"}]}}}})
    }

    #[test]
    fn defaults_and_the_generated_selector_should_match_kube_apiserver() {
        let mut o = job();
        Jobs.prepare_create(&mut o);
        let spec = &o["spec"];
        assert_eq!((spec["completions"].clone(), spec["parallelism"].clone()), (json!(1), json!(1)));
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(spec["selector"], json!({"matchLabels": {CONTROLLER_UID: "u-1"}}));
        assert_eq!(spec["template"]["metadata"]["labels"]["job-name"], "pi");
        let causes = futures::executor::block_on(Jobs.validate(&o, None));
        assert!(causes.is_empty(), "{causes:?}");
    }

    #[test]
    fn parallelism_alone_should_leave_completions_unset() {
        let mut spec = serde_json::Map::new();
        spec.insert("parallelism".into(), json!(3));
        spec.insert("backoffLimitPerIndex".into(), json!(1));
        default_spec(&mut spec);
        assert!(!spec.contains_key("completions"));
        assert_eq!(spec["backoffLimit"], i32::MAX);
        let o = json!({"spec": {"parallelism": 3}, "status": {"succeeded": 1}});
        assert_eq!(completions(&o), "1/1 of 3");
    }

    #[test]
    fn always_restarting_pods_and_template_changes_should_be_refused() {
        let mut o = job();
        o["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        Jobs.prepare_create(&mut o);
        let causes = futures::executor::block_on(Jobs.validate(&o, None));
        assert_eq!(causes[0].field, "spec.template.spec.restartPolicy");
        let mut old = job();
        Jobs.prepare_create(&mut old);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:6");
        let causes = futures::executor::block_on(Jobs.validate(&new, Some(&old)));
        assert_eq!(causes[0].field, "spec.template");
    }
}
