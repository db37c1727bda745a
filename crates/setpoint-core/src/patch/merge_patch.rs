//! JSON merge patch (RFC 7386, `application/merge-patch+json`), with the semantics of the
//! library kube-apiserver applies it with (`evanphx/json-patch` v4 `MergePatch`): `null`
//! deletes a member, objects merge recursively, anything else replaces the target.
//!
//! Where upstream departs from the RFC, this follows upstream:
//!
//! * a value that lands where the document had no object (a new member, or one replacing a
//!   scalar or array) is stored with `null` members pruned from its objects, including objects
//!   inside arrays (the RFC keeps arrays verbatim); `null` array elements themselves stay;
//! * an object member holding `null` counts as absent;
//! * the patch must be an object: `null` is rejected as [`PatchError::NullMergePatch`], any
//!   other non-object as [`PatchError::Malformed`] (kube-apiserver decodes the body into a map
//!   first and answers 400).

use serde_json::{Map, Value};

use super::error::{PatchError, PatchResult};

/// Applies the JSON merge patch `patch` to `doc`.
///
/// ```
/// use serde_json::json;
/// let doc = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}, "spec": {"replicas": 1}});
/// let patch = json!({"metadata": {"labels": {"tier": null, "env": "prod"}}, "spec": {"replicas": 3}});
/// let out = setpoint_core::merge_patch(doc, patch).unwrap();
/// assert_eq!(out, json!({"metadata": {"labels": {"app": "web", "env": "prod"}}, "spec": {"replicas": 3}}));
/// ```
pub fn merge_patch(doc: Value, patch: Value) -> PatchResult<Value> {
    let patch = match patch {
        Value::Object(patch) => patch,
        Value::Null => return Err(PatchError::NullMergePatch),
        _ => {
            return Err(PatchError::Malformed(
                "a merge patch must be a JSON object".to_owned(),
            ))
        }
    };
    match doc {
        Value::Object(mut doc) => {
            merge_members(&mut doc, patch);
            Ok(Value::Object(doc))
        }
        // Upstream: a document that is not an object is replaced by the pruned patch.
        _ => {
            let mut out = Value::Object(patch);
            prune_nulls(&mut out);
            Ok(out)
        }
    }
}

fn merge_members(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            doc.remove(&key);
            continue;
        }
        match doc.get_mut(&key) {
            Some(current) if !current.is_null() => merge_value(current, value),
            _ => {
                let mut value = value;
                prune_nulls(&mut value);
                doc.insert(key, value);
            }
        }
    }
}

fn merge_value(current: &mut Value, patch: Value) {
    match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => merge_members(current, patch),
        // Upstream replaces an object by a non-object patch value verbatim, nulls and all.
        (current @ Value::Object(_), patch) => *current = patch,
        (current, mut patch) => {
            prune_nulls(&mut patch);
            *current = patch;
        }
    }
}

/// Removes `null` members from objects, recursively, also in objects inside arrays (upstream
/// `pruneNulls`; `null` array elements are kept).
fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            members.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"a": "1"}},
            "spec": {
                "replicas": 2,
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "busybox"}
                ]}}
            }
        })
    }

    #[test]
    fn kubectl_scale_patch_should_set_replicas_only() {
        let out = merge_patch(deployment(), json!({"spec": {"replicas": 4}})).unwrap();
        let mut want = deployment();
        want["spec"]["replicas"] = json!(4);
        assert_eq!(out, want);
    }

    #[test]
    fn kubectl_label_patch_should_add_and_remove_labels() {
        let out = merge_patch(
            deployment(),
            json!({"metadata": {"labels": {"tier": "fe", "app": null}}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"tier": "fe"}));
        assert_eq!(out["metadata"]["annotations"], json!({"a": "1"}));
    }

    #[test]
    fn null_should_delete_and_deleting_an_absent_member_should_be_a_no_op() {
        let out = merge_patch(
            deployment(),
            json!({"metadata": {"annotations": null, "nothing": null}}),
        )
        .unwrap();
        assert!(out["metadata"].get("annotations").is_none());
        assert!(out["metadata"].get("nothing").is_none());
    }

    #[test]
    fn lists_should_be_replaced_whole() {
        let out = merge_patch(
            deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:1.27"}])
        );
    }

    #[test]
    fn new_members_should_be_stored_with_null_members_pruned_even_inside_arrays() {
        let out = merge_patch(
            json!({"spec": {}}),
            json!({"spec": {"x": {"a": null, "b": 1, "l": [null, {"c": null, "d": 2}]}}}),
        )
        .unwrap();
        assert_eq!(out, json!({"spec": {"x": {"b": 1, "l": [null, {"d": 2}]}}}));
    }

    #[test]
    fn an_object_replacing_a_scalar_should_be_pruned_and_an_array_replacing_an_object_should_not() {
        let out = merge_patch(
            json!({"a": 1, "o": {"k": 1}}),
            json!({"a": {"x": null, "y": 1}}),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"y": 1}, "o": {"k": 1}}));
        let out = merge_patch(json!({"o": {"k": 1}}), json!({"o": [null, 1]})).unwrap();
        assert_eq!(out, json!({"o": [null, 1]}));
    }

    #[test]
    fn a_member_holding_null_should_count_as_absent() {
        let out = merge_patch(json!({"a": null}), json!({"a": {"b": null, "c": 1}})).unwrap();
        assert_eq!(out, json!({"a": {"c": 1}}));
    }

    #[test]
    fn an_empty_patch_should_change_nothing() {
        assert_eq!(merge_patch(deployment(), json!({})).unwrap(), deployment());
    }

    #[test]
    fn non_object_patches_should_be_rejected() {
        assert_eq!(
            merge_patch(deployment(), Value::Null).unwrap_err(),
            PatchError::NullMergePatch
        );
        for body in [json!([]), json!("x"), json!(1), json!(true)] {
            assert!(matches!(
                merge_patch(deployment(), body).unwrap_err(),
                PatchError::Malformed(_)
            ));
        }
    }

    #[test]
    fn merging_should_be_idempotent_for_kubectl_style_patches() {
        let patch = json!({"metadata": {"labels": {"tier": "fe"}}, "spec": {"replicas": 5}});
        let once = merge_patch(deployment(), patch.clone()).unwrap();
        let twice = merge_patch(once.clone(), patch).unwrap();
        assert_eq!(once, twice);
    }
}
