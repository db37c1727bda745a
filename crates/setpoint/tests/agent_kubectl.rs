//! Pods as real processes through `setpoint server` (all loops and the local agent on) and the
//! real `kubectl`: a Deployment's pods become processes, a killed process is restarted, a
//! deleted pod is replaced, and deleting the Deployment leaves no process behind — nor does
//! stopping the server.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::processes::{processes_with, Cleanup};
use common::Server;

/// The Deployment: three shells looping, each with `marker` in its command line. Bound to the
/// local agent's node in the template: the test is about the agent, not the scheduler.
fn deployment(marker: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: loop}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: loop}}}}
  template:
    metadata: {{labels: {{app: loop}}}}
    spec:
      nodeName: local
      terminationGracePeriodSeconds: 3
      containers:
      - name: sh
        image: busybox
        command: ["sh", "-c", "while true; do sleep 1; done # {marker}"]
"#
    )
}

/// Pod name → (phase, container pid, restart count, running) of the pods labelled app=loop.
fn pods(s: &Server) -> BTreeMap<String, (String, Option<i32>, u32, bool)> {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=loop",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}"#,
    ]);
    out.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let name = fields.next()?.to_owned();
            let phase = fields.next().unwrap_or_default().to_owned();
            let pid = fields
                .next()
                .and_then(|id| id.strip_prefix("setpoint://")?.parse().ok());
            let restarts = fields.next().and_then(|r| r.parse().ok()).unwrap_or(0);
            let running = fields.next().is_some_and(|t| !t.is_empty());
            Some((name, (phase, pid, restarts, running)))
        })
        .collect()
}

/// Waits until `check` accepts the pods; panics with them after 90 s.
fn wait_pods(
    s: &Server,
    what: &str,
    check: impl Fn(&BTreeMap<String, (String, Option<i32>, u32, bool)>) -> bool,
) -> BTreeMap<String, (String, Option<i32>, u32, bool)> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let found = pods(s);
        if check(&found) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "waiting for {what}; pods: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn all_running(pods: &BTreeMap<String, (String, Option<i32>, u32, bool)>, n: usize) -> bool {
    pods.len() == n
        && pods
            .values()
            .all(|(phase, pid, _, running)| phase == "Running" && pid.is_some() && *running)
}

fn pids_of(pods: &BTreeMap<String, (String, Option<i32>, u32, bool)>) -> Vec<i32> {
    let mut pids: Vec<i32> = pods.values().filter_map(|p| p.1).collect();
    pids.sort_unstable();
    pids
}

fn sorted(mut pids: Vec<i32>) -> Vec<i32> {
    pids.sort_unstable();
    pids
}

fn wait_processes(marker: &str, want: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = sorted(processes_with(marker));
        if found == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes {found:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Applies the Deployment with a marker unique to this run (`prefix`, the process and the
/// time), and returns the marker and a guard that kills its processes if the test fails.
fn apply_deployment(s: &Server, prefix: &str) -> (String, Cleanup) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("{prefix}-{}-{nanos:x}", std::process::id());
    let cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &deployment(&marker));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (marker, cleanup)
}

/// Waits (90 s at most) until pod `name` has finished successfully.
fn wait_succeeded(s: &Server, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let phase = s.ok(&["get", "pod", name, "-o", "jsonpath={.status.phase}"]);
        if phase == "Succeeded" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} is {phase:?}: {}",
            s.ok(&["get", "pod", name, "-o", "yaml"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn deployment_pods_should_run_as_processes_and_leave_none_behind() {
    let mut s = Server::start();
    let (marker, _cleanup) = apply_deployment(&s, "setpoint-agent-kubectl");

    // Three pods Running, each a real process carrying the marker.
    let running = wait_pods(&s, "3 pods running", |p| all_running(p, 3));
    let pids = pids_of(&running);
    wait_processes(&marker, &pids);
    let nodes = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=loop",
        "-o",
        "jsonpath={.items[*].spec.nodeName}",
    ]);
    assert!(nodes.split_whitespace().all(|n| n == "local"), "{nodes}");

    // kill -9 one: restarted, restart count 1.
    let (victim, (_, victim_pid, _, _)) = running.iter().next().expect("a pod");
    let victim_pid = victim_pid.expect("pid");
    let status = std::process::Command::new("kill")
        .args(["-9", &victim_pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let after_kill = wait_pods(&s, "the killed container restarted", |p| {
        all_running(p, 3)
            && p.get(victim)
                .is_some_and(|(_, pid, restarts, _)| *restarts == 1 && *pid != Some(victim_pid))
    });
    wait_processes(&marker, &pids_of(&after_kill));

    // Delete a pod: replaced by a new one, its process gone.
    s.ok(&["delete", "pod", victim, "--wait=false"]);
    let replaced = wait_pods(&s, "the deleted pod replaced", |p| {
        all_running(p, 3) && !p.contains_key(victim)
    });
    let new_pid = after_kill[victim].1.expect("pid");
    wait_processes(&marker, &pids_of(&replaced));
    assert!(!processes_with(&marker).contains(&new_pid));

    // Delete the Deployment: pods gone, no process left.
    s.ok(&["delete", "deployment", "loop"]);
    wait_pods(&s, "no pods", BTreeMap::is_empty);
    wait_processes(&marker, &[]);
    // The agent removes a pod's directory once the pod is gone from the API, which kubectl
    // may see first: wait for it (a SIGKILL'd server would leave it for `agent cleanup`).
    let agent_root = s.dir.join("agent");
    let pods_dir = agent_root.join("pods");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pods_dir.read_dir().is_ok_and(|mut d| d.next().is_none()) {
        assert!(Instant::now() < deadline, "pod directories left behind");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Stop the server: nothing of the agent's survives.
    s.kill();
    let shims: Vec<i32> = processes_with("agent-shim")
        .into_iter()
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(&agent_root.display().to_string())
            })
        })
        .collect();
    assert!(shims.is_empty(), "shims left running: {shims:?}");
    assert!(processes_with(&marker).is_empty());
    assert!(
        pods_dir.read_dir().is_ok_and(|mut d| d.next().is_none()),
        "pod directories came back"
    );
}

