//! Strategic merge patch scenarios: the bodies kubectl sends (the `apply` bodies are the ones
//! captured in the reference traces or built the way kubectl's three-way diff builds them), and
//! the directives and failure modes one by one. Expected results are worked out from upstream's
//! `strategicpatch` algorithm.

use serde_json::{json, Value};

use super::{strategic_merge_patch, FieldStrategy, PatchSchema};
use crate::patch::error::{PatchError, PatchErrorKind};

fn smp(api_version: &str, kind: &str, live: Value, patch: Value) -> Result<Value, PatchError> {
    let schema = PatchSchema::for_kind(api_version, kind).expect("built-in kind");
    strategic_merge_patch(live, patch, schema)
}

fn deploy_patch(live: Value, patch: Value) -> Value {
    smp("apps/v1", "Deployment", live, patch).unwrap()
}

fn nginx(image: &str) -> Value {
    json!({
        "name": "nginx",
        "image": image,
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent"
    })
}

/// A Deployment as stored after `kubectl apply` of a one-container manifest.
fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web"},
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}\n"
            }
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": containers,
                    "restartPolicy": "Always",
                    "dnsPolicy": "ClusterFirst"
                }
            }
        },
        "status": {"replicas": 2, "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True"}
        ]}
    })
}

fn containers(obj: &Value) -> &Value {
    &obj["spec"]["template"]["spec"]["containers"]
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
}

// --- The bodies kubectl sends -------------------------------------------------------------

#[test]
fn kubectl_apply_changing_replicas_should_update_replicas_and_the_annotation_only() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({
        "metadata": {"annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}\n"
        }},
        "spec": {"replicas": 3}
    });
    let out = deploy_patch(live.clone(), patch);
    let mut want = live;
    want["spec"]["replicas"] = json!(3);
    want["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!("{\"new\":true}\n");
    assert_eq!(out, want);
}

#[test]
fn kubectl_apply_changing_image_port_env_and_adding_a_sidecar_should_merge_by_name() {
    // The body kubectl 1.33 sent in the reference trace.
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
        "containers": [
            {
                "$setElementOrder/ports": [{"containerPort": 8080}],
                "env": [{"name": "A", "value": "1"}],
                "image": "nginx:1.26",
                "name": "nginx",
                "ports": [{"containerPort": 8080}, {"$patch": "delete", "containerPort": 80}]
            },
            {"image": "busybox", "name": "sidecar"}
        ]
    }}}});
    let out = deploy_patch(live, patch);
    let mut want_nginx = nginx("nginx:1.26");
    want_nginx["ports"] = json!([{"containerPort": 8080}]);
    want_nginx["env"] = json!([{"name": "A", "value": "1"}]);
    assert_eq!(
        containers(&out),
        &json!([want_nginx, {"image": "busybox", "name": "sidecar"}])
    );
    assert_eq!(out["spec"]["template"]["spec"]["restartPolicy"], "Always");
}

#[test]
fn kubectl_apply_reverting_should_delete_the_sidecar_and_the_env_list() {
    // The revert body of the reference trace: `env: null` and a delete directive.
    let live = deploy_patch(
        deployment(json!([nginx("nginx:1.25")])),
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
            "containers": [
                {
                    "$setElementOrder/ports": [{"containerPort": 8080}],
                    "env": [{"name": "A", "value": "1"}],
                    "image": "nginx:1.26",
                    "name": "nginx",
                    "ports": [{"containerPort": 8080}, {"$patch": "delete", "containerPort": 80}]
                },
                {"image": "busybox", "name": "sidecar"}
            ]
        }}}}),
    );
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}],
        "containers": [
            {
                "$setElementOrder/ports": [{"containerPort": 80}],
                "env": null,
                "image": "nginx:1.25",
                "name": "nginx",
                "ports": [{"containerPort": 80}, {"$patch": "delete", "containerPort": 8080}]
            },
            {"$patch": "delete", "name": "sidecar"}
        ]
    }}}});
    let out = deploy_patch(live, patch);
    let mut want = nginx("nginx:1.25");
    want["ports"] = json!([{"containerPort": 80}]);
    assert_eq!(containers(&out), &json!([want]));
}

