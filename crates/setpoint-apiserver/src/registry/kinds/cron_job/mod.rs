//! batch/v1 CronJob: Jobs made on a schedule. Defaults as kube-apiserver's: concurrency
//! `Allow`, not suspended, three successful and one failed job kept, the job template's pod
//! defaults. The schedule must parse (`schedule.rs`), the time zone be a known one, the name at
//! most 52 characters (room for the jobs' suffix), and the template's pods restart `OnFailure`
//! or `Never`. `generation`, the `status` subresource and the `kubectl get cronjobs` row.

mod schedule;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::CronJob;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::pod_template::{default_pod_spec, template_columns, validate_pod_spec};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age, age_cell, name_cell, selector_string, Column};
use crate::registry::validation::{at_least, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(CronJobs), |g| vec![status(g)])]
}

/// The longest name a CronJob may have: its jobs append an 11-character suffix.
const MAX_NAME: usize = 52;

/// Where the time zone database is looked up.
const ZONEINFO: &str = "/usr/share/zoneinfo";

#[derive(Debug)]
struct CronJobs;

#[async_trait]
impl Strategy for CronJobs {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CronJob>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CronJob>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "concurrencyPolicy", json!("Allow"));
            default(spec, "suspend", json!(false));
            default(spec, "successfulJobsHistoryLimit", json!(3));
            default(spec, "failedJobsHistoryLimit", json!(1));
        }
        if let Some(pod) = object_at(object, &["spec", "jobTemplate", "spec", "template", "spec"]) {
            default_pod_spec(pod);
        }
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({}));
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let name = &object["metadata"]["name"];
        if name.as_str().is_some_and(|n| n.len() > MAX_NAME) {
            causes.push(Cause::invalid(
                "metadata.name",
                name,
                &format!("must be no more than {MAX_NAME} characters"),
            ));
        }
        let spec = &object["spec"];
        match spec["schedule"].as_str() {
            None | Some("") => causes.push(Cause::required("spec.schedule")),
            Some(s) => {
                if let Some(problem) = schedule::problem(s) {
                    causes.push(Cause::invalid("spec.schedule", &spec["schedule"], &problem));
                }
            }
        }
        if let Some(zone) = spec["timeZone"].as_str() {
            if let Some(problem) = zone_problem(zone) {
                causes.push(Cause::invalid("spec.timeZone", &spec["timeZone"], &problem));
            }
        }
        one_of(object, "/spec/concurrencyPolicy", &["Allow", "Forbid", "Replace"], &mut causes);
        for field in ["startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
            at_least(object, &format!("/spec/{field}"), 0, &mut causes);
        }
        let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
        validate_pod_spec(pod, "spec.jobTemplate.spec.template.spec", &mut causes);
        if pod["restartPolicy"].as_str() == Some("Always") {
            causes.push(Cause::not_supported(
                "spec.jobTemplate.spec.template.spec.restartPolicy",
                &pod["restartPolicy"],
                &["OnFailure", "Never"],
            ));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::new("Schedule", 0),
            Column::new("Timezone", 0),
            Column::new("Suspend", 0),
            Column::integer("Active", 0),
            Column::new("Last Schedule", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let suspend = match spec["suspend"].as_bool() {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last = if status["lastScheduleTime"].is_null() {
            "<none>".to_owned()
        } else {
            age(&status["lastScheduleTime"], now)
        };
        let containers = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let list = |field: &str| -> String {
            let items: Vec<&str> = containers.iter().filter_map(|c| c[field].as_str()).collect();
            items.join(",")
        };
        vec![
            name_cell(o),
            json!(spec["schedule"].as_str().unwrap_or_default()),
            json!(spec["timeZone"].as_str().unwrap_or("<none>")),
            json!(suspend),
            json!(status["active"].as_array().map_or(0, Vec::len)),
            json!(last),
            age_cell(o, now),
            json!(list("name")),
            json!(list("image")),
            json!(selector_string(&spec["jobTemplate"]["spec"]["selector"])),
        ]
    }
}

/// Why `zone` is not an explicit, known time zone, if it is not. Without a time zone
/// database on this machine every well-formed name is accepted.
fn zone_problem(zone: &str) -> Option<String> {
    let explicit = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones";
    if zone.is_empty() || zone.eq_ignore_ascii_case("local") {
        return Some(explicit.into());
    }
    let well_formed = zone
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'))
        && !zone.starts_with('/')
        && !zone.contains("..");
    let database = Path::new(ZONEINFO);
    let known = well_formed && (!database.is_dir() || zone == "UTC" || database.join(zone).is_file());
    (!known).then(|| format!("unknown time zone {zone}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(spec: Value) -> Value {
        json!({"metadata": {"name": "c", "namespace": "d"}, "spec": spec})
    }

    fn template() -> Value {
        json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox:1"}]}}}})
    }

    #[test]
    fn defaults_should_match_kube_apiserver() {
        let mut o = cron(json!({"schedule": "*/5 * * * *", "jobTemplate": template()}));
        CronJobs.prepare_create(&mut o);
        let spec = &o["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        assert_eq!(spec["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(futures::executor::block_on(CronJobs.validate(&o, None)).is_empty());
        let cells = CronJobs.cells(&o, Utc::now());
        assert_eq!(cells[1..6], [json!("*/5 * * * *"), json!("<none>"), json!("False"), json!(0), json!("<none>")]);
    }

    #[test]
    fn bad_schedules_zones_and_long_names_should_be_refused() {
        let mut o = cron(json!({"schedule": "every minute", "timeZone": "Local", "jobTemplate": template()}));
        o["metadata"]["name"] = json!("c".repeat(53));
        let fields: Vec<String> = futures::executor::block_on(CronJobs.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["metadata.name", "spec.schedule", "spec.timeZone"]);
    }
}
