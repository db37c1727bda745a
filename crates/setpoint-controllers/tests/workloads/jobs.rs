//! The Job loop (and the TTL-after-finished loop): pods made with the Job's owner, labels and
//! tracking finalizer; completions and parallelism; Indexed pods with their index; finalizers
//! released once counted; the backoff limit, per-index limits, the pod failure policy, the
//! success policy, the active deadline, suspend and resume; deletion after the TTL.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";
const TRACKING: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// A Job named `name` with `spec` merged over a one-container, `restartPolicy: Never` template.
fn job(name: &str, spec: Value) -> Job {
    let mut value = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    });
    if let (Some(base), Value::Object(extra)) = (value["spec"].as_object_mut(), spec) {
        base.extend(extra);
    }
    serde_json::from_value(value).expect("a valid Job")
}

/// The pods of Job `name` that have not been deleted, by name.
async fn pods_of(api: &Api<Pod>, name: &str) -> Vec<Pod> {
    let mut pods = api
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await
        .expect("list pods")
        .items;
    pods.sort_by_key(ResourceExt::name_any);
    pods
}

/// Waits until Job `name` has `n` active (not finished, not deleted) pods; returns them.
async fn active_pods(api: &Api<Pod>, name: &str, n: usize) -> Vec<Pod> {
    eventually(&format!("{n} active pods of {name}"), || async {
        let active: Vec<Pod> = pods_of(api, name)
            .await
            .into_iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && !matches!(phase(p).as_deref(), Some("Succeeded" | "Failed"))
            })
            .collect();
        (active.len() == n).then_some(active)
    })
    .await
}

fn phase(pod: &Pod) -> Option<String> {
    pod.status.as_ref().and_then(|s| s.phase.clone())
}

/// Ends `pod` in `Succeeded` (exit code 0) or `Failed` (any other), as a kubelet would.
async fn finish(api: &Api<Pod>, pod: &Pod, exit_code: i32) {
    let phase = if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": phase,
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "finishedAt": now}},
            }],
        }})),
    )
    .await
    .expect("patch pod status");
}

/// Waits until Job `name` has condition `type_` `True`; returns the Job.
async fn wait_condition(api: &Api<Job>, name: &str, type_: &str) -> Job {
    eventually(&format!("job {name} has {type_}"), || async {
        let job = api.get(name).await.expect("get job");
        condition(&job, type_)
            .is_some_and(|c| c.status == "True")
            .then_some(job)
    })
    .await
}

fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn reason(job: &Job, type_: &str) -> Option<String> {
    condition(job, type_).and_then(|c| c.reason.clone())
}