#[test]
fn kubectl_apply_changing_the_second_container_should_keep_container_order() {
    let live = deployment(json!([nginx("nginx:1.25"), {"name": "sidecar", "image": "busybox"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
        "containers": [{"image": "busybox:1.36", "name": "sidecar"}]
    }}}});
    let out = deploy_patch(live, patch);
    assert_eq!(names(containers(&out)), ["nginx", "sidecar"]);
    assert_eq!(containers(&out)[1]["image"], "busybox:1.36");
    assert_eq!(containers(&out)[0], nginx("nginx:1.25"));
}

#[test]
fn kubectl_apply_removing_an_env_var_should_delete_it_by_name() {
    let mut c = nginx("nginx:1.25");
    c["env"] = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
    let live = deployment(json!([c]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}],
        "containers": [{
            "$setElementOrder/env": [{"name": "A"}],
            "env": [{"$patch": "delete", "name": "B"}],
            "name": "nginx"
        }]
    }}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        containers(&out)[0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
}

#[test]
fn kubectl_apply_changing_a_middle_env_var_should_keep_env_order() {
    let mut c = nginx("nginx:1.25");
    c["env"] = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C"}]);
    let live = deployment(json!([c]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}],
        "containers": [{
            "$setElementOrder/env": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
            "env": [{"name": "B", "value": "new"}],
            "name": "nginx"
        }]
    }}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        containers(&out)[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "new"}, {"name": "C"}])
    );
}

#[test]
fn kubectl_apply_adding_labels_should_merge_them_into_both_label_maps() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"},
            "labels": {"tier": "fe"}
        },
        "spec": {"template": {"metadata": {"labels": {"tier": "fe"}}}}
    });
    let out = deploy_patch(live, patch);
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "tier": "fe"})
    );
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"],
        json!({"app": "web", "tier": "fe"})
    );
    assert_eq!(
        out["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
}

#[test]
fn kubectl_apply_removing_a_label_should_delete_it_with_null() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let out = deploy_patch(
        live,
        json!({"metadata": {"labels": {"app": null, "gone": null}}}),
    );
    assert_eq!(out["metadata"]["labels"], json!({}));
}

#[test]
fn kubectl_rollout_restart_should_add_the_restarted_at_template_annotation() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let stamp = "2025-01-02T03:04:05Z";
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": stamp
    }}}}});
    let out = deploy_patch(live.clone(), patch);
    assert_eq!(
        out["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}})
    );
    assert_eq!(
        out["spec"]["template"]["spec"],
        live["spec"]["template"]["spec"]
    );
}

#[test]
fn kubectl_apply_switching_to_recreate_should_drop_rolling_update_via_retain_keys() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"strategy": {
        "$retainKeys": ["type"],
        "rollingUpdate": null,
        "type": "Recreate"
    }}});
    let out = deploy_patch(live, patch);
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn kubectl_apply_changing_a_volume_source_should_drop_the_old_source_via_retain_keys() {
    let mut live = deployment(json!([nginx("nginx:1.25")]));
    live["spec"]["template"]["spec"]["volumes"] = json!([
        {"name": "data", "emptyDir": {}},
        {"name": "cache", "emptyDir": {"medium": "Memory"}}
    ]);
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/volumes": [{"name": "data"}, {"name": "cache"}],
        "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "cfg"}, "name": "data"}]
    }}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        json!([
            {"name": "data", "configMap": {"name": "cfg"}},
            {"name": "cache", "emptyDir": {"medium": "Memory"}}
        ])
    );
}

#[test]
fn kubectl_apply_changing_finalizers_should_add_delete_and_order_them() {
    // last-applied [a, b], new manifest [a, c]: kubectl sends the additions, a parallel
    // deletion list and the order.
    let mut live = deployment(json!([nginx("nginx:1.25")]));
    live["metadata"]["finalizers"] = json!(["a", "b"]);
    let patch = json!({"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["b"],
        "$setElementOrder/finalizers": ["a", "c"],
        "finalizers": ["c"]
    }});
    let out = deploy_patch(live, patch);
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
}

