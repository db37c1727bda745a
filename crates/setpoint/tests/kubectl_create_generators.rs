//! kubectl's generator commands against `setpoint server`: `create namespace|configmap|secret|
//! serviceaccount|deployment|service` send their objects as Kubernetes protobuf through
//! client-go's typed clients (`run` sends JSON, and is here as the other generator); each
//! object is then read back with `get -o json`.

use crate::common;

use std::process::Command;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common::{kubectl_version, Server};
use serde_json::{json, Value};

fn get_json(s: &Server, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&s.ok(&all)).expect("kubectl get -o json prints JSON")
}

#[test]
fn create_namespace_should_send_protobuf_and_create_the_namespace() {
    let s = Server::start();
    let out = s.kubectl(&["create", "namespace", "team-a", "-v=8"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    // Guards the rest of this file: the generators really do send protobuf.
    assert!(
        log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl did not send protobuf:\n{log}"
    );
    let ns = get_json(&s, &["namespace", "team-a"]);
    assert_eq!(ns["metadata"]["name"], "team-a");
    assert_eq!(ns["status"]["phase"], "Active");
}

#[test]
fn create_configmap_should_keep_literals_and_file_contents() {
    let s = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.properties");
    std::fs::write(&file, "color=blue\nsize=3\n").unwrap();
    let from_file = format!("--from-file={}", file.display());
    s.ok(&[
        "create",
        "configmap",
        "cfg",
        "--from-literal=a=1",
        "--from-literal=empty=",
        &from_file,
    ]);
    let cm = get_json(&s, &["configmap", "cfg"]);
    assert_eq!(
        cm["data"],
        json!({"a": "1", "empty": "", "app.properties": "color=blue\nsize=3\n"})
    );
}

#[test]
fn create_secret_generic_tls_and_docker_registry_should_store_base64_data_and_types() {
    let s = Server::start();
    s.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=user=admin",
        "--from-literal=pass=s3cr3t",
    ]);
    let generic = get_json(&s, &["secret", "creds"]);
    assert_eq!(generic["type"], "Opaque");
    assert_eq!(
        generic["data"],
        json!({"user": "YWRtaW4=", "pass": "czNjcjN0"})
    );

    // Any certificate and key will do: the server's own serving pair.
    let (cert, key) = (s.dir.join("pki/server.crt"), s.dir.join("pki/server.key"));
    s.ok(&[
        "create",
        "secret",
        "tls",
        "web-tls",
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ]);
    let tls = get_json(&s, &["secret", "web-tls"]);
    assert_eq!(tls["type"], "kubernetes.io/tls");
    let crt = tls["data"]["tls.crt"].as_str().unwrap();
    assert_eq!(STANDARD.decode(crt).unwrap(), std::fs::read(&cert).unwrap());

    s.ok(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        "--docker-server=registry.example.com",
        "--docker-username=u",
        "--docker-password=p",
    ]);
    let reg = get_json(&s, &["secret", "regcred"]);
    assert_eq!(reg["type"], "kubernetes.io/dockerconfigjson");
    let config = reg["data"][".dockerconfigjson"].as_str().unwrap();
    let config: Value = serde_json::from_slice(&STANDARD.decode(config).unwrap()).unwrap();
    assert_eq!(config["auths"]["registry.example.com"]["username"], "u");
}

#[test]
fn create_serviceaccount_should_create_it() {
    let s = Server::start();
    s.ok(&["create", "serviceaccount", "robot"]);
    let sa = get_json(&s, &["serviceaccount", "robot"]);
    assert_eq!(sa["metadata"]["name"], "robot");
    assert_eq!(sa["metadata"]["namespace"], "default");
}

#[test]
fn create_deployment_should_keep_replicas_image_port_labels_and_selector() {
    let s = Server::start();
    s.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
        "--port=80",
    ]);
    let d = get_json(&s, &["deployment", "web"]);
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"],
        json!({"app": "web"})
    );
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "nginx");
    assert_eq!(c["image"], "nginx:1.27");
    assert_eq!(c["ports"][0]["containerPort"], 80);
}

#[test]
fn create_deployment_should_keep_an_explicit_zero_replicas() {
    let s = Server::start();
    s.ok(&[
        "create",
        "deployment",
        "idle",
        "--image=busybox",
        "--replicas=0",
    ]);
    assert_eq!(get_json(&s, &["deployment", "idle"])["spec"]["replicas"], 0);
}

#[test]
fn create_service_clusterip_should_keep_port_target_port_and_selector() {
    let s = Server::start();
    s.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let svc = get_json(&s, &["service", "web"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["selector"], json!({"app": "web"}));
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["name"], "80-8080");
    assert_eq!(port["port"], 80);
    assert_eq!(port["targetPort"], 8080);
    assert_eq!(port["protocol"], "TCP");
}

#[test]
fn run_should_create_a_pod_with_image_labels_args_and_env() {
    let s = Server::start();
    s.ok(&[
        "run",
        "box",
        "--image=busybox:1.36",
        "--env=MODE=test",
        "--restart=Never",
        "--",
        "sleep",
        "3600",
    ]);
    let pod = get_json(&s, &["pod", "box"]);
    assert_eq!(pod["metadata"]["labels"], json!({"run": "box"}));
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["image"], "busybox:1.36");
    assert_eq!(c["args"], json!(["sleep", "3600"]));
    assert_eq!(c["env"], json!([{"name": "MODE", "value": "test"}]));
}

#[test]
fn create_with_dry_run_server_should_decode_but_not_store() {
    let s = Server::start();
    let out = s.ok(&[
        "create",
        "configmap",
        "dry",
        "--from-literal=k=v",
        "--dry-run=server",
        "-o",
        "json",
    ]);
    let cm: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cm["data"], json!({"k": "v"}));
    assert!(s.fails(&["get", "configmap", "dry"]).contains("NotFound"));
}

/// The kubectl binaries of other minor versions installed beside the one on the PATH.
fn versioned_kubectls() -> Vec<(u32, std::path::PathBuf)> {
    (27..=33)
        .filter_map(|minor| kubectl_version(minor).map(|p| (minor, p)))
        .collect()
}

#[test]
fn kubectl_1_27_to_1_33_generators_should_all_succeed() {
    let s = Server::start();
    let versions = versioned_kubectls();
    if versions.is_empty() {
        eprintln!("no versioned kubectl beside the one on the PATH; skipping");
        return;
    }
    for (minor, bin) in versions {
        let run = |args: &[&str]| {
            let out = Command::new(&bin)
                .arg("--kubeconfig")
                .arg(s.kubeconfig())
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "kubectl 1.{minor} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let name = format!("v1-{minor}");
        run(&["create", "namespace", &name]);
        run(&["create", "configmap", &name, "--from-literal=a=1"]);
        run(&["create", "secret", "generic", &name, "--from-literal=a=1"]);
        run(&["create", "serviceaccount", &name]);
        run(&[
            "create",
            "deployment",
            &name,
            "--image=nginx",
            "--replicas=2",
            "--port=80",
        ]);
        run(&["create", "service", "clusterip", &name, "--tcp=80:8080"]);
        run(&["run", &name, "--image=busybox"]);
        let d = get_json(&s, &["deployment", &name]);
        assert_eq!(d["spec"]["replicas"], 2, "kubectl 1.{minor}");
        let cm = get_json(&s, &["configmap", &name]);
        assert_eq!(cm["data"], json!({"a": "1"}), "kubectl 1.{minor}");
    }
}
