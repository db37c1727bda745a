//! Tests of `json_patch.rs`.

use super::*;
use serde_json::json;

fn apply(doc: Value, patch: Value) -> PatchResult<Value> {
    json_patch(doc, patch)
}

fn failure(doc: Value, patch: Value) -> (usize, OperationFailure) {
    match apply(doc, patch) {
        Err(PatchError::OperationFailed { index, failure, .. }) => (index, failure),
        other => panic!("expected an operation failure, got {other:?}"),
    }
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    })
}

#[test]
fn add_should_create_members_overwrite_them_and_insert_into_arrays() {
    let out = apply(
        pod(),
        json!([
            {"op": "add", "path": "/metadata/labels/tier", "value": "fe"},
            {"op": "add", "path": "/metadata/labels/app", "value": "api"},
            {"op": "add", "path": "/metadata/finalizers/0", "value": "z"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "end"},
            {"op": "add", "path": "/metadata/finalizers/4", "value": "last"},
        ]),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "api", "tier": "fe"})
    );
    assert_eq!(
        out["metadata"]["finalizers"],
        json!(["z", "a", "b", "end", "last"])
    );
}

#[test]
fn add_past_the_end_of_an_array_should_fail() {
    let (index, f) = failure(
        pod(),
        json!([{"op": "add", "path": "/metadata/finalizers/3", "value": "x"}]),
    );
    assert_eq!(index, 0);
    assert_eq!(
        f,
        OperationFailure::IndexOutOfRange {
            pointer: "/metadata/finalizers/3".into(),
            index: 3,
            len: 2
        }
    );
}

#[test]
fn add_with_a_negative_index_should_count_from_the_end_of_the_grown_array() {
    let out = apply(
        json!({"l": [1, 2]}),
        json!([
            {"op": "add", "path": "/l/-1", "value": 3},
            {"op": "add", "path": "/l/-4", "value": 0},
        ]),
    )
    .unwrap();
    assert_eq!(out, json!({"l": [0, 1, 2, 3]}));
}

#[test]
fn add_under_a_missing_parent_should_fail_with_missing_path() {
    let (_, f) = failure(
        pod(),
        json!([{"op": "add", "path": "/metadata/annotations/a", "value": "1"}]),
    );
    assert_eq!(
        f,
        OperationFailure::MissingPath {
            pointer: "/metadata/annotations/a".into()
        }
    );
}

#[test]
fn add_through_a_scalar_or_null_should_fail_with_missing_path() {
    let doc = json!({"a": "s", "n": null});
    for path in ["/a/b", "/n/b"] {
        let (_, f) = failure(
            doc.clone(),
            json!([{"op": "add", "path": path, "value": 1}]),
        );
        assert_eq!(
            f,
            OperationFailure::MissingPath {
                pointer: path.into()
            }
        );
    }
}

#[test]
fn add_to_the_whole_document_should_fail() {
    let (_, f) = failure(pod(), json!([{"op": "add", "path": "", "value": {}}]));
    assert_eq!(f, OperationFailure::MissingPath { pointer: "".into() });
}

#[test]
fn add_without_a_value_should_add_null() {
    let out = apply(json!({}), json!([{"op": "add", "path": "/x"}])).unwrap();
    assert_eq!(out, json!({"x": null}));
}

#[test]
fn escaped_pointer_tokens_should_name_keys_with_slashes_and_tildes() {
    let out = apply(
        json!({"metadata": {"annotations": {}}}),
        json!([
            {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "me"},
            {"op": "add", "path": "/metadata/annotations/a~0b", "value": "t"},
        ]),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"example.com/owner": "me", "a~b": "t"})
    );
}

#[test]
fn remove_should_delete_members_and_array_elements() {
    let out = apply(
        pod(),
        json!([
            {"op": "remove", "path": "/metadata/labels/app"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "remove", "path": "/spec/containers/-1"},
        ]),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({}));
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    assert_eq!(out["spec"]["containers"], json!([]));
}