#[test]
fn set_element_order_alone_should_reorder_the_live_list() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]
    }}}});
    let out = deploy_patch(live, patch);
    assert_eq!(names(containers(&out)), ["c", "a", "b"]);
}

#[test]
fn set_element_order_for_a_list_absent_on_both_sides_should_vanish() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch =
        json!({"spec": {"template": {"spec": {"$setElementOrder/volumes": [{"name": "v"}]}}}});
    assert_eq!(deploy_patch(live.clone(), patch), live);
}

// --- kubectl patch (hand-written bodies) ----------------------------------------------------

#[test]
fn a_new_container_without_element_order_should_be_placed_first_like_upstream() {
    // As the Kubernetes "kubectl patch" task page shows: the patched container comes first.
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "redis", "image": "redis"}
    ]}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(names(containers(&out)), ["redis", "nginx"]);
}

#[test]
fn a_new_element_should_follow_the_patched_element_before_it() {
    let mut c = nginx("nginx:1.25");
    c["env"] = json!([{"name": "A"}, {"name": "B"}, {"name": "C"}]);
    let live = deployment(json!([c]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "env": [{"name": "B", "value": "b"}, {"name": "N", "value": "n"}]}
    ]}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        containers(&out)[0]["env"],
        json!([{"name": "A"}, {"name": "B", "value": "b"}, {"name": "N", "value": "n"}, {"name": "C"}])
    );
}

#[test]
fn nested_maps_in_merged_elements_should_merge_recursively() {
    let mut c = nginx("nginx:1.25");
    c["resources"] = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
    let live = deployment(json!([c]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}}
    ]}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        containers(&out)[0]["resources"],
        json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}})
    );
}

#[test]
fn lists_without_a_merge_strategy_should_be_replaced_whole() {
    let pod = json!({"spec": {
        "containers": [{"name": "c", "image": "x", "args": ["a", "b"]}],
        "tolerations": [{"key": "k1", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}]
    }});
    let patch = json!({"spec": {
        "containers": [{"name": "c", "args": ["z"]}],
        "tolerations": [{"key": "k3", "operator": "Exists"}]
    }});
    let out = smp("v1", "Pod", pod, patch).unwrap();
    assert_eq!(
        out["spec"]["tolerations"],
        json!([{"key": "k3", "operator": "Exists"}])
    );
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));
    assert_eq!(out["spec"]["containers"][0]["image"], "x");
}

#[test]
fn node_taints_should_be_replaced_and_conditions_merged_by_type() {
    let node = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}, "status": {
        "conditions": [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]
    }});
    let patch = json!({
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "Hostname", "address": "n1"}]
        }
    });
    let out = smp("v1", "Node", node, patch).unwrap();
    assert_eq!(
        out["spec"]["taints"],
        json!([{"key": "b", "effect": "NoExecute"}])
    );
    assert_eq!(
        out["status"]["conditions"],
        json!([
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "True", "reason": "KubeletReady"}
        ])
    );
    assert_eq!(
        out["status"]["addresses"],
        json!([{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}])
    );
}

#[test]
fn service_ports_should_merge_by_port() {
    let svc = json!({"spec": {"ports": [
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
        {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}
    ]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
    let out = smp("v1", "Service", svc, patch).unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([
            {"name": "http", "port": 80, "targetPort": 9090, "protocol": "TCP"},
            {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}
        ])
    );
}

#[test]
fn pod_status_patches_should_merge_conditions_and_pod_ips() {
    let pod = json!({"status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "c", "ready": false}]
    }});
    let patch = json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "podIPs": [{"ip": "10.1.0.5"}],
        "containerStatuses": [{"name": "c", "ready": true, "started": true}]
    }});
    let out = smp("v1", "Pod", pod, patch).unwrap();
    assert_eq!(out["status"]["phase"], "Running");
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}])
    );
    assert_eq!(out["status"]["podIPs"], json!([{"ip": "10.1.0.5"}]));
    // containerStatuses has no merge strategy: replaced whole.
    assert_eq!(
        out["status"]["containerStatuses"],
        json!([{"name": "c", "ready": true, "started": true}])
    );
}

