//! Jobs and CronJobs with real process pods: an Indexed Job of 10 completions, 3 at a time,
//! whose index 4 fails on its first run (a marker file remembers it) and still completes;
//! `kubectl create job`, `kubectl wait --for=condition=complete`, `kubectl logs job/NAME`; a
//! CronJob every minute with Forbid that starts its Job on schedule, and
//! `kubectl create job --from=cronjob/NAME`.

use std::time::{Duration, Instant};

use crate::common::Server;

/// Waits (`limit` at most) until `check` accepts the output of `kubectl args`.
fn wait_for(s: &Server, args: &[&str], limit: Duration, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let out = s.kubectl(args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "waiting on kubectl {args:?}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn indexed_job(marks: &str) -> String {
    format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {{name: indexed}}
spec:
  completions: 10
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox
        command:
        - sh
        - -c
        - |
          if [ "$JOB_COMPLETION_INDEX" = 4 ] && [ ! -e {marks}/failed-once ]; then
            touch {marks}/failed-once; echo "index 4 fails once"; exit 3
          fi
          echo "index $JOB_COMPLETION_INDEX done"
"#
    )
}

#[test]
fn indexed_job_should_complete_although_one_index_fails_once() {
    let s = Server::start();
    let marks = s.dir.join("marks");
    std::fs::create_dir_all(&marks).expect("marks dir");
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        &indexed_job(&marks.display().to_string()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // One failure, then the 10 s recreation backoff for index 4: well within the wait.
    s.ok(&[
        "wait",
        "--for=condition=complete",
        "job/indexed",
        "--timeout=180s",
    ]);
    let status = s.ok(&[
        "get",
        "job",
        "indexed",
        "-o",
        "jsonpath={.status.succeeded} {.status.failed} {.status.completedIndexes} {.status.active}",
    ]);
    assert_eq!(status, "10 1 0-9 0");
    assert!(marks.join("failed-once").exists());
    // Every pod carried its index; index 4 had two.
    let indexes = s.ok(&[
        "get",
        "pods",
        "-l",
        "batch.kubernetes.io/job-name=indexed",
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.batch\\.kubernetes\\.io/job-completion-index} {.status.phase}{\"\\n\"}{end}",
    ]);
    let mut lines: Vec<&str> = indexes.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines.len(), 11, "{indexes}");
    assert!(
        lines.contains(&"4 Failed") && lines.contains(&"4 Succeeded"),
        "{indexes}"
    );
    // No pod keeps the tracking finalizer once counted.
    let finalizers = s.ok(&[
        "get",
        "pods",
        "-l",
        "batch.kubernetes.io/job-name=indexed",
        "-o",
        "jsonpath={.items[*].metadata.finalizers}",
    ]);
    assert!(!finalizers.contains("job-tracking"), "{finalizers}");
    let logs = s.ok(&["logs", "job/indexed"]);
    assert!(
        logs.contains("done") || logs.contains("fails once"),
        "{logs}"
    );
}

#[test]
fn kubectl_create_job_should_run_and_its_logs_should_be_readable() {
    let s = Server::start();
    s.ok(&[
        "create",
        "job",
        "hello",
        "--image=busybox",
        "--",
        "sh",
        "-c",
        "echo hello from a job",
    ]);
    s.ok(&[
        "wait",
        "--for=condition=complete",
        "job/hello",
        "--timeout=120s",
    ]);
    assert_eq!(s.ok(&["logs", "job/hello"]).trim(), "hello from a job");
    let row = s.ok(&["get", "job", "hello", "--no-headers"]);
    assert!(row.contains("Complete") && row.contains("1/1"), "{row}");
}

const CRONJOB: &str = r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: tick
            image: busybox
            command: ["sh", "-c", "echo tick"]
"#;

#[test]
fn cronjob_should_start_jobs_on_schedule_and_on_demand() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], CRONJOB);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // On demand: a Job from the CronJob's template, owned by it.
    s.ok(&["create", "job", "tick-now", "--from=cronjob/tick"]);
    s.ok(&[
        "wait",
        "--for=condition=complete",
        "job/tick-now",
        "--timeout=120s",
    ]);
    assert_eq!(s.ok(&["logs", "job/tick-now"]).trim(), "tick");
    let owner = s.ok(&[
        "get",
        "job",
        "tick-now",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].kind}",
    ]);
    assert_eq!(owner, "CronJob");

    // On schedule: within the next minute, a Job named after its start time, which completes.
    let jobs = wait_for(
        &s,
        &["get", "jobs", "-o", "jsonpath={.items[*].metadata.name}"],
        Duration::from_secs(120),
        |names| {
            names
                .split_whitespace()
                .any(|n| n != "tick-now" && n.starts_with("tick-"))
        },
    );
    let scheduled = jobs
        .split_whitespace()
        .find(|n| *n != "tick-now")
        .expect("a scheduled job")
        .to_owned();
    let minutes: i64 = scheduled
        .trim_start_matches("tick-")
        .parse()
        .expect("minutes since the epoch");
    let stamp = s.ok(&[
        "get",
        "job",
        &scheduled,
        "-o",
        "jsonpath={.metadata.annotations.batch\\.kubernetes\\.io/cronjob-scheduled-timestamp}",
    ]);
    let at: k8s_openapi::jiff::Timestamp = stamp.parse().expect("an RFC 3339 time");
    assert_eq!(at.as_second() / 60, minutes);
    s.ok(&[
        "wait",
        "--for=condition=complete",
        &format!("job/{scheduled}"),
        "--timeout=120s",
    ]);
    wait_for(
        &s,
        &[
            "get",
            "cronjob",
            "tick",
            "-o",
            "jsonpath={.status.lastSuccessfulTime}",
        ],
        Duration::from_secs(60),
        |t| !t.is_empty(),
    );
}
