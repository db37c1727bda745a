//! The `ConversionReview` (`apiextensions.k8s.io/v1`) a conversion webhook is sent, and the
//! checks its answer must pass before the converted objects are used, as kube-apiserver
//! checks them: the same `uid`, `result.status: Success`, one object per object sent, each in
//! the desired `apiVersion` with the same kind, name, namespace and uid. Of the metadata only
//! `labels` and `annotations` (string values) are taken from the answer; the rest is the
//! original's.

use serde_json::{json, Map, Value};

/// The request body converting `objects` to `desired`.
pub(super) fn request(uid: &str, desired: &str, objects: &[&Value]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

/// The converted objects of a webhook's answer `body` to the request `uid` converting
/// `originals` to `desired`, checked; the error says what was wrong.
pub(super) fn converted(
    body: &[u8],
    uid: &str,
    desired: &str,
    originals: &[&Value],
) -> Result<Vec<Value>, String> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    if review["apiVersion"] != "apiextensions.k8s.io/v1" || review["kind"] != "ConversionReview" {
        return Err(format!(
            "expected a response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}, Kind={}",
            review["apiVersion"].as_str().unwrap_or_default(),
            review["kind"].as_str().unwrap_or_default()
        ));
    }
    let response = match &review["response"] {
        Value::Object(r) => r,
        _ => return Err("no response provided".to_owned()),
    };
    let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if got_uid != uid {
        return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    let objects = response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if objects.len() != originals.len() {
        return Err(format!(
            "returned {} objects, expected {}",
            objects.len(),
            originals.len()
        ));
    }
    originals
        .iter()
        .zip(objects)
        .enumerate()
        .map(|(i, (original, converted))| {
            checked(original, converted.clone(), desired)
                .map_err(|e| format!("returned invalid converted object at index {i}: {e}"))
        })
        .collect()
}

/// One converted object, checked against its original, with the original's metadata bar
/// labels and annotations.
fn checked(original: &Value, mut converted: Value, desired: &str) -> Result<Value, String> {
    let got = converted["apiVersion"].as_str().unwrap_or_default();
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    let same = |field: &str, of: &dyn Fn(&Value) -> &Value| {
        let (a, b) = (of(original), of(&converted));
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        if text(a) == text(b) {
            Ok(())
        } else {
            Err(format!(
                "must have the same {field}: {} != {}",
                text(a),
                text(b)
            ))
        }
    };
    same("kind", &|v| &v["kind"])?;
    same("name", &|v| &v["metadata"]["name"])?;
    same("namespace", &|v| &v["metadata"]["namespace"])?;
    same("UID", &|v| &v["metadata"]["uid"])?;
    let answered = match converted.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("invalid metadata in converted object".to_owned()),
        None => return Err("missing metadata in converted object".to_owned()),
    };
    let mut metadata: Map<String, Value> = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(map)) => {
                if let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{k}] must be a string in converted object"
                    ));
                }
                metadata.insert(field.to_owned(), Value::Object(map.clone()));
            }
            Some(_) => return Err(format!("invalid metadata.{field} in converted object")),
        }
    }
    converted["metadata"] = Value::Object(metadata);
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gadget() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "labels": {"a": "b"}},
            "spec": {"host": "h", "port": 80}})
    }

    fn answer(uid: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects}}))
        .unwrap()
    }

    #[test]
    fn a_request_should_carry_uid_desired_version_and_objects() {
        let g = gadget();
        let r = request("r1", "example.com/v2", &[&g]);
        assert_eq!(r["request"]["uid"], "r1");
        assert_eq!(r["request"]["desiredAPIVersion"], "example.com/v2");
        assert_eq!(r["request"]["objects"][0], g);
        assert_eq!(r["kind"], "ConversionReview");
    }

    #[test]
    fn a_good_answer_should_keep_original_metadata_but_labels_and_annotations() {
        let g = gadget();
        let out = json!({"apiVersion": "example.com/v2", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "default", "uid": "u1", "resourceVersion": "99",
                "labels": {"c": "d"}, "annotations": {"x": "y"}},
            "spec": {"address": "h:80"}});
        let got = converted(&answer("r1", json!([out])), "r1", "example.com/v2", &[&g]).unwrap();
        assert_eq!(got[0]["spec"]["address"], "h:80");
        assert_eq!(got[0]["metadata"]["resourceVersion"], "7");
        assert_eq!(got[0]["metadata"]["labels"], json!({"c": "d"}));
        assert_eq!(got[0]["metadata"]["annotations"], json!({"x": "y"}));
    }

    #[test]
    fn bad_answers_should_be_refused_with_the_reason() {
        let g = gadget();
        let ok = json!({"apiVersion": "example.com/v2", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "default", "uid": "u1"}});
        let err = |body: Vec<u8>| converted(&body, "r1", "example.com/v2", &[&g]).unwrap_err();
        assert!(err(answer("other", json!([ok]))).contains("expected response.uid=\"r1\""));
        assert!(err(answer("r1", json!([]))).contains("returned 0 objects, expected 1"));
        let mut wrong = ok.clone();
        wrong["apiVersion"] = json!("example.com/v1");
        assert!(err(answer("r1", json!([wrong]))).contains("invalid groupVersion"));
        let mut renamed = ok.clone();
        renamed["metadata"]["name"] = json!("h");
        assert!(err(answer("r1", json!([renamed]))).contains("must have the same name"));
        let mut bad_label = ok.clone();
        bad_label["metadata"]["labels"] = json!({"a": 1});
        assert!(err(answer("r1", json!([bad_label]))).contains("must be a string"));
        let failed = serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview", "response": {"uid": "r1",
            "result": {"status": "Failure", "message": "cannot convert"}}}))
        .unwrap();
        assert_eq!(err(failed), "cannot convert");
        assert!(err(b"nonsense".to_vec()).contains("not JSON"));
    }
}
