//! PIDAutoscaler end to end through `setpoint server` with real pods on the local agent: the
//! loop installs the `pidautoscalers.autoscaling.setpoint.dev` CRD; a PIDAutoscaler on a
//! Deployment whose processes burn CPU (request 100m, target 50 %) scales it up to its maximum,
//! reports its P, I, D terms in status and shows in `kubectl get pida`; when the processes stop
//! burning, the integral winds down and the Deployment returns to its minimum.

use crate::common;

use common::Server;

use common::burn::{deployment, wait_burn_replicas, wait_output};
use common::processes::Cleanup;

const AUTOSCALER: &str = r#"
apiVersion: autoscaling.setpoint.dev/v1alpha1
kind: PIDAutoscaler
metadata: {name: burn}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: burn}
  minReplicas: 1
  maxReplicas: 3
  samplePeriodSeconds: 1
  gains: {kp: 0.2, ki: 0.4, kd: 0.1}
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
"#;

#[test]
fn pid_autoscaler_should_scale_a_burning_deployment_up_and_back_down() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_fresh_with(&["--hpa-sync-period", "1s", "--metrics-interval", "1s"]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-pid-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let stop = tmp.path().join("stop");
    let stop = stop.display().to_string();

    // The loop installs its CRD.
    wait_output(
        &s,
        &["api-resources", "--api-group=autoscaling.setpoint.dev"],
        |t| t.contains("pidautoscalers") && t.contains("pida"),
    );
    for doc in [deployment(&marker, &stop), AUTOSCALER.to_owned()] {
        let out = s.kubectl_stdin(&["apply", "-f", "-"], &doc);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    wait_burn_replicas(&s, "3");
    let terms = wait_output(
        &s,
        &[
            "get",
            "pida",
            "burn",
            "-o",
            "jsonpath={.status.terms.p} {.status.terms.i} {.status.terms.d} {.status.terms.output}",
        ],
        |t| t.split_whitespace().count() == 4,
    );
    let values: Vec<f64> = terms
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect();
    // Output (log replicas) rounds to the maximum and is clamped there; the integral has
    // grown with the positive error.
    assert!(
        values[3] > 2.5f64.ln() && values[3] <= 3f64.ln() + 1e-9,
        "{terms}"
    );
    assert!(values[1] > 0.0, "{terms}");
    let table = s.ok(&["get", "pida"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("burn") && l.contains(" 3 ")),
        "{table}"
    );
    let metric = s.ok(&[
        "get",
        "pida",
        "burn",
        "-o",
        "jsonpath={.status.currentMetrics[0].resource.current.averageUtilization}",
    ]);
    assert!(metric.parse::<i64>().is_ok_and(|u| u > 50), "{metric}");

    std::fs::write(&stop, b"").unwrap();
    wait_burn_replicas(&s, "1");
    let desired = s.ok(&[
        "get",
        "pida",
        "burn",
        "-o",
        "jsonpath={.status.desiredReplicas}",
    ]);
    assert_eq!(desired, "1");
    s.ok(&["delete", "deployment", "burn", "--wait=false"]);
}
