//! Tests of `paths.rs`.

use super::*;

fn resource(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    subresources: &[&str],
) -> OpenApiResource {
    OpenApiResource {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
        subresources: subresources.iter().map(|s| s.to_string()).collect(),
        verbs: [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
        .map(String::from)
        .to_vec(),
        schema: serde_json::Value::Null,
    }
}

fn methods(
    by_path: &BTreeMap<String, Vec<Operation>>,
    path: &str,
) -> Vec<(&'static str, &'static str)> {
    by_path
        .get(path)
        .map(|ops| {
            ops.iter()
                .map(|o| (o.method.as_str(), o.action.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn namespaced_resources_should_have_kube_apiserver_paths() {
    let pods = resource("", "Pod", "pods", true, &["status", "log", "binding"]);
    let by_path = paths([&pods]);
    assert_eq!(
        methods(&by_path, "/api/v1/namespaces/{namespace}/pods"),
        [
            ("get", "list"),
            ("post", "post"),
            ("delete", "deletecollection")
        ]
    );
    assert_eq!(
        methods(&by_path, "/api/v1/namespaces/{namespace}/pods/{name}"),
        [
            ("get", "get"),
            ("put", "put"),
            ("patch", "patch"),
            ("delete", "delete")
        ]
    );
    assert_eq!(methods(&by_path, "/api/v1/pods"), [("get", "list")]);
    assert_eq!(
        methods(&by_path, "/api/v1/watch/namespaces/{namespace}/pods"),
        [("get", "watchlist")]
    );
    assert_eq!(
        methods(&by_path, "/api/v1/watch/namespaces/{namespace}/pods/{name}"),
        [("get", "watch")]
    );
    assert_eq!(
        methods(&by_path, "/api/v1/watch/pods"),
        [("get", "watchlist")]
    );
    assert_eq!(
        methods(
            &by_path,
            "/api/v1/namespaces/{namespace}/pods/{name}/status"
        ),
        [("get", "get"), ("put", "put"), ("patch", "patch")]
    );
    assert_eq!(
        methods(&by_path, "/api/v1/namespaces/{namespace}/pods/{name}/log"),
        [("get", "get")]
    );
    assert_eq!(
        methods(
            &by_path,
            "/api/v1/namespaces/{namespace}/pods/{name}/binding"
        ),
        [("post", "post")]
    );
    assert_eq!(by_path.len(), 9);
    let read = &by_path["/api/v1/namespaces/{namespace}/pods/{name}"][0];
    assert_eq!(read.id, "readCoreV1NamespacedPod");
    assert_eq!(
        read.params.iter().map(|p| p.name).collect::<Vec<_>>(),
        ["name", "namespace", "pretty"]
    );
}

#[test]
fn cluster_scoped_resources_should_have_no_namespace_segment() {
    let namespaces = resource(
        "",
        "Namespace",
        "namespaces",
        false,
        &["status", "finalize"],
    );
    let by_path = paths([&namespaces]);
    assert!(by_path.contains_key("/api/v1/namespaces/{name}"));
    assert!(by_path.contains_key("/api/v1/watch/namespaces"));
    let finalize = &by_path["/api/v1/namespaces/{name}/finalize"][0];
    assert_eq!(
        (finalize.method, finalize.action, finalize.id.as_str()),
        (Method::Put, Action::Put, "replaceCoreV1NamespaceFinalize")
    );
    assert!(by_path
        .values()
        .flatten()
        .all(|op| !op.params.contains(&&params::NAMESPACE)));
}

#[test]
fn scale_should_speak_autoscaling_v1_and_binding_core_v1() {
    let deployments = resource("apps", "Deployment", "deployments", true, &["scale"]);
    let by_path = paths([&deployments]);
    let scale = &by_path["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert!(scale
        .iter()
        .all(|op| op.gvk.kind == "Scale" && op.gvk.group == "autoscaling"));
    assert_eq!(scale[2].id, "patchAppsV1NamespacedDeploymentScale");
    let pods = resource("", "Pod", "pods", true, &["binding"]);
    let by_path = paths([&pods]);
    assert_eq!(
        by_path["/api/v1/namespaces/{namespace}/pods/{name}/binding"][0]
            .gvk
            .kind,
        "Binding"
    );
}

#[test]
fn verbs_should_decide_the_main_operations() {
    let mut events = resource("events.k8s.io", "Event", "events", true, &[]);
    events.verbs = vec!["get".into(), "list".into()];
    let by_path = paths([&events]);
    assert_eq!(
        by_path.keys().collect::<Vec<_>>(),
        [
            "/apis/events.k8s.io/v1/events",
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"
        ]
    );
    assert_eq!(
        by_path["/apis/events.k8s.io/v1/events"][0].id,
        "listEventsV1EventForAllNamespaces"
    );
}

#[test]
fn strategic_merge_patch_should_be_offered_for_builtin_kinds_only() {
    assert!(patch_content_types(true).contains(&"application/strategic-merge-patch+json"));
    assert_eq!(
        patch_content_types(false),
        [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml"
        ]
    );
    assert_eq!(
        id_group_version("stable.example-co.com", "v1beta1"),
        "StableExampleCoComV1beta1"
    );
}
