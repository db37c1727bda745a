//! What goes on the wire the way kube-apiserver writes it: field order of statuses, objects,
//! lists and the version document.

use super::*;

#[tokio::test]
async fn status_bodies_should_have_kube_apiservers_field_order_and_details() {
    // Regression (issue 14.11a): Status keys came out alphabetically with no trailing newline;
    // kube-apiserver writes `kind, apiVersion, metadata, status, message, reason, details, code`
    // and ends every JSON body with a newline (the Python client's tests compare the text).
    let api = api().await;
    let missing = call_text(&api, "GET", &format!("{CM}/nope"), JSON, "").await;
    assert_eq!(
        missing.1,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );
    let missing_deploy = call_text(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        JSON,
        "",
    )
    .await;
    assert!(
        missing_deploy.1.contains(
            r#""details":{"name":"web","group":"apps","kind":"deployments"},"code":404}"#
        ),
        "{}",
        missing_deploy.1
    );
    assert_eq!(create_cm(&api, "c").await.0, StatusCode::CREATED);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let exists = call_text(&api, "POST", CM, JSON, &body.to_string()).await;
    assert_eq!(
        exists.1,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"c\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"c\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );
    let invalid = call_text(
        &api,
        "POST",
        CM,
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad"}}"#,
    )
    .await;
    assert!(
        invalid.1.starts_with("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"ConfigMap \\\"Bad\\\" is invalid: metadata.name: Invalid value: \\\"Bad\\\": a lowercase RFC 1123 subdomain"),
        "{}",
        invalid.1
    );
    assert!(
        invalid.1.contains("\"reason\":\"Invalid\",\"details\":{\"name\":\"Bad\",\"kind\":\"ConfigMap\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"Bad\\\": a lowercase RFC 1123 subdomain"),
        "{}",
        invalid.1
    );
    assert!(
        invalid
            .1
            .ends_with("\"field\":\"metadata.name\"}]},\"code\":422}\n"),
        "{}",
        invalid.1
    );
    // Reasons kube-apiserver sends without details.
    let bad = call_text(&api, "POST", CM, JSON, "{not json").await;
    assert!(
        bad.1.contains("\"reason\":\"BadRequest\",\"code\":400}\n"),
        "{}",
        bad.1
    );
    let media = call_text(&api, "POST", CM, "text/plain", "x").await;
    assert!(
        media
            .1
            .contains("\"reason\":\"UnsupportedMediaType\",\"code\":415}\n"),
        "{}",
        media.1
    );
    // MethodNotAllowed: go-restful's answer for a path without a route for the method.
    let verb = call_text(&api, "PUT", CM, JSON, "{}").await;
    assert!(
        verb.1.ends_with("\"message\":\"the server does not allow this method on the requested resource\",\"reason\":\"MethodNotAllowed\",\"details\":{},\"code\":405}\n"),
        "{}",
        verb.1
    );
    // A verb the resource does not support: apimachinery's NewMethodNotSupported names it.
    let verb = call_text(&api, "DELETE", "/api/v1/namespaces", JSON, "").await;
    assert!(
        verb.1.ends_with(
            "\"reason\":\"MethodNotAllowed\",\"details\":{\"kind\":\"namespaces\"},\"code\":405}\n"
        ),
        "{}",
        verb.1
    );
    // A successful delete answers a Success Status with the object's name, kind and uid.
    let deleted = call_text(&api, "DELETE", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(deleted.0, StatusCode::OK);
    assert!(
        deleted.1.starts_with("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"details\":{\"name\":\"c\",\"kind\":\"configmaps\",\"uid\":\""),
        "{}",
        deleted.1
    );
    assert!(deleted.1.ends_with("\"}}\n"), "{}", deleted.1);
}

#[tokio::test]
async fn objects_and_lists_should_start_with_kind_api_version_and_metadata() {
    // Regression (issue 14.11a): objects came out with alphabetical keys (`apiVersion, data,
    // kind, metadata`) and no trailing newline.
    let api = api().await;
    let body = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","labels":{"a":"b"}},"data":{"k":"v"}}"#;
    let created = call_text(&api, "POST", CM, JSON, body).await;
    assert_eq!(created.0, StatusCode::CREATED);
    assert!(
        created.1.starts_with("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\",\"namespace\":\"default\",\"uid\":"),
        "{}",
        created.1
    );
    assert!(
        created.1.ends_with("},\"data\":{\"k\":\"v\"}}\n"),
        "{}",
        created.1
    );
    let got = call_text(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert!(
        got.1.starts_with(
            "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\","
        ),
        "{}",
        got.1
    );
    assert!(got.1.ends_with("}\n"), "{}", got.1);
    let list = call_text(&api, "GET", CM, JSON, "").await;
    assert!(
        list.1.starts_with(
            "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
        ),
        "{}",
        list.1
    );
    assert!(list.1.contains("\"items\":[{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\","), "{}", list.1);
    assert!(list.1.ends_with("]}\n"), "{}", list.1);
}

#[tokio::test]
async fn the_version_document_should_be_written_as_kube_apiserver_writes_it() {
    // Issue 14.11a: `/version` is not written by the API encoder but indented, in
    // `version.Info`'s field order, without a trailing newline.
    let api = api().await;
    let (status, text) = call_text(&api, "GET", "/version", JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.starts_with(
            "{\n  \"major\": \"1\",\n  \"minor\": \"33\",\n  \"gitVersion\": \"v1.33.0-setpoint."
        ),
        "{text}"
    );
    assert!(text.ends_with("\"\n}"), "{text}");
}
