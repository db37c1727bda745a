//! `kubectl logs` through `setpoint server` (all loops and the local agent on): the API
//! server's `pods/log` proxies to the agent's HTTPS endpoint (mutual TLS), which serves the
//! log files the container shims write. Covers the whole log, `-c`, `--tail`, `--timestamps`,
//! `--limit-bytes`, `--since`, `-f` streaming a line written after it started, `--previous`
//! after a restart, and the errors for an unknown container and a pod without a previous run.

use crate::common;

use std::io::Read as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::processes::Cleanup;
use common::Server;

/// Two pods, bound to the local agent's node from the start (this test is about logs, not
/// scheduling). `talk`: container `app` prints three lines, waits for the file `go` in `dir`,
/// prints `later`; container `side` prints one line. `flaky`: each run counts itself in
/// `dir/count` and prints `run N`; the first run exits 1, later runs stay up.
fn pods(dir: &Path, marker: &str) -> String {
    let dir = dir.display();
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: talk}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "for i in 1 2 3; do echo line $i; done; while [ ! -f {dir}/go ]; do sleep 0.1; done; echo later; exec sleep 1000 # {marker}"]
  - name: side
    image: busybox
    command: ["sh", "-c", "echo from side >&2; exec sleep 1000 # {marker}"]
---
apiVersion: v1
kind: Pod
metadata: {{name: flaky}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "n=$(cat {dir}/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > {dir}/count; echo run $n; if [ $n -ge 2 ]; then exec sleep 1000; fi; exit 1 # {marker}"]
"#
    )
}

/// Polls `kubectl args` until its output satisfies `check`; panics with the last output after
/// 90 s.
fn wait_output(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() && check(&text) {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(Instant::now() < deadline, "kubectl {args:?}: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn kubectl_logs_should_show_follow_tail_and_previous_output() {
    let s = Server::start();
    let work = tempfile::tempdir().expect("tempdir");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-logs-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pods(work.path(), &marker));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The whole log, once the three lines are out.
    let all = wait_output(&s, &["logs", "talk", "-c", "app"], |t| t.contains("line 3"));
    assert_eq!(all, "line 1\nline 2\nline 3\n");
    // -c: the other container (its stderr is in its log too).
    assert_eq!(s.ok(&["logs", "talk", "-c", "side"]), "from side\n");
    // --tail.
    assert_eq!(s.ok(&["logs", "talk", "-c", "app", "--tail=1"]), "line 3\n");
    // --timestamps: each line is prefixed with its RFC 3339 UTC time.
    let stamped = s.ok(&["logs", "talk", "-c", "app", "--timestamps"]);
    let lines: Vec<&str> = stamped.lines().collect();
    assert_eq!(lines.len(), 3, "{stamped}");
    for (i, line) in lines.iter().enumerate() {
        let (time, text) = line.split_once(' ').expect("a timestamp and the text");
        assert!(
            time.ends_with('Z') && time.len() >= 20 && time.as_bytes()[10] == b'T',
            "{line}"
        );
        assert_eq!(text, format!("line {}", i + 1));
    }
    // --limit-bytes cuts mid-line; --since keeps recent lines.
    assert_eq!(
        s.ok(&["logs", "talk", "-c", "app", "--limit-bytes=8"]),
        "line 1\nl"
    );
    assert_eq!(s.ok(&["logs", "talk", "-c", "app", "--since=1h"]), all);
    // Unknown container: the API server's error.
    let err = s.fails(&["logs", "talk", "-c", "nope"]);
    assert!(
        err.contains("container nope is not valid for pod talk"),
        "{err}"
    );
    // No previous run yet: the agent's error, relayed.
    let err = s.fails(&["logs", "talk", "-c", "app", "--previous"]);
    assert!(
        err.contains("previous terminated container \"app\" in pod \"talk\" not found"),
        "{err}"
    );

    // -f: a line written after kubectl started arrives while it follows.
    let mut follower = s
        .kubectl_command()
        .args(["logs", "-f", "talk", "-c", "app"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f");
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let mut stdout = follower.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let wait_seen = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !seen.lock().expect("lock").contains(what) {
            assert!(
                Instant::now() < deadline,
                "kubectl logs -f did not show {what:?}: {:?}",
                seen.lock().expect("lock")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_seen("line 3\n");
    assert!(!seen.lock().expect("lock").contains("later"));
    std::fs::write(work.path().join("go"), "").expect("trigger");
    wait_seen("later\n");
    assert!(
        follower.try_wait().expect("try_wait").is_none(),
        "kubectl logs -f keeps following a running container"
    );
    let _ = follower.kill();
    let _ = follower.wait();
    let _ = reader.join();
    assert_eq!(
        *seen.lock().expect("lock"),
        "line 1\nline 2\nline 3\nlater\n"
    );

    // --previous: after the first run of `flaky` failed and it was restarted.
    wait_output(
        &s,
        &["get", "pod", "flaky", "-o", "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].state.running.startedAt}"],
        |t| t.starts_with("1 ") && t.trim().len() > 2,
    );
    let current = wait_output(&s, &["logs", "flaky"], |t| t.contains("run 2"));
    assert_eq!(current, "run 2\n");
    assert_eq!(s.ok(&["logs", "flaky", "--previous"]), "run 1\n");

    s.ok(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
}
