//! Each built-in kind decoded from a body built field by field: namespaces, config maps,
//! secrets, service accounts, deployments, services, pods, signing requests, token reviews,
//! service CIDRs and IP addresses.

use super::*;

#[test]
fn namespace_should_decode_to_name_with_empty_spec_and_status() {
    let raw = Enc::new()
        .msg(1, object_meta("team-a", &[]))
        .msg(2, Enc::new())
        .msg(3, Enc::new().str(1, ""));
    assert_eq!(
        decoded(&body("v1", "Namespace", raw)),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
               "spec": {}, "status": {}})
    );
}

#[test]
fn configmap_should_keep_empty_values_and_base64_binary_data() {
    let raw = Enc::new()
        .msg(1, object_meta("cfg", &[]))
        .entry(2, "a", "1")
        .entry(2, "empty", "")
        .entry(2, "file.txt", "line 1\nline 2\n")
        .bytes_entry(3, "bin", &[0, 1, 2, 255]);
    assert_eq!(
        decoded(&body("v1", "ConfigMap", raw)),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
               "data": {"a": "1", "empty": "", "file.txt": "line 1\nline 2\n"},
               "binaryData": {"bin": "AAEC/w=="}})
    );
}

#[test]
fn secret_should_base64_its_data_and_keep_its_type() {
    let raw = Enc::new()
        .msg(1, object_meta("tls", &[]))
        .bytes_entry(2, "tls.crt", b"CERT")
        .bytes_entry(2, "tls.key", b"KEY")
        .str(3, "kubernetes.io/tls");
    assert_eq!(
        decoded(&body("v1", "Secret", raw)),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
               "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
               "type": "kubernetes.io/tls"})
    );
}

#[test]
fn secret_should_keep_an_explicit_false_immutable() {
    let raw = Enc::new()
        .msg(1, object_meta("s", &[]))
        .str(3, "")
        .int(5, 0);
    assert_eq!(
        decoded(&body("v1", "Secret", raw)),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "immutable": false})
    );
}

#[test]
fn serviceaccount_should_decode_references() {
    let raw = Enc::new()
        .msg(1, object_meta("robot", &[]))
        .msg(2, Enc::new().str(1, "Secret").str(2, "").str(3, "tok"))
        .msg(3, Enc::new().str(1, "regcred"))
        .int(4, 1);
    assert_eq!(
        decoded(&body("v1", "ServiceAccount", raw)),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
               "secrets": [{"kind": "Secret", "name": "tok"}],
               "imagePullSecrets": [{"name": "regcred"}],
               "automountServiceAccountToken": true})
    );
}

#[test]
fn deployment_should_decode_replicas_selector_template_and_empty_strategy() {
    let template = Enc::new().msg(1, object_meta("", &[("app", "web")])).msg(
        2,
        Enc::new()
            .msg(
                2,
                container("nginx", "nginx:1.27").msg(
                    6,
                    Enc::new()
                        .str(1, "")
                        .int(2, 0)
                        .int(3, 80)
                        .str(4, "")
                        .str(5, ""),
                ),
            )
            .str(3, "")
            .str(6, "")
            .str(8, ""),
    );
    let raw = Enc::new()
        .msg(1, object_meta("web", &[("app", "web")]))
        .msg(
            2,
            Enc::new()
                .int(1, 3)
                .msg(2, Enc::new().entry(1, "app", "web"))
                .msg(3, template)
                .msg(4, Enc::new().str(1, ""))
                .int(5, 0)
                .int(7, 0),
        )
        .msg(
            3,
            Enc::new()
                .int(1, 0)
                .int(2, 0)
                .int(3, 0)
                .int(4, 0)
                .int(5, 0)
                .int(7, 0),
        );
    assert_eq!(
        decoded(&body("apps/v1", "Deployment", raw)),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx:1.27", "resources": {},
                        "ports": [{"containerPort": 80}]
                    }]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn deployment_should_keep_zero_replicas_and_decode_int_or_string_surge() {
    let raw = Enc::new().msg(
        2,
        Enc::new().int(1, 0).msg(
            4,
            Enc::new().str(1, "RollingUpdate").msg(
                2,
                Enc::new()
                    .msg(1, Enc::new().int(1, 1).int(2, 0).str(3, "25%"))
                    .msg(2, Enc::new().int(1, 0).int(2, 2).str(3, "")),
            ),
        ),
    );
    assert_eq!(
        decoded(&body("apps/v1", "Deployment", raw))["spec"],
        json!({"replicas": 0, "strategy": {"type": "RollingUpdate",
               "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}}})
    );
}

#[test]
fn service_should_decode_ports_with_target_port_and_selector() {
    let port = Enc::new()
        .str(1, "80-8080")
        .str(2, "TCP")
        .int(3, 80)
        .msg(4, Enc::new().int(1, 0).int(2, 8080).str(3, ""))
        .int(5, 0);
    let raw = Enc::new()
        .msg(1, object_meta("web", &[("app", "web")]))
        .msg(
            2,
            Enc::new()
                .msg(1, port)
                .entry(2, "app", "web")
                .str(3, "")
                .str(4, "ClusterIP")
                .str(7, "")
                .int(12, 0)
                .int(13, 0),
        )
        .msg(3, Enc::new().msg(1, Enc::new()));
    assert_eq!(
        decoded(&body("v1", "Service", raw)),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "labels": {"app": "web"}},
               "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                                   "targetPort": 8080}],
                        "selector": {"app": "web"}, "type": "ClusterIP"},
               "status": {"loadBalancer": {}}})
    );
}

