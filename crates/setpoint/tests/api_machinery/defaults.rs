//! The objects clients assume exist: each namespace's own-name label, the `default` ServiceAccount and the `kube-root-ca.crt`
//! ConfigMap in every namespace (put back when deleted), and the `kubernetes` Service in
//! `default` with its Endpoints and EndpointSlice pointing at the API server.

use serde_json::Value;
use setpoint_testenv::eventually_blocking;

use crate::common::Server;

fn get(server: &Server, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let out = server.kubectl(&all);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn namespaces_should_get_their_default_objects_and_the_api_its_service() {
    let server = Server::start();
    server.ok(&["create", "namespace", "team"]);
    let team = get(&server, &["namespace", "team"]).unwrap();
    assert_eq!(
        team["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    for ns in ["default", "team", "kube-system"] {
        eventually_blocking(&format!("the default ServiceAccount in {ns}"), || {
            get(&server, &["serviceaccount", "default", "-n", ns])
        });
        let ca = eventually_blocking(&format!("kube-root-ca.crt in {ns}"), || {
            get(&server, &["configmap", "kube-root-ca.crt", "-n", ns])
        });
        let bundle = ca["data"]["ca.crt"].as_str().unwrap_or_default();
        assert!(bundle.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    }
    // Deleted or changed, they come back.
    server.ok(&["delete", "serviceaccount", "default", "-n", "team"]);
    server.ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "team",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"tampered"}}"#,
    ]);
    eventually_blocking("the default ServiceAccount back in team", || {
        get(&server, &["serviceaccount", "default", "-n", "team"])
    });
    eventually_blocking("the CA bundle restored in team", || {
        get(&server, &["configmap", "kube-root-ca.crt", "-n", "team"]).filter(|cm| {
            cm["data"]["ca.crt"]
                .as_str()
                .is_some_and(|b| b.starts_with("-----BEGIN"))
        })
    });

    // The kubernetes Service points at this API server.
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse::<u64>()
        .unwrap();
    let service = eventually_blocking("the kubernetes Service", || {
        get(&server, &["service", "kubernetes", "-n", "default"])
    });
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.1", "{service}");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port);
    let endpoints = eventually_blocking("the kubernetes Endpoints", || {
        get(&server, &["endpoints", "kubernetes", "-n", "default"])
    });
    assert_eq!(
        endpoints["subsets"][0]["addresses"][0]["ip"], "127.0.0.1",
        "{endpoints}"
    );
    assert_eq!(endpoints["subsets"][0]["ports"][0]["port"], port);
    let slice = eventually_blocking("the kubernetes EndpointSlice", || {
        get(&server, &["endpointslice", "kubernetes", "-n", "default"])
    });
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(
        slice["endpoints"][0]["addresses"][0], "127.0.0.1",
        "{slice}"
    );
    let leases = get(
        &server,
        &[
            "leases",
            "-n",
            "kube-system",
            "-l",
            "apiserver.kubernetes.io/identity=kube-apiserver",
        ],
    )
    .unwrap();
    assert_eq!(
        leases["items"].as_array().map(Vec::len),
        Some(1),
        "{leases}"
    );
}
