//! Tests of the documents as wholes, over the resources Setpoint serves plus a custom
//! resource: what kubectl looks for is there, and every reference resolves.

use std::collections::BTreeSet;

use prost::Message;
use serde_json::{json, Value};

use super::v2_proto as pb;
use super::*;

const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn builtin(
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
        verbs: ALL_VERBS.map(String::from).to_vec(),
        schema: builtin_schema(group, "v1", kind).expect(kind),
    }
}

fn widget() -> OpenApiResource {
    OpenApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        namespaced: true,
        subresources: vec!["status".into(), "scale".into()],
        verbs: ALL_VERBS.map(String::from).to_vec(),
        schema: json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "mode": {"type": "string", "enum": ["a", "b"], "nullable": true},
                    },
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        }),
    }
}

/// What Setpoint serves, plus a custom resource.
fn served() -> Vec<OpenApiResource> {
    let mut namespaces = builtin(
        "",
        "Namespace",
        "namespaces",
        false,
        &["finalize", "status"],
    );
    namespaces.verbs.retain(|v| v != "deletecollection");
    vec![
        namespaces,
        builtin("", "Pod", "pods", true, &["binding", "log", "status"]),
        builtin("", "Node", "nodes", false, &["status"]),
        builtin("", "ConfigMap", "configmaps", true, &[]),
        builtin("", "Secret", "secrets", true, &[]),
        builtin("", "ServiceAccount", "serviceaccounts", true, &[]),
        builtin("", "Service", "services", true, &["status"]),
        builtin("", "Event", "events", true, &[]),
        builtin("events.k8s.io", "Event", "events", true, &[]),
        builtin("coordination.k8s.io", "Lease", "leases", true, &[]),
        builtin(
            "apps",
            "Deployment",
            "deployments",
            true,
            &["scale", "status"],
        ),
        builtin(
            "apps",
            "ReplicaSet",
            "replicasets",
            true,
            &["scale", "status"],
        ),
        widget(),
    ]
}

fn group_versions(resources: &[OpenApiResource]) -> BTreeSet<(String, String)> {
    resources
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .collect()
}

fn v3_documents() -> Vec<((String, String), Value)> {
    let resources = served();
    group_versions(&resources)
        .into_iter()
        .map(|(g, v)| {
            let doc = v3_group_version(&g, &v, &resources);
            ((g, v), doc)
        })
        .collect()
}

/// Every operation of a v3 document as (path, method, operation).
fn v3_operations(doc: &Value) -> Vec<(&str, &str, &Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            all.push((path.as_str(), method.as_str(), op));
        }
    }
    all
}

fn query_params(op: &Value) -> Vec<&str> {
    op["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["in"] == "query")
        .filter_map(|p| p["name"].as_str())
        .collect()
}

#[test]
fn v3_documents_should_survive_a_json_round_trip_and_declare_openapi_3() {
    for (gv, doc) in v3_documents() {
        let text = serde_json::to_string(&doc).expect("serialize");
        let back: Value = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, doc, "{gv:?}");
        assert_eq!(doc["openapi"], "3.0.0");
        assert_eq!(doc["info"]["title"], "Kubernetes");
        assert!(doc["components"]["schemas"]
            .as_object()
            .is_some_and(|s| !s.is_empty()));
    }
}

#[test]
fn every_v3_operation_should_carry_its_gvk_and_action() {
    const ACTIONS: [&str; 9] = [
        "get",
        "list",
        "watch",
        "watchlist",
        "post",
        "put",
        "patch",
        "delete",
        "deletecollection",
    ];
    for (gv, doc) in v3_documents() {
        for (path, method, op) in v3_operations(&doc) {
            let gvk = &op["x-kubernetes-group-version-kind"];
            assert!(
                gvk["group"].is_string() && gvk["version"].is_string() && gvk["kind"].is_string(),
                "{gv:?} {method} {path}"
            );
            let action = op["x-kubernetes-action"].as_str().expect("action");
            assert!(ACTIONS.contains(&action), "{action}");
        }
    }
}

