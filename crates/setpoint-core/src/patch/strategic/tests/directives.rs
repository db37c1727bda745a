//! Directives (`$patch: replace`, `$patch: delete`, `$retainKeys`, ...), type changes, null
//! patches and custom schemas.

use super::*;

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
