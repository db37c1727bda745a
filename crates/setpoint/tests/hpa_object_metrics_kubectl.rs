//! `Object` and `External` metrics end to end through `setpoint server` on a simulated node
//! (pods run and become ready without processes; no CPU is needed): an HPA whose `Object`
//! metric is a ConfigMap field (`.data.depth`, target `value: 5`) scales a Deployment up to its
//! maximum when the field is high, shows `20/5` in `kubectl get hpa`, scales back down when
//! it is low, and reports a missing field as `FailedGetObjectMetric`; an HPA whose `External`
//! metric sums a field over the ConfigMaps a label selector matches (`configmaps:data.depth`,
//! target `averageValue: 3`) settles on `ceil(sum / 3)` replicas and follows the sum; a
//! PIDAutoscaler with an `Object` metric scales up when its field rises.

use crate::common;

use common::burn::wait_output;
use common::Server;

fn start() -> Server {
    Server::start_fresh_with(&[
        "--no-agent",
        "--simulated-nodes",
        "1",
        "--hpa-sync-period",
        "1s",
    ])
}

fn apply(s: &Server, doc: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], doc);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn deployment(name: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - {{name: main, image: busybox, command: ["sleep", "1000"]}}
"#
    )
}

fn replicas_of(s: &Server, deployment: &str, want: &str) {
    wait_output(
        s,
        &[
            "get",
            "deployment",
            deployment,
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        |r| r == want,
    );
}

fn set_depth(s: &Server, configmap: &str, depth: &str) {
    s.ok(&[
        "patch",
        "configmap",
        configmap,
        "--type=merge",
        "-p",
        &format!(r#"{{"data":{{"depth":"{depth}"}}}}"#),
    ]);
}

fn hpa_row(s: &Server, name: &str, check: impl Fn(&str) -> bool) -> String {
    let table = wait_output(s, &["get", "hpa"], |t| {
        t.lines()
            .any(|l| l.split_whitespace().next() == Some(name) && check(l))
    });
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_default()
        .to_owned()
}

const OBJECT_HPA: &str = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: work}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: work}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Object
    object:
      describedObject: {apiVersion: v1, kind: ConfigMap, name: queue}
      metric: {name: .data.depth}
      target: {type: Value, value: "5"}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"#;

const EXTERNAL_HPA: &str = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: batch}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: batch}
  minReplicas: 1
  maxReplicas: 8
  metrics:
  - type: External
    external:
      metric:
        name: configmaps:data.depth
        selector: {matchLabels: {queue: jobs}}
      target: {type: AverageValue, averageValue: "3"}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"#;

#[test]
fn hpa_should_scale_on_object_and_external_metrics() {
    let s = start();

    // Object: 20 on a target of 5 with one ready pod asks for 4, bounded to 3.
    apply(&s, &deployment("work"));
    apply(
        &s,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: queue}\ndata: {depth: \"20\"}\n",
    );
    apply(&s, OBJECT_HPA);
    replicas_of(&s, "work", "3");
    let row = hpa_row(&s, "work", |l| l.contains("20/5"));
    assert!(row.contains("Deployment/work"), "{row}");
    let active = s.ok(&[
        "get",
        "hpa",
        "work",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"ScalingActive\")].message}",
    ]);
    assert!(active.contains("ConfigMap metric .data.depth"), "{active}");
    let current = s.ok(&[
        "get",
        "hpa",
        "work",
        "-o",
        "jsonpath={.status.currentMetrics[0].type} {.status.currentMetrics[0].object.describedObject.name} {.status.currentMetrics[0].object.current.value}",
    ]);
    assert_eq!(current, "Object queue 20");

    // Low: 1 on 5 with three ready pods is ceil(0.2 × 3) = 1.
    set_depth(&s, "queue", "1");
    replicas_of(&s, "work", "1");
    hpa_row(&s, "work", |l| l.contains("1/5"));

    // A field that is not there: the metric fails, nothing changes.
    s.ok(&[
        "patch",
        "hpa",
        "work",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/metrics/0/object/metric/name","value":".data.nothere"}]"#,
    ]);
    let failed = wait_output(
        &s,
        &[
            "get",
            "hpa",
            "work",
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}: {.message}{\"\\n\"}{end}",
        ],
        |c| c.contains("ScalingActive=False/FailedGetObjectMetric"),
    );
    assert!(
        failed.contains("ConfigMap default/queue has no field .data.nothere"),
        "{failed}"
    );

    // External: the labelled ConfigMaps sum to 4 + 5 = 9 (the unlabelled 100 does not
    // count); on an average target of 3 that is ceil(9 / 3) = 3 replicas.
    for (name, labelled, depth) in [
        ("j1", true, "4"),
        ("j2", true, "5"),
        ("other", false, "100"),
    ] {
        let labels = if labelled { "{queue: jobs}" } else { "{}" };
        apply(
            &s,
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {labels}}}\ndata: {{depth: \"{depth}\"}}\n"),
        );
    }
    apply(&s, &deployment("batch"));
    apply(&s, EXTERNAL_HPA);
    replicas_of(&s, "batch", "3");
    hpa_row(&s, "batch", |l| l.contains("3/3 (avg)"));
    // The sum rises to 4 + 11 = 15: ceil(15 / 3) = 5, and the average shown is 15 / 5.
    set_depth(&s, "j2", "11");
    replicas_of(&s, "batch", "5");
    hpa_row(&s, "batch", |l| l.contains("3/3 (avg)"));
    let active = s.ok(&[
        "get",
        "hpa",
        "batch",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"ScalingActive\")].message}",
    ]);
    assert!(
        active.contains("external metric configmaps:data.depth"),
        "{active}"
    );
    s.ok(&["delete", "hpa", "work", "batch"]);
}

const PIDA: &str = r#"
apiVersion: autoscaling.setpoint.dev/v1alpha1
kind: PIDAutoscaler
metadata: {name: work}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: work}
  minReplicas: 1
  maxReplicas: 4
  samplePeriodSeconds: 1
  metrics:
  - type: Object
    object:
      describedObject: {apiVersion: v1, kind: ConfigMap, name: queue}
      metric: {name: "{.data.depth}"}
      target: {type: Value, value: "5"}
"#;

#[test]
fn pid_autoscaler_should_scale_up_on_an_object_metric() {
    let s = start();
    wait_output(
        &s,
        &["api-resources", "--api-group=autoscaling.setpoint.dev"],
        |t| t.contains("pidautoscalers"),
    );
    apply(&s, &deployment("work"));
    apply(
        &s,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: queue}\ndata: {depth: \"5\"}\n",
    );
    apply(&s, PIDA);
    // At the target the law holds; the metric is reported.
    wait_output(
        &s,
        &[
            "get",
            "pida",
            "work",
            "-o",
            "jsonpath={.status.currentMetrics[0].type} {.status.currentMetrics[0].object.current.value}",
        ],
        |t| t == "Object 5",
    );
    let replicas = s.ok(&[
        "get",
        "deployment",
        "work",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas, "1");
    // Four times the target: the law scales up to its maximum.
    set_depth(&s, "queue", "20");
    replicas_of(&s, "work", "4");
    let active = s.ok(&[
        "get",
        "pida",
        "work",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"ScalingActive\")].reason}",
    ]);
    assert_eq!(active, "ValidMetricFound");
}