#[test]
fn pod_should_decode_a_kubectl_run_pod() {
    let c = container("box", "busybox")
        .str(4, "sleep")
        .str(4, "3600")
        .msg(7, Enc::new().str(1, "MODE").str(2, "test"))
        .msg(
            9,
            Enc::new()
                .str(1, "data")
                .int(2, 1)
                .str(3, "/data")
                .str(4, "")
                .str(6, ""),
        )
        .msg(15, Enc::new().int(2, 1))
        .int(16, 1)
        .int(18, 1);
    let raw = Enc::new()
        .msg(1, object_meta("box", &[("run", "box")]))
        .msg(
            2,
            Enc::new()
                .msg(2, c)
                .str(3, "Never")
                .str(6, "ClusterFirst")
                .str(8, "")
                .int(11, 0)
                .str(16, ""),
        )
        .msg(
            3,
            Enc::new()
                .str(1, "")
                .str(3, "")
                .str(4, "")
                .msg(7, Enc::new()),
        );
    assert_eq!(
        decoded(&body("v1", "Pod", raw)),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "box", "labels": {"run": "box"}},
               "spec": {"containers": [{
                   "name": "box", "image": "busybox", "args": ["sleep", "3600"],
                   "env": [{"name": "MODE", "value": "test"}],
                   "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                   "securityContext": {"privileged": true},
                   "resources": {}, "stdin": true, "tty": true
               }], "restartPolicy": "Never", "dnsPolicy": "ClusterFirst"},
               "status": {}})
    );
}

#[test]
fn a_signing_request_should_decode_extra_values_as_lists() {
    let extra = Enc::new()
        .str(1, "scopes")
        .msg(2, Enc::new().str(1, "a").str(1, "b"));
    let spec = Enc::new()
        .bytes(1, b"PEM")
        .str(5, "client auth")
        .msg(6, extra)
        .str(7, "example.com/signer");
    let raw = Enc::new().msg(1, object_meta("c", &[])).msg(2, spec);
    assert_eq!(
        decoded(&body(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            raw
        )),
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": "c"}, "spec": {"request": "UEVN", "usages": ["client auth"],
               "extra": {"scopes": ["a", "b"]}, "signerName": "example.com/signer"}})
    );
}

#[test]
fn a_token_review_a_service_cidr_and_an_ip_address_should_decode() {
    let raw = Enc::new()
        .msg(1, Enc::new())
        .msg(2, Enc::new().str(1, "secret").str(2, "https://a.example"));
    assert_eq!(
        decoded(&body("authentication.k8s.io/v1", "TokenReview", raw)),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
               "spec": {"token": "secret", "audiences": ["https://a.example"]}})
    );
    let raw = Enc::new()
        .msg(1, object_meta("extra", &[]))
        .msg(2, Enc::new().str(1, "10.0.0.0/24").str(1, "fd00::/64"));
    assert_eq!(
        decoded(&body("networking.k8s.io/v1", "ServiceCIDR", raw)),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
               "metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.0/24", "fd00::/64"]}})
    );
    let parent = Enc::new()
        .str(2, "services")
        .str(3, "default")
        .str(4, "web");
    let raw = Enc::new()
        .msg(1, object_meta("10.96.0.10", &[]))
        .msg(2, Enc::new().msg(1, parent));
    assert_eq!(
        decoded(&body("networking.k8s.io/v1", "IPAddress", raw)),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
               "metadata": {"name": "10.96.0.10"},
               "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}})
    );
}
