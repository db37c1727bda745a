//! ResourceQuota admission against a server without loops (so the test sets the quota's
//! status itself): creates charged to `status.used`, the fourth pod over `pods=3` refused with
//! kube-apiserver's message, concurrent creates never both taking the last unit, dry runs not
//! charged, compute quotas requiring requests and limits, and scopes deciding which pods a
//! quota covers.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;
use setpoint_testenv::eventually_blocking;

use crate::common::Server;

fn pod(name: &str, extra: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"containers":[{{"name":"c","image":"busybox"{extra}}}]}}}}"#
    )
}

fn used(server: &Server, quota: &str) -> Value {
    let out = server.ok(&["get", "quota", quota, "-o", "json"]);
    serde_json::from_str::<Value>(&out).unwrap()["status"]["used"].clone()
}

/// Creates quota `name` with `hard` (and more of its spec), its status set to `used`, and
/// waits until admission sees it (a dry-run pod refused while the status says it is full).
fn create_quota(server: &Server, name: &str, hard: &str, used: &str, extra_spec: &str) {
    let manifest = format!(
        r#"{{"apiVersion":"v1","kind":"ResourceQuota","metadata":{{"name":"{name}"}},"spec":{{"hard":{hard}{extra_spec}}}}}"#
    );
    let out = server.kubectl_stdin(&["create", "-f", "-"], &manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = format!(r#"{{"status":{{"hard":{hard},"used":{hard}}}}}"#);
    server.ok(&[
        "patch",
        "quota",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &full,
    ]);
    eventually_blocking("admission to see the quota", || {
        let out = server.kubectl_stdin(
            &["create", "--dry-run=server", "-f", "-"],
            &pod("probe", ""),
        );
        (!out.status.success()).then_some(())
    });
    let status = format!(r#"{{"status":{{"hard":{hard},"used":{used}}}}}"#);
    server.ok(&[
        "patch",
        "quota",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
}

fn create(server: &Server, manifest: &str) -> Result<(), String> {
    let out = server.kubectl_stdin(&["create", "-f", "-"], manifest);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_fourth_pod_should_be_refused_and_concurrent_creates_never_overcharge() {
    let server = Server::start_api_only();
    create_quota(&server, "q", r#"{"pods":"3"}"#, r#"{"pods":"0"}"#, "");
    for i in 1..=3 {
        create(&server, &pod(&format!("p{i}"), "")).unwrap();
    }
    assert_eq!(used(&server, "q")["pods"], "3");
    let refused = create(&server, &pod("p4", "")).unwrap_err();
    assert!(
        refused.contains(r#"pods "p4" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"#),
        "{refused}"
    );
    let dry = server.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &pod("p5", ""));
    assert!(!dry.status.success(), "a dry run is checked too");

    // Room for two more, six creating at once: exactly two get in.
    server.ok(&[
        "patch",
        "quota",
        "q",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"hard":{"pods":"5"}}}"#,
    ]);
    server.ok(&[
        "patch",
        "quota",
        "q",
        "--type=merge",
        "-p",
        r#"{"spec":{"hard":{"pods":"5"}}}"#,
    ]);
    let children: Vec<_> = (0..6)
        .map(|i| {
            let mut child = server
                .kubectl_command()
                .args(["create", "-f", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let manifest = pod(&format!("race{i}"), "");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(manifest.as_bytes())
                .unwrap();
            child
        })
        .collect();
    let admitted = children
        .into_iter()
        .map(|mut c| c.wait().unwrap().success())
        .filter(|ok| *ok)
        .count();
    assert_eq!(admitted, 2, "only the room left is admitted");
    assert_eq!(used(&server, "q")["pods"], "5");

    // A dry run is checked but not charged.
    server.ok(&[
        "patch",
        "quota",
        "q",
        "--type=merge",
        "-p",
        r#"{"spec":{"hard":{"pods":"6"}}}"#,
    ]);
    server.ok(&[
        "patch",
        "quota",
        "q",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"hard":{"pods":"6"}}}"#,
    ]);
    let out = server.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &pod("dry", ""));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(used(&server, "q")["pods"], "5");
}

#[test]
fn compute_quotas_should_require_what_they_limit_and_count_it() {
    let server = Server::start_api_only();
    create_quota(
        &server,
        "compute",
        r#"{"requests.cpu":"1","limits.memory":"1Gi"}"#,
        r#"{"requests.cpu":"0","limits.memory":"0"}"#,
        "",
    );
    let refused = create(&server, &pod("bare", "")).unwrap_err();
    assert!(
        refused.contains(r#"pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: c; requests.cpu for: c"#),
        "{refused}"
    );
    let sized = r#","resources":{"requests":{"cpu":"600m"},"limits":{"memory":"512Mi"}}"#;
    create(&server, &pod("a", sized)).unwrap();
    let u = used(&server, "compute");
    assert_eq!(
        (u["requests.cpu"].as_str(), u["limits.memory"].as_str()),
        (Some("600m"), Some("512Mi"))
    );
    let refused = create(&server, &pod("b", sized)).unwrap_err();
    assert!(
        refused.contains("exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"),
        "{refused}"
    );
}

#[test]
fn a_scoped_quota_should_cover_only_the_pods_its_scopes_match() {
    let server = Server::start_api_only();
    create_quota(
        &server,
        "best",
        r#"{"pods":"1"}"#,
        r#"{"pods":"0"}"#,
        r#","scopes":["BestEffort"]"#,
    );
    create(&server, &pod("free1", "")).unwrap();
    let refused = create(&server, &pod("free2", "")).unwrap_err();
    assert!(refused.contains("exceeded quota: best"), "{refused}");
    // Not best effort: not covered.
    create(
        &server,
        &pod("sized", r#","resources":{"requests":{"cpu":"100m"}}"#),
    )
    .unwrap();
    assert_eq!(used(&server, "best")["pods"], "1");
}

#[test]
fn object_counts_should_be_charged_for_any_kind() {
    let server = Server::start_api_only();
    create_quota(
        &server,
        "counts",
        r#"{"pods":"1","configmaps":"1","count/deployments.apps":"0","services.loadbalancers":"0"}"#,
        r#"{"pods":"0","configmaps":"0","count/deployments.apps":"0","services.loadbalancers":"0"}"#,
        "",
    );
    server.ok(&["create", "configmap", "one"]);
    let refused = server.fails(&["create", "configmap", "two"]);
    assert!(
        refused.contains(r#"configmaps "two" is forbidden: exceeded quota: counts, requested: configmaps=1, used: configmaps=1, limited: configmaps=1"#),
        "{refused}"
    );
    let refused = server.fails(&["create", "deployment", "web", "--image=busybox"]);
    assert!(
        refused.contains("exceeded quota: counts, requested: count/deployments.apps=1"),
        "{refused}"
    );

    // An update is charged for what it adds: a service turned LoadBalancer.
    server.ok(&["create", "service", "clusterip", "web", "--tcp=80"]);
    let refused = server.fails(&[
        "patch",
        "service",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"type":"LoadBalancer"}}"#,
    ]);
    assert!(
        refused.contains(r#"services "web" is forbidden: exceeded quota: counts, requested: services.loadbalancers=1, used: services.loadbalancers=0, limited: services.loadbalancers=0"#),
        "{refused}"
    );
    server.ok(&[
        "patch",
        "service",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"a":"b"}}}"#,
    ]);
}
