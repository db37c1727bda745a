//! The CronJob loop on a manual clock: a minute passes in milliseconds. Jobs made on schedule
//! with their name, annotation and owner; `status.active` and `lastScheduleTime`; Forbid
//! holding a start back while a Job runs, Replace swapping it; the history limit deleting the
//! oldest finished Job; suspend; too many missed start times. No Job loop runs: tests finish
//! Jobs by writing their status.

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_controllers::{Clock, LoopContext};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops_with;

const NS: &str = "default";
const MINUTE: Duration = Duration::from_secs(60);

fn cronjob(name: &str, spec: Value) -> CronJob {
    let mut value = json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }}}},
        },
    });
    if let (Some(base), Value::Object(extra)) = (value["spec"].as_object_mut(), spec) {
        base.extend(extra);
    }
    serde_json::from_value(value).expect("a valid CronJob")
}

/// The Jobs of CronJob `name` (not being deleted), oldest first.
async fn jobs_of(api: &Api<Job>, name: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = api
        .list(&ListParams::default())
        .await
        .expect("list jobs")
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.kind == "CronJob" && o.name == name)
        })
        .collect();
    jobs.sort_by_key(ResourceExt::name_any);
    jobs
}

async fn wait_jobs(api: &Api<Job>, name: &str, n: usize) -> Vec<Job> {
    eventually(&format!("{n} jobs of {name}"), || async {
        let jobs = jobs_of(api, name).await;
        (jobs.len() == n).then_some(jobs)
    })
    .await
}

/// Marks `job` Complete, as the Job loop would.
async fn complete(api: &Api<Job>, job: &Job) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch_status(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "startTime": now, "completionTime": now, "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "lastTransitionTime": now},
            ],
        }})),
    )
    .await
    .expect("complete the job");
}

async fn has_event(client: &setpoint_runtime::Client, reason: &str) -> bool {
    let events: Api<Event> = client.namespaced_api(NS);
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason))
}

fn start(
    env: &TestEnv,
) -> (
    Clock,
    setpoint_testenv::Running<setpoint_controllers::LoopError>,
) {
    let clock = Clock::manual(Utc::now());
    let ctx = LoopContext::new(env.client()).with_clock(clock.clone());
    (clock, run_loops_with(ctx, "cronjob"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_should_start_a_job_each_minute_and_forbid_overlap() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let (clock, running) = start(&env);
    let cronjobs = client.namespaced_api::<CronJob>(NS);
    let jobs = client.namespaced_api::<Job>(NS);
    let created = cronjobs
        .create(
            &PostParams::default(),
            &cronjob("tick", json!({"concurrencyPolicy": "Forbid"})),
        )
        .await
        .expect("create cronjob");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        jobs_of(&jobs, "tick").await.is_empty(),
        "nothing before the first minute"
    );

    clock.advance(MINUTE);
    let first = wait_jobs(&jobs, "tick", 1).await;
    let job = &first[0];
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("CronJob", created.uid().expect("uid").as_str())
    );
    let scheduled = &job.annotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"];
    let scheduled = chrono::DateTime::parse_from_rfc3339(scheduled).expect("an RFC 3339 time");
    assert_eq!(
        job.name_any(),
        format!("tick-{}", scheduled.timestamp() / 60)
    );
    let status = eventually("status.active lists the job", || async {
        let cj = cronjobs.get("tick").await.expect("get");
        let st = cj.status.unwrap_or_default();
        (st.active.as_ref().is_some_and(|a| a.len() == 1) && st.last_schedule_time.is_some())
            .then_some(st)
    })
    .await;
    assert_eq!(
        status.active.expect("active")[0].name.as_deref(),
        Some(job.name_any().as_str())
    );

    // Forbid: the first job still runs, so the next minute starts nothing.
    clock.advance(MINUTE);
    eventually("JobAlreadyActive reported", || {
        has_event(&client, "JobAlreadyActive")
    })
    .await;
    assert_eq!(jobs_of(&jobs, "tick").await.len(), 1);

    complete(&jobs, job).await;
    clock.advance(MINUTE);
    wait_jobs(&jobs, "tick", 2).await;
    let cj = eventually("lastSuccessfulTime set", || async {
        let cj = cronjobs.get("tick").await.expect("get");
        cj.status
            .as_ref()
            .and_then(|s| s.last_successful_time.clone())
            .map(|_| cj)
    })
    .await;
    assert_eq!(cj.status.and_then(|s| s.active).map(|a| a.len()), Some(1));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_should_swap_the_running_job_and_history_should_keep_the_newest() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let (clock, running) = start(&env);
    let cronjobs = client.namespaced_api::<CronJob>(NS);
    let jobs = client.namespaced_api::<Job>(NS);
    let spec = json!({"concurrencyPolicy": "Replace", "successfulJobsHistoryLimit": 1});
    cronjobs
        .create(&PostParams::default(), &cronjob("swap", spec))
        .await
        .expect("create cronjob");
    clock.advance(MINUTE);
    let first = wait_jobs(&jobs, "swap", 1).await;
    clock.advance(MINUTE);
    let second = eventually("the first job replaced", || async {
        let now = jobs_of(&jobs, "swap").await;
        (now.len() == 1 && now[0].name_any() != first[0].name_any()).then_some(now)
    })
    .await;
    // The event is recorded in the background, so it may land just after the replacement.
    eventually("SuccessfulDelete reported", || {
        has_event(&client, "SuccessfulDelete")
    })
    .await;

    // History: two completed jobs, the limit keeps one.
    complete(&jobs, &second[0]).await;
    clock.advance(MINUTE);
    let third = eventually("a third job", || async {
        let now = jobs_of(&jobs, "swap").await;
        now.iter()
            .any(|j| j.name_any() != second[0].name_any())
            .then_some(now)
    })
    .await;
    let newest = third
        .iter()
        .find(|j| j.name_any() != second[0].name_any())
        .expect("new");
    complete(&jobs, newest).await;
    clock.advance(Duration::from_secs(1));
    eventually("the oldest completed job deleted", || async {
        let now = jobs_of(&jobs, "swap").await;
        now.iter().all(|j| j.name_any() != second[0].name_any())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_cronjobs_should_start_nothing_and_missed_times_should_be_reported() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let (clock, running) = start(&env);
    let cronjobs = client.namespaced_api::<CronJob>(NS);
    let jobs = client.namespaced_api::<Job>(NS);
    cronjobs
        .create(
            &PostParams::default(),
            &cronjob("asleep", json!({"suspend": true})),
        )
        .await
        .expect("create cronjob");
    clock.advance(MINUTE * 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(jobs_of(&jobs, "asleep").await.is_empty());

    cronjobs
        .patch(
            "asleep",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("resume");
    // 200 missed minutes: one warning, and only the most recent start runs.
    let started = wait_jobs(&jobs, "asleep", 1).await;
    eventually("TooManyMissedTimes reported", || {
        has_event(&client, "TooManyMissedTimes")
    })
    .await;
    let scheduled = &started[0].annotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"];
    let scheduled = chrono::DateTime::parse_from_rfc3339(scheduled).expect("time");
    assert!(clock.now().signed_duration_since(scheduled) < chrono::Duration::minutes(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(jobs_of(&jobs, "asleep").await.len(), 1);
    running.stop().await;
}
