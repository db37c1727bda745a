//! Admission webhooks (issue 16): a validating and a mutating webhook served over TLS by this
//! test process (`webhook.rs`), configured with kubectl on a `setpoint server`, and what
//! kubectl then sees — allowed, denied with the webhook's message, patched, a warning, a
//! webhook that is down or slow under each failure policy, selectors and match conditions
//! that keep requests away from a webhook, dry runs — and what the webhook is sent.

mod policy;
pub(crate) mod webhook;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::Server;
use webhook::{Webhooks, WARNING};

/// One webhook entry calling `url`, for configmaps (CREATE, UPDATE, DELETE), with `extra`
/// fields over these.
fn hook(name: &str, url: &str, hooks: &Webhooks, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": hooks.ca_bundle()},
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
            "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        w[k] = v.clone();
    }
    w
}

/// Creates a configuration of `kind` (`Validating` or `Mutating`) named `name`.
fn install(server: &Server, kind: &str, name: &str, webhooks: Vec<Value>) {
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": format!("{kind}WebhookConfiguration"),
        "metadata": {"name": name},
        "webhooks": webhooks,
    });
    let out = server.kubectl_stdin(&["create", "-f", "-"], &configuration.to_string());
    assert!(
        out.status.success(),
        "creating {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The configuration reaches the server's watch cache, which admission reads, within
    // milliseconds; this leaves room for a loaded machine.
    std::thread::sleep(Duration::from_millis(300));
}

/// A ConfigMap manifest named `name` (kubectl reports errors of `create -f` with their reason).
fn configmap(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_validating_webhook_should_allow_deny_and_be_told_the_request() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    install(
        &server,
        "Validating",
        "deny-bad",
        vec![hook(
            "deny.setpoint.test",
            &hooks.url("/deny"),
            &hooks,
            json!({}),
        )],
    );

    server.ok(&["create", "configmap", "good-1", "--from-literal=a=1"]);
    let out = server.kubectl_stdin(&["create", "-f", "-"], &configmap("bad-1"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"deny.setpoint.test\" denied the request: configmap bad-1 is not welcome"
        ),
        "the webhook's message and code (403): {}",
        stderr(&out)
    );
    server.fails(&["get", "configmap", "bad-1"]);

    let create = hooks.requests("/deny")[0].clone();
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["requestKind"], create["kind"]);
    assert_eq!(create["namespace"], "default");
    assert_eq!(create["name"], "good-1");
    assert_eq!(create["object"]["data"]["a"], "1");
    assert_eq!(create["oldObject"], Value::Null);
    assert_eq!(create["dryRun"], false);
    assert_eq!(create["options"]["kind"], "CreateOptions");
    assert!(
        create["userInfo"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{create}"
    );
    assert!(create["uid"].as_str().is_some_and(|u| !u.is_empty()));

    server.ok(&["label", "configmap", "good-1", "team=a"]);
    let update = hooks.requests("/deny").last().cloned().unwrap();
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["object"]["metadata"]["labels"]["team"], "a");
    assert_eq!(update["oldObject"]["metadata"]["labels"], Value::Null);
    assert_eq!(update["options"]["kind"], "UpdateOptions");

    // Dry runs are sent with dryRun: true (sideEffects: None), and still denied.
    let dry = server.fails(&["create", "configmap", "bad-2", "--dry-run=server"]);
    assert!(dry.contains("configmap bad-2 is not welcome"), "{dry}");
    server.ok(&["create", "configmap", "dry-1", "--dry-run=server"]);
    let dry_request = hooks.requests("/deny").last().cloned().unwrap();
    assert_eq!(dry_request["dryRun"], true);
    assert_eq!(dry_request["options"]["dryRun"], json!(["All"]));
    server.fails(&["get", "configmap", "dry-1"]);

    server.ok(&["delete", "configmap", "good-1"]);
    let delete = hooks.requests("/deny").last().cloned().unwrap();
    assert_eq!(delete["operation"], "DELETE");
    assert_eq!(delete["object"], Value::Null);
    assert_eq!(delete["oldObject"]["metadata"]["name"], "good-1");
    assert_eq!(delete["options"]["kind"], "DeleteOptions");

    // Requests on the webhook configurations are never sent to webhooks.
    let before = hooks.requests("/deny").len();
    server.ok(&["delete", "validatingwebhookconfiguration", "deny-bad"]);
    assert_eq!(hooks.requests("/deny").len(), before);
}