#[test]
fn every_v3_patch_should_declare_field_validation_and_the_patch_types() {
    let resources = served();
    for (gv, doc) in v3_documents() {
        let builtin_gv = gv.0 != "example.com";
        for (path, method, op) in v3_operations(&doc) {
            let params = query_params(op);
            match method {
                "patch" => {
                    for name in ["dryRun", "fieldManager", "fieldValidation", "force"] {
                        assert!(params.contains(&name), "{name} on PATCH {path}");
                    }
                    let content = op["requestBody"]["content"].as_object().expect("content");
                    let mut expected = vec![
                        "application/apply-patch+yaml",
                        "application/json-patch+json",
                        "application/merge-patch+json",
                    ];
                    if builtin_gv {
                        expected.push("application/strategic-merge-patch+json");
                    }
                    expected.sort_unstable();
                    assert_eq!(
                        content.keys().map(String::as_str).collect::<Vec<_>>(),
                        expected,
                        "{path}"
                    );
                }
                "post" | "put" => assert!(params.contains(&"fieldValidation"), "{method} {path}"),
                _ => {}
            }
        }
        // kubectl's verifier looks for a PATCH of each kind it applies.
        for r in resources
            .iter()
            .filter(|r| (r.group.as_str(), r.version.as_str()) == (gv.0.as_str(), gv.1.as_str()))
        {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            assert!(
                v3_operations(&doc).iter().any(|(_, m, op)| *m == "patch" && op["x-kubernetes-group-version-kind"] == gvk),
                "no PATCH for {gvk}"
            );
        }
    }
}

#[test]
fn every_v3_reference_should_resolve_within_its_document() {
    for (gv, doc) in v3_documents() {
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let mut names = Vec::new();
        schema::references(&doc, &mut names);
        assert!(!names.is_empty());
        for name in names {
            assert!(schemas.contains_key(&name), "{gv:?}: dangling {name}");
        }
        let text = doc.to_string();
        assert!(
            !text.contains("\"$schema\"")
                && !text.contains("#/$defs")
                && !text.contains("#/definitions")
        );
    }
}

#[test]
fn every_kind_should_be_found_by_its_gvk_list_as_kubectl_explain_does() {
    let resources = served();
    for (gv, doc) in v3_documents() {
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for r in resources
            .iter()
            .filter(|r| r.group == gv.0 && r.version == gv.1)
        {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            let found: Vec<_> = schemas
                .values()
                .filter(|s| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.contains(&gvk))
                })
                .collect();
            assert_eq!(found.len(), 1, "{gvk}");
            assert!(found[0]["properties"]["metadata"].is_object(), "{gvk}");
        }
    }
}