#[test]
fn owner_references_should_merge_by_uid_and_delete_by_uid() {
    let cm = json!({"metadata": {"ownerReferences": [
        {"uid": "u1", "kind": "Deployment", "name": "a", "controller": true}
    ]}});
    let added = smp(
        "v1",
        "ConfigMap",
        cm,
        json!({"metadata": {"ownerReferences": [{"uid": "u2", "kind": "Job", "name": "b"}]}}),
    )
    .unwrap();
    assert_eq!(
        added["metadata"]["ownerReferences"],
        json!([
            {"uid": "u2", "kind": "Job", "name": "b"},
            {"uid": "u1", "kind": "Deployment", "name": "a", "controller": true}
        ])
    );
    let removed = smp(
        "v1",
        "ConfigMap",
        added,
        json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}]}}),
    )
    .unwrap();
    assert_eq!(
        removed["metadata"]["ownerReferences"],
        json!([{"uid": "u2", "kind": "Job", "name": "b"}])
    );
}

#[test]
fn finalizers_should_merge_as_a_set() {
    let lease = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = smp(
        "coordination.k8s.io/v1",
        "Lease",
        lease.clone(),
        json!({"metadata": {"finalizers": ["b", "a"]}}),
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
    // A value new to the list goes first, as upstream orders it.
    let out = smp(
        "coordination.k8s.io/v1",
        "Lease",
        lease,
        json!({"metadata": {"finalizers": ["c"]}}),
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
}

#[test]
fn delete_from_primitive_list_should_remove_values() {
    let sa = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let out = smp(
        "v1",
        "ServiceAccount",
        sa,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "x"]}}),
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
}

#[test]
fn delete_from_primitive_list_should_never_create_or_retype_the_list() {
    for live in [
        json!({"metadata": {"name": "s"}}),
        json!({"metadata": {"finalizers": null}}),
    ] {
        let out = smp(
            "v1",
            "Secret",
            live.clone(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
        )
        .unwrap();
        assert_eq!(out, live);
    }
}

#[test]
fn delete_from_primitive_list_should_work_on_lists_without_a_merge_strategy() {
    let pod = json!({"spec": {"containers": [{"name": "c", "args": ["-v", "-x", "-y"]}]}});
    let patch = json!({"spec": {"containers": [
        {"name": "c", "$deleteFromPrimitiveList/args": ["-x"]}
    ]}});
    let out = smp("v1", "Pod", pod, patch).unwrap();
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["-v", "-y"]));
}

#[test]
fn service_account_secrets_should_merge_by_name() {
    let sa = json!({"secrets": [{"name": "t1"}]});
    let out = smp(
        "v1",
        "ServiceAccount",
        sa,
        json!({"secrets": [{"name": "t2"}]}),
    )
    .unwrap();
    assert_eq!(out["secrets"], json!([{"name": "t2"}, {"name": "t1"}]));
}

#[test]
fn scale_and_plain_kinds_should_patch_like_merge_patch_outside_metadata_lists() {
    let scale = json!({"spec": {"replicas": 1}, "status": {"replicas": 1}});
    let out = smp(
        "autoscaling/v1",
        "Scale",
        scale,
        json!({"spec": {"replicas": 5}}),
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"spec": {"replicas": 5}, "status": {"replicas": 1}})
    );
    let cm = json!({"data": {"a": "1", "b": "2"}});
    let out = smp(
        "v1",
        "ConfigMap",
        cm,
        json!({"data": {"a": null, "c": "3"}}),
    )
    .unwrap();
    assert_eq!(out, json!({"data": {"b": "2", "c": "3"}}));
}

// --- Element order, as upstream's own test expectations pin it down -------------------------

