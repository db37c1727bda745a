//! The sample operator (`examples/sample-operator`) as its own process against `setpoint server`
//! (every built-in loop, two simulated nodes, no node agent), driven by the real `kubectl`:
//! the CRD printed by `--print-crd` applies and is established; a Foo gets its Deployment,
//! whose pods run on the simulated nodes, so the Foo reports them available; drift is
//! corrected (`kubectl scale` → scaled back, `kubectl delete deployment` → recreated); Events
//! are recorded; and `kubectl delete foo` runs the finalizer (the state file goes) after which
//! the garbage collector deletes the Deployment through its owner reference.
//!
//! The example binary is the one `cargo test` builds beside the test binaries
//! (`target/<profile>/examples/`); if it is missing or older than the example's sources (a run
//! filtered with `--test`), it is built once with `cargo build --example`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use common::Server;
use setpoint_testenv::eventually_blocking_within;

const FOO: &str = r#"
apiVersion: samplecontroller.setpoint.dev/v1alpha1
kind: Foo
metadata:
  name: example-foo
spec:
  deploymentName: example-foo
  replicas: 2
"#;

/// The example binary, built if needed (once per test process).
fn operator_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/<test> → target/<profile>/examples/sample-operator
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let binary = profile_dir.join("examples").join("sample-operator");
        let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample-operator");
        if !is_newer_than_sources(&binary, &sources) {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "setpoint", "--example", "sample-operator"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build");
            assert!(status.success(), "building the sample operator failed");
        }
        assert!(binary.exists(), "{} missing", binary.display());
        binary
    })
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn is_newer_than_sources(binary: &Path, sources: &Path) -> bool {
    let Some(built) = modified(binary) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(sources) else {
        return false;
    };
    entries
        .filter_map(Result::ok)
        .all(|e| modified(&e.path()).is_some_and(|m| m <= built))
}

/// The operator process; SIGKILLed when dropped (a test that passes stops it with SIGTERM).
struct Operator(Option<Child>);

impl Operator {
    fn start(server: &Server, state_dir: &Path) -> Operator {
        let child = Command::new(operator_binary())
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .arg("--state-dir")
            .arg(state_dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the operator");
        Operator(Some(child))
    }

    /// SIGTERM, then waits (at most 30 s) for a clean exit.
    fn stop(mut self) {
        let mut child = self.0.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(exit) = child.try_wait().expect("wait") {
                assert!(exit.success(), "the operator exited with {exit}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the operator did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `kubectl get <what> -o jsonpath=<path>`, or `None` if kubectl fails (e.g. not found).
fn jsonpath(server: &Server, what: &[&str], path: &str) -> Option<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let template = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &template]);
    let out = server.kubectl(&args);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn sample_operator_should_reconcile_foos_against_setpoint_server() {
    let data = tempfile::tempdir().expect("data dir");
    let server = Server::start_with(
        &data.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--simulated-nodes", "2"],
    );
    let minute = Duration::from_secs(60);

    // The generated CRD, printed as YAML, is accepted by kubectl and the server.
    let crd = Command::new(operator_binary())
        .arg("--print-crd")
        .output()
        .expect("--print-crd");
    assert!(crd.status.success());
    let crd = String::from_utf8(crd.stdout).expect("UTF-8 YAML");
    let out = server.kubectl_stdin(&["apply", "-f", "-"], &crd);
    assert!(
        out.status.success(),
        "kubectl apply of the CRD: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/foos.samplecontroller.setpoint.dev",
        "--timeout=60s",
    ]);

    let state = tempfile::tempdir().expect("state dir");
    let operator = Operator::start(&server, state.path());
    let out = server.kubectl_stdin(&["apply", "-f", "-"], FOO);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let foo_uid = server.ok(&[
        "get",
        "foo",
        "example-foo",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);

    // The Deployment, owned by the Foo; its pods become available on the simulated nodes.
    let owner = eventually_blocking_within("the Deployment exists", minute, || {
        jsonpath(
            &server,
            &["deployment", "example-foo"],
            "{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}",
        )
    });
    assert_eq!(owner, format!("Foo/{foo_uid}/true"));
    eventually_blocking_within("the Foo reports 2 available replicas", minute, || {
        let available = jsonpath(
            &server,
            &["foo", "example-foo"],
            "{.status.availableReplicas}",
        )?;
        (available == "2").then_some(())
    });
    let ready = server.ok(&[
        "get",
        "foo",
        "example-foo",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    assert_eq!(ready, "True");
    // The printer columns of the derived CRD.
    let table = server.ok(&["get", "foos"]);
    assert!(
        table.contains("DEPLOYMENT") && table.contains("AVAILABLE"),
        "{table}"
    );
    let file = state.path().join("default_example-foo.json");
    assert!(file.exists(), "state file {} missing", file.display());

    // Drift: scaled by hand → put back.
    server.ok(&["scale", "deployment", "example-foo", "--replicas=5"]);
    eventually_blocking_within("the Deployment is scaled back to 2", minute, || {
        let replicas = jsonpath(&server, &["deployment", "example-foo"], "{.spec.replicas}")?;
        (replicas == "2").then_some(())
    });
    // Drift: deleted by hand → recreated.
    let old_uid = server.ok(&[
        "get",
        "deployment",
        "example-foo",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    server.ok(&["delete", "deployment", "example-foo", "--wait=false"]);
    eventually_blocking_within("the Deployment is recreated", minute, || {
        let uid = jsonpath(&server, &["deployment", "example-foo"], "{.metadata.uid}")?;
        (!uid.is_empty() && uid != old_uid).then_some(())
    });
    eventually_blocking_within("the Foo reports 2 available again", minute, || {
        let available = jsonpath(
            &server,
            &["foo", "example-foo"],
            "{.status.availableReplicas}",
        )?;
        let d_available = jsonpath(
            &server,
            &["deployment", "example-foo"],
            "{.status.availableReplicas}",
        )?;
        (available == "2" && d_available == "2").then_some(())
    });

    // Events about the Foo, as kubectl shows them.
    let events = server.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=Foo",
    ]);
    for reason in ["DeploymentCreated", "DeploymentScaled", "Synced"] {
        assert!(events.contains(reason), "no {reason} event:\n{events}");
    }

    // Deletion: kubectl waits for the finalizer; the state file is gone; the garbage collector
    // then deletes the Deployment (and its ReplicaSet and pods) through the owner reference.
    server.ok(&["delete", "foo", "example-foo", "--timeout=60s"]);
    assert!(!file.exists(), "state file {} left behind", file.display());
    let deleted = Instant::now();
    eventually_blocking_within(
        "the Deployment is garbage collected",
        Duration::from_secs(120),
        || {
            let out = server.kubectl(&["get", "deployment", "example-foo"]);
            (!out.status.success()).then_some(())
        },
    );
    eprintln!(
        "the Deployment was garbage collected {:?} after its Foo",
        deleted.elapsed()
    );
    eventually_blocking_within("its pods are gone", Duration::from_secs(120), || {
        let pods = server.ok(&["get", "pods", "-l", "controller=example-foo", "-o", "name"]);
        pods.trim().is_empty().then_some(())
    });
    operator.stop();
}
