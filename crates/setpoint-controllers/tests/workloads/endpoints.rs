//! The `endpointslice` and `endpoint` loops against an in-process API server: endpoints follow
//! pod readiness, termination and `publishNotReadyAddresses`; a named `targetPort` resolving
//! differently per pod splits the slices; many pods split into slices of 100; selector changes
//! and Service deletion; headless hostnames and node zones. Pod IPs and readiness are written by
//! the test, as a kubelet would.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";

/// A pod of `app` whose container names port `http` as `http_port`.
fn pod(name: &str, app: &str, http_port: i32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "ports": [{"name": "http", "containerPort": http_port}]}]},
    }))
    .expect("pod")
}

/// Gives the pod an IP and a readiness, as a kubelet would.
async fn set_status(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}],
        }})),
    )
    .await
    .expect("pod status");
}

fn service(name: &str, spec: Value) -> Service {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"tier": "front"}}, "spec": spec}),
    )
    .expect("service")
}

/// One endpoint as the tests compare it: address, ready, serving, terminating.
type Row = (String, bool, bool, bool);

/// The Service's slices: each slice's port numbers and its endpoints, sorted.
async fn slices_of(api: &Api<EndpointSlice>, service: &str) -> Vec<(Vec<i32>, Vec<Row>)> {
    let Ok(list) = api
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
    else {
        return Vec::new();
    };
    let mut out: Vec<(Vec<i32>, Vec<Row>)> = list
        .items
        .iter()
        .map(|s| {
            let ports = s.ports.iter().flatten().filter_map(|p| p.port).collect();
            let mut rows: Vec<Row> = s
                .endpoints
                .iter()
                .map(|e| {
                    let c = e.conditions.clone().unwrap_or_default();
                    (
                        e.addresses.join(","),
                        c.ready == Some(true),
                        c.serving == Some(true),
                        c.terminating == Some(true),
                    )
                })
                .collect();
            rows.sort();
            (ports, rows)
        })
        .collect();
    out.sort();
    out
}

/// Waits until the Service's slices are `want`.
async fn slices_become(api: &Api<EndpointSlice>, service: &str, want: Vec<(Vec<i32>, Vec<Row>)>) {
    let what = format!("slices of {service}: {want:?}");
    eventually(&what, || async { slices_of(api, service).await == want }).await;
}

fn row(ip: &str, ready: bool, serving: bool, terminating: bool) -> Row {
    (ip.to_owned(), ready, serving, terminating)
}

