//! `pods/exec`, `pods/attach`, `pods/portforward`: the checks before the agent is called, each
//! with kube-apiserver's (or kubectl's) code and words, in process; the upgrade proxy through
//! the real transport to a fake agent in `splice.rs`.

mod agent;
mod splice;

use http::StatusCode;
use serde_json::{json, Value};
use setpoint_apiserver::Api;

use super::{api, call, expect, JSON};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// Creates pod `name` with `containers` (and `init` containers), bound to `node` if given.
async fn create_pod(api: &Api, name: &str, containers: &[&str], node: Option<&str>) -> String {
    let list = |names: &[&str]| {
        names
            .iter()
            .map(|n| json!({"name": n, "image": "busybox"}))
            .collect::<Vec<_>>()
    };
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": list(containers)},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    let created = call(api, "POST", PODS, JSON, &pod.to_string()).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    created.1["metadata"]["uid"].as_str().unwrap().to_owned()
}

async fn set_phase(api: &Api, name: &str, phase: &str) {
    let patch = json!({"status": {"phase": phase}}).to_string();
    let got = call(
        api,
        "PATCH",
        &format!("{PODS}/{name}/status"),
        "application/merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.1);
}

/// A refusal's code, reason and message.
async fn refusal(api: &Api, method: &str, uri: &str) -> (u16, String) {
    let got = call(api, method, uri, JSON, "").await;
    let code = got.0.as_u16();
    let reason = match code {
        400 => "BadRequest",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    expect(&got, code, reason);
    (
        code,
        got.1["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn stream_requests_should_be_checked_as_kube_apiserver_checks_them() {
    let api = api().await;
    create_pod(&api, "two", &["a", "b"], Some("n1")).await;
    create_pod(&api, "pending", &["app"], None).await;
    create_pod(&api, "done", &["app"], Some("n1")).await;
    set_phase(&api, "done", "Succeeded").await;
    create_pod(&api, "failed", &["app"], Some("n1")).await;
    set_phase(&api, "failed", "Failed").await;
    create_pod(&api, "web", &["app"], Some("n1")).await;
    let bad = |message: &str| (400, message.to_owned());
    for method in ["GET", "POST"] {
        let cases = [
            (
                format!("{PODS}/missing/exec?command=true"),
                (404, r#"pods "missing" not found"#.to_owned()),
            ),
            (
                format!("{PODS}/web/exec?stdout=true"),
                bad("you must specify at least one command for the container"),
            ),
            (
                format!("{PODS}/two/exec?command=true"),
                bad("a container name must be specified for pod two, choose one of: [a b]"),
            ),
            (
                format!("{PODS}/two/attach?container=c"),
                bad("container c is not valid for pod two"),
            ),
            (
                format!("{PODS}/pending/exec?command=true"),
                bad("pod pending does not have a host assigned"),
            ),
            (
                format!("{PODS}/pending/portforward?ports=80"),
                bad("pod pending does not have a host assigned"),
            ),
            (
                format!("{PODS}/done/exec?command=true"),
                bad("cannot exec into a container in a completed pod; current phase is Succeeded"),
            ),
            (
                format!("{PODS}/failed/attach"),
                bad("cannot attach a container in a completed pod; current phase is Failed"),
            ),
            (
                format!("{PODS}/done/portforward?ports=80"),
                bad("unable to forward port because pod is not running. Current status=Succeeded"),
            ),
            // Valid, but not an upgrade request (and, in process, no connection to upgrade).
            (
                format!("{PODS}/web/exec?command=true&stdout=true"),
                bad("Upgrade request required"),
            ),
            (
                format!("{PODS}/two/attach?container=b&stdout=true"),
                bad("Upgrade request required"),
            ),
            (
                format!("{PODS}/web/portforward?ports=80"),
                bad("Upgrade request required"),
            ),
        ];
        for (uri, want) in cases {
            assert_eq!(refusal(&api, method, &uri).await, want, "{method} {uri}");
        }
    }
    let (code, _) = refusal(&api, "PUT", &format!("{PODS}/web/exec?command=true")).await;
    assert_eq!(code, 405);
}

#[tokio::test]
async fn discovery_should_list_the_stream_subresources_with_kubes_verbs() {
    let api = api().await;
    let (status, list) = call(&api, "GET", "/api/v1", JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    let resources = list["resources"].as_array().unwrap();
    let find = |name: &str| -> Value {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not listed"))
    };
    for (name, kind) in [
        ("pods/exec", "PodExecOptions"),
        ("pods/attach", "PodAttachOptions"),
        ("pods/portforward", "PodPortForwardOptions"),
    ] {
        let r = find(name);
        assert_eq!(r["kind"], kind, "{r}");
        assert_eq!(r["verbs"], json!(["create", "get"]), "{r}");
        assert_eq!(r["namespaced"], true, "{r}");
    }
}
