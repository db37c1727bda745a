//! The API server driven by the real `kubectl`: discovery, create/get in every output format,
//! label/annotate, the three patch types, apply twice, watch, delete with --wait, and the
//! errors users see.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{kubectl_version, Server};

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
fn pods_should_print_kubectl_columns_and_delete_at_once_when_unscheduled() {
    // No node agent and no scheduler: the pod stays unscheduled and Pending.
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--controllers=*,-scheduler"],
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers: [{name: c, image: busybox, command: [sleep, '100']}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = s.ok(&["get", "pods"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(
        table.contains("0/1") && table.contains("Pending"),
        "{table}"
    );
    let wide = s.ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap().contains("NOMINATED NODE"),
        "{wide}"
    );
    let json = s.ok(&["get", "pod", "p1", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["spec"]["restartPolicy"], "Always", "defaults applied");
    assert_eq!(v["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(v["status"]["qosClass"], "BestEffort");
    assert_eq!(
        s.ok(&[
            "get",
            "pods",
            "--field-selector",
            "status.phase=Pending",
            "-o",
            "name"
        ])
        .trim(),
        "pod/p1"
    );
    s.ok(&["delete", "pod", "p1", "--wait"]);
    assert_eq!(s.ok(&["get", "pods", "-o", "name"]).trim(), "");
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
fn a_pod_with_the_largest_grace_period_should_be_deleted_by_kubectl() {
    // Regression (issue 14.2): such a pod was accepted, then `kubectl delete pod` got a 500
    // (the server panicked computing its deletionTimestamp), and a node agent stopping it
    // would have overflowed its deadline.
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-grace-{}-{nanos:x}", std::process::id());
    let _cleanup = common::processes::Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: patient}}\nspec:\n  nodeName: local\n  terminationGracePeriodSeconds: 9223372036854775807\n  containers:\n  - {{name: c, image: busybox, command: [sh, -c, 'sleep 3600 # {marker}']}}\n"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/patient",
        "--timeout=60s",
    ]);
    // SIGTERM stops `sh`: the agent does not wait out the grace period.
    let out = s.ok(&["delete", "pod", "patient", "--timeout=60s"]);
    assert!(out.contains("pod \"patient\" deleted"), "{out}");
    let err = s.fails(&["get", "pod", "patient"]);
    assert!(err.contains("NotFound"), "{err}");
}

#[test]
fn kubectl_as_should_be_refused_not_ignored() {
    // Regression (issue 14.14): `kubectl --as=…` ran the request as the admin.
    let s = Server::start_api_only();
    // Discovery first, as the caller: kubectl reports a refused discovery request as
    // "unknown" (kube-apiserver's answer included), whereas it prints a refused list's message.
    s.ok(&["get", "secrets"]);
    let err = s.fails(&["--as=system:anonymous", "get", "secrets"]);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("users \"system:anonymous\" is forbidden")
            && err.contains("impersonation is not supported"),
        "{err}"
    );
    let err = s.fails(&[
        "--as=someone",
        "--as-group=system:masters",
        "get",
        "secrets",
    ]);
    assert!(err.contains("Forbidden"), "{err}");
    let err = s.fails(&["--as=system:anonymous", "get", "--raw", "/api/v1/secrets"]);
    assert!(err.contains("impersonation is not supported"), "{err}");
}

#[test]
fn a_deleted_namespace_should_stay_terminating_while_content_is_held_and_refuse_new_content() {
    let s = Server::start();
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: doomed}\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-", "--validate=false"], ns)
        .status
        .success());
    // A finalizer nobody removes keeps the namespace controller from finishing.
    let held =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n";
    assert!(s
        .kubectl_stdin(
            &["create", "-n", "doomed", "-f", "-", "--validate=false"],
            held
        )
        .status
        .success());
    s.ok(&["delete", "namespace", "doomed", "--wait=false"]);
    assert_eq!(
        s.ok(&["get", "ns", "doomed", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    let other = CONFIGMAP.replace("name: c1", "name: c2");
    let out = s.kubectl_stdin(
        &["create", "-n", "doomed", "-f", "-", "--validate=false"],
        &other,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Forbidden") && err.contains("because it is being terminated"),
        "{err}"
    );
    // Released, the content goes and the namespace with it.
    s.ok(&[
        "patch",
        "cm",
        "held",
        "-n",
        "doomed",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    s.ok(&["wait", "--for=delete", "namespace/doomed", "--timeout=60s"]);
    let err = s.fails(&["get", "ns", "doomed"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
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
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(s.kubeconfig())
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
    let mut wait = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(s.kubeconfig())
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

#[test]
fn services_should_get_a_cluster_ip_that_stays() {
    let s = Server::start();
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-"], svc)
        .status
        .success());
    let ip = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
    assert!(
        octets[0] == 10 && (96..112).contains(&octets[1]),
        "{ip} is outside 10.96.0.0/12"
    );
    let table = s.ok(&["get", "svc", "web"]);
    assert!(table.contains(&ip) && table.contains("80/TCP"), "{table}");
    // Replacing with the original manifest (no clusterIP) keeps the address.
    let out = s.kubectl_stdin(&["replace", "-f", "-"], svc);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]),
        ip
    );
    let taken = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: other}}\nspec:\n  clusterIP: {ip}\n  ports: [{{port: 80}}]\n"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &taken);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already allocated"), "{err}");
}

#[test]
fn events_should_be_one_set_served_by_both_event_apis() {
    let s = Server::start();
    let new_api = r#"
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: e1}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: example.com/controller
reportingInstance: controller-1
action: Reconcile
reason: Synced
type: Normal
note: synced the web deployment
regarding: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}
"#;
    let out = s.kubectl_stdin(&["create", "-f", "-"], new_api);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let core = s.ok(&["get", "events.v1.", "e1", "-o", "json"]);
    let core: serde_json::Value = serde_json::from_str(&core).unwrap();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "synced the web deployment");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["reportingComponent"], "example.com/controller");
    let table = s.ok(&["get", "events"]);
    assert!(
        table.contains("deployment/web") && table.contains("Synced"),
        "{table}"
    );

    let old_api = "apiVersion: v1\nkind: Event\nmetadata: {name: e2}\ninvolvedObject: {kind: Pod, name: p1, namespace: default}\nreason: Started\nmessage: started the container\ntype: Normal\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-"], old_api)
        .status
        .success());
    let note = s.ok(&[
        "get",
        "events.v1.events.k8s.io",
        "e2",
        "-o",
        "jsonpath={.apiVersion} {.note} {.regarding.name}",
    ]);
    assert_eq!(note, "events.k8s.io/v1 started the container p1");
}

#[test]
fn kubectl_debug_should_fail_cleanly_without_ephemeral_containers() {
    // Regression (issue 14.7): `kubectl debug POD -it --image=busybox` made kubectl itself
    // panic: the 404 for the unsupported pods/ephemeralcontainers subresource had no
    // `details`, and kubectl reads `Details.Name` to tell it from a missing pod.
    let s = Server::start_api_only();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers: [{name: c, image: busybox, command: [sleep, '100']}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.kubectl(&["debug", "p1", "-it", "--image=busybox"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("panic") && !stderr.contains("goroutine"),
        "kubectl panicked:\n{stderr}"
    );
    assert!(
        stderr.contains("ephemeral containers are disabled for this cluster"),
        "{stderr}"
    );
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
