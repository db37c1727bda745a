//! Exec and attach as the agent's stream routes run them, below the stream protocols: the
//! exec helper (`agent-shim exec`) puts a command in a running container's context (its
//! environment, working directory, cgroup), and the shim's attach socket fans the container's
//! output out to every attached client and takes stdin (closed for good after the first
//! stdin client with `stdinOnce`).

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::{container_pid, files_named, first_container, running, Harness};

const SHIM: &str = env!("CARGO_BIN_EXE_setpoint-agent-shim");

fn exec(pid: i32, spec: &Path, argv: &[&str]) -> std::process::Output {
    Command::new(SHIM)
        .args(["exec", "--target", &pid.to_string(), "--spec"])
        .arg(spec)
        .arg("--")
        .args(argv)
        .output()
        .expect("the exec helper ran")
}

async fn running_pid(harness: &Harness, name: &str) -> i32 {
    let pod = harness
        .wait_pod(name, "running", |p| first_container(p).is_some_and(running))
        .await;
    first_container(&pod)
        .and_then(container_pid)
        .expect("a container pid")
}

fn only(root: &Path, suffix: &str) -> PathBuf {
    let found = files_named(root, suffix);
    assert_eq!(found.len(), 1, "{suffix}: {found:?}");
    found.into_iter().next().expect("one")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_should_run_in_the_containers_environment_directory_and_cgroup() {
    let harness = Harness::start().await;
    let work = harness.root.path().join("work-dir");
    std::fs::create_dir_all(&work).expect("a working directory");
    harness
        .create_pod(
            "ctx",
            json!({"containers": [{
                "name": "app",
                "command": ["sh", "-c", "exec sleep 1000"],
                "workingDir": work,
                "env": [{"name": "GREETING", "value": "from the pod"}]
            }]}),
        )
        .await;
    let pid = running_pid(&harness, "ctx").await;
    let spec = only(harness.root.path(), "app/0.spec.json");

    let out = exec(
        pid,
        &spec,
        &[
            "sh",
            "-c",
            "echo $GREETING; pwd; cat /proc/self/cgroup; exit 3",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("from the pod"));
    assert_eq!(lines.next().map(PathBuf::from), Some(work.clone()));
    // Same cgroups as the container's main process (with or without cgroups in use).
    let theirs = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
    let ours: Vec<&str> = lines.collect();
    assert_eq!(ours, theirs.lines().collect::<Vec<_>>());

    let missing = exec(pid, &spec, &["no-such-command-here"]);
    assert_eq!(missing.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains(r#"exec: "no-such-command-here": executable file not found in $PATH"#),
        "{missing:?}"
    );
}

/// Frame kinds of the attach socket (`shim/attach.rs`).
const HELLO: u8 = 0;
const STDIN: u8 = 1;
const STDIN_CLOSE: u8 = 2;
const STDOUT: u8 = 4;

fn send(to: &mut UnixStream, kind: u8, payload: &[u8]) {
    let mut frame = vec![kind];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    to.write_all(&frame).expect("frame sent");
}

/// Reads stdout frames until `want` was seen (or the socket ends); returns all read.
fn read_until(from: &mut UnixStream, want: &str) -> String {
    let mut seen = String::new();
    while !seen.contains(want) {
        let mut head = [0u8; 5];
        if from.read_exact(&mut head).is_err() {
            break;
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut data = vec![0u8; len];
        from.read_exact(&mut data).expect("frame payload");
        if head[0] == STDOUT {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    seen
}

fn connect(socket: &Path) -> UnixStream {
    // Through the directory: the full path may exceed a socket address.
    let dir = std::fs::File::open(socket.parent().expect("a directory")).expect("opened");
    let short = format!(
        "/proc/self/fd/{}/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir),
        socket.file_name().expect("a name").to_string_lossy()
    );
    let stream = UnixStream::connect(short).expect("connected to the attach socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_should_fan_out_output_and_close_stdin_once() {
    let harness = Harness::start().await;
    harness
        .create_pod(
            "att",
            json!({"restartPolicy": "Never", "containers": [{
                "name": "app", "stdin": true, "stdinOnce": true,
                "command": ["sh", "-c", "while read l; do echo got:$l; done; echo bye"]
            }]}),
        )
        .await;
    running_pid(&harness, "att").await;
    let socket = only(harness.root.path(), "app/0.attach");
    let mut writer = connect(&socket);
    let mut watcher = connect(&socket);
    send(&mut writer, HELLO, &[1]);
    send(&mut watcher, HELLO, &[0]);
    // Both are registered once the shim read their hellos; retry the line until both see it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        n += 1;
        send(&mut writer, STDIN, format!("x{n}\n").as_bytes());
        let line = format!("got:x{n}");
        let w = read_until(&mut writer, &line);
        watcher
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let seen = read_until(&mut watcher, &line);
        if seen.contains(&line) && w.contains(&line) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no fan-out: {seen:?}");
    }
    watcher
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    // stdinOnce: the first stdin client's close ends the container's input.
    send(&mut writer, STDIN_CLOSE, &[]);
    assert!(read_until(&mut watcher, "bye").contains("bye"));
    harness
        .wait_pod("att", "the container to complete", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some_and(|t| t.exit_code == 0)
            })
        })
        .await;
    // The log got the output too.
    let log = std::fs::read_to_string(only(harness.root.path(), "app/0.log")).expect("the log");
    assert!(log.contains("got:x1") && log.contains("bye"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_container_should_run_on_a_terminal_that_attach_writes_to() {
    let harness = Harness::start().await;
    harness
        .create_pod(
            "tty",
            json!({"restartPolicy": "Never", "containers": [{
                "name": "app", "stdin": true, "stdinOnce": true, "tty": true,
                "command": ["sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty; echo ctty:$(cut -d' ' -f7 /proc/$$/stat); read l; echo got:$l"]
            }]}),
        )
        .await;
    running_pid(&harness, "tty").await;
    let socket = only(harness.root.path(), "app/0.attach");
    let mut client = connect(&socket);
    send(&mut client, HELLO, &[1]);
    send(&mut client, STDIN, b"typed\n");
    // The terminal echoes the line, then the command answers.
    let seen = read_until(&mut client, "got:typed");
    assert!(seen.contains("got:typed"), "{seen:?}");
    harness
        .wait_pod("tty", "the container to complete", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some_and(|t| t.exit_code == 0)
            })
        })
        .await;
    let log = std::fs::read_to_string(only(harness.root.path(), "app/0.log")).expect("the log");
    assert!(
        log.contains("on-a-tty") && log.contains("got:typed"),
        "{log}"
    );
}

#[test]
fn exec_should_join_the_namespaces_of_the_target_process() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root (namespaces of its own)");
        return;
    }
    // A target in new network and UTS namespaces (as a pod's container would be).
    let mut target = Command::new("unshare")
        .args([
            "-n",
            "-u",
            "sh",
            "-c",
            "hostname in-the-pod && exec sleep 1000",
        ])
        .spawn()
        .expect("unshare started");
    let pid = target.id() as i32;
    let netns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).starts_with("sleep"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the target did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("0.spec.json");
    let json = json!({
        "argv": ["sleep", "1000"], "env": [["PATH", "/usr/bin:/bin"]],
        "workingDir": dir.path(), "log": dir.path().join("0.log"),
        "runRecord": dir.path().join("0.run.json"), "exitRecord": dir.path().join("0.exit"),
    });
    std::fs::write(&spec, json.to_string()).expect("spec written");
    let theirs = netns(&pid.to_string()).expect("the target's network namespace");
    assert_ne!(
        netns("self"),
        Some(theirs.clone()),
        "the target has a namespace of its own"
    );
    let out = exec(
        pid,
        &spec,
        &["sh", "-c", "hostname; readlink /proc/self/ns/net"],
    );
    let _ = target.kill();
    let _ = target.wait();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("in-the-pod"));
    assert_eq!(lines.next().map(PathBuf::from), Some(theirs));
}