#[test]
fn apps_document_should_keep_patch_metadata_for_apply() {
    let resources = served();
    let doc = v3_group_version("apps", "v1", &resources);
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
            ["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.Container"]["properties"]["env"]
            ["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert!(schemas["io.k8s.api.autoscaling.v1.Scale"].is_object());
    assert!(
        schemas.get("io.k8s.api.core.v1.Pod").is_none(),
        "only what apps/v1 references"
    );
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(
        patch["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.Deployment"
    );
}

#[test]
fn custom_resource_document_should_publish_the_crd_schema() {
    let doc = v3_group_version("example.com", "v1", &served());
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        widget["properties"]["spec"]["properties"]["replicas"]["minimum"],
        0
    );
    assert_eq!(
        widget["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let list = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"]["get"];
    assert_eq!(
        list["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/com.example.v1.WidgetList"
    );
    assert!(doc["paths"]
        .get("/api/v1/namespaces/{namespace}/pods")
        .is_none());
}

fn decoded_v2() -> (pb::Document, pb::Document) {
    let resources = served();
    let bytes = v2_protobuf(&resources);
    let decoded = pb::Document::decode(bytes.as_slice()).expect("decode");
    (v2::document(&resources), decoded)
}

fn v2_operations(doc: &pb::Document) -> Vec<(&str, &'static str, &pb::Operation)> {
    let mut all = Vec::new();
    for named in doc.paths.iter().flat_map(|p| &p.path) {
        let item = named.value.as_ref().expect("path item");
        for (method, op) in [
            ("get", &item.get),
            ("put", &item.put),
            ("post", &item.post),
            ("delete", &item.delete),
            ("patch", &item.patch),
        ] {
            if let Some(op) = op {
                all.push((named.name.as_str(), method, op));
            }
        }
    }
    all
}

fn extension(extensions: &[pb::NamedAny], name: &str) -> Option<Value> {
    let yaml = &extensions
        .iter()
        .find(|e| e.name == name)?
        .value
        .as_ref()?
        .yaml;
    serde_json::from_str(yaml).ok()
}

#[test]
fn v2_protobuf_should_decode_to_the_document_it_encodes() {
    let (built, decoded) = decoded_v2();
    assert_eq!(built, decoded);
    assert_eq!(decoded.swagger, "2.0");
    assert!(decoded
        .definitions
        .as_ref()
        .is_some_and(|d| d.additional_properties.len() > 100));
}

#[test]
fn every_v2_patch_should_declare_field_validation_gvk_and_consumes() {
    let (_, doc) = decoded_v2();
    let patches: Vec<_> = v2_operations(&doc)
        .into_iter()
        .filter(|(_, m, _)| *m == "patch")
        .collect();
    assert!(patches.len() > 20);
    for (path, _, op) in patches {
        let query: Vec<&str> = op
            .parameters
            .iter()
            .filter_map(|p| match &p.oneof {
                Some(pb::parameters_item::Oneof::Parameter(pb::Parameter {
                    oneof: Some(pb::parameter::Oneof::NonBodyParameter(nb)),
                })) => match &nb.oneof {
                    Some(pb::non_body_parameter::Oneof::QueryParameterSubSchema(q)) => {
                        Some(q.name.as_str())
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert!(query.contains(&"fieldValidation"), "{path}");
        let gvk = extension(&op.vendor_extension, "x-kubernetes-group-version-kind").expect("gvk");
        assert!(gvk["kind"].is_string(), "{path}");
        assert_eq!(
            extension(&op.vendor_extension, "x-kubernetes-action"),
            Some(json!("patch"))
        );
        let smp = op
            .consumes
            .iter()
            .any(|c| c == "application/strategic-merge-patch+json");
        assert_eq!(smp, !path.starts_with("/apis/example.com/"), "{path}");
    }
}

#[test]
fn v2_definitions_should_be_what_kube_openapi_accepts() {
    let (_, doc) = decoded_v2();
    let definitions = v2::definitions_by_name(&doc);
    fn check(
        s: &pb::Schema,
        at: &str,
        definitions: &std::collections::BTreeMap<&str, &pb::Schema>,
    ) {
        if !s.xref.is_empty() {
            let name = s
                .xref
                .strip_prefix("#/definitions/")
                .expect("definitions ref");
            assert!(definitions.contains_key(name), "{at}: dangling {name}");
            assert!(
                s.r#type.is_none() && s.properties.is_none(),
                "{at}: ref with a type"
            );
        }
        let types = s
            .r#type
            .as_ref()
            .map(|t| t.value.clone())
            .unwrap_or_default();
        assert!(types.len() <= 1, "{at}");
        if types == ["array"] {
            assert_eq!(s.items.as_ref().map(|i| i.schema.len()), Some(1), "{at}");
        }
        for p in s.properties.iter().flat_map(|p| &p.additional_properties) {
            check(
                p.value.as_ref().expect("property"),
                &format!("{at}.{}", p.name),
                definitions,
            );
        }
        for i in s.items.iter().flat_map(|i| &i.schema) {
            check(i, &format!("{at}[]"), definitions);
        }
        if let Some(pb::additional_properties_item::Oneof::Schema(a)) = s
            .additional_properties
            .as_ref()
            .and_then(|a| a.oneof.as_ref())
        {
            check(a, &format!("{at}{{}}"), definitions);
        }
    }
    for (name, schema) in &definitions {
        check(schema, name, &definitions);
    }
    for (_, _, op) in v2_operations(&doc) {
        for r in op.responses.iter().flat_map(|r| &r.response_code) {
            if let Some(pb::response_value::Oneof::Response(resp)) =
                r.value.as_ref().and_then(|v| v.oneof.as_ref())
            {
                if let Some(pb::schema_item::Oneof::Schema(s)) =
                    resp.schema.as_ref().and_then(|s| s.oneof.as_ref())
                {
                    check(s, &op.operation_id, &definitions);
                }
            }
        }
    }
    let deployment = definitions["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        extension(
            &deployment.vendor_extension,
            "x-kubernetes-group-version-kind"
        ),
        Some(json!([{"group": "apps", "version": "v1", "kind": "Deployment"}]))
    );
    let spec = definitions["io.k8s.api.core.v1.PodSpec"];
    let containers = spec
        .properties
        .iter()
        .flat_map(|p| &p.additional_properties)
        .find(|p| p.name == "containers")
        .and_then(|p| p.value.as_ref())
        .expect("containers");
    assert_eq!(
        extension(&containers.vendor_extension, "x-kubernetes-patch-merge-key"),
        Some(json!("name"))
    );
}