#[test]
fn a_mutating_webhook_should_patch_what_is_stored_before_validation() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    install(
        &server,
        "Mutating",
        "labeler",
        vec![hook(
            "label.setpoint.test",
            &hooks.url("/label"),
            &hooks,
            json!({}),
        )],
    );
    install(
        &server,
        "Validating",
        "observer",
        vec![hook(
            "observe.setpoint.test",
            &hooks.url("/allow"),
            &hooks,
            json!({}),
        )],
    );

    server.ok(&["create", "configmap", "m1", "--from-literal=a=1"]);
    let label = server.ok(&[
        "get",
        "configmap",
        "m1",
        "-o",
        "jsonpath={.metadata.labels.admitted}",
    ]);
    assert_eq!(label, "yes");
    // Validating webhooks see the object as mutated.
    let seen = hooks.requests("/allow")[0].clone();
    assert_eq!(seen["object"]["metadata"]["labels"]["admitted"], "yes");

    // An object with labels keeps them; updates are patched too.
    let manifest = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m2", "labels": {"app": "x"}}}"#;
    let out = server.kubectl_stdin(&["create", "-f", "-"], manifest);
    assert!(out.status.success(), "{}", stderr(&out));
    let labels = server.ok(&[
        "get",
        "configmap",
        "m2",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    let labels: Value = serde_json::from_str(&labels).unwrap();
    assert_eq!(labels, json!({"app": "x", "admitted": "yes"}));
    server.ok(&["label", "configmap", "m2", "admitted-"]);
    let label = server.ok(&[
        "get",
        "configmap",
        "m2",
        "-o",
        "jsonpath={.metadata.labels.admitted}",
    ]);
    assert_eq!(label, "yes", "the update was patched again");
}

#[test]
fn a_webhook_that_is_down_or_answers_garbage_should_follow_the_failure_policy() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let down = format!("https://{closed}/");
    install(
        &server,
        "Validating",
        "down-fail",
        vec![hook(
            "down.setpoint.test",
            &down,
            &hooks,
            json!({"failurePolicy": "Fail"}),
        )],
    );
    let out = server.kubectl_stdin(&["create", "-f", "-"], &configmap("c1"));
    assert!(!out.status.success());
    let refused = stderr(&out);
    assert!(
        refused.contains(&format!(
            "Error from server (InternalError): error when creating \"STDIN\": Internal error occurred: failed calling webhook \"down.setpoint.test\": failed to call webhook: Post \"https://{closed}/?timeout=10s\": dial tcp {closed}: connect: connection refused"
        )),
        "{refused}"
    );
    server.fails(&["get", "configmap", "c1"]);
    server.ok(&["delete", "validatingwebhookconfiguration", "down-fail"]);

    install(
        &server,
        "Validating",
        "down-ignore",
        vec![hook(
            "down.setpoint.test",
            &down,
            &hooks,
            json!({"failurePolicy": "Ignore"}),
        )],
    );
    server.ok(&["create", "configmap", "c1"]);
    server.ok(&["delete", "validatingwebhookconfiguration", "down-ignore"]);

    install(
        &server,
        "Mutating",
        "garbage",
        vec![hook(
            "garbage.setpoint.test",
            &hooks.url("/garbage"),
            &hooks,
            json!({}),
        )],
    );
    let garbage = server.fails(&["create", "configmap", "c2"]);
    assert!(
        garbage.contains(
            "failed calling webhook \"garbage.setpoint.test\": received invalid webhook response"
        ),
        "{garbage}"
    );
}

