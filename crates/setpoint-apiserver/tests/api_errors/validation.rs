//! Objects the validation refuses or accepts: names, finalizers, namespace moves, data sizes,
//! fields that must match selectors.

use super::*;

#[tokio::test]
async fn invalid_objects_should_name_the_field() {
    let api = api().await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Bad_Name"},
        "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}}});
    let got = call(
        &api,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        JSON,
        &deploy.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert_eq!(got.1["details"]["kind"], "Deployment");
    let fields: Vec<&str> = got.1["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.replicas",
            "spec.template.spec.containers[0].image"
        ]
    );
    let nameless = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#;
    expect(
        &call(&api, "POST", CM, JSON, nameless).await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn subdomain_names_should_allow_253_characters_and_services_dns_1035_labels() {
    // Regression (issue 14.10): ConfigMap names of 64-253 characters were refused with the
    // 63-character DNS label rule. kube-apiserver checks most kinds' names as DNS-1123
    // subdomains, namespaces as DNS-1123 labels and services as DNS-1035 labels.
    let api = api().await;
    let long = "a".repeat(100);
    let (status, body) = create_cm(&api, &long).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        create_cm(&api, &"b".repeat(253)).await.0,
        StatusCode::CREATED
    );
    let too_long = create_cm(&api, &"c".repeat(254)).await;
    expect(&too_long, 422, "Invalid");
    assert!(
        too_long.1["message"]
            .as_str()
            .unwrap()
            .contains("must be no more than 253 characters"),
        "{}",
        too_long.1
    );
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n".repeat(64)}});
    expect(
        &call(&api, "POST", "/api/v1/namespaces", JSON, &ns.to_string()).await,
        422,
        "Invalid",
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1svc"},
        "spec": {"ports": [{"port": 80}]}});
    let got = call(
        &api,
        "POST",
        "/api/v1/namespaces/default/services",
        JSON,
        &svc.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("a DNS-1035 label"),
        "{}",
        got.1
    );
}

#[tokio::test]
async fn finalizer_names_should_be_qualified_or_standard() {
    // Regression (issue 14.10): finalizer names were not validated. kube-apiserver wants a
    // qualified name, and on built-in kinds a name without a domain only from its own list.
    let api = api().await;
    let with = |name: &str, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": finalizers}})
        .to_string()
    };
    let got = call(&api, "POST", CM, JSON, &with("a", json!(["cleanup"]))).await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "ConfigMap \"a\" is invalid: metadata.finalizers[0]: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"
    );
    let got = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("b", json!(["example.com/a b"])),
    )
    .await;
    expect(&got, 422, "Invalid");
    let got = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("c", json!(["orphan", "foregroundDeletion"])),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("finalizer orphan and foregroundDeletion cannot be both set"),
        "{}",
        got.1
    );
    let ok = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("d", json!(["example.com/cleanup", "kubernetes"])),
    )
    .await;
    assert_eq!(ok.0, StatusCode::CREATED, "{}", ok.1);
}

#[tokio::test]
async fn a_foreground_delete_should_replace_an_orphan_finalizer() {
    // Issue 14.10: with finalizer validation refusing orphan together with
    // foregroundDeletion, a delete's propagation finalizer must replace the other one (as
    // kube-apiserver's delete does) instead of failing validation.
    let api = api().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["orphan"]}});
    assert_eq!(
        call(&api, "POST", CM, JSON, &cm.to_string()).await.0,
        StatusCode::CREATED
    );
    let (status, body) = call(
        &api,
        "DELETE",
        &format!("{CM}/c"),
        JSON,
        r#"{"propagationPolicy":"Foreground"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, cm) = call(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["foregroundDeletion"]),
        "{cm}"
    );
}

#[tokio::test]
async fn a_patch_should_not_move_an_object_to_another_namespace_or_name() {
    // Regression (issue 14.10): a merge patch that changed `metadata.namespace` was silently
    // ignored; kube-apiserver refuses it with 400.
    let api = api().await;
    assert_eq!(create_cm(&api, "c").await.0, StatusCode::CREATED);
    let merge = "application/merge-patch+json";
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c"),
        merge,
        r#"{"metadata":{"namespace":"kube-system"}}"#,
    )
    .await;
    expect(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c"),
        merge,
        r#"{"metadata":{"name":"d"}}"#,
    )
    .await;
    expect(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        "the name of the object (d) does not match the name on the URL (c)"
    );
    let put = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "kube-system"}});
    expect(
        &call(&api, "PUT", &format!("{CM}/c"), JSON, &put.to_string()).await,
        400,
        "BadRequest",
    );
    let (status, cm) = call(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cm["metadata"]["namespace"], "default");
}

#[tokio::test]
async fn config_map_and_secret_data_should_be_at_most_one_mebibyte() {
    // Regression (issue 14.10): a 2 MiB ConfigMap was accepted; kube-apiserver allows 1 MiB of
    // data in a ConfigMap or Secret.
    let api = api().await;
    let big = "x".repeat(2 * 1024 * 1024);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"a": big}});
    let got = call(&api, "POST", CM, JSON, &cm.to_string()).await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
    );
    assert_eq!(got.1["details"]["causes"][0]["reason"], "FieldValueTooLong");
    assert_eq!(got.1["details"]["causes"][0]["field"], "[]");
    let exact = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "max"},
        "data": {"a": "y".repeat(1024 * 1024)}});
    assert_eq!(
        call(&api, "POST", CM, JSON, &exact.to_string()).await.0,
        StatusCode::CREATED
    );
    use base64::Engine as _;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
        "data": {"a": base64::engine::general_purpose::STANDARD.encode(vec![0u8; 1024 * 1024 + 1])}});
    let got = call(
        &api,
        "POST",
        "/api/v1/namespaces/default/secrets",
        JSON,
        &secret.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
}

#[tokio::test]
async fn a_node_without_unschedulable_should_match_spec_unschedulable_false() {
    // Regression (issue 14.11c): `spec.unschedulable=false` did not select a node without the
    // field; kube-apiserver formats the absent bool as `false`.
    let api = api().await;
    for (name, spec) in [
        ("free", json!({})),
        ("cordoned", json!({"unschedulable": true})),
    ] {
        let node =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
        let (status, body) = call(&api, "POST", "/api/v1/nodes", JSON, &node.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, schedulable) = call(
        &api,
        "GET",
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
        JSON,
        "",
    )
    .await;
    assert_eq!(names(&schedulable), ["free"], "{schedulable}");
    let (_, cordoned) = call(
        &api,
        "GET",
        "/api/v1/nodes?fieldSelector=spec.unschedulable!%3Dfalse",
        JSON,
        "",
    )
    .await;
    assert_eq!(names(&cordoned), ["cordoned"], "{cordoned}");
}
