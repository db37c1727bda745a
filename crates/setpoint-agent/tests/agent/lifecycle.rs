//! A container's life as a process: running and reported, exits, restarts with back-off, a
//! killed process restarted, containers without a command or with args only.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_should_run_as_a_real_process_and_report_running() {
    let h = Harness::start().await;
    let marker = marker("run");
    h.create_pod("web", sleeper(&marker)).await;
    let pod = h
        .wait_pod("web", "Running and ready", |p| {
            phase(p) == "Running" && first_container(p).is_some_and(|c| running(c) && c.ready)
        })
        .await;
    let status = pod.status.as_ref().expect("status");
    assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
    assert!(status.start_time.is_some());
    let conditions: BTreeMap<&str, &str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    for condition in [
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ] {
        assert_eq!(
            conditions.get(condition),
            Some(&"True"),
            "{condition}: {conditions:?}"
        );
    }
    let container = first_container(&pod).expect("container status");
    assert_eq!(container.restart_count, 0);
    assert_eq!(container.started, Some(true));
    let pid = container_pid(container).expect("a pid in containerID");
    assert!(alive(pid), "process {pid} is not running");
    assert_eq!(
        marked(&marker),
        vec![pid],
        "exactly the container's process carries the marker"
    );
    // Its output is in the log.
    let logs = files_named(h.root.path(), "0.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !logs
        .iter()
        .any(|l| std::fs::read_to_string(l).is_ok_and(|t| t.contains("hi")))
    {
        assert!(Instant::now() < deadline, "no \"hi\" in {logs:?}");
        sleep(Duration::from_millis(50)).await;
    }

    h.delete_pod("web").await;
    h.wait_gone("web").await;
    assert!(!alive(pid), "the deleted pod's process {pid} still runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_with_restart_policy_never_should_fail_the_pod_with_the_exit_code() {
    let h = Harness::start().await;
    h.create_pod(
        "fails",
        json!({"restartPolicy": "Never", "containers": [{"name": "app", "command": ["sh", "-c", "exit 1"]}]}),
    )
    .await;
    let pod = h
        .wait_pod("fails", "Failed", |p| phase(p) == "Failed")
        .await;
    let container = first_container(&pod).expect("container status");
    let terminated = container
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 1);
    assert_eq!(terminated.reason.as_deref(), Some("Error"));
    assert_eq!(container.restart_count, 0);

    h.create_pod(
        "succeeds",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app", "command": ["true"]}]}),
    )
    .await;
    let pod = h
        .wait_pod("succeeds", "Succeeded", |p| phase(p) == "Succeeded")
        .await;
    let terminated = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_container_should_restart_then_back_off() {
    let h = Harness::start().await;
    h.create_pod(
        "crashy",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app", "command": ["sh", "-c", "exit 3"]}]}),
    )
    .await;
    // The first restart is immediate; the second waits 10 s: the container shows
    // CrashLoopBackOff with its last exit.
    let pod = h
        .wait_pod("crashy", "CrashLoopBackOff", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
            })
        })
        .await;
    assert_eq!(
        phase(&pod),
        "Running",
        "a pod restarting its containers is Running"
    );
    let container = first_container(&pod).expect("container status");
    assert!(
        container.restart_count >= 1,
        "restartCount {}",
        container.restart_count
    );
    let waiting = container
        .state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .expect("waiting");
    let message = waiting.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("back-off 10s restarting failed container=app pod=crashy_default("),
        "{message}"
    );
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState.terminated");
    assert_eq!(last.exit_code, 3);
    h.delete_pod("crashy").await;
    h.wait_gone("crashy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_process_should_be_restarted_at_once_with_its_last_state() {
    let h = Harness::start().await;
    let marker = marker("kill");
    h.create_pod("victim", sleeper(&marker)).await;
    let pod = h
        .wait_pod("victim", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let pod = h
        .wait_pod("victim", "running again after one restart", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let container = first_container(&pod).expect("status");
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState.terminated");
    assert_eq!((last.exit_code, last.signal), (137, Some(9)));
    let new_pid = container_pid(container).expect("pid");
    assert_ne!(new_pid, pid);
    assert!(alive(new_pid));
    assert_eq!(marked(&marker), vec![new_pid], "one process, the new one");
    h.delete_pod("victim").await;
    h.wait_gone("victim").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_without_command_should_wait_with_a_clear_reason() {
    let h = Harness::start().await;
    h.create_pod(
        "imagey",
        json!({"containers": [{"name": "nginx", "image": "nginx"}]}),
    )
    .await;
    let pod = h
        .wait_pod("imagey", "waiting with a reason", |p| {
            first_container(p)
                .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.waiting.is_some()))
        })
        .await;
    let waiting = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.waiting.clone())
        .expect("waiting");
    assert_eq!(
        waiting.reason.as_deref(),
        Some("CreateContainerConfigError")
    );
    assert_eq!(
        waiting.message.as_deref(),
        Some("setpoint runs processes, not images: container nginx has no command and no args")
    );
    assert_eq!(phase(&pod), "Pending");
    assert_eq!(first_container(&pod).map(|c| c.restart_count), Some(0));
    h.delete_pod("imagey").await;
    h.wait_gone("imagey").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_with_args_and_no_command_should_run_its_args() {
    // Regression (issue 14.18): `kubectl run x --image=busybox -- sh -c '…'` puts the command
    // in `args`; the pod waited with CreateContainerConfigError because `command` was empty.
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "argsonly",
        json!({"restartPolicy": "Never", "containers": [{
            "name": "app", "workingDir": work.path(),
            "args": ["sh", "-c", "echo ran-from-args > out"]
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("argsonly", "Succeeded", |p| phase(p) == "Succeeded")
        .await;
    let terminated = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(
        std::fs::read_to_string(work.path().join("out")).expect("the output file"),
        "ran-from-args\n"
    );
    h.delete_pod("argsonly").await;
    h.wait_gone("argsonly").await;
}
