//! `kubectl exec`, `attach`, `cp` and `port-forward` end to end: kubectl → the API server's
//! `pods/exec|attach|portforward` (an upgrade proxy) → the agent's stream routes → a command
//! in the container's context, the shim's attach socket, or a connection in the pod. One
//! server for all the checks; each protocol path kubectl 1.32 takes is covered: WebSocket
//! (`v5.channel.k8s.io`) and SPDY (`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`) for exec,
//! SPDY in a WebSocket and plain SPDY (`KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) for
//! port-forward.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::processes::Cleanup;
use crate::common::{free_loopback_addr, Server};

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs kubectl with extra environment and optional stdin.
fn kubectl_env(s: &Server, env: &[(&str, &str)], args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = s.kubectl_command();
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("kubectl started");
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(data).expect("stdin written");
    }
    child.wait_with_output().expect("kubectl ran")
}

fn wait_ready(s: &Server, what: &str) {
    let out = s.kubectl(&["wait", "--for=condition=Ready", "--timeout=90s", what]);
    assert!(out.status.success(), "{what}: {}", text(&out));
}

fn pods(marker: &str, port: u16) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: shell}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "exec sleep 1000 # {marker}"]
    env: [{{name: GREETING, value: hello-from-the-pod}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: att}}
spec:
  nodeName: local
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    stdin: true
    stdinOnce: true
    command: ["sh", "-c", "while read l; do echo got:$l; done; echo bye # {marker}"]
---
apiVersion: v1
kind: Pod
metadata: {{name: term}}
spec:
  nodeName: local
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    stdin: true
    tty: true
    command: ["sh", "-c", "test -t 0 && echo on-a-tty; read l; echo got:$l # {marker}"]
---
apiVersion: v1
kind: Pod
metadata: {{name: ticker}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "while true; do echo tick; sleep 0.2; done # {marker}"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: python
        command: ["python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
        env: [{{name: SETPOINT_TEST_MARKER, value: "{marker}"}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: {port}}}]
"#
    )
}

/// Starts `kubectl port-forward target LOCAL:remote` and checks an HTTP GET through it.
fn check_port_forward(s: &Server, env: &[(&str, &str)], target: &str, remote: u16) {
    let local: u16 = free_loopback_addr()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a free port");
    let mut child = s
        .kubectl_command()
        .args(["port-forward", target, &format!("{local}:{remote}")])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl port-forward started");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let got = TcpStream::connect(("127.0.0.1", local)).and_then(|mut conn| {
            conn.set_read_timeout(Some(Duration::from_secs(20)))?;
            conn.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")?;
            let mut answer = String::new();
            conn.read_to_string(&mut answer)?;
            Ok(answer)
        });
        match got {
            Ok(answer) if answer.starts_with("HTTP/1.0 200") => break answer,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            other => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("kubectl output");
                panic!("port-forward {target} {env:?}: {other:?}; {}", text(&out));
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(answer.contains("Directory listing"), "{answer}");
}

