//! Hand-written `kubectl patch` bodies: new elements and where they go, nested maps, lists
//! without a merge strategy, and the merge keys of taints, conditions, ports, owner references,
//! finalizers and secrets; delete-from-primitive-list; kinds without a strategy.

use super::*;

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
