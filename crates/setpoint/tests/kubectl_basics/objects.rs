//! Objects through their whole life with kubectl: create, apply, get, edit, describe, wait,
//! delete; errors for invalid and duplicate objects, finalizers, server-side dry runs.

use super::*;

#[test]
fn configmaps_should_go_through_their_whole_life_with_kubectl() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], CONFIGMAP);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.ok(&["get", "cm", "c1", "-o", "name"]).trim(),
        "configmap/c1"
    );
    let json = s.ok(&["get", "cm", "c1", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["data"]["a"], "1");
    assert!(!v["metadata"]["uid"].as_str().unwrap().is_empty());
    assert!(v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());
    assert!(s
        .ok(&["get", "cm", "c1", "-o", "yaml"])
        .contains("a: \"1\""));
    let table = s.ok(&["get", "cm"]);
    assert!(
        table.starts_with("NAME") && table.contains("DATA") && table.contains("c1"),
        "{table}"
    );

    s.ok(&["label", "cm", "c1", "tier=x"]);
    s.ok(&["annotate", "cm", "c1", "note=hi"]);
    assert_eq!(
        s.ok(&["get", "cm", "-l", "tier=x", "-o", "name"]).trim(),
        "configmap/c1"
    );
    assert_eq!(
        s.ok(&["get", "cm", "-l", "tier!=x", "-o", "name"])
            .lines()
            .filter(|l| *l != "configmap/kube-root-ca.crt")
            .collect::<Vec<_>>()
            .join("\n"),
        ""
    );
    assert_eq!(
        s.ok(&[
            "get",
            "cm",
            "--field-selector",
            "metadata.name=c1",
            "-o",
            "name"
        ])
        .trim(),
        "configmap/c1"
    );

    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/c","value":"3"}]"#,
    ]);
    s.ok(&["patch", "cm", "c1", "-p", r#"{"data":{"a":null}}"#]);
    let data = s.ok(&["get", "cm", "c1", "-o", "jsonpath={.data}"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&data).unwrap(),
        serde_json::json!({"b": "2", "c": "3"})
    );

    let err = s.fails(&[
        "patch",
        "cm",
        "c1",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/data/b","value":"9"}]"#,
    ]);
    assert!(err.contains("rejected our request"), "{err}");

    s.ok(&["delete", "cm", "c1", "--wait"]);
    let err = s.fails(&["get", "cm", "c1"]);
    assert!(err.contains(r#"configmaps "c1" not found"#), "{err}");
}

#[test]
fn apply_twice_should_change_only_what_changed() {
    let s = Server::start();
    let apply =
        |manifest: &str| s.kubectl_stdin(&["apply", "-f", "-", "--validate=false"], manifest);
    let first = apply(DEPLOYMENT);
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("deployment.apps/web created"),
        "{first:?}"
    );
    let again = apply(DEPLOYMENT);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("unchanged"),
        "{again:?}"
    );
    let generation = s.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert_eq!(generation, "1");

    let changed = DEPLOYMENT
        .replace("replicas: 2", "replicas: 3")
        .replace("nginx:1.25", "nginx:1.26");
    let third = apply(&changed);
    assert!(
        String::from_utf8_lossy(&third.stdout).contains("configured"),
        "{third:?}"
    );
    let got = s.ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.generation} {.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[0].name}"]);
    assert_eq!(got, "2 3 nginx:1.26 A");

    s.ok(&["scale", "deploy", "web", "--replicas=5"]);
    assert_eq!(
        s.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation}"
        ]),
        "5 3"
    );
    let wide = s.ok(&["get", "deploy", "-o", "wide"]);
    assert!(
        wide.contains("nginx:1.26") && wide.contains("app=web"),
        "{wide}"
    );
}