#[test]
fn a_slow_webhook_should_time_out_quickly_per_its_policy() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    let slow = |policy: &str| {
        hook(
            &format!("slow-{}.setpoint.test", policy.to_lowercase()),
            &hooks.url("/slow"),
            &hooks,
            json!({"failurePolicy": policy, "timeoutSeconds": 1}),
        )
    };
    install(&server, "Validating", "slow-fail", vec![slow("Fail")]);
    let started = Instant::now();
    let refused = server.fails(&["create", "configmap", "t1"]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        refused.contains("failed calling webhook \"slow-fail.setpoint.test\"")
            && refused.contains("context deadline exceeded")
            && refused.contains("?timeout=1s"),
        "{refused}"
    );
    server.ok(&["delete", "validatingwebhookconfiguration", "slow-fail"]);

    install(&server, "Validating", "slow-ignore", vec![slow("Ignore")]);
    let started = Instant::now();
    server.ok(&["create", "configmap", "t1"]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_webhooks_warning_should_reach_kubectl() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    install(
        &server,
        "Validating",
        "warner",
        vec![hook(
            "warn.setpoint.test",
            &hooks.url("/warn"),
            &hooks,
            json!({}),
        )],
    );
    let out = server.kubectl(&["create", "configmap", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("Warning: {WARNING}")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn selectors_and_match_conditions_should_keep_requests_from_a_webhook() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    server.ok(&["create", "namespace", "plain"]);
    server.ok(&["create", "namespace", "guarded"]);
    server.ok(&["label", "namespace", "guarded", "admission=on"]);
    install(
        &server,
        "Validating",
        "picky",
        vec![hook(
            "picky.setpoint.test",
            &hooks.url("/deny"),
            &hooks,
            json!({
                "namespaceSelector": {"matchLabels": {"admission": "on"}},
                "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
                "matchConditions": [{"name": "not-exempt",
                    "expression": "!object.metadata.name.endsWith('-exempt')"}],
            }),
        )],
    );
    // Not in a selected namespace: never sent.
    server.ok(&["create", "configmap", "bad-1", "-n", "plain"]);
    let denied = server.fails(&["create", "configmap", "bad-1", "-n", "guarded"]);
    assert!(
        denied.contains("configmap bad-1 is not welcome"),
        "{denied}"
    );
    // Excluded by the object selector.
    let skipped = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-2", "namespace": "guarded", "labels": {"skip": "yes"}}}"#;
    let out = server.kubectl_stdin(&["create", "-f", "-"], skipped);
    assert!(out.status.success(), "{}", stderr(&out));
    // Excluded by the match condition.
    server.ok(&["create", "configmap", "bad-3-exempt", "-n", "guarded"]);
    let sent: Vec<String> = hooks
        .requests("/deny")
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["namespace"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(sent, ["guarded/bad-1"]);
}

#[test]
fn subresources_should_be_sent_with_their_own_kind_and_name() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    let rules = json!({"rules": [{"operations": ["UPDATE"], "apiGroups": ["apps"],
        "apiVersions": ["v1"], "resources": ["deployments/scale", "deployments/status"]}]});
    install(
        &server,
        "Validating",
        "scale-guard",
        vec![hook(
            "scale.setpoint.test",
            &hooks.url("/deny"),
            &hooks,
            rules,
        )],
    );
    for name in ["web", "bad-web"] {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let out = server.kubectl_stdin(&["create", "-f", "-"], &deployment.to_string());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert!(
        hooks.requests("/deny").is_empty(),
        "the main resource is not covered"
    );

    server.ok(&["scale", "deployment", "web", "--replicas=3"]);
    let scale = hooks.requests("/deny")[0].clone();
    assert_eq!(scale["subResource"], "scale");
    assert_eq!(
        scale["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(scale["resource"]["resource"], "deployments");
    assert_eq!(scale["object"]["spec"]["replicas"], 3);
    assert_eq!(scale["oldObject"]["spec"]["replicas"], 1);
    let denied = server.fails(&["scale", "deployment", "bad-web", "--replicas=3"]);
    assert!(denied.contains("scale bad-web is not welcome"), "{denied}");
    let replicas = server.ok(&[
        "get",
        "deployment",
        "bad-web",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas, "1");

    server.ok(&[
        "patch",
        "deployment",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"observedGeneration": 1}}"#,
    ]);
    let status = hooks.requests("/deny").last().cloned().unwrap();
    assert_eq!(status["subResource"], "status");
    assert_eq!(status["kind"]["kind"], "Deployment");
    assert_eq!(status["object"]["status"]["observedGeneration"], 1);
}

#[test]
fn a_webhook_asking_for_reinvocation_should_see_a_later_webhooks_change() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    // Configurations run in name order: `a-first` before `b-labeler`.
    install(
        &server,
        "Mutating",
        "a-first",
        vec![hook(
            "first.setpoint.test",
            &hooks.url("/allow"),
            &hooks,
            json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    );
    install(
        &server,
        "Mutating",
        "b-labeler",
        vec![hook(
            "label.setpoint.test",
            &hooks.url("/label"),
            &hooks,
            json!({}),
        )],
    );
    server.ok(&["create", "configmap", "r1"]);
    let first = hooks.requests("/allow");
    assert_eq!(
        first.len(),
        2,
        "called again after the labeler changed the object"
    );
    assert_eq!(first[0]["object"]["metadata"]["labels"], Value::Null);
    assert_eq!(first[1]["object"]["metadata"]["labels"]["admitted"], "yes");
    assert_eq!(hooks.requests("/label").len(), 1);
}

#[test]
fn a_webhook_behind_a_service_should_be_reached_through_its_endpoints() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    server.ok(&["create", "service", "clusterip", "hook", "--tcp=443:9443"]);
    let service = |policy: &str| {
        json!({
            "name": "svc.setpoint.test",
            "clientConfig": {"service": {"namespace": "default", "name": "hook", "path": "/deny"},
                "caBundle": hooks.ca_bundle()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": policy,
        })
    };
    // No endpoints yet: the failure policy decides.
    install(&server, "Validating", "svc-fail", vec![service("Fail")]);
    let refused = server.fails(&["create", "configmap", "bad-1"]);
    assert!(
        refused.contains("failed calling webhook \"svc.setpoint.test\"")
            && refused.contains("no endpoints available for service \"default/hook\""),
        "{refused}"
    );
    // An EndpointSlice routes the Service to the webhook (`kubectl create service` names the
    // port `443-9443`, and so does the slice, as the EndpointSlice controller would). Where
    // this server does not serve EndpointSlices yet, a CRD of the same group and kind does.
    let discovery = server.ok(&["api-resources", "-o", "name"]);
    if !discovery
        .lines()
        .any(|l| l == "endpointslices.discovery.k8s.io")
    {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "endpointslices.discovery.k8s.io",
                "annotations": {"api-approved.kubernetes.io": "unapproved, test only"}},
            "spec": {"group": "discovery.k8s.io", "scope": "Namespaced",
                "names": {"plural": "endpointslices", "singular": "endpointslice", "kind": "EndpointSlice",
                    "listKind": "EndpointSliceList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        let out = server.kubectl_stdin(&["create", "-f", "-"], &crd.to_string());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "443-9443", "port": hooks.port(), "protocol": "TCP"}]});
    let out = server.kubectl_stdin(&["create", "-f", "-"], &slice.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(300));
    let denied = server.fails(&["create", "configmap", "bad-1"]);
    assert!(
        denied.contains("configmap bad-1 is not welcome"),
        "{denied}"
    );
    server.ok(&["create", "configmap", "good-1"]);
    let sent = hooks.requests("/deny");
    assert_eq!(
        sent.len(),
        2,
        "both creates went through the Service's endpoint"
    );
}

#[test]
fn an_equivalent_version_webhook_should_get_the_object_converted_to_its_version() {
    let hooks = Webhooks::start();
    let server = Server::start_api_only();
    // Registered for autoscaling/v1 only; `matchPolicy` defaults to Equivalent.
    let mut webhook = hook(
        "label.setpoint.test",
        &hooks.url("/label"),
        &hooks,
        json!({}),
    );
    webhook["rules"] = json!([{"operations": ["CREATE"], "apiGroups": ["autoscaling"],
        "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers"]}]);
    install(&server, "Mutating", "hpa-labeler", vec![webhook]);
    let hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]
        }
    });
    let out = server.kubectl_stdin(&["create", "-f", "-"], &hpa.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    // The webhook was sent a v1 object, converted (not just relabelled)...
    let seen = hooks.requests("/label")[0].clone();
    assert_eq!(seen["kind"]["version"], "v1", "{seen}");
    assert_eq!(seen["requestKind"]["version"], "v2", "{seen}");
    assert_eq!(seen["object"]["apiVersion"], "autoscaling/v1", "{seen}");
    assert_eq!(
        seen["object"]["spec"]["targetCPUUtilizationPercentage"], 60,
        "{seen}"
    );
    assert!(seen["object"]["spec"]["metrics"].is_null(), "{seen}");
    // ...and its patch, made to the v1 object, reached the v2 object stored.
    let stored: Value =
        serde_json::from_str(&server.ok(&["get", "hpa.v2.autoscaling", "web", "-o", "json"]))
            .unwrap();
    assert_eq!(stored["metadata"]["labels"]["admitted"], "yes", "{stored}");
    assert_eq!(
        stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 60,
        "{stored}"
    );
}
