use serde_json::json;

use super::*;

#[test]
fn a_configuration_should_own_leaves_items_and_entries_but_not_named_structs() {
    let shape = Shape::builtin("v1", "Pod");
    let set = field_set(
        &json!({"metadata": {"labels": {"app": "web"}, "annotations": {}},
                "spec": {"containers": [{"name": "web", "image": "nginx", "args": ["a"]}],
                         "securityContext": {}}}),
        &shape,
    );
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:annotations": {}, "f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}},
                "f:securityContext": {}
            }
        })
    );
}

#[test]
fn a_comparison_should_mark_wholly_added_nodes_and_changed_leaves() {
    let shape = Shape::builtin("apps/v1", "Deployment");
    let old = json!({"spec": {"replicas": 1, "template": {"spec": {}}}});
    let new = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let c = compare(Some(&old), Some(&new), &shape);
    assert_eq!(c.modified.paths(), vec![vec!["f:spec", "f:replicas"]]);
    let item = r#"k:{"name":"c"}"#;
    assert!(c
        .added
        .contains(&["f:spec", "f:template", "f:spec", "f:containers", item]));
    assert!(c
        .added
        .contains(&["f:spec", "f:template", "f:spec", "f:containers"]));
    assert!(!c.added.contains(&["f:spec", "f:template", "f:spec"]));
    assert!(c.removed.is_empty());
    let back = compare(Some(&new), Some(&old), &shape);
    assert!(back
        .removed
        .contains(&["f:spec", "f:template", "f:spec", "f:containers", item]));
    assert!(compare(Some(&new), Some(&new), &shape).is_empty());
}

#[test]
fn a_merge_should_key_list_items_and_keep_live_only_items_in_place() {
    let shape = Shape::builtin("v1", "Pod");
    let live = json!({"spec": {"containers": [
        {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}, {"name": "c", "image": "c:1"}
    ], "tolerations": [{"key": "x"}]}});
    let config = json!({"spec": {"containers": [
        {"name": "c", "image": "c:2"}, {"name": "d", "image": "d:1"}
    ], "tolerations": [{"key": "y"}]}});
    let merged = merge(Some(&live), &config, &shape);
    let names: Vec<&str> = merged["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(merged["spec"]["containers"][2]["image"], "c:2");
    // Tolerations are atomic: replaced.
    assert_eq!(merged["spec"]["tolerations"], json!([{"key": "y"}]));
}

#[test]
fn removing_a_set_should_drop_members_with_their_subtrees() {
    let shape = Shape::builtin("v1", "Pod");
    let mut obj = json!({"metadata": {"finalizers": ["a", "b"]},
                         "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
    let mut set = FieldSet::new();
    set.insert(&["f:metadata", "f:finalizers", r#"v:"a""#]);
    set.insert(&["f:spec", "f:containers", r#"k:{"name":"b"}"#]);
    remove(&mut obj, &set, &shape);
    assert_eq!(
        obj,
        json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "a", "image": "x"}]}})
    );
}

#[test]
fn a_merge_should_put_live_only_items_before_new_ones_where_they_stand() {
    let shape = Shape::builtin("v1", "Pod");
    let live = json!({"spec": {"containers": [{"name": "http"}]}});
    let config = json!({"spec": {"containers": [{"name": "metrics"}]}});
    assert_eq!(
        merge(Some(&live), &config, &shape)["spec"]["containers"],
        json!([{"name": "http"}, {"name": "metrics"}])
    );
    // Shared items follow the configuration's order.
    let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "x"}, {"name": "b"}]}});
    let config = json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}});
    let names: Vec<String> = merge(Some(&live), &config, &shape)["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["x", "b", "a"]);
}
