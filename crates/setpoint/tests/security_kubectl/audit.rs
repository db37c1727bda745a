//! The audit log of a `setpoint server` process, on by default: real kubectl's writes appear
//! in `DATA_DIR/audit/audit.log` as `setpoint-admin` with their verb, object and code; the
//! counts are in `/metrics`; a bad `--audit-policy-file` stops the start with a clear error.

use std::path::Path;

use serde_json::Value;
use setpoint_testenv::eventually_blocking;
use setpoint_testenv::process::{setpoint_binary, Server};

fn events_in(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn kubectl_writes_should_be_audited_as_the_admin() {
    let server = Server::start_api_only();
    server.ok(&["create", "configmap", "audited", "--from-literal=a=b"]);
    server.ok(&["delete", "configmap", "audited"]);
    let log = server.dir.join("audit").join("audit.log");
    for (verb, code) in [("create", 201), ("delete", 200)] {
        let event = eventually_blocking(&format!("the kubectl {verb} in the audit log"), || {
            events_in(&log).into_iter().find(|e| {
                e["verb"] == verb
                    && e["objectRef"]["resource"] == "configmaps"
                    && e["objectRef"]["name"] == "audited"
            })
        });
        assert_eq!(event["stage"], "ResponseComplete", "{event}");
        assert_eq!(event["user"]["username"], "setpoint-admin", "{event}");
        assert_eq!(event["objectRef"]["namespace"], "default", "{event}");
        assert_eq!(event["responseStatus"]["code"], code, "{event}");
        assert!(
            event["userAgent"].as_str().unwrap().starts_with("kubectl"),
            "{event}"
        );
        assert!(event.get("requestObject").is_none(), "{event}");
    }
    let metrics = server.ok(&["get", "--raw", "/metrics"]);
    let events_total = metrics
        .lines()
        .find_map(|l| l.strip_prefix("apiserver_audit_event_total "))
        .unwrap_or_else(|| panic!("no apiserver_audit_event_total in /metrics"));
    assert!(events_total.trim().parse::<u64>().unwrap() >= 2);
    assert!(metrics.contains(r#"apiserver_audit_error_total{plugin="log"} 0"#));
}

#[test]
fn a_bad_audit_policy_should_stop_the_start_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
    )
    .unwrap();
    let out = std::process::Command::new(setpoint_binary())
        .args([
            "server",
            "--no-agent",
            "--controllers=",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--audit-policy-file")
        .arg(&policy)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the audit policy") && stderr.contains("Loud"),
        "{stderr}"
    );
}
