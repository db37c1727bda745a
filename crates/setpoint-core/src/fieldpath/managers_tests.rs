use serde_json::{json, Value};

use super::*;

fn key(manager: &str, operation: Operation) -> ManagerKey {
    ManagerKey {
        manager: manager.into(),
        operation,
        subresource: String::new(),
    }
}

fn configmap_shape() -> Shape {
    Shape::builtin("v1", "ConfigMap")
}

fn owns(managers: &Managers, who: &ManagerKey, path: &[&str]) -> bool {
    managers.get(who).is_some_and(|m| m.set.contains(path))
}

fn apply_ok(
    managers: &mut Managers,
    live: Option<&Value>,
    config: Value,
    who: &ManagerKey,
    force: bool,
) -> Value {
    apply(
        managers,
        live,
        &config,
        &Writer {
            manager: who,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
        force,
    )
    .unwrap_or_else(|c| panic!("conflicts: {c:?}"))
}

#[test]
fn an_apply_should_own_exactly_its_configuration() {
    let mut managers = Managers::new();
    let a = key("a", Operation::Apply);
    let obj = apply_ok(
        &mut managers,
        None,
        json!({"data": {"x": "1", "y": "2"}}),
        &a,
        false,
    );
    assert_eq!(obj, json!({"data": {"x": "1", "y": "2"}}));
    assert!(owns(&managers, &a, &["f:data", "f:x"]));
    assert!(owns(&managers, &a, &["f:data", "f:y"]));
    assert!(!owns(&managers, &a, &["f:data"]));
}

#[test]
fn applying_a_different_value_of_anothers_field_should_conflict_unless_forced() {
    let mut managers = Managers::new();
    let (a, b) = (key("a", Operation::Apply), key("b", Operation::Apply));
    let obj = apply_ok(&mut managers, None, json!({"data": {"x": "1"}}), &a, false);
    // The same value: shared, no conflict.
    let obj = apply_ok(
        &mut managers,
        Some(&obj),
        json!({"data": {"x": "1"}}),
        &b,
        false,
    );
    assert!(owns(&managers, &a, &["f:data", "f:x"]) && owns(&managers, &b, &["f:data", "f:x"]));
    let conflicts = apply(
        &mut managers.clone(),
        Some(&obj),
        &json!({"data": {"x": "2"}}),
        &Writer {
            manager: &b,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
        false,
    )
    .unwrap_err();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, a);
    assert_eq!(conflicts[0].path, vec!["f:data", "f:x"]);
    let obj = apply_ok(
        &mut managers,
        Some(&obj),
        json!({"data": {"x": "2"}}),
        &b,
        true,
    );
    assert_eq!(obj["data"]["x"], "2");
    assert!(!managers.contains_key(&a), "a lost its only field");
    assert!(owns(&managers, &b, &["f:data", "f:x"]));
}

#[test]
fn fields_an_applier_stops_applying_should_go_unless_someone_else_owns_them() {
    let mut managers = Managers::new();
    let (a, u) = (key("a", Operation::Apply), key("u", Operation::Update));
    let obj = apply_ok(
        &mut managers,
        None,
        json!({"data": {"x": "1", "y": "2", "z": "3"}}),
        &a,
        false,
    );
    // Another writer takes z over with an update.
    let mut changed = obj.clone();
    changed["data"]["z"] = json!("30");
    update(
        &mut managers,
        Some(&obj),
        &changed,
        &Writer {
            manager: &u,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
    );
    assert!(owns(&managers, &u, &["f:data", "f:z"]));
    assert!(!owns(&managers, &a, &["f:data", "f:z"]));
    let obj = apply_ok(
        &mut managers,
        Some(&changed),
        json!({"data": {"x": "1"}}),
        &a,
        false,
    );
    // y was a's alone: removed; z is u's: kept.
    assert_eq!(obj, json!({"data": {"x": "1", "z": "30"}}));
    // Applying z back at its old value now conflicts with u.
    let conflicts = apply(
        &mut managers.clone(),
        Some(&obj),
        &json!({"data": {"x": "1", "z": "3"}}),
        &Writer {
            manager: &a,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
        false,
    )
    .unwrap_err();
    assert_eq!(conflicts[0].manager, u);
}

#[test]
fn keyed_list_items_should_be_owned_and_pruned_item_by_item() {
    let shape = Shape::builtin("apps/v1", "Deployment");
    let mut managers = Managers::new();
    let a = key("a", Operation::Apply);
    let config =
        |containers: Value| json!({"spec": {"template": {"spec": {"containers": containers}}}});
    let two = config(json!([{"name": "web", "image": "w:1"}, {"name": "side", "image": "s:1"}]));
    let obj = apply(
        &mut managers,
        None,
        &two,
        &Writer {
            manager: &a,
            api_version: "apps/v1",
            shape: &shape,
            ignore: &Ignore::default(),
        },
        false,
    )
    .unwrap();
    let item = r#"k:{"name":"side"}"#;
    let path = ["f:spec", "f:template", "f:spec", "f:containers", item];
    assert!(owns(&managers, &a, &path));
    let fields = managers[&a].set.to_fields_v1();
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"][item],
        json!({".": {}, "f:image": {}, "f:name": {}})
    );
    // Another writer (a controller) adds a field to the web container.
    let mut live = obj.clone();
    live["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"cpu": "1"}});
    let u = key("u", Operation::Update);
    update(
        &mut managers,
        Some(&obj),
        &live,
        &Writer {
            manager: &u,
            api_version: "apps/v1",
            shape: &shape,
            ignore: &Ignore::default(),
        },
    );
    let one = config(json!([{"name": "web", "image": "w:2"}]));
    let obj = apply(
        &mut managers,
        Some(&live),
        &one,
        &Writer {
            manager: &a,
            api_version: "apps/v1",
            shape: &shape,
            ignore: &Ignore::default(),
        },
        false,
    )
    .unwrap();
    let containers = obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{obj}");
    assert_eq!(containers[0]["image"], "w:2");
    assert_eq!(
        containers[0]["resources"]["limits"]["cpu"], "1",
        "u's field stays"
    );
}

#[test]
fn an_update_should_take_what_it_changed_without_conflict() {
    let mut managers = Managers::new();
    let (a, u) = (key("a", Operation::Apply), key("u", Operation::Update));
    let obj = apply_ok(&mut managers, None, json!({"data": {"x": "1"}}), &a, false);
    let new = json!({"data": {"x": "2", "w": "0"}, "metadata": {"labels": {"k": "v"}}});
    update(
        &mut managers,
        Some(&obj),
        &new,
        &Writer {
            manager: &u,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
    );
    assert!(!managers.contains_key(&a));
    let fields = managers[&u].set.to_fields_v1();
    assert_eq!(
        fields,
        json!({"f:data": {"f:w": {}, "f:x": {}}, "f:metadata": {".": {}, "f:labels": {".": {}, "f:k": {}}}})
    );
    // Fields an update removes are nobody's.
    update(
        &mut managers,
        Some(&new),
        &json!({"data": {"w": "0"}}),
        &Writer {
            manager: &u,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &Ignore::default(),
        },
    );
    assert_eq!(
        managers[&u].set.to_fields_v1(),
        json!({"f:data": {"f:w": {}}})
    );
}

#[test]
fn ignored_fields_should_be_owned_by_nobody() {
    let mut managers = Managers::new();
    let u = key("u", Operation::Update);
    let ignore = Ignore::new(
        vec![
            vec!["f:metadata".into()],
            vec!["f:metadata".into(), "f:name".into()],
        ],
        vec![vec!["f:status".into()]],
    );
    let new = json!({"metadata": {"name": "n", "labels": {"a": "b"}}, "status": {"x": 1}, "data": {"k": "v"}});
    update(
        &mut managers,
        None,
        &new,
        &Writer {
            manager: &u,
            api_version: "v1",
            shape: &configmap_shape(),
            ignore: &ignore,
        },
    );
    assert_eq!(
        managers[&u].set.to_fields_v1(),
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
    );
}
