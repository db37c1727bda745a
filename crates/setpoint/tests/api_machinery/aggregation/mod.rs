//! API aggregation (issue 16): the local APIServices of what the server serves itself, and a
//! test aggregated API server (`wardle`, HTTPS with its own CA, trusting the front-proxy CA
//! Setpoint publishes) registered by an APIService behind a Service and an EndpointSlice —
//! checked available, listed by `kubectl get apiservices` and `kubectl api-resources`, its
//! flunders read and watched through the proxy with the caller's identity in front-proxy
//! headers, its OpenAPI v3 document listed and proxied (`kubectl explain` reads it), its v2
//! definitions merged into `/openapi/v2`; a wrong `caBundle`,
//! `insecureSkipTLSVerify` and a stopped server behave as on kube-apiserver (aggregated
//! discovery read with curl, as kubectl cannot set its `Accept`). An APIService
//! `v1beta1.metrics.k8s.io` given a Service takes over the group Setpoint serves itself.

mod wardle;

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::Server;
use wardle::Wardle;

/// A server without loops, checking APIServices every second, in `tmp`.
fn start(tmp: &tempfile::TempDir) -> Server {
    Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &[
            "--no-agent",
            "--controllers=",
            "--apiservice-check-interval",
            "1s",
        ],
    )
}

/// Retries `f` until it returns `Some` (20 s at most).
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