#[test]
fn kubectl_run_with_the_command_in_args_should_run_it() {
    // Regression (issue 14.18): `kubectl run x --image=busybox -- sh -c '…'` puts the command
    // in `args`; the pod waited with CreateContainerConfigError because `command` was empty.
    let s = Server::start();
    s.ok(&[
        "run",
        "hi",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "echo hi from args",
    ]);
    wait_succeeded(&s, "hi");
    assert_eq!(s.ok(&["logs", "hi"]), "hi from args\n");
}

/// Every regular file under `dir`, with its permission bits.
fn file_modes(dir: &Path, out: &mut Vec<(std::path::PathBuf, u32)>) {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in std::fs::read_dir(dir)
        .expect("the data directory")
        .flatten()
    {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue; // gone meanwhile
        };
        if meta.is_dir() {
            file_modes(&entry.path(), out);
        } else if meta.is_file() {
            out.push((entry.path(), meta.permissions().mode() & 0o777));
        }
    }
}

#[test]
fn a_servers_data_directory_and_files_should_be_private() {
    // Regression (issue 14.15): the store's log files were 0644, and a data directory that
    // already existed with 0755 was used as it was. Pod logs and records were 0644 too.
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = Server::start_in(&dir);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the open data directory is tightened");
    s.ok(&[
        "run",
        "private",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "echo secret",
    ]);
    wait_succeeded(&s, "private");
    assert_eq!(s.ok(&["logs", "private"]), "secret\n");
    let mut files = Vec::new();
    file_modes(&dir, &mut files);
    assert!(
        files
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("wal-")),
        "{files:?}"
    );
    assert!(
        files
            .iter()
            .any(|(p, _)| p.to_string_lossy().ends_with(".log")),
        "{files:?}"
    );
    // Certificates and the ServiceAccount public key are public material (0644, in the 0700
    // directory), and so are a pod's `/etc/hosts`, `/etc/hostname` and `/etc/resolv.conf`
    // (bind-mounted into its containers, which may run as other users); a volume's files have
    // the modes its pod asks for (`defaultMode`, 0644 for the kube-api-access token volume, as
    // kube writes it); everything else is 0600.
    let container_view = |p: &std::path::Path| {
        let etc = p.parent().is_some_and(|d| d.ends_with("etc"))
            && ["hosts", "hostname", "resolv.conf"]
                .iter()
                .any(|n| p.file_name().is_some_and(|f| f == *n));
        etc || p.components().any(|c| c.as_os_str() == "volumes")
    };
    let public = |p: &std::path::Path| p.extension().is_some_and(|e| e == "crt" || e == "pub");
    let open: Vec<_> = files
        .iter()
        .filter(|(p, mode)| mode & 0o077 != 0 && !public(p) && !container_view(p))
        .collect();
    assert!(open.is_empty(), "files readable by others: {open:?}");
}

#[test]
fn agent_cleanup_should_stop_the_pods_a_stopped_server_left_running() {
    // Regression (issue 14.17): stopping the server leaves its pods' processes running (the
    // next start adopts them), and nothing stopped them for a user about to delete the data
    // directory. `setpoint agent cleanup --data-dir DIR` does, escaped processes included.
    let mut s = Server::start();
    let (marker, _cleanup) = apply_deployment(&s, "setpoint-agent-cleanup");
    // And a pod whose container starts a process in a session of its own; both its processes
    // are found by their (unique) sleep durations.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let unique = format!("{}", nanos % 1_000_000_000);
    let (main, escaped) = (format!("1000.{unique}"), format!("1001.{unique}"));
    let _cleanup_escaper = Cleanup {
        marker: format!(".{unique}"),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    s.ok(&[
        "run",
        "escaper",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        &format!("setsid sleep {escaped} & exec sleep {main}"),
    ]);
    let running = wait_pods(&s, "3 pods running", |p| all_running(p, 3));
    let deadline = Instant::now() + Duration::from_secs(90);
    let counts = || {
        (
            processes_with(&marker).len(),
            processes_with(&main).len(),
            processes_with(&escaped).len(),
        )
    };
    while counts() != (3, 1, 1) {
        assert!(
            Instant::now() < deadline,
            "the pods' processes: {:?}",
            counts()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Stopped, the server leaves them running (by design).
    s.kill();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(counts(), (3, 1, 1), "still running after the stop");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["agent", "cleanup", "--grace-period", "2s", "--data-dir"])
        .arg(&s.dir)
        .output()
        .expect("setpoint agent cleanup");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for pod in running.keys() {
        assert!(
            stdout.contains(&format!("stopped default/{pod} container sh")),
            "{pod} not in: {stdout}"
        );
    }
    assert!(
        stdout.contains("stopped default/escaper container escaper"),
        "{stdout}"
    );
    assert_eq!(counts(), (0, 0, 0), "left running after cleanup");
    let agent_root = s.dir.join("agent").display().to_string();
    let shims: Vec<i32> = processes_with("agent-shim")
        .into_iter()
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&agent_root))
        })
        .collect();
    assert!(shims.is_empty(), "shims left running: {shims:?}");
    // A second run finds nothing.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["agent", "cleanup", "--data-dir"])
        .arg(&s.dir)
        .output()
        .expect("setpoint agent cleanup");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("no pod process of {agent_root} was running\n")
    );
}