#[test]
fn kubectl_exec_attach_cp_and_port_forward_should_reach_the_pods() {
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-streams-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let port: u16 = free_loopback_addr()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a free port");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pods(&marker, port));
    assert!(out.status.success(), "{}", text(&out));
    wait_ready(&s, "pod/shell");

    // exec: the container's environment; a non-zero exit is kubectl's exit status.
    let out = s.kubectl(&["exec", "shell", "--", "sh", "-c", "echo $GREETING; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello-from-the-pod\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("command terminated with exit code 3"),
        "{}",
        text(&out)
    );
    // -i over WebSocket and over SPDY: stdin reaches the command and its end closes it.
    for env in [
        &[][..],
        &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")][..],
    ] {
        let out = kubectl_env(
            &s,
            env,
            &["exec", "-i", "shell", "--", "sh", "-c", "cat; echo err >&2"],
            Some(b"piped input"),
        );
        assert!(out.status.success(), "{env:?}: {}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "piped input",
            "{env:?}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n", "{env:?}");
    }
    // kubectl 1.27 speaks only SPDY for exec.
    if let Some(old) = crate::common::kubectl_version(27) {
        let mut child = Command::new(old)
            .arg("--kubeconfig")
            .arg(s.kubeconfig())
            .args(["exec", "-i", "shell", "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl 1.27 started");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"from 1.27")
            .expect("stdin written");
        let out = child.wait_with_output().expect("kubectl 1.27 ran");
        assert!(out.status.success(), "kubectl 1.27: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from 1.27");
    }
    // -it under a terminal (script(1) gives kubectl one): the command sees a terminal.
    let kubeconfig = s.kubeconfig();
    let line = format!(
        "kubectl --kubeconfig {} exec -it shell -- sh -c 'test -t 1 && echo on-a-tty'",
        kubeconfig.display()
    );
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script ran");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("on-a-tty"),
        "{}",
        text(&out)
    );
    // A command that does not exist.
    let out = s.kubectl(&["exec", "shell", "--", "no-such-command-here"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("executable file not found in $PATH"),
        "{}",
        text(&out)
    );

    python_stream_exec(&s);
    kube_crate_exec(&s);

    // cp: 10 MB in and out, unchanged.
    let work = tempfile::tempdir().expect("tempdir");
    let data: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let local_in = work.path().join("in.bin");
    std::fs::write(&local_in, &data).expect("written");
    let remote = format!("{}/copied.bin", work.path().display());
    let to_pod = format!("shell:{remote}");
    let out = s.kubectl(&["cp", &local_in.display().to_string(), &to_pod]);
    assert!(out.status.success(), "cp in: {}", text(&out));
    let local_out = work.path().join("out.bin");
    let out = s.kubectl(&["cp", &to_pod, &local_out.display().to_string()]);
    assert!(out.status.success(), "cp out: {}", text(&out));
    let back = std::fs::read(&local_out).expect("copied back");
    assert!(
        back == data,
        "cp round trip changed the file ({} bytes back)",
        back.len()
    );

    // attach -i: stdin reaches the container, its output comes back; stdinOnce ends it.
    wait_ready(&s, "pod/att");
    let out = kubectl_env(&s, &[], &["attach", "-i", "att"], Some(b"ping\n"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("got:ping"), "{}", text(&out));

    // attach -it (under script(1), which gives kubectl a terminal) to a tty container: the
    // typed line reaches the container's terminal, its answer comes back.
    wait_ready(&s, "pod/term");
    let line = format!(
        "kubectl --kubeconfig {} attach -it term",
        kubeconfig.display()
    );
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script started");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("got:typed") {
                break;
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
    });
    // Type until the container answers (the attach may not be up for the first line).
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let _ = stdin.write_all(b"typed\r");
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(seen) => break seen,
            Err(_) if Instant::now() < deadline => {}
            Err(_) => break String::new(),
        }
    };
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.contains("got:typed"), "attach -it: {seen:?}");

    // attach without -i to a container without stdin: its live output.
    wait_ready(&s, "pod/ticker");
    check_attach_output(&s);

    // port-forward: pod/, svc/ and deploy/ (kubectl picks the pod), both tunnel protocols.
    let out = s.kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=90s",
        "deployment/web",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let pod = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    check_port_forward(&s, &[], &format!("pod/{pod}"), port);
    check_port_forward(
        &s,
        &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
        &format!("pod/{pod}"),
        port,
    );
    check_port_forward(&s, &[], "svc/web", 80);
    check_port_forward(&s, &[], "deploy/web", port);
}

/// The Python client's `stream()` exec (`tests/python/stream_exec.py`), when `SETPOINT_PYTHON`
/// names a Python with the `kubernetes` package (scripts/check sets it).
fn python_stream_exec(s: &Server) {
    let Some(python) = std::env::var_os("SETPOINT_PYTHON") else {
        eprintln!("skipped the Python client: set SETPOINT_PYTHON (scripts/check does)");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/stream_exec.py");
    let out = Command::new(python)
        .arg(script)
        .arg(s.kubeconfig())
        .arg("shell")
        .output()
        .expect("python ran");
    assert!(out.status.success(), "python stream exec: {}", text(&out));
}

/// The kube crate's `Api::exec` with `AttachParams` (WebSocket, v5 or v4 channels).
fn kube_crate_exec(s: &Server) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, AttachParams};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let pods: Api<Pod> = Api::namespaced(s.kube_client().await, "default");
        let params = AttachParams::default().stdin(true).stderr(false);
        let mut attached = pods
            .exec(
                "shell",
                ["sh", "-c", "echo $GREETING; read l; echo got:$l"],
                &params,
            )
            .await
            .expect("kube exec");
        let mut stdin = attached.stdin().expect("stdin");
        stdin.write_all(b"kube-rs\n").await.expect("stdin written");
        let mut stdout = attached.stdout().expect("stdout");
        let mut output = String::new();
        stdout
            .read_to_string(&mut output)
            .await
            .expect("stdout read");
        assert_eq!(output, "hello-from-the-pod\ngot:kube-rs\n");
        let status = attached
            .take_status()
            .expect("a status")
            .await
            .expect("the status arrived");
        assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");
    });
}

/// `kubectl attach ticker` (no stdin) prints the container's output as it comes.
fn check_attach_output(s: &Server) {
    let mut child = s
        .kubectl_command()
        .args(["attach", "ticker"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl attach started");
    let mut stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).matches("tick").count() >= 2 {
                let _ = tx.send(());
                return;
            }
        }
    });
    let got = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let out = child.wait_with_output().expect("kubectl output");
    assert!(
        got.is_ok(),
        "kubectl attach showed no output: {}",
        text(&out)
    );
}
