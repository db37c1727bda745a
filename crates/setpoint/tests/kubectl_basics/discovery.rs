//! What kubectl discovers and explains: the built-in resources, every supported kubectl
//! version, `kubectl explain` and strict field validation; and `kubectl --as`, refused.

use super::*;

#[test]
fn discovery_should_show_the_built_in_resources() {
    let s = Server::start();
    let ns = s.ok(&["get", "namespaces", "-o", "name"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(ns.contains(&format!("namespace/{n}")), "{ns}");
    }
    let resources = s.ok(&["api-resources", "-o", "name"]);
    for r in [
        "pods",
        "deployments.apps",
        "replicasets.apps",
        "leases.coordination.k8s.io",
        "events.events.k8s.io",
        "configmaps",
    ] {
        assert!(
            resources.lines().any(|l| l == r),
            "{r} missing from:\n{resources}"
        );
    }
    // `kubectl` from the PATH, as a user runs it (on these machines a version dispatcher, which
    // picks its kubectl by the server's minor version; the other tests run that one directly).
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(s.kubeconfig())
        .args(["version", "-o", "json"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let minor = setpoint_testenv::kubectl::SERVED_MINOR;
    assert!(
        version.contains(&format!("\"minor\": \"{minor}\"")),
        "{version}"
    );
}

#[test]
fn kubectl_1_27_to_1_33_should_all_discover_and_list() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], DEPLOYMENT);
    assert!(out.status.success());
    let mut tried = 0;
    for minor in 27..=33 {
        let Some(bin) = kubectl_version(minor) else {
            continue;
        };
        tried += 1;
        // 1.27-1.29 understand only the v2beta1 aggregated discovery; 1.30+ prefer v2.
        let out = Command::new(&bin)
            .arg("--kubeconfig")
            .arg(s.kubeconfig())
            .args(["get", "deployments.apps", "-o", "name"])
            .output()
            .unwrap();
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).trim() == "deployment.apps/web",
            "kubectl 1.{minor}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        tried > 0,
        "no versioned kubectl found beside the one on the PATH"
    );
}

#[test]
fn kubectl_as_should_act_as_the_impersonated_user() {
    // Regression (issue 14.14): `kubectl --as=…` ran the request as the admin. Now the admin
    // may impersonate (RBAC: `system:masters` holds the `impersonate` verb) and the request
    // runs as the impersonated user, refused as that user.
    let s = Server::start_api_only();
    s.ok(&["get", "secrets"]);
    let err = s.fails(&["--as=system:anonymous", "get", "secrets"]);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("User \"system:anonymous\" cannot list resource \"secrets\""),
        "{err}"
    );
    let err = s.fails(&["--as=jane", "get", "--raw", "/api/v1/secrets"]);
    assert!(err.contains("Forbidden"), "{err}");
    // Impersonating a group with the rights works as that group.
    s.ok(&[
        "--as=someone",
        "--as-group=system:masters",
        "get",
        "secrets",
    ]);
}