fn items(live: Value, patch: Value) -> Value {
    let schema = PatchSchema::from_entries([
        ("items", FieldStrategy::by("name")),
        ("ints", FieldStrategy::MergeScalars),
    ]);
    strategic_merge_patch(live, patch, &schema).unwrap()
}

#[test]
fn patch_order_should_win_over_live_order_for_patched_elements() {
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "b", "v": 1}, {"name": "c"}]}),
        json!({"items": [{"name": "c", "v": 3}, {"name": "a", "v": 2}]}),
    );
    assert_eq!(
        out["items"],
        json!([{"name": "b", "v": 1}, {"name": "c", "v": 3}, {"name": "a", "v": 2}])
    );
    let out = items(json!({"ints": [1, 2, 3]}), json!({"ints": [3, 1]}));
    assert_eq!(out["ints"], json!([2, 3, 1]));
}

#[test]
fn element_order_should_place_new_elements_among_live_ones() {
    let out = items(
        json!({"items": [{"name": "a", "x": 1}, {"name": "b", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "d"}, {"name": "a"}, {"name": "b"}, {"name": "c"}],
            "items": [{"name": "d", "v": 4}, {"name": "c", "v": 3}]
        }),
    );
    assert_eq!(names(&out["items"]), ["d", "a", "b", "c"]);
}

#[test]
fn element_order_naming_absent_elements_should_be_ignored_for_them() {
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "c"}]}),
        json!({
            "$setElementOrder/items": [{"name": "c"}, {"name": "b"}, {"name": "a"}],
            "items": [{"name": "c", "v": 3}, {"name": "a", "v": 1}]
        }),
    );
    assert_eq!(
        out["items"],
        json!([{"name": "c", "v": 3}, {"name": "a", "v": 1}])
    );
}

#[test]
fn deleting_and_adding_should_put_new_elements_into_freed_slots_like_upstream() {
    // Upstream's order reference is the live list's array after its in-place deletes and
    // appends (see `order::live_order_after_merge`).
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "b", "x": 1}, {"name": "d", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}, {"name": "c"}],
            "items": [{"name": "c"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["b", "d", "c"]);
    let out = items(
        json!({"items": [{"name": "a"}, {"name": "d", "x": 2}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}, {"name": "c"}],
            "items": [{"name": "b"}, {"name": "c"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["d", "b", "c"]);
    let out = items(
        json!({"items": [{"name": "c", "x": 1}]}),
        json!({
            "$setElementOrder/items": [{"name": "b"}],
            "items": [{"name": "b"}, {"$patch": "delete", "name": "a"}]
        }),
    );
    assert_eq!(names(&out["items"]), ["b", "c"]);
}

#[test]
fn element_order_should_keep_server_only_elements_after_their_live_predecessor() {
    let live = json!({"items": [
        {"name": "a"}, {"name": "b"}, {"name": "x"}, {"name": "y"}, {"name": "c"}, {"name": "d"}
    ]});
    let order = json!({"$setElementOrder/items": [{"name": "b"}, {"name": "a"}, {"name": "d"}, {"name": "c"}]});
    assert_eq!(
        names(&items(live, order)["items"]),
        ["b", "a", "x", "y", "d", "c"]
    );
}

#[test]
fn element_order_with_duplicate_keys_should_group_duplicates_at_the_first_position() {
    let live = json!({"items": [
        {"name": "a"}, {"name": "b", "v": 1}, {"name": "c"}, {"name": "b", "v": 2}
    ]});
    let order = json!({"$setElementOrder/items": [{"name": "b"}, {"name": "a"}, {"name": "c"}, {"name": "b"}]});
    assert_eq!(
        items(live, order)["items"],
        json!([{"name": "b", "v": 1}, {"name": "b", "v": 2}, {"name": "a"}, {"name": "c"}])
    );
}

#[test]
fn nulls_in_new_values_should_go_from_objects_but_stay_in_lists() {
    let out = items(
        json!({}),
        json!({"x": [{"inner": {"a": "1", "b": null}}], "y": ["k1", null, "k2"], "z": {"n": null}}),
    );
    assert_eq!(
        out,
        json!({"x": [{"inner": {"a": "1"}}], "y": ["k1", null, "k2"], "z": {}})
    );
}

#[test]
fn element_order_and_deletions_on_scalars_should_keep_server_only_values_last() {
    let out = items(
        json!({"ints": [1, 2, 3, 4]}),
        json!({"$setElementOrder/ints": [1, 2], "$deleteFromPrimitiveList/ints": [3]}),
    );
    assert_eq!(out["ints"], json!([1, 2, 4]));
}

// --- Directives ------------------------------------------------------------------------------

#[test]
fn patch_replace_in_a_list_element_should_replace_the_whole_list() {
    let live = deployment(json!([nginx("nginx:1.25"), {"name": "sidecar"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "replace"},
        {"name": "only", "image": "x"}
    ]}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(containers(&out), &json!([{"name": "only", "image": "x"}]));
}

#[test]
fn patch_replace_in_an_object_should_replace_it() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"run": "x"}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        out["spec"]["selector"],
        json!({"matchLabels": {"run": "x"}})
    );
}

#[test]
fn patch_delete_in_an_object_should_empty_it() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"metadata": {"annotations": {"$patch": "delete"}}});
    let out = deploy_patch(live, patch);
    assert_eq!(out["metadata"]["annotations"], json!({}));
}

