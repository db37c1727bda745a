//! `GET /metrics` on `setpoint server`: the API server's request, watch and store figures under
//! kube-apiserver's names and the built-in loops' controllers and work queues under
//! controller-runtime's, one Prometheus text exposition, only for authenticated clients; and
//! the health endpoints' checks.

use setpoint_testenv::eventually_blocking;

use crate::common::Server;

/// The value of the first sample whose line starts with `prefix` (name and labels).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_should_count_requests_watches_store_calls_and_loops() {
    let server = Server::start();
    server.ok(&[
        "create",
        "deployment",
        "web",
        "--image=example.invalid/web:1",
        "--replicas=0",
    ]);
    let text = eventually_blocking("the deployment controller's reconciles in /metrics", || {
        let text = server.ok(&["get", "--raw", "/metrics"]);
        sample(&text, r#"controller_runtime_reconcile_total{controller="deployment-controller",result="success"}"#)
            .filter(|n| *n >= 1.0)
            .map(|_| text)
    });
    let created = r#"apiserver_request_total{verb="POST",dry_run="",group="apps",version="v1",resource="deployments",subresource="",scope="resource",component="apiserver",code="201"}"#;
    assert_eq!(sample(&text, created), Some(1.0), "{text}");
    assert!(
        text.contains("# TYPE apiserver_request_duration_seconds histogram"),
        "{text}"
    );
    assert!(text.contains(r#"apiserver_request_duration_seconds_bucket{verb="POST",dry_run="",group="apps",version="v1",resource="deployments",subresource="",scope="resource",component="apiserver",le="+Inf"} 1"#), "{text}");
    // The loops' informers watch through the API: long-running requests.
    let watches: f64 = text
        .lines()
        .filter(|l| l.starts_with(r#"apiserver_longrunning_requests{verb="WATCH""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(watches >= 2.0, "{text}");
    assert!(
        sample(
            &text,
            r#"etcd_request_duration_seconds_count{operation="create",type="deployments"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"workqueue_adds_total{name="deployment-controller""#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_depth{name="scheduler""#),
        "{text}"
    );
    // The watch caches: one deployment stored, its event taken from the store and sent to the
    // deployment controller's informer.
    assert_eq!(
        sample(
            &text,
            r#"apiserver_storage_objects{resource="deployments.apps"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_watch_cache_events_received_total{group="apps",resource="deployments"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"apiserver_watch_events_total{group="apps",resource="deployments",version="v1"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        sample(&text, r#"apiserver_storage_objects{resource="namespaces"}"#)
            .is_some_and(|n| n >= 4.0),
        "{text}"
    );
    // The deployment's JSON in the cache is the stored bytes, not a copy (namespaces created
    // by this Setpoint are too).
    for resource in [
        r#"group="apps",resource="deployments""#,
        r#"group="",resource="namespaces""#,
    ] {
        assert!(
            sample(
                &text,
                &format!(r#"setpoint_watch_cache_object_bytes{{{resource},held="stored"}}"#)
            )
            .is_some_and(|n| n >= 100.0),
            "{resource}: {text}"
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"setpoint_watch_cache_object_bytes{{{resource},held="copy"}}"#)
            ),
            Some(0.0),
            "{resource}: {text}"
        );
    }
    // The health endpoints list real checks. (The providers' CRDs, installed after the server
    // first said ready, make it unready until their caches load: a moment, waited out.)
    let ready = eventually_blocking("/readyz?verbose to pass", || {
        let out = server.kubectl(&["get", "--raw", "/readyz?verbose"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    for line in [
        "[+]ping ok",
        "[+]etcd ok",
        "[+]etcd-readiness ok",
        "[+]informer-sync ok",
        "[+]shutdown ok",
        "readyz check passed",
    ] {
        assert!(ready.contains(line), "{line} in {ready}");
    }
    let live = server.ok(&["get", "--raw", "/livez?verbose"]);
    assert!(
        live.contains("[+]etcd ok") && !live.contains("shutdown"),
        "{live}"
    );
    assert_eq!(server.ok(&["get", "--raw", "/readyz/informer-sync"]), "ok");
    // Anonymous clients are refused, as for every API path.
    let out = server.kubectl(&["get", "--raw", "/metrics", "--token=not-a-token"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unauthorized"));
}
