//! CustomResourceDefinitions driven by the real `kubectl`: apply a CRD and wait for it to be
//! established, then create, read (printer columns, another served version), patch (merge and
//! JSON), scale and delete custom objects; schema validation with the field named, pruning,
//! defaults, CEL rules, the status subresource and `generation`, `kubectl explain`; a
//! cluster-scoped CRD; deleting a CRD removes its objects (waiting for their finalizers) and
//! its resource; CRDs survive a restart. Cluster API's kinds (`setpoint-capi`), whose CRDs the
//! `cluster-api` loop installs, apply as upstream's and print upstream's columns.

use crate::common;

use common::Server;
use serde_json::Value;
use setpoint_testenv::eventually_blocking;

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [shop]}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    selectableFields:
    - {jsonPath: .spec.color}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A widget for the end-to-end tests.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            x-kubernetes-validations:
            - {rule: "self.size <= 5 || self.color == 'red'", message: big widgets must be red}
            - {rule: "!has(self.replicas) || self.replicas <= self.size", message: too many,
               messageExpression: "'replicas ' + string(self.replicas) + ' exceed size ' + string(self.size)"}
            properties:
              size: {type: integer, minimum: 1, maximum: 10, description: How big the widget is.}
              color: {type: string, enum: [red, blue, green]}
              label: {type: string, maxLength: 8, pattern: '^[a-z]+$'}
              replicas: {type: integer, default: 1}
              mode: {type: string, default: auto}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