#[test]
fn remove_of_a_missing_member_should_fail_and_leave_nothing_changed() {
    let (index, f) = failure(
        pod(),
        json!([
            {"op": "add", "path": "/metadata/labels/x", "value": "1"},
            {"op": "remove", "path": "/metadata/labels/nope"},
        ]),
    );
    assert_eq!(index, 1);
    assert_eq!(
        f,
        OperationFailure::MissingKey {
            pointer: "/metadata/labels/nope".into(),
            key: "nope".into()
        }
    );
}

#[test]
fn remove_with_a_non_numeric_array_token_should_fail() {
    let (_, f) = failure(
        pod(),
        json!([{"op": "remove", "path": "/metadata/finalizers/-"}]),
    );
    assert_eq!(
        f,
        OperationFailure::NotAnIndex {
            pointer: "/metadata/finalizers/-".into(),
            token: "-".into()
        }
    );
}

#[test]
fn replace_should_change_existing_values() {
    let out = apply(
        pod(),
        json!([
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"},
            {"op": "replace", "path": "/metadata/finalizers/1", "value": "c"},
        ]),
    )
    .unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
}

#[test]
fn replace_of_a_missing_member_should_add_it_like_kube_apiserver() {
    // evanphx/json-patch v4 does not check that the member exists; RFC 6902 would fail.
    let out = apply(
        pod(),
        json!([{"op": "replace", "path": "/metadata/labels/new", "value": "x"}]),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"]["new"], "x");
}

#[test]
fn replace_of_a_missing_array_element_should_fail() {
    let (_, f) = failure(
        pod(),
        json!([{"op": "replace", "path": "/metadata/finalizers/2", "value": "x"}]),
    );
    assert!(matches!(
        f,
        OperationFailure::IndexOutOfRange { index: 2, .. }
    ));
}

#[test]
fn replace_of_the_whole_document_should_take_objects_and_ignore_scalars() {
    let out = apply(
        pod(),
        json!([{"op": "replace", "path": "", "value": {"a": 1}}]),
    )
    .unwrap();
    assert_eq!(out, json!({"a": 1}));
    let out = apply(pod(), json!([{"op": "replace", "path": "", "value": 5}])).unwrap();
    assert_eq!(out, pod());
}

#[test]
fn move_should_remove_the_source_and_add_at_the_target() {
    let out = apply(
        json!({"a": {"x": 1}, "l": [1, 2, 3]}),
        json!([
            {"op": "move", "from": "/a/x", "path": "/b"},
            {"op": "move", "from": "/l/0", "path": "/l/-"},
        ]),
    )
    .unwrap();
    assert_eq!(out, json!({"a": {}, "b": 1, "l": [2, 3, 1]}));
}

#[test]
fn move_into_its_own_child_should_fail() {
    let (_, f) = failure(
        json!({"a": {"b": {}}}),
        json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
    );
    assert_eq!(
        f,
        OperationFailure::MissingPath {
            pointer: "/a/b/c".into()
        }
    );
}

#[test]
fn move_without_from_should_fail_naming_the_field() {
    let (_, f) = failure(json!({"a": 1}), json!([{"op": "move", "path": "/b"}]));
    assert_eq!(f, OperationFailure::MissingField("from"));
}

#[test]
fn copy_should_duplicate_values_and_copy_missing_members_as_null() {
    let out = apply(
        json!({"a": {"x": [1]}}),
        json!([
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "copy", "from": "/nothing", "path": "/c"},
        ]),
    )
    .unwrap();
    assert_eq!(out, json!({"a": {"x": [1]}, "b": {"x": [1]}, "c": null}));
}

#[test]
fn copy_should_stop_past_the_accumulated_size_limit() {
    let big = "x".repeat(1024 * 1024);
    let ops: Vec<Value> = (0..4)
        .map(|i| json!({"op": "copy", "from": "/s", "path": format!("/c{i}")}))
        .collect();
    let (index, f) = failure(json!({ "s": big }), Value::Array(ops));
    assert_eq!(index, 2);
    assert!(matches!(f, OperationFailure::CopyLimitExceeded { .. }));
}