fn get_json(server: &Server, args: &[&str]) -> Option<Value> {
    let out = server.kubectl(args);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn create(server: &Server, manifest: &Value) {
    let out = server.kubectl_stdin(&["create", "-f", "-"], &manifest.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `GET path` with `accept`, with curl and the admin token (kubectl cannot set `Accept`).
fn curl(server: &Server, path: &str, accept: &str) -> Vec<u8> {
    let token = std::fs::read_to_string(server.dir.join("pki/admin.token")).unwrap();
    let out = std::process::Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(server.dir.join("pki/ca.crt"))
        .args([
            "-H",
            &format!("Authorization: Bearer {}", token.trim()),
            "-H",
            &format!("Accept: {accept}"),
            &format!("{}{path}", server.url()),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `/apis` as aggregated discovery (v2).
fn aggregated_discovery(server: &Server) -> Value {
    let body = curl(
        server,
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    );
    serde_json::from_slice(&body).unwrap()
}

/// The entry of `group` in aggregated discovery, if listed.
fn discovered_group(server: &Server, group: &str) -> Option<Value> {
    aggregated_discovery(server)["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == group)
        .cloned()
}

/// The `Available` condition of the APIService `name`.
fn available(server: &Server, name: &str) -> Option<Value> {
    let o = get_json(server, &["get", "apiservice", name, "-o", "json"])?;
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
}

fn wait_condition(server: &Server, name: &str, status: &str, reason: &str) -> Value {
    eventually(&format!("{name} to be {status} ({reason})"), || {
        available(server, name).filter(|c| c["status"] == status && c["reason"] == reason)
    })
}

#[test]
fn the_local_apiservices_should_be_listed_as_on_a_real_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp);
    let apps = wait_condition(&server, "v1.apps", "True", "Local");
    assert_eq!(apps["message"], "Local APIServices are always available");
    let o = get_json(&server, &["get", "apiservice", "v1.apps", "-o", "json"]).unwrap();
    assert_eq!(o["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(o["spec"]["versionPriority"], 15);
    assert!(o["spec"]["service"].is_null());
    assert_eq!(
        o["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    let table = server.ok(&["get", "apiservices"]);
    for name in [
        "v1. ",
        "v1.apps ",
        "v1beta1.metrics.k8s.io ",
        "v2.autoscaling ",
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1..3], ["Local", "True"], "{row}");
    }

    // A CRD's group-version gets one labelled `true`, gone with the CRD.
    create(
        &server,
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema":
                    {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    );
    wait_condition(&server, "v1.example.com", "True", "Local");
    let o = get_json(
        &server,
        &["get", "apiservice", "v1.example.com", "-o", "json"],
    )
    .unwrap();
    assert_eq!(
        o["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    assert_eq!(o["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(o["spec"]["versionPriority"], 100);
    server.ok(&["delete", "crd", "gadgets.example.com"]);
    eventually("v1.example.com to go", || {
        let out = server.kubectl(&["get", "apiservice", "v1.example.com"]);
        (!out.status.success()).then_some(())
    });
}

fn apiservice(spec_tls: Value) -> Value {
    let mut spec = json!({"group": "wardle.example.com", "version": "v1",
        "groupPriorityMinimum": 1000, "versionPriority": 15,
        "service": {"namespace": "default", "name": "wardle"}});
    for (k, v) in spec_tls.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.wardle.example.com"}, "spec": spec})
}

fn patch_spec(server: &Server, spec: &Value) {
    server.ok(&[
        "patch",
        "apiservice",
        "v1.wardle.example.com",
        "--type=merge",
        "-p",
        &json!({"spec": spec}).to_string(),
    ]);
}

#[test]
fn an_aggregated_api_should_be_proxied_discovered_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp);

    // What aggregated servers are told to trust.
    let auth = eventually("extension-apiserver-authentication", || {
        get_json(
            &server,
            &[
                "get",
                "cm",
                "-n",
                "kube-system",
                "extension-apiserver-authentication",
                "-o",
                "json",
            ],
        )
    });
    let data = &auth["data"];
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
    let ca = std::fs::read_to_string(server.dir.join("pki/ca.crt")).unwrap();
    assert_eq!(data["client-ca-file"], ca.as_str());
    let front_proxy_ca = data["requestheader-client-ca-file"].as_str().unwrap();
    assert!(front_proxy_ca.contains("BEGIN CERTIFICATE") && front_proxy_ca != ca);

    let wardle = Wardle::start(Some(front_proxy_ca));
    server.ok(&[
        "create",
        "service",
        "clusterip",
        "wardle",
        &format!("--tcp=443:{}", wardle.port()),
    ]);
    create(
        &server,
        &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "wardle-1", "labels": {"kubernetes.io/service-name": "wardle"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": format!("443-{}", wardle.port()), "port": wardle.port(), "protocol": "TCP"}]}),
    );
    create(
        &server,
        &apiservice(json!({"caBundle": wardle.ca_bundle()})),
    );
    let passed = wait_condition(&server, "v1.wardle.example.com", "True", "Passed");
    assert_eq!(passed["message"], "all checks passed");
    // Checked every second, written only on change.
    let rv = |name: &str| {
        get_json(&server, &["get", "apiservice", name, "-o", "json"]).unwrap()["metadata"]
            ["resourceVersion"]
            .clone()
    };
    let (wardle_rv, apps_rv) = (rv("v1.wardle.example.com"), rv("v1.apps"));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(rv("v1.wardle.example.com"), wardle_rv);
    assert_eq!(rv("v1.apps"), apps_rv);
    let table = server.ok(&["get", "apiservices"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("v1.wardle.example.com "))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], ["default/wardle", "True"], "{row}");

    // Discovery: kubectl's (aggregated) and the legacy documents.
    let resources = eventually("flunders in api-resources", || {
        let out = server.ok(&["api-resources", "--api-group=wardle.example.com"]);
        out.contains("flunders").then_some(out)
    });
    assert!(
        resources.contains("wardle.example.com/v1") && resources.contains("Flunder"),
        "{resources}"
    );
    let groups: Value = serde_json::from_str(&server.ok(&["get", "--raw", "/apis"])).unwrap();
    let wardle_group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "wardle.example.com")
        .cloned()
        .unwrap();
    assert_eq!(
        wardle_group["preferredVersion"]["groupVersion"],
        "wardle.example.com/v1"
    );
    let group: Value =
        serde_json::from_str(&server.ok(&["get", "--raw", "/apis/wardle.example.com"])).unwrap();
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["versions"][0]["version"], "v1");

    let entry = discovered_group(&server, "wardle.example.com").unwrap();
    assert_eq!(entry["versions"][0]["freshness"], "Current");
    assert_eq!(entry["versions"][0]["resources"][0]["resource"], "flunders");

    // Reads through the proxy.
    let list = server.ok(&["get", "flunders"]);
    assert!(list.contains("f1") && list.contains("f2"), "{list}");
    let f1 = get_json(&server, &["get", "flunder", "f1", "-o", "json"]).unwrap();
    assert_eq!(f1["spec"]["reference"], "f1");

    // Connections to it are reused.
    let before = wardle.connections();
    for _ in 0..5 {
        server.ok(&[
            "get",
            "--raw",
            "/apis/wardle.example.com/v1/namespaces/default/flunders",
        ]);
    }
    let opened = wardle.connections() - before;
    assert!(opened <= 2, "{opened} connections for 5 requests");

    // The identity the aggregated server sees: the caller, vouched for by the front proxy.
    let echo: Value =
        serde_json::from_str(&server.ok(&["get", "--raw", "/apis/wardle.example.com/v1/echo"]))
            .unwrap();
    assert_eq!(echo["user"], json!(["setpoint-admin"]));
    assert_eq!(
        echo["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(echo["authorization"], false);
    assert_eq!(echo["clientCertificate"], "front-proxy-client");

    // OpenAPI v3: listed in the index, the document proxied.
    let index: Value = serde_json::from_str(&server.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    let url = index["paths"]["apis/wardle.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(index["paths"]["apis/apps/v1"].is_object());
    let doc: Value = serde_json::from_str(&server.ok(&["get", "--raw", &url])).unwrap();
    assert_eq!(doc["info"]["title"], "wardle");
    let explained = eventually("kubectl explain flunders", || {
        let out = server.kubectl(&["explain", "flunders.spec"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(
        explained.contains("What the flunder is.") && explained.contains("reference"),
        "{explained}"
    );
    // OpenAPI v2 (protobuf): the definitions of the aggregated server are merged in.
    let v2 = eventually("the flunder in /openapi/v2", || {
        let v2 = curl(
            &server,
            "/openapi/v2",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        );
        let text = String::from_utf8_lossy(&v2).into_owned();
        text.contains("com.example.wardle.v1.Flunder")
            .then_some(text)
    });
    assert!(v2.contains("io.k8s.api.apps.v1.Deployment"));

    // A watch flows event by event: the first arrives before the server sends the second.
    let mut watch = server
        .kubectl_command()
        .args([
            "get",
            "--raw",
            "/apis/wardle.example.com/v1/namespaces/default/flunders?watch=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let first_at = Instant::now();
    let second = lines.next().unwrap().unwrap();
    let gap = first_at.elapsed();
    let _ = watch.wait();
    assert!(
        first.contains("\"f1\"") && second.contains("\"f2\""),
        "{first} {second}"
    );
    assert!(
        gap >= Duration::from_millis(1000),
        "the events came together ({gap:?})"
    );

    // A caBundle of another CA fails the check, and requests get 503.
    let other = Wardle::start(None);
    patch_spec(&server, &json!({"caBundle": other.ca_bundle()}));
    let failed = wait_condition(
        &server,
        "v1.wardle.example.com",
        "False",
        "FailedDiscoveryCheck",
    );
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with("failing or missing response from https://127.0.0.1:")
            && message.contains("/apis/wardle.example.com/v1"),
        "{message}"
    );
    let refused = server.fails(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1/namespaces/default/flunders",
    ]);
    assert!(
        refused.contains("ServiceUnavailable") || refused.contains("unable to handle"),
        "{refused}"
    );

    // insecureSkipTLSVerify: the certificate is not checked.
    patch_spec(
        &server,
        &json!({"caBundle": null, "insecureSkipTLSVerify": true}),
    );
    wait_condition(&server, "v1.wardle.example.com", "True", "Passed");
    assert!(server.ok(&["get", "flunders"]).contains("f2"));

    // The server stops: the check fails and requests get 503.
    wardle.stop();
    let failed = wait_condition(
        &server,
        "v1.wardle.example.com",
        "False",
        "FailedDiscoveryCheck",
    );
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{failed}"
    );
    let refused = server.fails(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1/namespaces/default/flunders",
    ]);
    assert!(
        refused.contains("ServiceUnavailable") || refused.contains("unable to handle"),
        "{refused}"
    );
    // Aggregated discovery keeps what it knew, marked stale.
    let entry = discovered_group(&server, "wardle.example.com").unwrap();
    assert_eq!(entry["versions"][0]["freshness"], "Stale");

    // Without endpoints: MissingEndpoints.
    server.ok(&["delete", "endpointslice", "wardle-1"]);
    wait_condition(
        &server,
        "v1.wardle.example.com",
        "False",
        "MissingEndpoints",
    );
    server.ok(&["delete", "service", "wardle"]);
    let gone = wait_condition(&server, "v1.wardle.example.com", "False", "ServiceNotFound");
    assert_eq!(
        gone["message"],
        "service/wardle in \"default\" is not present"
    );
}

#[test]
fn a_registered_metrics_server_should_replace_the_local_metrics_group() {
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp);
    wait_condition(&server, "v1beta1.metrics.k8s.io", "True", "Local");
    let local = server.ok(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1"]);
    assert!(
        local.contains("\"pods\"") && !local.contains("wardlemetrics"),
        "{local}"
    );

    // A "metrics-server" (the wardle server) behind a Service (with Endpoints this time)
    // takes the group over.
    let wardle = Wardle::start(None);
    server.ok(&[
        "create",
        "service",
        "clusterip",
        "wardle",
        &format!("--tcp=443:{}", wardle.port()),
    ]);
    create(
        &server,
        &json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "wardle"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": format!("443-{}", wardle.port()), "port": wardle.port()}]}]}),
    );
    let service = json!({"service": {"namespace": "default", "name": "wardle", "port": 443},
        "insecureSkipTLSVerify": true});
    server.ok(&[
        "patch",
        "apiservice",
        "v1beta1.metrics.k8s.io",
        "--type=merge",
        "-p",
        &json!({"spec": service}).to_string(),
    ]);
    wait_condition(&server, "v1beta1.metrics.k8s.io", "True", "Passed");
    let proxied = server.ok(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1"]);
    assert!(proxied.contains("wardlemetrics"), "{proxied}");
    let resources = eventually("wardlemetrics in api-resources", || {
        let out = server.ok(&["api-resources", "--api-group=metrics.k8s.io"]);
        out.contains("wardlemetrics").then_some(out)
    });
    assert!(!resources.contains("podmetrics"), "{resources}");

    // Without its Service, the local group comes back.
    server.ok(&[
        "patch",
        "apiservice",
        "v1beta1.metrics.k8s.io",
        "--type=merge",
        "-p",
        r#"{"spec": {"service": null, "insecureSkipTLSVerify": null}}"#,
    ]);
    wait_condition(&server, "v1beta1.metrics.k8s.io", "True", "Local");
    let local = server.ok(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1"]);
    assert!(local.contains("\"pods\""), "{local}");
}