#[test]
fn invalid_and_duplicate_objects_should_get_clear_errors() {
    let s = Server::start();
    let bad = DEPLOYMENT.replace("matchLabels: {app: web}", "matchLabels: {app: other}");
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"The Deployment "web" is invalid"#)
            && err.contains("spec.template.metadata.labels"),
        "{err}"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], CONFIGMAP);
    assert!(out.status.success());
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], CONFIGMAP);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AlreadyExists") && err.contains(r#"configmaps "c1" already exists"#),
        "{err}"
    );
    let err = s.fails(&["get", "pods", "-n", "nowhere", "x"]);
    assert!(err.contains("NotFound"), "{err}");
    let out = s.kubectl_stdin(
        &["create", "-n", "nowhere", "-f", "-", "--validate=false"],
        CONFIGMAP,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(r#"namespaces "nowhere" not found"#), "{err}");
}

#[test]
fn finalizers_should_hold_a_deleted_object_until_removed() {
    let s = Server::start();
    let cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-", "--validate=false"], cm)
        .status
        .success());
    s.ok(&["delete", "cm", "held", "--wait=false"]);
    let ts = s.ok(&[
        "get",
        "cm",
        "held",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!ts.is_empty(), "deletionTimestamp set");
    let err = s.fails(&[
        "patch",
        "cm",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}]"#,
    ]);
    assert!(err.contains("no new finalizers"), "{err}");
    s.ok(&[
        "patch",
        "cm",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let err = s.fails(&["get", "cm", "held"]);
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn server_dry_runs_should_delete_nothing_and_diff_only_what_changed() {
    // Regression (issue 14.1): kubectl sends dryRun in the DeleteOptions body, which was
    // ignored: every `kubectl delete … --dry-run=server` below deleted for real (the namespace
    // with everything in it). (issue 14.9): `kubectl diff` showed resourceVersion as removed.
    let s = Server::start();
    s.ok(&["create", "namespace", "victim"]);
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keepme, namespace: victim, labels: {dry: run}}\ndata: {a: \"1\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: pruneme, namespace: victim, labels: {dry: run}}\ndata: {b: \"2\"}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = s.ok(&["-n", "victim", "delete", "cm", "keepme", "--dry-run=server"]);
    assert!(out.contains("(server dry run)"), "{out}");
    let out = s.ok(&["delete", "namespace", "victim", "--dry-run=server"]);
    assert!(out.contains("(server dry run)"), "{out}");
    let out = s.ok(&[
        "delete",
        "cm",
        "-l",
        "dry=run",
        "--all-namespaces",
        "--dry-run=server",
    ]);
    assert!(out.contains("keepme") && out.contains("pruneme"), "{out}");
    let only_keepme = manifest.split("---").next().unwrap();
    let out = s.kubectl_stdin(
        &[
            "apply",
            "--prune",
            "-l",
            "dry=run",
            "--prune-allowlist=core/v1/ConfigMap",
            "--dry-run=server",
            "-f",
            "-",
        ],
        only_keepme,
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("configmap/pruneme pruned (server dry run)"),
        "{printed}"
    );

    // Nothing was deleted, and the namespace loop had nothing to act on.
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(
        s.ok(&["get", "ns", "victim", "-o", "jsonpath={.status.phase}"]),
        "Active"
    );
    assert_eq!(
        s.ok(&["get", "cm", "-n", "victim", "-l", "dry=run", "-o", "name"]),
        "configmap/keepme\nconfigmap/pruneme\n"
    );

    // `kubectl diff` (a server dry-run patch) shows only the changed data.
    let changed = only_keepme.replace("a: \"1\"", "a: \"2\"");
    let out = s.kubectl_stdin(&["diff", "-f", "-"], &changed);
    let diff = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{diff}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        diff.contains("-  a: \"1\"") && diff.contains("+  a: \"2\""),
        "{diff}"
    );
    assert!(!diff.contains("resourceVersion"), "{diff}");
    assert!(!diff.contains("generation"), "{diff}");
}

#[test]
fn describe_edit_and_wait_for_delete_should_work() {
    let s = Server::start();
    assert!(s
        .kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .status
        .success());
    let described = s.ok(&["describe", "deployment", "web"]);
    assert!(
        described.contains("Replicas:") && described.contains("nginx:1.25"),
        "{described}"
    );
    // `kubectl edit` runs $EDITOR on a temporary file, then sends the difference as a patch.
    let out = s
        .kubectl_command()
        .args(["edit", "deployment", "web"])
        .env("KUBE_EDITOR", "sed -i s/replicas:\\ 2/replicas:\\ 7/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "7"
    );
    let mut wait = s
        .kubectl_command()
        .args(["wait", "--for=delete", "deployment/web", "--timeout=30s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    s.ok(&["delete", "deployment", "web", "--wait=false"]);
    let status = wait.wait().unwrap();
    assert!(
        status.success(),
        "kubectl wait --for=delete did not see the deletion"
    );
}