#[test]
fn test_should_pass_on_equal_values_and_fail_otherwise() {
    let ok = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]},
        {"op": "test", "path": "/spec/containers/0", "value": {"image": "nginx", "name": "c"}},
        {"op": "test", "path": "/metadata/missing", "value": null},
    ]);
    assert_eq!(apply(pod(), ok).unwrap(), pod());
    let (index, f) = failure(
        pod(),
        json!([
            {"op": "test", "path": "/metadata/name", "value": "p1"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["b", "a"]},
        ]),
    );
    assert_eq!(index, 1);
    assert_eq!(
        f,
        OperationFailure::TestFailed {
            pointer: "/metadata/finalizers".into()
        }
    );
}

#[test]
fn test_should_distinguish_integers_from_floats_and_missing_values() {
    let doc = json!({"n": 1, "o": {}});
    assert!(apply(
        doc.clone(),
        json!([{"op": "test", "path": "/n", "value": 1.0}])
    )
    .is_err());
    assert!(apply(
        doc.clone(),
        json!([{"op": "test", "path": "/x", "value": 1}])
    )
    .is_err());
    assert!(apply(doc.clone(), json!([{"op": "test", "path": "/n"}])).is_err());
    assert!(apply(
        doc,
        json!([{"op": "test", "path": "", "value": {"n": 1, "o": {}}}])
    )
    .is_ok());
}

#[test]
fn finalizer_removal_guarded_by_test_should_work_like_kube_rs_sends_it() {
    // kube-runtime's finalizer helper: test the list, then remove one entry by index.
    let patch = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]);
    let out = apply(pod(), patch.clone()).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a"]));
    // The same patch against a list someone else changed must fail (422), not remove "a".
    let (index, f) = failure(out, patch);
    assert_eq!(index, 0);
    assert!(matches!(f, OperationFailure::TestFailed { .. }));
}

#[test]
fn unknown_or_missing_op_should_fail_at_its_index() {
    let (index, f) = failure(
        pod(),
        json!([{"op": "test", "path": "/kind", "value": "Pod"}, {"op": "merge", "path": "/a"}]),
    );
    assert_eq!(index, 1);
    assert_eq!(f, OperationFailure::UnknownOp("merge".into()));
    let (_, f) = failure(pod(), json!([null]));
    assert_eq!(f, OperationFailure::UnknownOp("unknown".into()));
    let (_, f) = failure(pod(), json!([{"op": "remove"}]));
    assert_eq!(f, OperationFailure::MissingField("path"));
}

#[test]
fn malformed_bodies_should_be_rejected_before_applying() {
    for body in [
        json!({}),
        json!("x"),
        json!([1]),
        json!([{"op": 1, "path": "/a"}]),
    ] {
        let err = apply(pod(), body.clone()).unwrap_err();
        assert!(matches!(err, PatchError::Malformed(_)), "{body}: {err:?}");
    }
    assert_eq!(apply(pod(), Value::Null).unwrap(), pod());
}

#[test]
fn unknown_operation_members_should_be_reported_but_ignored() {
    let patch = JsonPatch::from_value(json!([
        {"op": "add", "path": "/a", "value": 1, "comment": "why"}
    ]))
    .unwrap();
    assert_eq!(patch.unknown_fields(), ["[0].comment"]);
    assert_eq!(patch.apply(json!({})).unwrap(), json!({"a": 1}));
}

#[test]
fn more_than_ten_thousand_operations_should_be_too_large() {
    let ops = vec![json!({"op": "test", "path": "/kind", "value": "Pod"}); 10_001];
    assert_eq!(
        apply(pod(), Value::Array(ops)).unwrap_err(),
        PatchError::TooManyOperations {
            count: 10_001,
            max: 10_000
        }
    );
}
