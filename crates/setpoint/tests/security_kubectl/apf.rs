//! API Priority and Fairness in a `setpoint server` process, through kubectl: the flags are
//! taken, kube's default FlowSchemas and priority levels exist with their status, responses
//! carry the `X-Kubernetes-PF-*` headers, and `/metrics` shows the levels' limits (sized by
//! `--max-requests-inflight` + `--max-mutating-requests-inflight`) and the queue waits.

use setpoint_testenv::eventually_blocking;
use setpoint_testenv::process::Server;

#[test]
fn a_server_should_serve_kubes_default_flow_control_with_headers_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &[
            "--no-agent",
            "--controllers=",
            "--max-requests-inflight=8",
            "--max-mutating-requests-inflight=4",
            "--max-watches-per-user=5",
        ],
    );
    let schemas = s.ok(&["get", "flowschemas", "-o", "name"]);
    for name in [
        "exempt",
        "probes",
        "system-nodes",
        "kube-system-service-accounts",
        "global-default",
        "catch-all",
    ] {
        assert!(
            schemas.contains(&format!("flowschema.flowcontrol.apiserver.k8s.io/{name}\n")),
            "{name}: {schemas}"
        );
    }
    let levels = s.ok(&["get", "prioritylevelconfigurations", "-o", "name"]);
    for name in [
        "exempt",
        "system",
        "node-high",
        "leader-election",
        "workload-high",
        "workload-low",
        "global-default",
        "catch-all",
    ] {
        assert!(levels.contains(&format!("/{name}\n")), "{name}: {levels}");
    }
    eventually_blocking("global-default is marked not Dangling", || {
        s.ok(&[
            "get",
            "flowschema",
            "global-default",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Dangling")].status}"#,
        ]) == "False"
    });
    // kubectl logs the response headers at -v=8; the admin is classified `exempt`.
    let exempt_uid = s.ok(&[
        "get",
        "flowschema",
        "exempt",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let out = s.kubectl(&["get", "namespaces", "-v=8"]);
    let log = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
    assert!(
        log.contains(&format!("x-kubernetes-pf-flowschema-uid: {exempt_uid}")),
        "no FlowSchema header naming exempt ({exempt_uid}) in: {log}"
    );
    let metrics = s.ok(&["get", "--raw", "/metrics"]);
    // 12 seats, global-default's 20 of 245 shares: one seat.
    assert!(
        metrics.contains(
            r#"apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.lines().any(|l| l
        .starts_with("apiserver_flowcontrol_request_wait_duration_seconds_count{")
        && l.contains(r#"flow_schema="exempt""#)));
}
