//! The bodies kubectl sends: `kubectl apply` changing replicas, images, ports, env, labels,
//! strategies, volume sources and finalizers; `kubectl rollout restart`; set element orders.

use super::*;

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