/// The ready and not-ready IPs of the Endpoints object, with its subsets' ports.
async fn endpoints_of(
    api: &Api<Endpoints>,
    name: &str,
) -> Option<Vec<(Vec<i32>, Vec<String>, Vec<String>)>> {
    let e = api.get_opt(name).await.ok()??;
    let mut out: Vec<_> = e
        .subsets
        .iter()
        .flatten()
        .map(|s| {
            let ips = |a: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
                a.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
            };
            (
                s.ports.iter().flatten().map(|p| p.port).collect(),
                ips(&s.addresses),
                ips(&s.not_ready_addresses),
            )
        })
        .collect();
    out.sort();
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_should_follow_readiness_named_ports_and_termination() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "endpointslice,endpoint");
    let pods = client.namespaced_api::<Pod>(NS);
    let services = client.namespaced_api::<Service>(NS);
    let slices = client.namespaced_api::<EndpointSlice>(NS);
    let endpoints = client.namespaced_api::<Endpoints>(NS);
    services
        .create(
            &PostParams::default(),
            &service(
                "web",
                json!({"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": "http"}]}),
            ),
        )
        .await
        .expect("service");
    // No pods yet: one empty placeholder slice, and an Endpoints object without subsets.
    slices_become(&slices, "web", vec![(vec![], vec![])]).await;
    eventually("empty Endpoints", || async {
        endpoints_of(&endpoints, "web").await == Some(vec![])
    })
    .await;

    // `a` and `b` name `http` 8080, `c` names it 9090: two port sets, two slices.
    let mut a = pod("a", "web", 8080);
    a.metadata.finalizers = Some(vec!["test.setpoint.dev/hold".to_owned()]);
    for p in [
        a,
        pod("b", "web", 8080),
        pod("c", "web", 9090),
        pod("pending", "web", 8080),
    ] {
        pods.create(&PostParams::default(), &p).await.expect("pod");
    }
    set_status(&pods, "a", "10.0.0.1", true).await;
    set_status(&pods, "b", "10.0.0.2", false).await;
    set_status(&pods, "c", "10.0.0.3", true).await;
    slices_become(
        &slices,
        "web",
        vec![
            (
                vec![8080],
                vec![
                    row("10.0.0.1", true, true, false),
                    row("10.0.0.2", false, false, false),
                ],
            ),
            (vec![9090], vec![row("10.0.0.3", true, true, false)]),
        ],
    )
    .await;
    let want = vec![
        (
            vec![8080],
            vec!["10.0.0.1".to_owned()],
            vec!["10.0.0.2".to_owned()],
        ),
        (vec![9090], vec!["10.0.0.3".to_owned()], vec![]),
    ];
    eventually("Endpoints subsets by port", || async {
        endpoints_of(&endpoints, "web").await == Some(want.clone())
    })
    .await;
    // The slices are labelled and controlled by the Service.
    let list = slices.list(&ListParams::default()).await.expect("slices");
    for s in &list.items {
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("endpointslice-controller.k8s.io")
        );
        assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
        assert!(!labels.contains_key("service.kubernetes.io/headless"));
        let owner = &s.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Service", Some(true))
        );
        assert!(s
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("web-")));
    }
    let names_before: Vec<Option<String>> = {
        let mut n: Vec<_> = list.items.iter().map(|s| s.metadata.name.clone()).collect();
        n.sort();
        n
    };

    // `b` turns ready: updated in place (same slices).
    set_status(&pods, "b", "10.0.0.2", true).await;
    slices_become(
        &slices,
        "web",
        vec![
            (
                vec![8080],
                vec![
                    row("10.0.0.1", true, true, false),
                    row("10.0.0.2", true, true, false),
                ],
            ),
            (vec![9090], vec![row("10.0.0.3", true, true, false)]),
        ],
    )
    .await;
    let mut names_after: Vec<_> = slices
        .list(&ListParams::default())
        .await
        .expect("slices")
        .items
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    names_after.sort();
    assert_eq!(names_before, names_after, "slices reused, not replaced");

    // `a` is deleted but held by a finalizer: terminating, serving, not ready in its slice;
    // gone from the Endpoints object.
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    slices_become(
        &slices,
        "web",
        vec![
            (
                vec![8080],
                vec![
                    row("10.0.0.1", false, true, true),
                    row("10.0.0.2", true, true, false),
                ],
            ),
            (vec![9090], vec![row("10.0.0.3", true, true, false)]),
        ],
    )
    .await;
    let want = vec![
        (vec![8080], vec!["10.0.0.2".to_owned()], vec![]),
        (vec![9090], vec!["10.0.0.3".to_owned()], vec![]),
    ];
    eventually("terminating pod out of Endpoints", || async {
        endpoints_of(&endpoints, "web").await == Some(want.clone())
    })
    .await;
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release a");

    // A finished pod is left out.
    pods.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("c finished");
    slices_become(
        &slices,
        "web",
        vec![(vec![8080], vec![row("10.0.0.2", true, true, false)])],
    )
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_not_ready_selector_change_and_deletion() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "endpointslice,endpoint,garbage-collector");
    let pods = client.namespaced_api::<Pod>(NS);
    let services = client.namespaced_api::<Service>(NS);
    let slices = client.namespaced_api::<EndpointSlice>(NS);
    let endpoints = client.namespaced_api::<Endpoints>(NS);
    for (name, app, ip) in [("x", "one", "10.1.0.1"), ("y", "two", "10.1.0.2")] {
        pods.create(&PostParams::default(), &pod(name, app, 8080))
            .await
            .expect("pod");
        set_status(&pods, name, ip, false).await;
    }
    services
        .create(
            &PostParams::default(),
            &service(
                "s",
                json!({"selector": {"app": "one"}, "publishNotReadyAddresses": true,
                                 "ports": [{"port": 80, "targetPort": 8080}]}),
            ),
        )
        .await
        .expect("service");
    // Not ready, but published: ready and serving.
    slices_become(
        &slices,
        "s",
        vec![(vec![8080], vec![row("10.1.0.1", true, true, false)])],
    )
    .await;
    eventually("published in Endpoints", || async {
        endpoints_of(&endpoints, "s").await
            == Some(vec![(vec![8080], vec!["10.1.0.1".to_owned()], vec![])])
    })
    .await;

    // The selector moves to `two`.
    services
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"app": "two"}}})),
        )
        .await
        .expect("patch selector");
    slices_become(
        &slices,
        "s",
        vec![(vec![8080], vec![row("10.1.0.2", true, true, false)])],
    )
    .await;
    eventually("Endpoints follow the selector", || async {
        endpoints_of(&endpoints, "s").await
            == Some(vec![(vec![8080], vec!["10.1.0.2".to_owned()], vec![])])
    })
    .await;

    // A Service without a selector is left alone: a user's slice stays as written.
    services
        .create(
            &PostParams::default(),
            &service("manual", json!({"ports": [{"port": 80}]})),
        )
        .await
        .expect("manual service");
    let user_slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "manual-1", "labels": {"kubernetes.io/service-name": "manual"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["192.168.0.9"]}],
    }))
    .expect("slice");
    slices
        .create(&PostParams::default(), &user_slice)
        .await
        .expect("user slice");

    // Deleting the Service removes its slices (garbage collector) and its Endpoints.
    services
        .delete("s", &DeleteParams::default())
        .await
        .expect("delete service");
    eventually("slices of s gone", || async {
        slices_of(&slices, "s").await.is_empty()
    })
    .await;
    eventually("Endpoints of s gone", || async {
        matches!(endpoints.get_opt("s").await, Ok(None))
    })
    .await;
    let manual = slices_of(&slices, "manual").await;
    assert_eq!(
        manual,
        vec![(vec![], vec![row("192.168.0.9", false, false, false)])]
    );
    assert!(
        endpoints.get_opt("manual").await.expect("get").is_none(),
        "no Endpoints for a selectorless Service"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pods_should_split_into_slices_of_a_hundred() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "endpointslice");
    let pods = client.namespaced_api::<Pod>(NS);
    let services = client.namespaced_api::<Service>(NS);
    let slices = client.namespaced_api::<EndpointSlice>(NS);
    for i in 0..150 {
        let name = format!("p{i}");
        pods.create(&PostParams::default(), &pod(&name, "big", 8080))
            .await
            .expect("pod");
        set_status(&pods, &name, &format!("10.2.{}.{}", i / 100, i % 100), true).await;
    }
    services
        .create(
            &PostParams::default(),
            &service(
                "big",
                json!({"selector": {"app": "big"}, "ports": [{"port": 80, "targetPort": 8080}]}),
            ),
        )
        .await
        .expect("service");
    let sizes = |s: &[(Vec<i32>, Vec<Row>)]| {
        let mut sizes: Vec<usize> = s.iter().map(|(_, e)| e.len()).collect();
        sizes.sort_unstable();
        sizes
    };
    eventually("150 endpoints in slices of 100 and 50", || async {
        sizes(&slices_of(&slices, "big").await) == vec![50, 100]
    })
    .await;
    // Ten more pods fit in the partial slice: no new slice.
    for i in 150..160 {
        let name = format!("p{i}");
        pods.create(&PostParams::default(), &pod(&name, "big", 8080))
            .await
            .expect("pod");
        set_status(&pods, &name, &format!("10.2.{}.{}", i / 100, i % 100), true).await;
    }
    eventually("160 endpoints in slices of 100 and 60", || async {
        sizes(&slices_of(&slices, "big").await) == vec![60, 100]
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_hostnames_and_node_zones() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "endpointslice,endpoint");
    let pods = client.namespaced_api::<Pod>(NS);
    let nodes = client.api::<Node>();
    let services = client.namespaced_api::<Service>(NS);
    let slices = client.namespaced_api::<EndpointSlice>(NS);
    let endpoints = client.namespaced_api::<Endpoints>(NS);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "zone-a"}}}))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    services
        .create(
            &PostParams::default(),
            &service(
                "db",
                json!({"clusterIP": "None", "selector": {"app": "db"},
                                  "ports": [{"name": "sql", "port": 5432}]}),
            ),
        )
        .await
        .expect("service");
    let mut p: Pod = pod("db-0", "db", 5432);
    let spec = p.spec.as_mut().expect("spec");
    spec.hostname = Some("db-0".to_owned());
    spec.subdomain = Some("db".to_owned());
    spec.node_name = Some("n1".to_owned());
    pods.create(&PostParams::default(), &p).await.expect("pod");
    set_status(&pods, "db-0", "10.3.0.1", true).await;
    let slice = eventually("db-0 in a slice", || async {
        let list = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=db"))
            .await
            .ok()?;
        list.items.into_iter().find(|s| !s.endpoints.is_empty())
    })
    .await;
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("service.kubernetes.io/headless"),
        "{labels:?}"
    );
    let annotations = slice.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("endpoints.kubernetes.io/last-change-trigger-time"),
        "{annotations:?}"
    );
    let endpoint = slice.endpoints[0].clone();
    assert_eq!(endpoint.hostname.as_deref(), Some("db-0"));
    assert_eq!(endpoint.node_name.as_deref(), Some("n1"));
    assert_eq!(endpoint.zone.as_deref(), Some("zone-a"));
    let target = endpoint.target_ref.expect("targetRef");
    assert_eq!(
        (target.kind.as_deref(), target.name.as_deref()),
        (Some("Pod"), Some("db-0"))
    );
    let e = eventually("db Endpoints", || async {
        let e = endpoints.get_opt("db").await.ok()??;
        e.subsets.is_some().then_some(e)
    })
    .await;
    let annotations = e.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("endpoints.kubernetes.io/last-change-trigger-time"),
        "{annotations:?}"
    );
    let labels: BTreeMap<String, String> = e.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("service.kubernetes.io/headless"),
        "{labels:?}"
    );
    let address = &e.subsets.as_ref().expect("subsets")[0]
        .addresses
        .as_ref()
        .expect("addresses")[0];
    assert_eq!(address.hostname.as_deref(), Some("db-0"));
    assert_eq!(address.node_name.as_deref(), Some("n1"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_endpoints_should_be_deleted_at_start_but_leader_records_kept() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let endpoints = client.namespaced_api::<Endpoints>(NS);
    let object = |name: &str, annotations: Value| -> Endpoints {
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}}))
            .expect("endpoints")
    };
    endpoints
        .create(&PostParams::default(), &object("leftover", json!({})))
        .await
        .expect("leftover");
    endpoints
        .create(
            &PostParams::default(),
            &object(
                "lock",
                json!({"control-plane.alpha.kubernetes.io/leader": "{}"}),
            ),
        )
        .await
        .expect("lock");
    // Creation timestamps have one-second precision: start the loop in a later second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let running = run_loops(&client, "endpoint");
    eventually("leftover deleted", || async {
        matches!(endpoints.get_opt("leftover").await, Ok(None))
    })
    .await;
    // One created while the loop runs, before its Service exists, stays.
    endpoints
        .create(&PostParams::default(), &object("early", json!({})))
        .await
        .expect("early");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(endpoints.get_opt("early").await.expect("get").is_some());
    assert!(endpoints.get_opt("lock").await.expect("get").is_some());
    running.stop().await;
}
