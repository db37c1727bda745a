//! Server-side apply with `kubectl`: creates and updates, `managedFields` as users read them,
//! fields a manager stops applying removed, conflicts with other managers (and
//! `--force-conflicts`), an update taking a field over, keyed lists of a custom resource merged
//! between managers, `kubectl diff --server-side`, dry runs, the move from client-side
//! apply, and managers of another API version (an `autoscaling/v1` and a `v2` HPA).

use serde_json::Value;

use crate::common::Server;

fn apply(server: &Server, args: &[&str], manifest: &str) -> std::process::Output {
    let mut all = vec!["apply", "--server-side", "-f", "-"];
    all.extend_from_slice(args);
    server.kubectl_stdin(&all, manifest)
}

fn applied(server: &Server, args: &[&str], manifest: &str) -> String {
    let out = apply(server, args, manifest);
    assert!(
        out.status.success(),
        "apply {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn get(server: &Server, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend(["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&server.ok(&args)).unwrap()
}

/// The managedFields entry of `manager`.
fn entry<'a>(object: &'a Value, manager: &str) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
}

fn config_map(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n{data}")
}

#[test]
fn server_side_apply_should_own_merge_prune_and_conflict_like_kube_apiserver() {
    let server = Server::start();
    // Create: the applier owns exactly what it applied.
    let out = applied(&server, &[], &config_map("  a: '1'\n  b: '2'\n"));
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let cm = get(&server, &["cm", "settings"]);
    let mine = entry(&cm, "kubectl").expect("kubectl's entry");
    assert_eq!(mine["operation"], "Apply");
    assert_eq!(mine["apiVersion"], "v1");
    assert_eq!(mine["fieldsType"], "FieldsV1");
    assert!(mine["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(
        mine["fieldsV1"],
        serde_json::json!({"f:data": {"f:a": {}, "f:b": {}}})
    );

    // Without --show-managed-fields kubectl hides them, as it does against kube-apiserver.
    let plain = server.ok(&["get", "cm", "settings", "-o", "yaml"]);
    assert!(!plain.contains("managedFields"), "{plain}");

    // A field no longer applied goes; a changed one changes.
    applied(&server, &[], &config_map("  a: '10'\n"));
    let cm = get(&server, &["cm", "settings"]);
    assert_eq!(cm["data"], serde_json::json!({"a": "10"}));

    // Another manager applying a different value conflicts, naming the field and its owner.
    let out = apply(
        &server,
        &["--field-manager=other"],
        &config_map("  a: '20'\n"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("conflict"), "{err}");
    assert!(err.contains(r#"conflict with "kubectl""#), "{err}");
    assert!(err.contains(".data.a"), "{err}");
    assert_eq!(get(&server, &["cm", "settings"])["data"]["a"], "10");

    // The same value is shared without conflict; forcing takes the field over.
    applied(
        &server,
        &["--field-manager=sharer"],
        &config_map("  a: '10'\n"),
    );
    applied(
        &server,
        &["--field-manager=other", "--force-conflicts"],
        &config_map("  a: '20'\n  c: '3'\n"),
    );
    let cm = get(&server, &["cm", "settings"]);
    assert_eq!(cm["data"], serde_json::json!({"a": "20", "c": "3"}));
    assert!(
        entry(&cm, "kubectl").is_none(),
        "kubectl lost its only field: {cm}"
    );
    assert!(
        entry(&cm, "sharer").is_none(),
        "sharer lost its only field: {cm}"
    );
    assert_eq!(
        entry(&cm, "other").unwrap()["fieldsV1"],
        serde_json::json!({"f:data": {"f:a": {}, "f:c": {}}})
    );

    // An update (here a merge patch) takes a field over without conflict; applying it back
    // to another value then conflicts with the patcher.
    server.ok(&[
        "patch",
        "cm",
        "settings",
        "--type=merge",
        "-p",
        r#"{"data":{"c":"30"}}"#,
    ]);
    let cm = get(&server, &["cm", "settings"]);
    let patcher = entry(&cm, "kubectl-patch").expect("the patch's entry");
    assert_eq!(patcher["operation"], "Update");
    assert_eq!(
        patcher["fieldsV1"],
        serde_json::json!({"f:data": {"f:c": {}}})
    );
    let out = apply(
        &server,
        &["--field-manager=other"],
        &config_map("  a: '20'\n  c: '3'\n"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"conflict with "kubectl-patch" using v1"#),
        "{err}"
    );
    // Dropping c from other's configuration leaves it: kubectl-patch owns it.
    applied(
        &server,
        &["--field-manager=other"],
        &config_map("  a: '20'\n"),
    );
    assert_eq!(
        get(&server, &["cm", "settings"])["data"],
        serde_json::json!({"a": "20", "c": "30"})
    );

    // Bad requests: no field manager (the raw API), a dry run changes nothing.
    let out = server.kubectl(&[
        "patch",
        "cm",
        "settings",
        "--type=apply",
        "-p",
        r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"0"}}"#,
        "--field-manager=",
    ]);
    assert!(!out.status.success());
    applied(
        &server,
        &["--field-manager=other", "--dry-run=server"],
        &config_map("  a: '99'\n"),
    );
    assert_eq!(get(&server, &["cm", "settings"])["data"]["a"], "20");
}

#[test]
fn creates_and_updates_should_record_their_managers() {
    let server = Server::start();
    server.ok(&["create", "configmap", "made", "--from-literal=k=v"]);
    let cm = get(&server, &["cm", "made"]);
    let create = entry(&cm, "kubectl-create").expect("kubectl-create's entry");
    assert_eq!(create["operation"], "Update");
    assert_eq!(
        create["fieldsV1"],
        serde_json::json!({"f:data": {".": {}, "f:k": {}}})
    );
    server.ok(&["label", "cm", "made", "tier=web"]);
    let cm = get(&server, &["cm", "made"]);
    assert_eq!(
        entry(&cm, "kubectl-label").unwrap()["fieldsV1"],
        serde_json::json!({"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}})
    );
    // A write that changes nothing records nothing new.
    let before = cm["metadata"]["resourceVersion"].clone();
    server.ok(&["label", "cm", "made", "tier=web", "--overwrite"]);
    assert_eq!(
        get(&server, &["cm", "made"])["metadata"]["resourceVersion"],
        before
    );
    // `[{}]` clears them.
    server.ok(&[
        "patch",
        "cm",
        "made",
        "--type=merge",
        "-p",
        r#"{"metadata":{"managedFields":[{}]}}"#,
    ]);
    let cm = get(&server, &["cm", "made"]);
    assert!(cm["metadata"]["managedFields"].is_null(), "{cm}");
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: example.invalid/web:1
        ports: [{containerPort: 80}]
      - name: side
        image: example.invalid/side:1
"#;

#[test]
fn deployments_should_merge_containers_by_name_and_kubectl_should_migrate_from_client_side_apply() {
    let server = Server::start_api_only();
    // Client-side apply first; then the same manifest server-side: kubectl moves the
    // client-side apply fields to its apply entry, so nothing conflicts.
    server.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    applied(&server, &[], DEPLOYMENT);
    let d = get(&server, &["deploy", "web"]);
    let mine = entry(&d, "kubectl").expect("kubectl's apply entry");
    assert_eq!(mine["operation"], "Apply");
    let containers = &mine["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert_eq!(
        containers[r#"k:{"name":"web"}"#]["f:ports"][r#"k:{"containerPort":80,"protocol":"TCP"}"#],
        serde_json::json!({".": {}, "f:containerPort": {}})
    );
    assert_eq!(
        mine["fieldsV1"]["f:spec"]["f:selector"],
        serde_json::json!({})
    );

    // `kubectl diff --server-side` shows what an apply would change (exit code 1).
    let changed = DEPLOYMENT.replace("web:1", "web:2");
    let out = server.kubectl_stdin(&["diff", "--server-side", "-f", "-"], &changed);
    let diff = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{diff}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        diff.contains("+      - image: example.invalid/web:2"),
        "{diff}"
    );

    // Dropping a container removes it; the other keeps its place and fields.
    let one = DEPLOYMENT
        .replace(
            "      - name: side\n        image: example.invalid/side:1\n",
            "",
        )
        .replace("web:1", "web:2");
    applied(&server, &[], &one);
    let d = get(&server, &["deploy", "web"]);
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{d}");
    assert_eq!(containers[0]["image"], "example.invalid/web:2");
    assert_eq!(containers[0]["ports"][0]["protocol"], "TCP");
    // The scale of another manager's update is its own; applying replicas again conflicts.
    server.ok(&["scale", "deploy", "web", "--replicas=5"]);
    server.ok(&[
        "patch",
        "deploy",
        "web",
        "--type=merge",
        "--field-manager=autoscaler",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ]);
    let out = apply(&server, &[], &one);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"conflict with "autoscaler""#) && err.contains(".spec.replicas"),
        "{err}"
    );
    // Without replicas in the manifest the applier leaves them to the autoscaler.
    applied(&server, &[], &one.replace("  replicas: 2\n", ""));
    assert_eq!(get(&server, &["deploy", "web"])["spec"]["replicas"], 4);
}

const GADGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              args: {type: array, items: {type: string}}
"#;

#[test]
fn custom_resources_should_merge_keyed_lists_between_managers() {
    let server = Server::start_api_only();
    server.kubectl_stdin(&["apply", "-f", "-"], GADGETS);
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.example.com",
        "--timeout=60s",
    ]);
    let gadget = |ports: &str, args: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {{name: g}}\nspec:\n  ports: {ports}\n  args: {args}\n"
        )
    };
    applied(
        &server,
        &["--field-manager=a"],
        &gadget("[{name: http, port: 80}]", "[x]"),
    );
    applied(
        &server,
        &["--field-manager=b"],
        &gadget("[{name: metrics, port: 9090}]", "[x]"),
    );
    let g = get(&server, &["gadgets", "g"]);
    let names: Vec<&str> = g["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http", "metrics"], "{g}");
    assert_eq!(
        entry(&g, "b").unwrap()["fieldsV1"],
        serde_json::json!({"f:spec": {"f:args": {}, "f:ports": {r#"k:{"name":"metrics"}"#: {".": {}, "f:name": {}, "f:port": {}}}}})
    );
    // An atomic list is one field: a different value conflicts.
    let out = apply(
        &server,
        &["--field-manager=b"],
        &gadget("[{name: metrics, port: 9090}]", "[y]"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("conflict") && err.contains(".spec.args"),
        "{err}"
    );
    // a drops its port: only a's item goes.
    applied(&server, &["--field-manager=a"], &gadget("[]", "[x]"));
    let g = get(&server, &["gadgets", "g"]);
    assert_eq!(
        g["spec"]["ports"],
        serde_json::json!([{"name": "metrics", "port": 9090}])
    );
}

/// An HPA at `autoscaling/v1` (`cpu` as `targetCPUUtilizationPercentage`) or `v2` (as
/// `metrics`).
fn hpa(version: &str, cpu: u32) -> String {
    let head = format!(
        "apiVersion: autoscaling/{version}\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n  maxReplicas: 5\n"
    );
    if version == "v1" {
        format!("{head}  targetCPUUtilizationPercentage: {cpu}\n")
    } else {
        format!("{head}  metrics:\n  - type: Resource\n    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: {cpu}}}}}\n")
    }
}

#[test]
fn managers_of_another_version_should_be_compared_in_their_own_terms() {
    let server = Server::start_api_only();
    applied(&server, &["--field-manager=v2-owner"], &hpa("v2", 60));
    // The same target through v1 is another name for the v2 owner's metrics: a conflict.
    let out = apply(&server, &["--field-manager=v1-owner"], &hpa("v1", 70));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(r#"conflict with "v2-owner""#)
            && err.contains(".spec.metrics"),
        "{err}"
    );
    // The same value is no conflict: shared.
    applied(&server, &["--field-manager=v1-owner"], &hpa("v1", 60));
    // Forced, the v1 applier takes the target over: the v2 owner no longer owns its metrics.
    applied(
        &server,
        &["--field-manager=v1-owner", "--force-conflicts"],
        &hpa("v1", 70),
    );
    let h = get(&server, &["hpa.v2.autoscaling", "web"]);
    assert_eq!(
        h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 70,
        "{h}"
    );
    let v2 = entry(&h, "v2-owner").expect("the v2 owner keeps its other fields");
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert!(v2["fieldsV1"]["f:spec"]["f:metrics"].is_null(), "{v2}");
    assert!(
        v2["fieldsV1"]["f:spec"]["f:maxReplicas"].is_object(),
        "{v2}"
    );
    let v1 = entry(&h, "v1-owner").unwrap();
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert!(
        v1["fieldsV1"]["f:spec"]["f:targetCPUUtilizationPercentage"].is_object(),
        "{v1}"
    );
    // An update through v2 takes the target back from the v1 applier, no conflict.
    server.ok(&[
        "patch",
        "hpa.v2.autoscaling",
        "web",
        "--type=merge",
        "--field-manager=tuner",
        "-p",
        r#"{"spec":{"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]}}"#,
    ]);
    let h = get(&server, &["hpa.v2.autoscaling", "web"]);
    let v1 = entry(&h, "v1-owner").unwrap();
    assert!(
        v1["fieldsV1"]["f:spec"]["f:targetCPUUtilizationPercentage"].is_null(),
        "{v1}"
    );
    assert!(entry(&h, "tuner").is_some(), "{h}");
}