#[test]
fn deleting_an_element_that_is_not_there_should_change_nothing() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "delete", "name": "ghost"}
    ]}}}});
    assert_eq!(deploy_patch(live.clone(), patch), live);
}

#[test]
fn repeated_patch_elements_with_one_key_should_merge_into_one_new_element() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx"},
        {"name": "s", "image": "a"},
        {"name": "s", "args": ["x"]}
    ]}}}});
    let out = deploy_patch(live, patch);
    assert_eq!(
        containers(&out),
        &json!([nginx("nginx:1.25"), {"name": "s", "image": "a", "args": ["x"]}])
    );
}

#[test]
fn values_for_absent_fields_should_lose_their_nulls_and_delete_directives() {
    // Upstream (since kubernetes#107705 and `removeDirectives`): what a patch adds is stored
    // without `null` members and without objects carrying `$patch`.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    let patch = json!({
        "metadata": {"labels": {"a": null, "b": "1"}, "annotations": {"$patch": "replace", "x": "y"}},
        "spec": {"hostAliases": [
            {"ip": "10.0.0.1", "hostnames": ["a"], "extra": null},
            {"$patch": "delete", "ip": "10.0.0.2"}
        ]}
    });
    let out = smp("v1", "Pod", pod, patch).unwrap();
    assert_eq!(out["metadata"], json!({"name": "p", "labels": {"b": "1"}}));
    assert_eq!(
        out["spec"]["hostAliases"],
        json!([{"ip": "10.0.0.1", "hostnames": ["a"]}])
    );
}

#[test]
fn a_new_list_with_element_order_should_lose_its_delete_directives() {
    let pod = json!({"spec": {"containers": [{"name": "c"}]}});
    let patch = json!({"spec": {
        "$setElementOrder/imagePullSecrets": [{"name": "a"}],
        "imagePullSecrets": [{"name": "a"}, {"$patch": "delete", "name": "gone"}]
    }});
    let out = smp("v1", "Pod", pod, patch).unwrap();
    assert_eq!(out["spec"]["imagePullSecrets"], json!([{"name": "a"}]));
}

#[test]
fn a_type_change_should_replace_the_value() {
    let live = json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}, "x": [1]}});
    let out = deploy_patch(
        live,
        json!({"spec": {"x": {"a": 1}, "template": {"spec": {"containers": "c"}}}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"x": {"a": 1}, "template": {"spec": {"containers": "c"}}}})
    );
}

#[test]
fn a_null_patch_should_change_nothing() {
    let live = deployment(json!([nginx("nginx:1.25")]));
    assert_eq!(deploy_patch(live.clone(), Value::Null), live);
    assert_eq!(deploy_patch(live.clone(), json!({})), live);
}

