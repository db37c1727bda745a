//! `shareProcessNamespace: true`: as root, one PID namespace per pod whose PID 1 is the pod's
//! init (`agent-shim pod-init`), with a `/proc` of its own in each container — the containers
//! see each other and not the host; exec lands in it; an agent restart adopts the init; the
//! pod's deletion stops it. Pods without it keep the host's namespace. Without mounts (the
//! non-root fallback, forced here) the pod runs in the host's namespace with a Warning event.

use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use setpoint_agent::MountMode;

use super::*;

const SHIM: &str = env!("CARGO_BIN_EXE_setpoint-agent-shim");

fn is_root() -> bool {
    euid() == Some(0)
}

fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The PID namespace of `pid` (`pid:[inode]`).
fn pid_ns(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn statuses(pod: &Pod) -> Vec<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
}

fn all_running(n: usize) -> impl Fn(&Pod) -> bool {
    move |p| {
        let cs = statuses(p);
        cs.len() == n && cs.iter().all(running)
    }
}

fn pid_of(pod: &Pod, name: &str) -> i32 {
    statuses(pod)
        .iter()
        .find(|c| c.name == name)
        .and_then(container_pid)
        .expect("the container's pid")
}

/// The pod's recorded init: (pid, its start time).
fn init_record(root: &Path) -> Option<serde_json::Value> {
    let path = files_named(root, "pid-namespace.json").into_iter().next()?;
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Waits for a line starting `prefix` in the log of container `name`; returns the line.
async fn log_line(root: &Path, name: &str, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let logs: String = files_named(root, ".log")
            .into_iter()
            .filter(|p| p.to_string_lossy().contains(name))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect();
        if let Some(line) = logs
            .lines()
            .find_map(|l| l.find(prefix).map(|i| l[i..].to_owned()))
        {
            return line;
        }
        assert!(Instant::now() < deadline, "{name}: no {prefix} in {logs}");
        sleep(Duration::from_millis(100)).await;
    }
}

fn sharing_pod(mark: &str) -> serde_json::Value {
    json!({
        "shareProcessNamespace": true,
        "containers": [
            // The bracket keeps the looker's own command line from matching.
            {"name": "target", "command": ["sh", "-c",
                format!("while :; do sleep 1; done # TARGET-{mark}")]},
            {"name": "looker", "command": ["sh", "-c",
                // `grep -q` answers 0 on a match even when a process vanished mid-scan (in the
                // host's namespace one always does); `grep -l` would answer 2 and loop forever.
                format!("until grep -qs 'TARGE[T]-{mark}' /proc/[0-9]*/cmdline; do sleep 0.1; done; \
                         echo PID1=$(tr '\\0' ' ' < /proc/1/cmdline); \
                         echo ALL=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '); \
                         exec sleep 1000 # {mark}")]}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_pid_namespace_should_hold_the_pods_processes_only() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mut h = Harness::start().await;
    let mark = marker("pidns");
    h.create_pod("sharing", sharing_pod(&mark)).await;
    h.create_pod("plain", sleeper(&marker("plain"))).await;
    let pod = h.wait_pod("sharing", "Running", all_running(2)).await;
    let (target, looker) = (pid_of(&pod, "target"), pid_of(&pod, "looker"));

    // The looker sees the target, PID 1 is the pod's init, and no host process.
    let pid1 = log_line(h.root.path(), "looker", "PID1=").await;
    assert!(pid1.contains("--pod-init-reaper"), "{pid1}");
    let all = log_line(h.root.path(), "looker", "ALL=").await;
    assert!(all.contains(&format!("TARGET-{mark}")), "{all}");
    let ours = std::fs::read_to_string("/proc/self/cmdline")
        .expect("our cmdline")
        .replace('\0', " ");
    assert!(
        !all.contains(ours.trim()),
        "the test process is visible: {all}"
    );

    // Both containers are in the init's namespace, which is not ours.
    let init = init_record(h.root.path()).expect("the init's record");
    let init_pid = init["initPid"].as_i64().expect("initPid").to_string();
    assert!(alive(init_pid.parse().expect("a pid")));
    let theirs = pid_ns(&target.to_string());
    assert_ne!(theirs, pid_ns("self"));
    assert_eq!(theirs, pid_ns(&looker.to_string()));
    assert_eq!(
        pid_ns(&init_pid),
        theirs,
        "the init is the namespace's PID 1"
    );

    // Exec lands in the same namespace, with the same /proc.
    let spec = files_named(h.root.path(), "target/0.spec.json")
        .into_iter()
        .next()
        .expect("the target's spec");
    let out = std::process::Command::new(SHIM)
        .args(["exec", "--target", &target.to_string(), "--spec"])
        .arg(&spec)
        .args([
            "--",
            "sh",
            "-c",
            "tr '\\0' ' ' < /proc/1/cmdline; echo; readlink /proc/self/ns/pid",
        ])
        .output()
        .expect("the exec helper ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("--pod-init-reaper"), "{stdout}");
    assert!(stdout.contains(&theirs), "{stdout} (want {theirs})");

    // A pod without it keeps the host's namespace.
    let plain = h.wait_pod("plain", "Running", all_running(1)).await;
    assert_eq!(pid_ns(&pid_of(&plain, "app").to_string()), pid_ns("self"));

    // An agent restart adopts the init: same init, same containers.
    h.stop_agent().await;
    h.start_agent();
    sleep(Duration::from_secs(2)).await;
    let pod = h.wait_pod("sharing", "Running", all_running(2)).await;
    assert_eq!(pid_of(&pod, "target"), target);
    assert_eq!(init_record(h.root.path()), Some(init.clone()));
    assert!(alive(init_pid.parse().expect("a pid")));

    // Deleting the pod stops the init: nothing of the pod is left.
    h.delete_pod("sharing").await;
    h.wait_gone("sharing").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(init_pid.parse().expect("a pid")) {
        assert!(
            Instant::now() < deadline,
            "the init {init_pid} outlived its pod"
        );
        sleep(Duration::from_millis(50)).await;
    }
    assert!(marked(&mark).is_empty());
    assert!(!alive(target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_namespaces_share_process_namespace_should_be_warned_about() {
    // The non-root fallback, forced: no mounts, so no PID namespace either.
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Emulated).await;
    let mark = marker("pidns-fallback");
    h.create_pod("sharing", sharing_pod(&mark)).await;
    let pod = h.wait_pod("sharing", "Running", all_running(2)).await;
    // Both containers are in the host's namespace, so they see each other through its /proc.
    // (The looker's own scan of every host process is not waited for: on a busy machine a read
    // of some other process's cmdline can stall far longer than the test may wait.)
    assert_eq!(pid_ns(&pid_of(&pod, "target").to_string()), pid_ns("self"));
    assert_eq!(pid_ns(&pid_of(&pod, "looker").to_string()), pid_ns("self"));
    assert!(init_record(h.root.path()).is_none());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = h
            .client
            .namespaced_api::<Event>(NS)
            .list(&ListParams::default())
            .await
            .expect("events");
        let reasons: Vec<_> = events
            .items
            .iter()
            .filter_map(|e| e.reason.clone())
            .collect();
        if reasons
            .iter()
            .any(|r| r == "ShareProcessNamespaceNotHonoured")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no warning event: {reasons:?}");
        sleep(Duration::from_millis(100)).await;
    }
}
