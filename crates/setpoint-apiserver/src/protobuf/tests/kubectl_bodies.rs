//! Bodies as kubectl sends them: a pod copied by `kubectl debug`, the delete options of
//! `kubectl drain`, evictions; and a table for every built-in kind served.

use super::*;

/// The body `kubectl debug rich --copy-to=rich-copy --image=busybox --attach=false` (kubectl
/// 1.33) POSTed, captured from its `-v=10` log: a copy of a pod that sets volumes (emptyDir,
/// configMap, secret, projected), pod and container security contexts, affinity and
/// anti-affinity, tolerations, topology spread, DNS config, host aliases, readiness gates, a
/// sidecar init container, env `valueFrom` and `envFrom`, probes of every handler, lifecycle
/// hooks, resize policy and resources, plus kubectl's debugger container.
const KUBECTL_DEBUG_COPY: &[u8] = include_bytes!("../testdata/kubectl-1.33-debug-copy-to.pb");

#[test]
fn a_pod_copied_by_kubectl_debug_should_decode_every_field() {
    // Regression (issue 14.8): `kubectl debug --copy-to` failed with `unsupported field 14 in
    // protobuf message PodSpec` (the pod security context, and most of PodSpec, had no table).
    let pod = decoded(KUBECTL_DEBUG_COPY);
    assert_eq!(
        pod["metadata"],
        json!({"name": "rich-copy", "namespace": "default", "annotations": {"a": "b"}})
    );
    // The copy is the source pod's spec as the server returned it, without `nodeName` (kubectl
    // clears it), plus the debugger container.
    let mut spec = pod["spec"].clone();
    let debugger = spec["containers"]
        .as_array_mut()
        .and_then(Vec::pop)
        .expect("containers");
    assert_eq!(debugger["image"], "busybox");
    assert!(debugger["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("debugger-")));
    let mut source: Value = serde_json::from_str(include_str!(
        "../testdata/kubectl-1.33-debug-copy-to.source-spec.json"
    ))
    .expect("JSON");
    source.as_object_mut().expect("object").remove("nodeName");
    assert_eq!(spec, source);
}

#[test]
fn delete_options_sent_by_kubectl_drain_should_decode() {
    // Regression (issue 14.8): `kubectl drain` failed: the DELETE of each pod carried this
    // protobuf body (kubectl 1.33, `-v=10`), which was parsed as JSON.
    let plain = b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\x22\x00";
    assert_eq!(
        decoded(plain),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"})
    );
    // `--grace-period=7`.
    let grace = b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x02\x08\x07\x1a\x00\x22\x00";
    assert_eq!(
        decoded(grace),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7})
    );
}

#[test]
fn delete_options_should_decode_every_field_under_any_api_version() {
    let raw = Enc::new()
        .int(1, 0)
        .msg(2, Enc::new().str(1, "uid-1").str(2, "42"))
        .int(3, 1)
        .str(4, "Foreground")
        .str(5, "All")
        .int(6, 0);
    assert_eq!(
        decoded(&body("meta.k8s.io/v1", "DeleteOptions", raw)),
        json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
            "orphanDependents": true,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
            "ignoreStoreReadErrorWithClusterBreakingPotential": false
        })
    );
}

#[test]
fn an_eviction_should_decode_with_its_delete_options() {
    // policy/v1 Eviction {metadata = 1, deleteOptions = 2}, as client-go's `Evict` writes it.
    for api_version in ["policy/v1", "policy/v1beta1"] {
        let raw = Enc::new()
            .msg(1, Enc::new().str(1, "web-0").str(3, "default"))
            .msg(2, Enc::new().int(1, 30).str(5, "All"));
        assert_eq!(
            decoded(&body(api_version, "Eviction", raw)),
            json!({
                "apiVersion": api_version,
                "kind": "Eviction",
                "metadata": {"name": "web-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 30, "dryRun": ["All"]}
            })
        );
    }
}

#[test]
fn an_inlined_volume_source_should_land_in_the_volume() {
    // Volume {name = 1, volumeSource = 2 (inlined)}; VolumeSource.hostPath = 1.
    let volume = Enc::new()
        .str(1, "host")
        .msg(2, Enc::new().msg(1, Enc::new().str(1, "/tmp")));
    let raw = Enc::new().msg(2, Enc::new().msg(1, volume));
    assert_eq!(
        decoded(&body("v1", "Pod", raw))["spec"]["volumes"],
        json!([{"name": "host", "hostPath": {"path": "/tmp"}}])
    );
}

#[test]
fn every_built_in_kind_served_should_have_a_table() {
    for (api_version, kind) in [
        ("v1", "Namespace"),
        ("v1", "Pod"),
        ("v1", "Node"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "Service"),
        ("v1", "Event"),
        ("v1", "Binding"),
        ("events.k8s.io/v1", "Event"),
        ("coordination.k8s.io/v1", "Lease"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("autoscaling/v1", "HorizontalPodAutoscaler"),
        ("autoscaling/v1", "Scale"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("policy/v1", "Eviction"),
    ] {
        assert_eq!(
            decoded(&body(api_version, kind, Enc::new())),
            json!({"apiVersion": api_version, "kind": kind}),
            "{api_version} {kind}"
        );
    }
}
