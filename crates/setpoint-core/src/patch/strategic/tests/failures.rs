//! Patches that must fail, with the error upstream gives.

use super::*;

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