/// Waits until no pod of Job `name` carries the tracking finalizer.
async fn all_released(api: &Api<Pod>, name: &str) {
    eventually(&format!("the pods of {name} released"), || async {
        pods_of(api, name)
            .await
            .iter()
            .all(|p| !p.finalizers().iter().any(|f| f == TRACKING))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_should_run_completions_with_parallelism_and_complete() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let created = jobs
        .create(
            &PostParams::default(),
            &job("pi", json!({"completions": 3, "parallelism": 2})),
        )
        .await
        .expect("create job");

    let first = active_pods(&pods, "pi", 2).await;
    for pod in &first {
        assert!(pod.finalizers().iter().any(|f| f == TRACKING), "{pod:?}");
        let owner = &pod.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
        assert_eq!(owner.uid, created.uid().expect("uid"));
        let labels = pod.labels();
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(labels["controller-uid"], owner.uid);
        finish(&pods, pod, 0).await;
    }
    // Two of three done: one more pod, never two.
    let last = active_pods(&pods, "pi", 1).await;
    finish(&pods, &last[0], 0).await;
    let done = wait_condition(&jobs, "pi", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.active, Some(0));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert_eq!(
        reason(&done, "SuccessCriteriaMet").as_deref(),
        Some("CompletionsReached")
    );
    assert_eq!(
        reason(&done, "Complete").as_deref(),
        Some("CompletionsReached")
    );
    all_released(&pods, "pi").await;
    assert_eq!(
        pods_of(&pods, "pi").await.len(),
        3,
        "no extra pods were made"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_job_should_give_each_index_a_pod_and_fail_an_index_over_its_limit() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let spec = json!({
        "completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "backoffLimitPerIndex": 0,
    });
    jobs.create(&PostParams::default(), &job("ix", spec))
        .await
        .expect("create job");
    let started = active_pods(&pods, "ix", 3).await;
    let indexes: BTreeSet<String> = started
        .iter()
        .map(|p| p.annotations()[INDEX].clone())
        .collect();
    assert_eq!(indexes, ["0", "1", "2"].map(String::from).into());
    for pod in &started {
        let index = &pod.annotations()[INDEX];
        assert_eq!(&pod.labels()[INDEX], index);
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("ix-{index}").as_str())
        );
        let env = spec.containers[0].env.as_ref().expect("env");
        assert!(
            env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX"),
            "{env:?}"
        );
        finish(&pods, pod, if index == "1" { 1 } else { 0 }).await;
    }
    let failed = wait_condition(&jobs, "ix", "Failed").await;
    let status = failed.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!((status.succeeded, status.failed), (Some(2), Some(1)));
    assert_eq!(reason(&failed, "Failed").as_deref(), Some("FailedIndexes"));
    assert_eq!(
        pods_of(&pods, "ix").await.len(),
        3,
        "index 1 was not retried"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_should_fail_past_its_backoff_limit_and_stop_its_other_pods() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let spec = json!({"completions": 4, "parallelism": 2, "backoffLimit": 0});
    jobs.create(&PostParams::default(), &job("flaky", spec))
        .await
        .expect("create job");
    let started = active_pods(&pods, "flaky", 2).await;
    finish(&pods, &started[0], 1).await;
    let failed = wait_condition(&jobs, "flaky", "Failed").await;
    assert_eq!(
        reason(&failed, "FailureTarget").as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(
        reason(&failed, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    let status = failed.status.clone().expect("status");
    // The other pod was stopped, and not counted.
    assert_eq!((status.active, status.failed), (Some(0), Some(1)));
    assert!(
        pods_of(&pods, "flaky").await.len() == 1,
        "the running pod was deleted"
    );
    assert!(status.completion_time.is_none());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_failure_policy_should_fail_the_job_or_ignore_the_failure() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let spec = json!({
        "completions": 1, "backoffLimit": 0,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        ]},
    });
    jobs.create(&PostParams::default(), &job("policy", spec))
        .await
        .expect("create job");
    let first = active_pods(&pods, "policy", 1).await;
    finish(&pods, &first[0], 7).await;
    // Ignored: not counted against backoffLimit 0, and replaced (after the backoff).
    let second = eventually("a replacement pod", || async {
        let active = active_pods(&pods, "policy", 1).await;
        (active[0].name_any() != first[0].name_any()).then_some(active)
    })
    .await;
    let job_now = jobs.get("policy").await.expect("get");
    assert_eq!(job_now.status.as_ref().and_then(|s| s.failed), Some(0));
    finish(&pods, &second[0], 42).await;
    let failed = wait_condition(&jobs, "policy", "Failed").await;
    assert_eq!(
        reason(&failed, "Failed").as_deref(),
        Some("PodFailurePolicy")
    );
    let message = condition(&failed, "Failed")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("exit code 42"), "{message}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_policy_should_complete_an_indexed_job_early() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let spec = json!({
        "completions": 4, "parallelism": 4, "completionMode": "Indexed",
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
    });
    jobs.create(&PostParams::default(), &job("leader", spec))
        .await
        .expect("create job");
    let started = active_pods(&pods, "leader", 4).await;
    let leader = started
        .iter()
        .find(|p| p.annotations()[INDEX] == "0")
        .expect("index 0");
    finish(&pods, leader, 0).await;
    let done = wait_condition(&jobs, "leader", "Complete").await;
    assert_eq!(
        reason(&done, "SuccessCriteriaMet").as_deref(),
        Some("SuccessPolicy")
    );
    let status = done.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(
        (status.active, status.failed),
        (Some(0), Some(0)),
        "the others not counted"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_should_stop_pods_without_counting_them_and_resume_should_restart_the_clock() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    jobs.create(
        &PostParams::default(),
        &job(
            "nap",
            json!({"completions": 2, "parallelism": 2, "suspend": true}),
        ),
    )
    .await
    .expect("create job");
    let suspended = wait_condition(&jobs, "nap", "Suspended").await;
    assert_eq!(
        suspended.status.as_ref().and_then(|s| s.start_time.clone()),
        None
    );
    assert!(pods_of(&pods, "nap").await.is_empty());

    let set_suspend = |on: bool| {
        let jobs = jobs.clone();
        async move {
            jobs.patch(
                "nap",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": on}})),
            )
            .await
            .expect("patch suspend");
        }
    };
    set_suspend(false).await;
    active_pods(&pods, "nap", 2).await;
    let resumed = jobs.get("nap").await.expect("get");
    let c = condition(&resumed, "Suspended").expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("JobResumed"))
    );
    assert!(resumed
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .is_some());

    set_suspend(true).await;
    eventually("the pods stopped", || async {
        pods_of(&pods, "nap").await.is_empty()
    })
    .await;
    let again = wait_condition(&jobs, "nap", "Suspended").await;
    assert_eq!(
        again.status.as_ref().and_then(|s| s.failed),
        Some(0),
        "suspension is no failure"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_should_fail_the_job_and_the_ttl_should_delete_it() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // The TTL loop deletes in the foreground, which the garbage collector carries out.
    let running = run_loops(&client, "job,ttl-after-finished,garbage-collector");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let spec = json!({"activeDeadlineSeconds": 1, "ttlSecondsAfterFinished": 1});
    jobs.create(&PostParams::default(), &job("slow", spec))
        .await
        .expect("create job");
    active_pods(&pods, "slow", 1).await;
    let failed = wait_condition(&jobs, "slow", "Failed").await;
    assert_eq!(
        reason(&failed, "Failed").as_deref(),
        Some("DeadlineExceeded")
    );
    eventually("the expired job deleted", || async {
        jobs.get_opt("slow").await.expect("get").is_none()
    })
    .await;
    running.stop().await;
}

// Regression: a Job deleted in the background vanished at once, and its pods kept the tracking
// finalizer forever (terminating, never gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_job_deleted_in_the_background_should_be_released_and_go() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "job,garbage-collector");
    let jobs = client.namespaced_api::<Job>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    jobs.create(
        &PostParams::default(),
        &job("gone", json!({"parallelism": 2, "completions": 2})),
    )
    .await
    .expect("create job");
    active_pods(&pods, "gone", 2).await;
    jobs.delete("gone", &kube::api::DeleteParams::background())
        .await
        .expect("delete job");
    eventually("the pods gone", || async {
        pods_of(&pods, "gone").await.is_empty()
    })
    .await;
    running.stop().await;
}
