//! The API server driven by the real `kubectl`: discovery, create/get in every output format,
//! label/annotate, the three patch types, apply twice, watch, delete with --wait, and the
//! errors users see.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::Server;

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, labels: {app: a}}\ndata: {a: \"1\"}\n";

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1.25", ports: [{containerPort: 80}], env: [{name: A, value: "1"}]}
"#;

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
    let version = s.ok(&["version", "-o", "json"]);
    assert!(version.contains("\"minor\": \"33\""), "{version}");
}

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
        s.ok(&["get", "cm", "-l", "tier!=x", "-o", "name"]).trim(),
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
fn get_watch_should_see_later_changes() {
    let s = Server::start();
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(s.kubeconfig())
        .args([
            "get",
            "cm",
            "-w",
            "--output-watch-events",
            "--request-timeout=20s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    // kubectl prints the (empty) list first; give it a moment to start watching.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], CONFIGMAP);
    assert!(out.status.success());
    s.ok(&["label", "cm", "c1", "x=y"]);
    s.ok(&["delete", "cm", "c1"]);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = lines.next().expect("watch output ended early").unwrap();
        if let Some(kind) = line
            .split_whitespace()
            .next()
            .filter(|k| ["ADDED", "MODIFIED", "DELETED"].contains(k))
        {
            seen.push(kind.to_owned());
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
}
