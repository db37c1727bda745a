//! HorizontalPodAutoscaler end to end through `setpoint server` with real pods on the local
//! agent: a Deployment whose processes burn CPU (request 100m) gets an HPA from
//! `kubectl autoscale --cpu-percent=50 --min=1 --max=3` (an `autoscaling/v1` object, read back
//! as `autoscaling/v2`), is scaled up to 3 while it burns, shows in `kubectl get hpa`, and is
//! scaled back to 1 once its processes stop burning (a file tells them to), with a short
//! scale-down stabilization window set through `autoscaling/v2`. Sync period and metrics
//! interval are shortened by flags so this takes seconds, not minutes. Also: a custom resource
//! with a `scale` subresource brought into the HPA's bounds, a missing target reported as
//! `AbleToScale=False`, and validation of the bounds.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;

use common::burn::{deployment, wait_burn_replicas, wait_output};
use common::processes::Cleanup;

#[test]
fn hpa_should_scale_a_burning_deployment_up_and_back_down() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_fresh_with(&["--hpa-sync-period", "1s", "--metrics-interval", "1s"]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-hpa-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let stop = tmp.path().join("stop");
    let stop = stop.display().to_string();

    // Discovery: the short name, both versions, v2 preferred.
    let resources = s.ok(&["api-resources", "--api-group=autoscaling", "--no-headers"]);
    assert!(
        resources.contains("horizontalpodautoscalers") && resources.contains("hpa"),
        "{resources}"
    );
    let versions = s.ok(&["api-versions"]);
    assert!(
        versions.contains("autoscaling/v1") && versions.contains("autoscaling/v2"),
        "{versions}"
    );

    let out = s.kubectl_stdin(&["apply", "-f", "-"], &deployment(&marker, &stop));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created = s.ok(&[
        "autoscale",
        "deployment",
        "burn",
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ]);
    assert!(created.contains("autoscaled"), "{created}");

    // Stored once, served in both versions.
    let v2 = s.ok(&[
        "get",
        "horizontalpodautoscalers.v2.autoscaling",
        "burn",
        "-o",
        "jsonpath={.spec.metrics[0].resource.target.averageUtilization} {.spec.minReplicas}",
    ]);
    assert_eq!(v2, "50 1");
    let v1 = s.ok(&[
        "get",
        "horizontalpodautoscalers.v1.autoscaling",
        "burn",
        "-o",
        "jsonpath={.spec.targetCPUUtilizationPercentage}",
    ]);
    assert_eq!(v1, "50");

    // Burning: up to the maximum, with the utilisation in TARGETS.
    wait_burn_replicas(&s, "3");
    let table = wait_output(&s, &["get", "hpa"], |t| {
        t.lines()
            .any(|l| l.starts_with("burn") && l.contains("%/50%"))
    });
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        vec![
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("burn"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        row.contains("Deployment/burn") && row.contains("cpu: "),
        "{row}"
    );
    let conditions = s.ok(&[
        "get",
        "hpa",
        "burn",
        "-o",
        "jsonpath={range .status.conditions[*]}{.type}={.status} {end}",
    ]);
    assert!(
        conditions.contains("AbleToScale=True") && conditions.contains("ScalingActive=True"),
        "{conditions}"
    );
    let last_scale = s.ok(&[
        "get",
        "hpa",
        "burn",
        "-o",
        "jsonpath={.status.lastScaleTime}",
    ]);
    assert!(!last_scale.is_empty());
    // Stored defaulted: the loop's status writes through v2 do not change the spec.
    let generation = s.ok(&[
        "get",
        "hpa",
        "burn",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert_eq!(generation, "1");

    // Load falls: a short scale-down window (set through v2), then back to the minimum.
    s.ok(&[
        "patch",
        "horizontalpodautoscalers.v2.autoscaling",
        "burn",
        "--type=merge",
        "-p",
        r#"{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":2}}}}"#,
    ]);
    let behavior = s.ok(&[
        "get",
        "hpa",
        "burn",
        "-o",
        "jsonpath={.spec.behavior.scaleDown.stabilizationWindowSeconds} {.spec.behavior.scaleUp.stabilizationWindowSeconds}",
    ]);
    assert_eq!(behavior, "2 0", "defaults fill the rest of behavior");
    std::fs::write(&stop, b"").unwrap();
    wait_burn_replicas(&s, "1");
    let desired = s.ok(&[
        "get",
        "hpa",
        "burn",
        "-o",
        "jsonpath={.status.desiredReplicas}",
    ]);
    assert_eq!(desired, "1");
    s.ok(&["delete", "deployment", "burn", "--wait=false"]);
}

#[test]
fn hpa_validation_should_reject_bad_bounds() {
    let s = Server::start_api_only();
    let bad = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}
  minReplicas: 3
  maxReplicas: 2
"#;
    let out = s.kubectl_stdin(&["create", "-f", "-"], bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.maxReplicas"), "{err}");
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
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

#[test]
fn hpa_should_scale_a_custom_resource_into_its_bounds_through_the_scale_subresource() {
    let s = Server::start_fresh_with(&[
        "--no-agent",
        "--controllers=horizontal-pod-autoscaler",
        "--hpa-sync-period",
        "1s",
    ]);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], GADGETS);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gadget =
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {replicas: 7}\n";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The CRD may not be established yet.
        if s.kubectl_stdin(&["apply", "-f", "-"], gadget)
            .status
            .success()
        {
            break;
        }
        assert!(Instant::now() < deadline, "gadget never created");
        std::thread::sleep(Duration::from_millis(200));
    }
    let hpa = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: g}
spec:
  scaleTargetRef: {apiVersion: example.com/v1, kind: Gadget, name: g}
  minReplicas: 2
  maxReplicas: 4
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], hpa);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Above the maximum: brought to it without reading metrics.
    wait_output(
        &s,
        &["get", "gadget", "g", "-o", "jsonpath={.spec.replicas}"],
        |r| r == "4",
    );
    wait_output(
        &s,
        &[
            "get",
            "hpa",
            "g",
            "-o",
            "jsonpath={.status.desiredReplicas}",
        ],
        |r| r == "4",
    );
    // A target that does not exist: AbleToScale=False.
    s.ok(&[
        "patch",
        "hpa",
        "g",
        "--type=merge",
        "-p",
        r#"{"spec":{"scaleTargetRef":{"name":"missing"}}}"#,
    ]);
    wait_output(
        &s,
        &[
            "get",
            "hpa",
            "g",
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason} {end}",
        ],
        |c| c.contains("AbleToScale=False/FailedGetScale"),
    );
}
