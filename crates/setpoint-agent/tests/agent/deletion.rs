//! Deleting a pod: pre-stop, SIGTERM then SIGKILL after the grace period, and processes that
//! left the session killed with their pod (through its cgroup or without cgroups).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_should_run_pre_stop_then_sigterm_and_sigkill_after_the_grace_period() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    // Honors SIGTERM: writes and exits.
    h.create_pod(
        "polite",
        json!({"containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "trap 'echo term >> polite; exit 0' TERM; while true; do sleep 0.1; done"],
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> polite"]}}}
        }]}),
    )
    .await;
    // Ignores SIGTERM: killed after its 2 s grace period.
    h.create_pod(
        "stubborn",
        json!({"terminationGracePeriodSeconds": 2, "containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "trap '' TERM; echo started > stubborn; while true; do sleep 0.1; done"]
        }]}),
    )
    .await;
    let mut pids = Vec::new();
    for name in ["polite", "stubborn"] {
        let pod = h
            .wait_pod(name, "Running", |p| first_container(p).is_some_and(running))
            .await;
        pids.push(container_pid(first_container(&pod).expect("status")).expect("pid"));
    }
    // The traps are set once the shells have written (stubborn) or run a loop (polite).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !work.path().join("stubborn").exists() {
        assert!(Instant::now() < deadline);
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_millis(300)).await;
    for name in ["polite", "stubborn"] {
        h.delete_pod(name).await;
    }
    for name in ["polite", "stubborn"] {
        h.wait_gone(name).await;
    }
    for pid in pids {
        assert!(!alive(pid), "process {pid} survived its pod's deletion");
    }
    let polite =
        std::fs::read_to_string(work.path().join("polite")).expect("the hook and the trap wrote");
    assert_eq!(polite, "prestop\nterm\n", "preStop first, then SIGTERM");
}

/// The processes whose command line holds `arg`.
fn with_arg(arg: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    alive(*pid)
                        && std::fs::read(format!("/proc/{pid}/cmdline"))
                            .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The session id of process `pid`.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// Kills the processes `with_arg(arg)` finds (what a failed test left).
struct KillWithArg(String);

impl Drop for KillWithArg {
    fn drop(&mut self) {
        for pid in with_arg(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Runs a pod whose container starts `sleep` in a session of its own (`setsid`) and keeps
/// running; deletes the pod; checks that the escaped `sleep` is gone too. Returns the run
/// record of the container.
async fn escaped_process_should_die_with_its_pod(h: &Harness, name: &str) -> serde_json::Value {
    // A unique duration: the escaped sleep is found by its argument.
    let arg = format!("1001.{}{}", std::process::id(), rand_suffix() % 1_000_000);
    let _cleanup = KillWithArg(arg.clone());
    h.create_pod(
        name,
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", format!("setsid sleep {arg} & exec sleep 1000")],
        }]}),
    )
    .await;
    let pod = h
        .wait_pod(name, "Running", |p| first_container(p).is_some_and(running))
        .await;
    let container = container_pid(first_container(&pod).expect("status")).expect("pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Wait for the `sleep` itself: `setsid` carries the same argument in its own command line
    // for the moment between its start and its `setsid()` and `exec`.
    let escaped = loop {
        if let [pid] = with_arg(&arg)[..] {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "sleep" {
                break pid;
            }
        }
        assert!(Instant::now() < deadline, "the escaped sleep never ran");
        sleep(Duration::from_millis(20)).await;
    };
    assert_ne!(
        session_of(escaped),
        session_of(container),
        "setsid put the sleep in a session of its own"
    );
    let record = files_named(h.root.path(), ".run.json")
        .first()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .expect("a run record");
    h.delete_pod(name).await;
    h.wait_gone(name).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !with_arg(&arg).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the escaped process {escaped} (sleep {arg}) outlived its pod"
        );
        sleep(Duration::from_millis(20)).await;
    }
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_that_left_the_session_should_be_killed_with_its_pod_through_its_cgroup() {
    // Regression (issue 14.13): `setsid sleep 1001 &` in a container outlived its deleted pod;
    // the agent killed the container's process group only. (Tests run as root here, so the
    // container has a cgroup.)
    let h = Harness::start().await;
    let record = escaped_process_should_die_with_its_pod(&h, "escaper").await;
    let cgroup = record["cgroup"]["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the run used a cgroup: {record}"));
    assert!(
        !cgroup.exists(),
        "the run's cgroup {} was removed",
        cgroup.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_that_left_the_session_should_be_killed_with_its_pod_without_cgroups() {
    // Regression (issue 14.13), the fallback: without cgroups the shim is a child subreaper
    // and kills every descendant.
    let h = Harness::start_tracking(ContainerTracking::Subreaper).await;
    let record = escaped_process_should_die_with_its_pod(&h, "escaper").await;
    assert!(record.get("cgroup").is_none(), "no cgroup: {record}");
}
