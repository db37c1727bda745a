//! Resource limits and identities of real container processes: a memory limit enforced to an
//! `OOMKilled` restart, CPU and memory limits written into the container's cgroups with its
//! QoS class and OOM score, `runAsUser`/`runAsGroup`/`supplementalGroups`/`fsGroup`, and
//! `shareProcessNamespace` (more in `pid_namespace.rs`). Root only (cgroup writes, uid
//! changes): each test says "skipped: needs root" otherwise; the non-root refusal of another
//! user is covered by the unit tests of `pods/resources.rs`.

use super::*;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// The run records (`*.run.json`) under the agent's root, as JSON.
fn run_records(root: &Path) -> Vec<serde_json::Value> {
    files_named(root, ".run.json")
        .into_iter()
        .filter_map(|p| serde_json::from_slice(&std::fs::read(p).ok()?).ok())
        .collect()
}

/// The directory of the run's limit cgroup used for `controller`, from its run record.
fn limit_dir(record: &serde_json::Value, controller: &str) -> Option<PathBuf> {
    record["limitCgroups"]
        .as_array()?
        .iter()
        .find(|cg| {
            cg["controllers"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c == controller))
        })
        .and_then(|cg| cg["cgroup"]["dir"].as_str())
        .map(PathBuf::from)
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_should_oom_kill_and_restart_the_container() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let h = Harness::start().await;
    // `tail` keeps its whole input (no newline ends a line): 200 MiB against 64 MiB.
    h.create_pod(
        "hog",
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", "head -c 200M /dev/zero | tail"],
            "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}}
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("hog", "an OOMKilled restart", |p| {
            first_container(p).is_some_and(|c| {
                c.restart_count >= 1
                    && c.last_state
                        .as_ref()
                        .and_then(|s| s.terminated.as_ref())
                        .is_some_and(|t| t.reason.as_deref() == Some("OOMKilled"))
            })
        })
        .await;
    let status = first_container(&pod).expect("a container status");
    let last = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(last.exit_code, 137, "{last:?}");
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.qos_class.as_deref()),
        Some("Guaranteed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_should_be_written_into_the_containers_cgroups() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let h = Harness::start().await;
    let mark = marker("limits");
    h.create_pod(
        "capped",
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", "exec sleep 1000"],
            "env": [{"name": "SETPOINT_TEST_MARKER", "value": mark}],
            "resources": {
                "requests": {"cpu": "100m", "memory": "32Mi"},
                "limits": {"cpu": "200m", "memory": "128Mi"}
            }
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("capped", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.qos_class.as_deref()),
        Some("Burstable")
    );
    let pid = container_pid(first_container(&pod).expect("status")).expect("a pid");
    let record = run_records(h.root.path())
        .into_iter()
        .find(|r| r["containerPid"] == pid)
        .expect("the run record");
    let memory = limit_dir(&record, "memory").expect("a memory cgroup");
    let cpu = limit_dir(&record, "cpu").expect("a cpu cgroup");
    let v2 = record["limitCgroups"]
        .as_array()
        .is_some_and(|cgs| cgs.iter().any(|cg| cg["version"] == "v2"));
    if v2 {
        assert_eq!(read(&memory, "memory.max"), (128u64 << 20).to_string());
        assert_eq!(read(&cpu, "cpu.max"), "20000 100000");
    } else {
        assert_eq!(
            read(&memory, "memory.limit_in_bytes"),
            (128u64 << 20).to_string()
        );
        assert_eq!(read(&cpu, "cpu.cfs_quota_us"), "20000");
        assert_eq!(read(&cpu, "cpu.cfs_period_us"), "100000");
        assert_eq!(read(&cpu, "cpu.shares"), "102");
    }
    for dir in [&memory, &cpu] {
        assert!(
            read(dir, "cgroup.procs")
                .lines()
                .any(|l| l == pid.to_string()),
            "{} holds {pid}",
            dir.display()
        );
    }
    // Burstable: 1000 − 1000 × 32 MiB / machine memory.
    let score: i32 = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .expect("oom_score_adj")
        .trim()
        .parse()
        .expect("a number");
    assert!((3..=999).contains(&score), "{score}");
    h.delete_pod("capped").await;
    h.wait_gone("capped").await;
    assert!(!memory.exists(), "{} removed", memory.display());
    assert!(marked(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_user_and_group_should_be_the_processs_identity() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let h = Harness::start().await;
    h.create_pod(
        "someone",
        json!({
            "securityContext": {"runAsUser": 1000, "runAsGroup": 3000,
                                "supplementalGroups": [4000], "fsGroup": 5000},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "pod-level", "command": ["sh", "-c", "touch /data/mine && exec sleep 1000"],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "own", "command": ["sh", "-c", "exec sleep 1000"],
                 "securityContext": {"runAsUser": 2000}}
            ]
        }),
    )
    .await;
    let pod = h
        .wait_pod("someone", "Running", |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| cs.len() == 2 && cs.iter().all(running))
        })
        .await;
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .expect("statuses");
    for (name, uid, gid) in [("pod-level", "1000", "3000"), ("own", "2000", "3000")] {
        let status = statuses
            .iter()
            .find(|c| c.name == name)
            .expect("the container");
        let pid = container_pid(status).expect("a pid");
        let proc_status =
            std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
        let field = |key: &str| {
            proc_status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_owned)
        };
        assert_eq!(field("Uid:").as_deref(), Some(uid), "{name}");
        assert_eq!(field("Gid:").as_deref(), Some(gid), "{name}");
        let groups = proc_status
            .lines()
            .find(|l| l.starts_with("Groups:"))
            .unwrap_or_default()
            .to_owned();
        assert!(
            groups.contains("4000") && groups.contains("5000"),
            "{name}: {groups}"
        );
    }
    // fsGroup: the volume is the group's (setgid: what the container creates is too).
    use std::os::unix::fs::MetadataExt as _;
    let volume = files_named(h.root.path(), "mine")
        .into_iter()
        .next()
        .expect("the file the container made");
    let made = std::fs::metadata(&volume).expect("metadata");
    assert_eq!((made.uid(), made.gid()), (1000, 5000));
    let dir = std::fs::metadata(volume.parent().expect("dir")).expect("metadata");
    assert_eq!(dir.gid(), 5000);
    assert_eq!(dir.mode() & 0o2070, 0o2070);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_process_namespace_should_let_containers_see_each_other() {
    // As root the pod gets a PID namespace of its own (`pid_namespace.rs`), else the
    // containers keep the machine's: either way they see each other.
    let h = Harness::start().await;
    let mark = marker("shared-pid");
    h.create_pod(
        "sharing",
        json!({
            "shareProcessNamespace": true,
            "containers": [
                // The bracket keeps the looker's own command line from matching.
                {"name": "target", "command": ["sh", "-c",
                    format!("while :; do sleep 1; done # TARGET-{mark}")]},
                {"name": "looker", "command": ["sh", "-c",
                    format!("until grep -qs 'TARGE[T]-{mark}' /proc/[0-9]*/cmdline; do sleep 0.1; done; echo seen; exec sleep 1000 # {mark}")]}
            ]
        }),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let logs = files_named(h.root.path(), ".log")
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("looker"))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect::<String>();
        if logs.contains("seen") {
            break;
        }
        assert!(Instant::now() < deadline, "looker never saw target: {logs}");
        sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cgroups_limits_should_be_recorded_not_enforced() {
    // The fallback without root, forced: no cgroups at all. The container runs; nothing
    // limits it; its OOM score is still its QoS class's where the agent may set it.
    let mut h = Harness::start_tracking(ContainerTracking::Subreaper).await;
    h.create_pod(
        "unlimited",
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", "exec sleep 1000"],
            "resources": {"limits": {"memory": "64Mi", "cpu": "100m"}}
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("unlimited", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("a pid");
    let record = run_records(h.root.path())
        .into_iter()
        .find(|r| r["containerPid"] == pid)
        .expect("the run record");
    assert!(record.get("limitCgroups").is_none(), "{record}");
    // Lowering a score needs CAP_SYS_RESOURCE (root in a container may lack it): then the
    // shim keeps its own.
    let may_lower = std::process::Command::new("sh")
        .args(["-c", "echo -1 > /proc/self/oom_score_adj"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let score =
        std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).expect("oom_score_adj");
    if may_lower {
        assert_eq!(score.trim(), "-997");
    }
    h.stop_agent().await;
}