#[test]
fn a_custom_schema_should_drive_the_merge() {
    let schema = PatchSchema::from_entries([
        ("spec.items", FieldStrategy::by("id")),
        ("spec.fixed", FieldStrategy::Replace),
    ]);
    let live = json!({"spec": {"items": [{"id": 1, "v": "a"}], "fixed": {"a": 1, "b": 2}}});
    let patch = json!({"spec": {"items": [{"id": 1, "w": "b"}], "fixed": {"c": 3}}});
    let out = strategic_merge_patch(live, patch, &schema).unwrap();
    assert_eq!(
        out,
        json!({"spec": {"items": [{"id": 1, "v": "a", "w": "b"}], "fixed": {"c": 3}}})
    );
}

// --- Failures --------------------------------------------------------------------------------

fn deploy_err(patch: Value) -> PatchError {
    smp(
        "apps/v1",
        "Deployment",
        deployment(json!([nginx("nginx:1.25")])),
        patch,
    )
    .unwrap_err()
}

#[test]
fn patch_merge_directives_should_fail_as_upstream_does() {
    let err = deploy_err(json!({"metadata": {"labels": {"$patch": "merge", "a": "b"}}}));
    assert!(
        matches!(err, PatchError::UnknownDirective { .. }),
        "{err:?}"
    );
    assert_eq!(err.kind(), PatchErrorKind::Internal);
    let err = deploy_err(json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "merge", "name": "nginx"}
    ]}}}}));
    assert_eq!(err, PatchError::ListMergeDirective);
    let err = deploy_err(json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "bogus", "name": "nginx"}
    ]}}}}));
    assert!(
        matches!(err, PatchError::UnknownDirective { .. }),
        "{err:?}"
    );
}

#[test]
fn an_element_without_its_merge_key_should_fail() {
    let err = deploy_err(json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}));
    assert_eq!(
        err,
        PatchError::MissingMergeKey {
            element: r#"{"image":"x"}"#.into(),
            key: "name".into()
        }
    );
    let err = deploy_err(json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "delete", "image": "x"}
    ]}}}}));
    assert!(matches!(err, PatchError::MissingMergeKey { .. }), "{err:?}");
}

#[test]
fn malformed_directives_should_be_bad_requests() {
    for patch in [
        json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
        json!({"spec": {"template": {"spec": {"$setElementOrder": [{"name": "nginx"}]}}}}),
        json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
    ] {
        let err = deploy_err(patch.clone());
        assert_eq!(err.kind(), PatchErrorKind::BadRequest, "{patch}: {err:?}");
    }
}

#[test]
fn patch_elements_out_of_element_order_should_fail() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "containers": [{"name": "b", "image": "1"}, {"name": "a", "image": "2"}]
    }}}});
    let err = smp("apps/v1", "Deployment", live, patch).unwrap_err();
    assert!(matches!(err, PatchError::OrderMismatch { .. }), "{err:?}");
}

#[test]
fn mixed_or_nested_list_elements_should_fail() {
    let err = deploy_err(json!({"spec": {"template": {"spec": {"containers": ["nginx"]}}}}));
    assert!(
        matches!(err, PatchError::MixedListElements { .. }),
        "{err:?}"
    );
    let pod = json!({"spec": {"hostAliases": []}});
    let err = smp(
        "v1",
        "Pod",
        pod,
        json!({"spec": {"hostAliases": [["10.0.0.1"]]}}),
    )
    .unwrap_err();
    assert_eq!(err, PatchError::ListOfLists);
    assert_eq!(err.kind(), PatchErrorKind::Invalid);
}

#[test]
fn non_object_patches_should_be_malformed() {
    for patch in [json!([]), json!("x"), json!(3)] {
        assert!(matches!(deploy_err(patch), PatchError::Malformed(_)));
    }
}

#[test]
fn a_set_element_order_that_is_not_a_list_should_fail() {
    let err =
        deploy_err(json!({"spec": {"template": {"spec": {"$setElementOrder/containers": "x"}}}}));
    assert_eq!(
        err,
        PatchError::UnexpectedType {
            expected: "[]interface {}",
            actual: "string"
        }
    );
}
