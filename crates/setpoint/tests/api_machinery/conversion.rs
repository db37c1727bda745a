//! CRD conversion webhooks (issue 16): a CRD `gadgets.example.com` serving `v1` (`spec.host`
//! and `spec.port`, the storage version) and `v2` (`spec.address: "host:port"`), converted by
//! a webhook this test serves over TLS. Objects created in either version read back in the
//! other with kubectl, lists and watches of `v2` see converted objects, and a webhook that is
//! down fails reads that need it with an error naming it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::api_machinery::admission::webhook::Webhooks;
use crate::common::Server;

/// The conversion webhook: `v1` ⇄ `v2` of a gadget's `spec`.
fn convert(_path: &str, review: &Value) -> String {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let converted: Vec<Value> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let mut o = o.clone();
            let spec = o["spec"].clone();
            o["spec"] = if desired == "example.com/v2" {
                json!({"address": format!("{}:{}", spec["host"].as_str().unwrap_or(""), spec["port"])})
            } else {
                let address = spec["address"].as_str().unwrap_or(":0");
                let (host, port) = address.rsplit_once(':').unwrap_or((address, "0"));
                json!({"host": host, "port": port.parse::<i64>().unwrap_or(0)})
            };
            o["apiVersion"] = json!(desired);
            o
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": request["uid"], "result": {"status": "Success"},
            "convertedObjects": converted}})
    .to_string()
}

fn crd(url: &str, ca_bundle: &str) -> Value {
    let schema = |properties: Value| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": properties}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": schema(json!({"host": {"type": "string"}, "port": {"type": "integer"}}))},
                {"name": "v2", "served": true, "storage": false,
                 "schema": schema(json!({"address": {"type": "string"}}))}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca_bundle}}}}})
}

fn gadget(version: &str, name: &str, spec: Value) -> String {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "Gadget",
        "metadata": {"name": name}, "spec": spec})
    .to_string()
}

fn create(server: &Server, manifest: &str) {
    let out = server.kubectl_stdin(&["create", "-f", "-"], manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn get_json(server: &Server, args: &[&str]) -> Value {
    serde_json::from_str(&server.ok(args)).unwrap()
}

/// Retries `f` until it returns `Some`, for what the server does shortly after a change.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_conversion_webhook_should_convert_reads_writes_lists_and_watches() {
    let hooks = Webhooks::start_with(convert);
    let server = Server::start_api_only();
    create(
        &server,
        &crd(&hooks.url("/convert"), &hooks.ca_bundle()).to_string(),
    );
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.example.com",
        "--timeout=20s",
    ]);
    let v1 = gadget("v1", "g1", json!({"host": "h1", "port": 80}));
    eventually("v1 to be served", || {
        server
            .kubectl_stdin(&["create", "-f", "-"], &v1)
            .status
            .success()
            .then_some(())
    });
    assert!(
        hooks.requests("/convert").is_empty(),
        "nothing to convert yet"
    );

    // Created in v1 (the storage version), read in v2.
    let g1 = get_json(
        &server,
        &["get", "gadgets.v2.example.com", "g1", "-o", "json"],
    );
    assert_eq!(g1["apiVersion"], "example.com/v2");
    assert_eq!(g1["spec"], json!({"address": "h1:80"}));
    let review = hooks.requests("/convert").pop().unwrap();
    assert_eq!(review["desiredAPIVersion"], "example.com/v2");
    assert_eq!(
        review["objects"][0]["spec"],
        json!({"host": "h1", "port": 80})
    );

    // Created in v2: stored in v1, answered in v2, read in v1.
    create(&server, &gadget("v2", "g2", json!({"address": "h2:81"})));
    let reviews = hooks.requests("/convert");
    assert!(reviews
        .iter()
        .any(|r| r["desiredAPIVersion"] == "example.com/v1"
            && r["objects"][0]["spec"] == json!({"address": "h2:81"})));
    let g2 = get_json(
        &server,
        &["get", "gadgets.v1.example.com", "g2", "-o", "json"],
    );
    assert_eq!(g2["apiVersion"], "example.com/v1");
    assert_eq!(g2["spec"], json!({"host": "h2", "port": 81}));

    // Lists of both versions; a v2 list converts its page in one review.
    let before = hooks.requests("/convert").len();
    let list = get_json(
        &server,
        &[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/gadgets",
        ],
    );
    let addresses: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["spec"]["address"])
        .collect();
    assert_eq!(addresses, [&json!("h1:80"), &json!("h2:81")]);
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["apiVersion"] == "example.com/v2"));
    let reviews = hooks.requests("/convert");
    assert_eq!(reviews.len(), before + 1, "one review for the page");
    assert_eq!(reviews[before]["objects"].as_array().unwrap().len(), 2);
    let list = get_json(
        &server,
        &[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/default/gadgets",
        ],
    );
    let hosts: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["spec"]["host"])
        .collect();
    assert_eq!(hosts, [&json!("h1"), &json!("h2")]);
    let table = server.ok(&["get", "gadgets.v2.example.com"]);
    assert!(table.contains("g1") && table.contains("g2"), "{table}");

    // A watch of v2 sees a v1 create converted.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/apis/example.com/v2/namespaces/default/gadgets?watch=1&timeoutSeconds=4&resourceVersion={rv}");
    let watch = server
        .kubectl_command()
        .args(["get", "--raw", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    create(
        &server,
        &gadget("v1", "g3", json!({"host": "h3", "port": 82})),
    );
    let out = watch.wait_with_output().unwrap();
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let added = events
        .iter()
        .find(|e| e["type"] == "ADDED" && e["object"]["metadata"]["name"] == "g3")
        .unwrap_or_else(|| panic!("no ADDED g3 in {events:?}"));
    assert_eq!(added["object"]["apiVersion"], "example.com/v2");
    assert_eq!(added["object"]["spec"], json!({"address": "h3:82"}));

    // The webhook down: reads that need it fail naming it; reads that do not still work.
    let dead = crate::common::free_loopback_addr();
    let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {"url": format!("https://{dead}/convert")}}}}});
    server.ok(&[
        "patch",
        "crd",
        "gadgets.example.com",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    let error = eventually("the dead webhook to be used", || {
        let out = server.kubectl(&["get", "gadgets.v2.example.com", "g1", "-o", "json"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && err.contains(&dead)).then_some(err)
    });
    assert!(
        error.contains("conversion webhook for example.com/v1, Kind=Gadget failed")
            && error.contains("connection refused"),
        "{error}"
    );
    let g1 = get_json(
        &server,
        &["get", "gadgets.v1.example.com", "g1", "-o", "json"],
    );
    assert_eq!(g1["spec"]["host"], "h1");
    let out = server.kubectl_stdin(
        &["create", "-f", "-"],
        &gadget("v2", "g4", json!({"address": "h4:1"})),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("conversion webhook"));
}
