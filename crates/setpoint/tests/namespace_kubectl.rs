//! The namespace controller seen through the real `kubectl`: `kubectl delete namespace` on a
//! namespace with content returns once the controller has deleted the content and finalized
//! the namespace, and the namespace is then gone.

use crate::common;

use common::Server;

const CONTENT: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: blue}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
stringData: {value: s3cret}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1.25"}
"#;

#[test]
fn kubectl_delete_namespace_should_return_once_content_and_namespace_are_gone() {
    let s = Server::start();
    s.ok(&["create", "namespace", "demo"]);
    let out = s.kubectl_stdin(&["apply", "-n", "demo", "-f", "-"], CONTENT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Waits (kubectl's default) until the namespace is gone.
    let deleted = s.ok(&["delete", "namespace", "demo", "--timeout=60s"]);
    assert!(deleted.contains("namespace \"demo\" deleted"), "{deleted}");
    let err = s.fails(&["get", "ns", "demo"]);
    assert!(err.contains("NotFound"), "{err}");
    // A namespace of the same name starts empty.
    s.ok(&["create", "namespace", "demo"]);
    for object in ["configmap/settings", "secret/token", "deployment/web"] {
        let err = s.fails(&["get", object, "-n", "demo"]);
        assert!(err.contains("NotFound"), "{object}: {err}");
    }
}