const GIZMOS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.org}
spec:
  group: example.org
  scope: Cluster
  names: {plural: gizmos, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn apply(s: &Server, manifest: &str, extra: &[&str]) -> String {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    let out = s.kubectl_stdin(&args, manifest);
    assert!(
        out.status.success(),
        "kubectl apply failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn apply_fails(s: &Server, manifest: &str) -> String {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(
        !out.status.success(),
        "kubectl apply succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(s: &Server, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&s.ok(&all)).expect("kubectl prints JSON")
}

fn establish(s: &Server, manifest: &str, name: &str) {
    apply(s, manifest, &[]);
    s.ok(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{name}"),
        "--timeout=30s",
    ]);
}

#[test]
fn custom_resources_should_go_through_their_whole_life_with_kubectl() {
    let s = Server::start();
    establish(&s, WIDGETS, "widgets.example.com");
    let crd = json(&s, &["get", "crd", "widgets.example.com"]);
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "NamesAccepted" && c["status"] == "True"));
    let resources = s.ok(&["api-resources", "--api-group=example.com"]);
    assert!(
        resources.contains("widgets") && resources.contains("wd") && resources.contains("Widget"),
        "{resources}"
    );

    // Unknown fields are pruned (the client asked not to be strict), defaults applied.
    apply(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, junk: 1}\nspec: {size: 3, color: blue, bogus: 1}\n",
        &["--validate=false"],
    );
    let w1 = json(&s, &["get", "wd", "w1"]);
    assert_eq!(w1["apiVersion"], "example.com/v1");
    assert_eq!(w1["spec"]["replicas"], 1);
    assert_eq!(w1["spec"]["mode"], "auto");
    assert!(w1["spec"].get("bogus").is_none(), "{w1}");
    assert!(w1["metadata"].get("junk").is_none(), "{w1}");
    assert_eq!(w1["metadata"]["generation"], 1);
    // With kubectl's default (strict) validation, the unknown field is an error.
    let err = apply_fails(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w9}\nspec: {size: 3, bogus: 1}\n",
    );
    assert!(err.contains("unknown field \"spec.bogus\""), "{err}");

    // Printer columns in a plain `kubectl get`, the priority-1 one only in wide output.
    let table = s.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "SIZE", "COLOR", "AGE"], "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("w1"), "{table}");
    let wide = s.ok(&["get", "widgets", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("REPLICAS"), "{wide}");
    assert_eq!(
        s.ok(&["get", "shop", "-o", "name"]).trim(),
        "widget.example.com/w1"
    );

    // Another served version: the same object, its own apiVersion.
    let old = s.ok(&[
        "get",
        "widgets.v1beta1.example.com",
        "w1",
        "-o",
        "jsonpath={.apiVersion} {.spec.size}",
    ]);
    assert_eq!(old, "example.com/v1beta1 3");

    // Merge and JSON patches; a spec change bumps the generation.
    s.ok(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":4}}"#,
    ]);
    s.ok(&[
        "patch",
        "wd",
        "w1",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/color","value":"green"}]"#,
    ]);
    let got = s.ok(&[
        "get",
        "wd",
        "w1",
        "-o",
        "jsonpath={.spec.size} {.spec.color} {.metadata.generation}",
    ]);
    assert_eq!(got, "4 green 3");

    // Invalid objects are rejected, naming the field.
    let err = s.fails(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":20}}"#,
    ]);
    assert!(
        err.contains(
            "spec.size: Invalid value: 20: spec.size in body should be less than or equal to 10"
        ),
        "{err}"
    );
    // Regression: the field was shown twice (`spec.size: spec.size: Invalid value: …`).
    assert!(!err.contains("spec.size: spec.size"), "{err}");
    let err = s.fails(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":"big"}}"#,
    ]);
    assert!(
        err.contains("spec.size") && err.contains("must be of type integer"),
        "{err}"
    );
    let err = apply_fails(&s, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 2, color: pink, label: Abc}\n");
    assert!(
        err.contains("spec.color: Unsupported value: \"pink\""),
        "{err}"
    );
    assert!(
        err.contains("spec.label") && err.contains("should match"),
        "{err}"
    );
    let err = apply_fails(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {color: red}\n",
    );
    assert!(err.contains("spec.size: Required value"), "{err}");
    let err = apply_fails(&s, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 2, tags: [a, a]}\n");
    assert!(err.contains("spec.tags[1]: Duplicate value"), "{err}");
    // A CEL rule.
    let err = s.fails(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":7}}"#,
    ]);
    assert!(err.contains("big widgets must be red"), "{err}");
    // A rule whose message comes from its messageExpression.
    let err = s.fails(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ]);
    assert!(err.contains("replicas 9 exceed size 4"), "{err}");
    s.ok(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":7,"color":"red"}}"#,
    ]);
    // selectableFields: field selectors on the CRD's fields.
    assert_eq!(
        s.ok(&[
            "get",
            "wd",
            "--field-selector",
            "spec.color=red",
            "-o",
            "name"
        ])
        .trim(),
        "widget.example.com/w1"
    );
    assert_eq!(
        s.ok(&[
            "get",
            "wd",
            "--field-selector",
            "spec.color!=red",
            "-o",
            "name"
        ])
        .trim(),
        ""
    );
    let err = s.fails(&["get", "wd", "--field-selector", "spec.size=7"]);
    assert!(err.contains("spec.size"), "{err}");

    // The status subresource: status only there, and no generation bump for it.
    let generation = s.ok(&["get", "wd", "w1", "-o", "jsonpath={.metadata.generation}"]);
    s.ok(&[
        "patch",
        "wd",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":2,"selector":"app=w"},"spec":{"size":1}}"#,
    ]);
    s.ok(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    let got = s.ok(&[
        "get",
        "wd",
        "w1",
        "-o",
        "jsonpath={.status.replicas} {.spec.size} {.metadata.generation}",
    ]);
    assert_eq!(got, format!("2 7 {generation}"));

    // The scale subresource.
    s.ok(&["scale", "wd", "w1", "--replicas=4"]);
    let scale: Value = serde_json::from_str(&s.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]))
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=w");
    assert_eq!(
        s.ok(&["get", "wd", "w1", "-o", "jsonpath={.spec.replicas}"]),
        "4"
    );

    // kubectl explain reads the CRD's schema from the OpenAPI v3 documents.
    let explain = s.ok(&["explain", "widgets.spec"]);
    assert!(explain.contains("What the widget should be"), "{explain}");
    assert!(
        explain.contains("size") && explain.contains("How big the widget is"),
        "{explain}"
    );

    // Changing the CRD (a strategic merge patch from `kubectl apply`): a new default shows
    // on the stored object, a new description in `kubectl explain`.
    let changed = WIDGETS
        .replace("A widget for the end-to-end tests.", "A widget, second edition.")
        .replace(
            "mode: {type: string, default: auto}",
            "mode: {type: string, default: auto}\n              shape: {type: string, default: round}",
        );
    assert!(apply(&s, &changed, &[]).contains("configured"));
    assert!(apply(&s, &changed, &[]).contains("unchanged"));
    assert_eq!(
        s.ok(&["get", "wd", "w1", "-o", "jsonpath={.spec.shape}"]),
        "round"
    );
    let explain = s.ok(&["explain", "widgets"]);
    assert!(explain.contains("A widget, second edition."), "{explain}");

    s.ok(&["delete", "wd", "w1", "--wait"]);
    let err = s.fails(&["get", "wd", "w1"]);
    assert!(
        err.contains(r#"widgets.example.com "w1" not found"#),
        "{err}"
    );
}

