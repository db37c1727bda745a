//! ValidatingAdmissionPolicy with kubectl: a policy with a parameter ConfigMap denies
//! Deployments with too many replicas (its message expression naming the limit); a second
//! policy bound with `Warn` makes kubectl print a warning; a binding whose parameters are
//! missing denies under `parameterNotFoundAction: Deny`; and the policies' own validation.

use std::time::Duration;

use serde_json::json;

use crate::common::Server;

fn apply(server: &Server, object: serde_json::Value) {
    let out = server.kubectl_stdin(&["create", "-f", "-"], &object.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn deployment(name: &str, replicas: u32) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    .to_string()
}

#[test]
fn a_policy_should_deny_with_its_params_and_warn_when_bound_so() {
    let server = Server::start_api_only();
    apply(
        &server,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "replica-limit", "namespace": "default"}, "data": {"max": "3"}}),
    );
    apply(
        &server,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "max-replicas"},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"],
                "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                "messageExpression": "'replicas must be at most ' + params.data.max"}],
        }}),
    );
    apply(
        &server,
        json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "max-replicas-default"},
            "spec": {"policyName": "max-replicas", "validationActions": ["Deny"],
                "paramRef": {"name": "replica-limit", "parameterNotFoundAction": "Deny"},
                "matchResources": {"objectSelector": {"matchLabels": {"team": "a"}}}}}),
    );
    apply(
        &server,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "owned"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"],
                "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
                "message": "every configmap needs a team label"}],
        }}),
    );
    apply(
        &server,
        json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "owned-warn"},
            "spec": {"policyName": "owned", "validationActions": ["Warn"]}}),
    );
    std::thread::sleep(Duration::from_millis(300));

    let table = server.ok(&["get", "validatingadmissionpolicies"]);
    assert!(
        table.contains("max-replicas") && table.contains("v1 ConfigMap"),
        "{table}"
    );

    let out = server.kubectl_stdin(&["create", "-f", "-"], &deployment("small", 2));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.kubectl_stdin(&["create", "-f", "-"], &deployment("big", 5));
    assert!(!out.status.success());
    let denied = String::from_utf8_lossy(&out.stderr);
    assert!(
        denied.contains("The deployments \"big\" is invalid: : ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-default' denied request: replicas must be at most 3"),
        "{denied}"
    );
    // Updates too (through scale's parent update).
    let refused = server.fails(&[
        "patch",
        "deployment",
        "small",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ]);
    assert!(refused.contains("replicas must be at most 3"), "{refused}");

    // Warn: the request goes through with kubectl printing the failure.
    let out = server.kubectl(&["create", "configmap", "unowned"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'owned' with binding 'owned-warn': every configmap needs a team label"),
        "{stderr}"
    );

    // Without its parameters the binding denies (parameterNotFoundAction: Deny).
    server.ok(&["delete", "configmap", "replica-limit"]);
    let out = server.kubectl_stdin(&["create", "-f", "-"], &deployment("other", 1));
    assert!(!out.status.success());
    let missing = String::from_utf8_lossy(&out.stderr);
    assert!(
        missing.contains("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{missing}"
    );
}

#[test]
fn policies_and_bindings_should_be_validated() {
    let server = Server::start_api_only();
    let out = server.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "broken"},
            "spec": {"validations": [{"expression": "object.spec.replicas <="}]}})
        .to_string(),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("spec.matchConstraints: Required value"),
        "{stderr}"
    );
    assert!(
        stderr.contains("spec.validations[0].expression: Invalid value"),
        "{stderr}"
    );
    let out = server.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}})
        .to_string(),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("must not contain both Deny and Warn"),
        "{stderr}"
    );
}