#[test]
fn explain_and_strict_validation_should_work_with_default_kubectl_flags() {
    let s = Server::start();
    let explain = s.ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        explain.contains("KIND:       Deployment") && explain.contains("DeploymentStrategy"),
        "{explain}"
    );
    let explain = s.ok(&["explain", "pods.spec.containers.image"]);
    assert!(explain.contains("FIELD: image <string>"), "{explain}");
    let bogus =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: strict}\ndata: {a: \"1\"}\nbogus: 1\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], bogus);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"strict decoding error: unknown field "bogus""#),
        "{err}"
    );
    // kubectl 1.27 and 1.28 read the protobuf OpenAPI v2 document instead.
    for minor in [27, 28] {
        let Some(bin) = kubectl_version(minor) else {
            continue;
        };
        let out = Command::new(&bin)
            .arg("--kubeconfig")
            .arg(s.kubeconfig())
            .args(["apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(DEPLOYMENT.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl 1.{minor}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn limit_ranges_should_be_served_like_any_builtin_kind() {
    // LimitRange is one file (registry/kinds/limit_range.rs) and one registration line:
    // discovery, the REST paths, the table, OpenAPI (`kubectl explain`) and validation follow.
    let s = Server::start_api_only();
    let resources = s.ok(&["api-resources", "--namespaced=true", "-o", "wide"]);
    assert!(
        resources.lines().any(|l| l.starts_with("limitranges ")
            && l.contains("limits")
            && l.contains("LimitRange")),
        "{resources}"
    );
    let limits = "apiVersion: v1\nkind: LimitRange\nmetadata: {name: cpu}\nspec:\n  limits:\n  - type: Container\n    min: {cpu: 100m}\n    defaultRequest: {cpu: 200m}\n    default: {cpu: 500m}\n    max: {cpu: \"1\"}\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], limits);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = s.ok(&["get", "limits"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"], "{table}");
    assert!(
        lines.next().is_some_and(|l| l.starts_with("cpu ")),
        "{table}"
    );
    let max = s.ok(&[
        "get",
        "limitrange",
        "cpu",
        "-o",
        "jsonpath={.spec.limits[0].max.cpu}",
    ]);
    assert_eq!(max, "1");
    let explain = s.ok(&["explain", "limitrange.spec.limits"]);
    assert!(
        explain.contains("KIND:       LimitRange") && explain.contains("maxLimitRequestRatio"),
        "{explain}"
    );
    let bad = limits
        .replace("name: cpu", "name: bad")
        .replace("min: {cpu: 100m}", "min: {cpu: \"2\"}");
    let out = s.kubectl_stdin(&["create", "-f", "-", "-v=6"], &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("422 Unprocessable Entity"), "{err}");
    assert!(
        err.contains(r#"The LimitRange "bad" is invalid"#)
            && err.contains("spec.limits[0].min[cpu]")
            && err.contains("min value 2 is greater than max value 1"),
        "{err}"
    );
}

#[test]
fn controller_revisions_should_be_served_like_any_builtin_kind() {
    // ControllerRevision (what StatefulSets and DaemonSets roll with) is one file
    // (registry/kinds/controller_revision.rs) and one registration line.
    let s = Server::start_api_only();
    let revision = "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata:\n  name: web-1\n  ownerReferences:\n  - {apiVersion: apps/v1, kind: StatefulSet, name: web, uid: 5e0c4a48-0000-4000-8000-000000000001, controller: true}\ndata: {spec: {template: {metadata: {labels: {app: web}}}}}\nrevision: 1\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], revision);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = s.ok(&["get", "controllerrevisions"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "CONTROLLER", "REVISION", "AGE"],
        "{table}"
    );
    assert_eq!(
        rows[1][..3],
        ["web-1", "statefulset.apps/web", "1"],
        "{table}"
    );
    let out = s.kubectl(&[
        "patch",
        "controllerrevision",
        "web-1",
        "--type=merge",
        "-p",
        r#"{"data":{"spec":{"template":{"metadata":{"labels":{"app":"other"}}}}}}"#,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("data: Invalid value") && err.contains("field is immutable"),
        "{err}"
    );
    // The revision number may change (a rollback renumbers the revision it returns to).
    s.ok(&[
        "patch",
        "controllerrevision",
        "web-1",
        "--type=merge",
        "-p",
        r#"{"revision":3}"#,
    ]);
}

#[test]
fn pod_disruption_budgets_should_be_served_like_any_builtin_kind() {
    // PodDisruptionBudget (policy/v1, what drains respect) is one file
    // (registry/kinds/pod_disruption_budget.rs) and one registration line.
    let s = Server::start_api_only();
    s.ok(&[
        "create",
        "poddisruptionbudget",
        "web",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    let table = s.ok(&["get", "pdb"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(rows[1][..4], ["web", "50%", "N/A", "0"], "{table}");
    let out = s.kubectl(&[
        "create",
        "poddisruptionbudget",
        "both",
        "--selector=app=web",
        "--max-unavailable=150%",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("spec.maxUnavailable") && err.contains("must not be greater than 100%"),
        "{err}"
    );
}