#[test]
fn deleting_a_crd_should_delete_its_objects_and_its_resource() {
    let s = Server::start();
    establish(&s, GIZMOS, "gizmos.example.org");
    apply(
        &s,
        "apiVersion: example.org/v1\nkind: Gizmo\nmetadata: {name: g1}\nspec: {anything: [1, 2]}\n",
        &[],
    );
    apply(
        &s,
        "apiVersion: example.org/v1\nkind: Gizmo\nmetadata: {name: g2, finalizers: [example.org/hold]}\nspec: {}\n",
        &[],
    );
    // Cluster-scoped: no namespace, listed as such.
    let g1 = json(&s, &["get", "gizmo", "g1"]);
    assert!(g1["metadata"].get("namespace").is_none(), "{g1}");
    assert_eq!(g1["spec"]["anything"], serde_json::json!([1, 2]));
    let resources = s.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(
        resources.lines().any(|l| l == "gizmos.example.org"),
        "{resources}"
    );

    s.ok(&["delete", "crd", "gizmos.example.org", "--wait=false"]);
    // g2's finalizer holds the CRD, Terminating; g1 is gone already.
    eventually_blocking("the CRD to report Terminating", || {
        let crd = json(&s, &["get", "crd", "gizmos.example.org"]);
        crd["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Terminating" && c["status"] == "True")
        })
    });
    let crd = json(&s, &["get", "crd", "gizmos.example.org"]);
    assert!(
        crd["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(
                "customresourcecleanup.apiextensions.k8s.io"
            )),
        "{crd}"
    );
    assert_eq!(
        s.ok(&["get", "gizmos", "-o", "name"]).trim(),
        "gizmo.example.org/g2"
    );
    let err = apply_fails(
        &s,
        "apiVersion: example.org/v1\nkind: Gizmo\nmetadata: {name: g3}\n",
    );
    assert!(err.contains("terminating"), "{err}");
    s.ok(&[
        "patch",
        "gizmo",
        "g2",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually_blocking("the CRD to go", || {
        !s.kubectl(&["get", "crd", "gizmos.example.org"])
            .status
            .success()
    });
    let resources = s.ok(&["api-resources", "-o", "name"]);
    assert!(!resources.contains("gizmos"), "{resources}");

    // Recreated, the resource starts empty.
    establish(&s, GIZMOS, "gizmos.example.org");
    assert_eq!(s.ok(&["get", "gizmos", "-o", "name"]).trim(), "");
}

#[test]
fn crds_and_their_objects_should_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    {
        let s = Server::start_in(&dir);
        establish(&s, WIDGETS, "widgets.example.com");
        apply(
            &s,
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 2}\n",
            &[],
        );
    }
    let s = Server::start_in(&dir);
    let got = s.ok(&[
        "get",
        "wd",
        "w1",
        "-o",
        "jsonpath={.spec.size} {.spec.mode}",
    ]);
    assert_eq!(got, "2 auto");
    let err = apply_fails(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 0}\n",
    );
    assert!(err.contains("spec.size"), "{err}");
}

