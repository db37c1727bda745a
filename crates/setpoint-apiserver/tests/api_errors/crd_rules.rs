//! Custom resource definitions: their initial status, and validation rules whose cost is too
//! high to admit or to run.

use super::*;

/// A namespaced CRD `<plural>.example.com` (kind `Thing`, version `v1`) whose `spec` has the
/// list `l` (`list` is its schema) and the rule `rule`.
fn crd_with_rule(plural: &str, list: Value, rule: &str) -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "x-kubernetes-validations": [{"rule": rule}],
                    "properties": {"l": list}}}}}}]}})
    .to_string()
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Creates a CRD and waits until its resource is served.
async fn establish(api: &Api, crd: &str, plural: &str) {
    let created = call(api, "POST", CRDS, JSON, crd).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let collection = format!("/apis/example.com/v1/namespaces/default/{plural}");
    for _ in 0..200 {
        if call(api, "GET", &collection, JSON, "").await.0 == StatusCode::OK {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{plural} was never served");
}

fn thing(name: &str, spec: Value) -> String {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

#[tokio::test]
async fn a_crd_whose_rules_cost_too_much_should_be_refused() {
    // Regression (issue 14.5): a rule cubic in an unbounded list was accepted, and then each
    // create took half a minute.
    let api = api().await;
    let rule = "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))";
    let unbounded = json!({"type": "array", "items": {"type": "integer"}});
    let got = call(
        &api,
        "POST",
        CRDS,
        JSON,
        &crd_with_rule("cubes", unbounded, rule),
    )
    .await;
    expect(&got, 422, "Invalid");
    let causes = got.1["details"]["causes"].as_array().unwrap();
    let at = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(causes[0]["reason"], "FieldValueForbidden", "{}", got.1);
    assert_eq!(
        causes[0]["field"],
        format!("{at}.properties[spec].x-kubernetes-validations[0].rule")
    );
    assert!(
        causes[0]["message"].as_str().unwrap().contains(
            "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        ),
        "{}",
        got.1
    );
    let total = causes.last().unwrap();
    assert_eq!(total["field"], at);
    assert!(total["message"].as_str().unwrap().contains("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"), "{}", got.1);
    assert_eq!(
        call(&api, "GET", &format!("{CRDS}/cubes.example.com"), JSON, "")
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    // The same rule on a list of at most 10 items is cheap enough.
    let bounded = json!({"type": "array", "maxItems": 10, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("cubes", bounded, rule), "cubes").await;
    let created = call(
        &api,
        "POST",
        "/apis/example.com/v1/namespaces/default/cubes",
        JSON,
        &thing("c", json!({"l": (0..10).collect::<Vec<i64>>()})),
    )
    .await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
}

#[tokio::test]
async fn a_rule_past_its_call_cost_limit_should_fail_the_request() {
    // Regression (issue 14.5): CEL evaluations had no cost limit at run time. The rule below
    // is estimated under the limits for 500 items, but comparing every pair of 500 items
    // costs more than one evaluation may.
    let api = api().await;
    let rule = "self.l.all(a, self.l.all(b, a + b >= 0))";
    let list = json!({"type": "array", "maxItems": 500, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("pairs", list, rule), "pairs").await;
    let things = "/apis/example.com/v1/namespaces/default/pairs";
    let small = thing("small", json!({"l": [1, 2, 3]}));
    let created = call(&api, "POST", things, JSON, &small).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let large = thing("large", json!({"l": (0..500).collect::<Vec<i64>>()}));
    let got = call(&api, "POST", things, JSON, &large).await;
    expect(&got, 422, "Invalid");
    let cause = &got.1["details"]["causes"][0];
    assert_eq!(cause["field"], "spec", "{}", got.1);
    assert_eq!(
        cause["message"],
        format!("Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule}")
    );
}

#[tokio::test]
async fn a_costly_rule_should_not_hold_up_other_requests() {
    // Regression (issue 14.5): CEL rules ran on the async worker threads, so a costly
    // evaluation stalled every other request (and `/readyz`) until it was done. On this
    // test's single-threaded runtime, another request can only complete while the costly
    // one is still in flight if the rules run elsewhere.
    let api = api().await;
    // Within the limits (about 900 000 per item, as estimated and at run time), but slow:
    // every pair of 330 items is compared, and none matches.
    let rule = "self.l.exists(a, self.l.exists(b, a + b < 0))";
    let list = json!({"type": "array", "maxItems": 330, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("slows", list, rule), "slows").await;
    let slow = thing("slow", json!({"l": (0..330).collect::<Vec<i64>>()}));
    let in_flight = {
        let api = Arc::clone(&api);
        tokio::spawn(async move {
            let things = "/apis/example.com/v1/namespaces/default/slows";
            call(&api, "POST", things, JSON, &slow).await
        })
    };
    // Let the costly request start.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let listed = call(&api, "GET", "/api/v1/namespaces", JSON, "").await;
    assert_eq!(listed.0, StatusCode::OK);
    assert!(
        !in_flight.is_finished(),
        "the costly request finished before another request could be answered"
    );
    let got = in_flight.await.unwrap();
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"].as_str().unwrap().contains("failed rule"),
        "{}",
        got.1
    );
}

#[tokio::test]
async fn creating_a_crd_should_answer_with_its_initial_status() {
    // Regression (issue 14.11b): the answer to creating a CRD had no `status`; kube-apiserver
    // answers with `acceptedNames` and `storedVersions` (kube-rs' crd_api example unwraps it).
    let api = api().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }],
        },
    });
    let (status, created) = call(
        &api,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        &crd.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["status"]["storedVersions"],
        json!(["v1"]),
        "{created}"
    );
    assert!(created["status"]["acceptedNames"].is_object(), "{created}");
    let decoded: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(created).unwrap();
    assert!(decoded.status.is_some());
}
