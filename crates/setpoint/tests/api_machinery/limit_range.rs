//! LimitRanger admission: a pod created without requests or limits gets the namespace's
//! LimitRange defaults and the `kubernetes.io/limit-ranger` annotation; pods and claims
//! outside its bounds are refused with kube-apiserver's 403 messages.

use serde_json::Value;
use setpoint_testenv::eventually_blocking;

use crate::common::Server;

const RANGE: &str = r#"{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"lr"},"spec":{"limits":[
  {"type":"Container","max":{"cpu":"1"},"default":{"cpu":"500m","memory":"256Mi"},"defaultRequest":{"cpu":"100m","memory":"128Mi"}},
  {"type":"PersistentVolumeClaim","max":{"storage":"2Gi"}}]}}"#;

fn pod(name: &str, resources: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"containers":[{{"name":"c","image":"busybox","resources":{resources}}}]}}}}"#
    )
}

#[test]
fn pods_should_get_defaults_and_stay_within_bounds() {
    let server = Server::start_api_only();
    let out = server.kubectl_stdin(&["create", "-f", "-"], RANGE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The first pod admission sees the range for is defaulted.
    let created = eventually_blocking("a pod defaulted by the LimitRange", || {
        let name = format!(
            "p{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
                % 1_000_000
        );
        let out = server.kubectl_stdin(&["create", "-o", "json", "-f", "-"], &pod(&name, "{}"));
        let pod: Value = serde_json::from_slice(&out.stdout).ok()?;
        (!pod["spec"]["containers"][0]["resources"]
            .as_object()?
            .is_empty())
        .then_some(pod)
    });
    let name = created["metadata"]["name"].as_str().unwrap();
    let requests = server.ok(&["get", "pod", name, "-o", "jsonpath={.spec.containers[0].resources.requests.cpu} {.spec.containers[0].resources.limits.memory}"]);
    assert_eq!(requests, "100m 256Mi");
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    );

    // What the pod sets is kept; over the bound is refused.
    let own = server.kubectl_stdin(
        &["create", "-o", "json", "-f", "-"],
        &pod(
            "own",
            r#"{"requests":{"cpu":"200m"},"limits":{"cpu":"300m"}}"#,
        ),
    );
    let own: Value = serde_json::from_slice(&own.stdout).unwrap();
    assert_eq!(
        own["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "200m"
    );
    assert_eq!(
        own["spec"]["containers"][0]["resources"]["requests"]["memory"],
        "128Mi"
    );
    let big = server.kubectl_stdin(
        &["create", "-f", "-"],
        &pod("big", r#"{"limits":{"cpu":"2"}}"#),
    );
    let err = String::from_utf8_lossy(&big.stderr);
    assert!(
        err.contains(
            r#"pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#
        ),
        "{err}"
    );

    // Claims are bounded by their storage request.
    let claim = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"5Gi"}}}}"#;
    let out = server.kubectl_stdin(&["create", "-f", "-"], claim);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"#),
        "{err}"
    );
}