#[test]
fn a_crd_whose_names_are_taken_should_not_be_served() {
    let s = Server::start();
    establish(&s, GIZMOS, "gizmos.example.org");
    // Another plural, the same kind in the same group.
    let clash = GIZMOS
        .replace("gizmos.example.org", "widgets.example.org")
        .replace("plural: gizmos", "plural: widgets");
    apply(&s, &clash, &[]);
    eventually_blocking("NamesAccepted=False", || {
        let crd = json(&s, &["get", "crd", "widgets.example.org"]);
        crd["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["type"] == "NamesAccepted"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("is already in use")
            })
        })
    });
    let resources = s.ok(&["api-resources", "--api-group=example.org", "-o", "name"]);
    assert_eq!(resources.trim(), "gizmos.example.org");
    // Once the names are free, the waiting CRD is served.
    s.ok(&["delete", "crd", "gizmos.example.org"]);
    s.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.org",
        "--timeout=30s",
    ]);
    let resources = s.ok(&["api-resources", "--api-group=example.org", "-o", "name"]);
    assert_eq!(resources.trim(), "widgets.example.org");
}

#[test]
fn deleting_a_namespace_should_delete_its_custom_objects() {
    let s = Server::start();
    establish(&s, WIDGETS, "widgets.example.com");
    s.ok(&["create", "namespace", "team"]);
    apply(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: team}\nspec: {size: 2}\n",
        &[],
    );
    assert_eq!(
        s.ok(&["get", "wd", "-A", "-o", "name"]).trim(),
        "widget.example.com/w1"
    );
    s.ok(&["delete", "namespace", "team", "--timeout=60s"]);
    assert_eq!(s.ok(&["get", "wd", "-A", "-o", "name"]).trim(), "");
}

