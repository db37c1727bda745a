//! The web console (docs/console.md) in a real headless Chromium: `tests/console/console.mjs`
//! (playwright-core, Debian's `chromium`) logs in through `setpoint console-url`'s one-time
//! URL, scrolls a list of 300 ConfigMaps of which only the rows in view are drawn, watches a
//! Deployment's page while `kubectl scale` takes it from 1 to 3 replicas (the
//! set point and the process variables on the page reach 3, with a convergence time, and the
//! Deployment controller's `ScalingReplicaSet` Event is a marker on the chart's time axis),
//! checks the CSRF header rule, a PIDAutoscaler's P, I and D terms, an HPA's target and
//! replicas, a suspended Job of 3 completions resumed until `status.succeeded` reaches 3 (with a
//! convergence time), the node's Ready condition, the loops view, and that the user `nobody`
//! gets the 403 panel.
//!
//! Needs `node`, Chromium (`SETPOINT_CHROMIUM`, else `/usr/bin/chromium`) and playwright-core
//! (`SETPOINT_PLAYWRIGHT_DIR`, else `target/console-node`): `scripts/check` installs them. Without
//! them the test fails, saying so. With `SETPOINT_CONSOLE_SCREENSHOTS=DIR` the script writes
//! PNGs of the main pages there (`docs/console/` holds the committed ones).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::burn::wait_output;
use common::processes::Cleanup;
use common::Server;

/// Where the tools come from, or a message saying how to get them.
fn tools() -> (PathBuf, PathBuf) {
    let install = "run scripts/check, which installs them (chromium from apt, playwright-core \
                   from npm into target/console-node)";
    let chromium = std::env::var_os("SETPOINT_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        chromium.exists(),
        "the console test needs Chromium at {}: {install}",
        chromium.display()
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "the console test needs `node` on the PATH: {install}"
    );
    let playwright = std::env::var_os("SETPOINT_PLAYWRIGHT_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/console-node"
            ))
        },
        PathBuf::from,
    );
    assert!(
        playwright
            .join("node_modules/playwright-core/package.json")
            .exists(),
        "the console test needs playwright-core in {}: {install}",
        playwright.display()
    );
    (chromium, playwright)
}

fn deployment(name: &str, marker: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        resources: {{requests: {{cpu: 100m}}}}
        command: ["sh", "-c", "exec sleep 1000 # {marker}"]
"#
    )
}

const AUTOSCALER: &str = r#"
apiVersion: autoscaling.setpoint.dev/v1alpha1
kind: PIDAutoscaler
metadata: {name: idle}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: idle}
  minReplicas: 1
  maxReplicas: 2
  samplePeriodSeconds: 1
  gains: {kp: 0.2, ki: 0.4, kd: 0.1}
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
"#;

/// A Job of 3 completions whose pods run `true`, created suspended (the page opens before it
/// starts, so its convergence is seen from the start).
fn job(name: &str, marker: &str) -> String {
    format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  completions: 3
  parallelism: 3
  suspend: true
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        command: ["sh", "-c", "true # {marker}"]
"#
    )
}

/// `setpoint console-url --data-dir DIR ARGS…`'s URL.
fn console_url(s: &Server, args: &[&str]) -> String {
    let out = Command::new(setpoint_testenv::process::setpoint_binary())
        .arg("console-url")
        .arg("--data-dir")
        .arg(&s.dir)
        .args(args)
        .output()
        .expect("run setpoint console-url");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success()
            && stdout.starts_with("https://")
            && stdout.contains("/ui/login?token="),
        "console-url {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_console_should_show_a_deployment_converge_in_a_browser() {
    let (chromium, playwright) = tools();
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_fresh_with(&["--hpa-sync-period", "1s", "--metrics-interval", "1s"]);
    let marker = format!("setpoint-console-test-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    wait_output(
        &s,
        &["api-resources", "--api-group=autoscaling.setpoint.dev"],
        |t| t.contains("pidautoscalers"),
    );
    for doc in [
        deployment("web", &marker),
        deployment("idle", &marker),
        AUTOSCALER.to_owned(),
        job("count", &marker),
    ] {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], &doc);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wait_output(
        &s,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |t| t == "1",
    );
    wait_output(
        &s,
        &["get", "pida", "idle", "-o", "jsonpath={.status.terms.p}"],
        |t| !t.is_empty(),
    );

    // Only a caller allowed to impersonate may mint: jane may not.
    let jane = tmp.path().join("jane.kubeconfig");
    let made = Command::new(setpoint_testenv::process::setpoint_binary())
        .args(["kubeconfig", "user", "jane", "--data-dir"])
        .arg(&s.dir)
        .arg("-o")
        .arg(&jane)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let refused = crate::common::kubectl_command()
        .arg("--kubeconfig")
        .arg(&jane)
        .args(["create", "--raw", "/ui/api/login-tokens", "-f", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("cannot mint a console login token"),
        "{stderr}"
    );

    let admin_url = console_url(&s, &[]);
    let nobody_url = console_url(&s, &["--user", "nobody"]);
    let mut command = Command::new("node");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/console/console.mjs"
        ))
        .env("CONSOLE_URL", &admin_url)
        .env("CONSOLE_URL_NOBODY", &nobody_url)
        .env("KUBECONFIG", s.kubeconfig())
        .env("CHROMIUM", &chromium)
        .env("PLAYWRIGHT_DIR", &playwright);
    if let Some(dir) = std::env::var_os("SETPOINT_CONSOLE_SCREENSHOTS") {
        command.env("SCREENSHOTS", dir);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "the browser script failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