#[test]
fn watches_should_see_objects_go_and_end_with_their_crd() {
    let s = Server::start();
    establish(&s, WIDGETS, "widgets.example.com");
    apply(
        &s,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n",
        &[],
    );
    let mut watch = s
        .kubectl_command()
        .args([
            "get",
            "wd",
            "-w",
            "--output-watch-events",
            "--request-timeout=60s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(watch.stdout.take().unwrap());
    let mut line = String::new();
    // The header, then the object as it is.
    for _ in 0..2 {
        line.clear();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    }
    assert!(line.starts_with("ADDED") && line.contains("w1"), "{line}");
    s.ok(&["delete", "crd", "widgets.example.com"]);
    let mut rest = String::new();
    // kubectl exits once the server ends the watch.
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = watch.wait().unwrap();
    assert!(rest.starts_with("DELETED") && rest.contains("w1"), "{rest}");
    assert!(status.success(), "{status}");
}

/// The CRDs the `cluster-api` loop installs.
const CLUSTER_API_CRDS: [&str; 5] = [
    "clusters.cluster.x-k8s.io",
    "machines.cluster.x-k8s.io",
    "machinesets.cluster.x-k8s.io",
    "machinedeployments.cluster.x-k8s.io",
    "machinehealthchecks.cluster.x-k8s.io",
];

/// The column headers of every table `kubectl get` printed (kubectl pads columns with at least
/// three spaces; a header may hold one, `CP DESIRED`).
fn headers(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| l.starts_with("NAME "))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn cluster_api_kinds_should_apply_print_scale_and_validate_as_upstreams() {
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--controllers=cluster-api"],
    );
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=5s"];
    let crds: Vec<String> = CLUSTER_API_CRDS
        .iter()
        .map(|c| format!("crd/{c}"))
        .collect();
    wait.extend(crds.iter().map(String::as_str));
    let serving = started.elapsed();
    eventually_blocking("the cluster-api loop to install its CRDs", || {
        s.kubectl(&wait).status.success()
    });
    eprintln!(
        "the server answered {serving:?} after it was started; the Cluster API CRDs were established {:?} after that",
        started.elapsed() - serving
    );

    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cluster-api/core-objects.yaml"
    );
    let out = s.ok(&["apply", "-f", example]);
    for created in [
        "cluster.cluster.x-k8s.io/demo created",
        "machinedeployment.cluster.x-k8s.io/demo-md-0 created",
        "machineset.cluster.x-k8s.io/demo-ms-0 created",
        "machine.cluster.x-k8s.io/demo-control-plane-0 created",
        "machinehealthcheck.cluster.x-k8s.io/demo-md-0-unhealthy created",
    ] {
        assert!(out.contains(created), "{out}");
    }

    let table = s.ok(&[
        "get",
        "clusters,machines,machinesets,machinedeployments,mhc",
    ]);
    let words = |h: &str| h.split(',').map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        headers(&table),
        vec![
            words("NAME,CLUSTERCLASS,AVAILABLE,CP DESIRED,CP AVAILABLE,CP UP-TO-DATE,W DESIRED,W AVAILABLE,W UP-TO-DATE,PHASE,AGE,VERSION"),
            words("NAME,CLUSTER,NODE NAME,FAILURE DOMAIN,READY,AVAILABLE,UP-TO-DATE,PHASE,AGE,VERSION"),
            words("NAME,CLUSTER,DESIRED,CURRENT,READY,AVAILABLE,UP-TO-DATE,AGE,VERSION"),
            words("NAME,CLUSTER,AVAILABLE,DESIRED,CURRENT,READY,AVAILABLE,UP-TO-DATE,PHASE,AGE,VERSION"),
            words("NAME,CLUSTER,REPLICAS,HEALTHY,AGE"),
        ],
        "{table}"
    );
    for row in [
        "cluster.cluster.x-k8s.io/demo",
        "machine.cluster.x-k8s.io/demo-control-plane-0",
        "machineset.cluster.x-k8s.io/demo-ms-0",
        "machinedeployment.cluster.x-k8s.io/demo-md-0",
        "machinehealthcheck.cluster.x-k8s.io/demo-md-0-unhealthy",
    ] {
        assert!(table.contains(row), "{row} missing:\n{table}");
    }
    // The wide view adds the priority-10 columns; the category lists every kind.
    let wide = s.ok(&["get", "machines", "-o", "wide"]);
    assert!(
        wide.lines()
            .next()
            .is_some_and(|h| h.contains("PROVIDER ID") && h.contains("INTERNAL-IP")),
        "{wide}"
    );
    let all = s.ok(&["get", "cluster-api", "-o", "name"]);
    assert_eq!(all.lines().count(), 5, "{all}");

    // Scale goes through the scale subresource (.spec.replicas ← .status.selector).
    s.ok(&["scale", "machinedeployment", "demo-md-0", "--replicas", "5"]);
    let scale: Value = serde_json::from_str(&s.ok(&[
        "get",
        "--raw",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machinedeployments/demo-md-0/scale",
    ]))
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 5);
    let md = json(&s, &["get", "md", "demo-md-0"]);
    assert_eq!(md["spec"]["replicas"], 5);
    s.ok(&["scale", "ms", "demo-ms-0", "--replicas", "0"]);
    assert_eq!(json(&s, &["get", "ms", "demo-ms-0"])["spec"]["replicas"], 0);

    // Invalid objects are refused with the field named (a 422 Invalid).
    let err = apply_fails(
        &s,
        r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: no-cluster}
spec:
  bootstrap: {dataSecretName: boot}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: m}
"#,
    );
    assert!(
        err.contains(r#"The Machine "no-cluster" is invalid"#),
        "{err}"
    );
    assert!(err.contains("spec.clusterName: Required value"), "{err}");
    let err = apply_fails(
        &s,
        r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata: {name: sideways}
spec:
  clusterName: demo
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      clusterName: demo
      bootstrap: {dataSecretName: boot}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: m}
  deletion: {order: Sideways}
"#,
    );
    assert!(
        err.contains(r#"spec.deletion.order: Unsupported value: "Sideways""#),
        "{err}"
    );
    // …and the status code is 422 (kubectl logs it at -v=6).
    let out = s.kubectl_stdin(
        &["create", "-f", "-", "-v=6"],
        r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata: {name: bad-range}
spec:
  clusterName: demo
  selector: {matchLabels: {a: b}}
  remediation: {triggerIf: {unhealthyInRange: "1-3"}}
"#,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("422 Unprocessable Entity"), "{err}");
    assert!(
        err.contains("spec.remediation.triggerIf.unhealthyInRange"),
        "{err}"
    );
}
