//! `kubectl get --watch` and events served by both event APIs.

use super::*;

#[test]
fn get_watch_should_see_later_changes() {
    let s = Server::start();
    let mut watch = s
        .kubectl_command()
        .args([
            "get",
            "cm",
            "-w",
            "--output-watch-events",
            "--request-timeout=20s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    // kubectl prints the (empty) list first; give it a moment to start watching.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let out = s.kubectl_stdin(&["create", "-f", "-", "--validate=false"], CONFIGMAP);
    assert!(out.status.success());
    s.ok(&["label", "cm", "c1", "x=y"]);
    s.ok(&["delete", "cm", "c1"]);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = lines.next().expect("watch output ended early").unwrap();
        let mut words = line.split_whitespace();
        let kind = words.next();
        // The root CA publisher's ConfigMap may be written meanwhile: not this test's.
        if words.next() == Some("kube-root-ca.crt") {
            continue;
        }
        if let Some(kind) = kind.filter(|k| ["ADDED", "MODIFIED", "DELETED"].contains(k)) {
            seen.push(kind.to_owned());
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
}

#[test]
fn events_should_be_one_set_served_by_both_event_apis() {
    let s = Server::start();
    let new_api = r#"
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: e1}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: example.com/controller
reportingInstance: controller-1
action: Reconcile
reason: Synced
type: Normal
note: synced the web deployment
regarding: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}
"#;
    let out = s.kubectl_stdin(&["create", "-f", "-"], new_api);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let core = s.ok(&["get", "events.v1.", "e1", "-o", "json"]);
    let core: serde_json::Value = serde_json::from_str(&core).unwrap();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "synced the web deployment");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["reportingComponent"], "example.com/controller");
    let table = s.ok(&["get", "events"]);
    assert!(
        table.contains("deployment/web") && table.contains("Synced"),
        "{table}"
    );

    let old_api = "apiVersion: v1\nkind: Event\nmetadata: {name: e2}\ninvolvedObject: {kind: Pod, name: p1, namespace: default}\nreason: Started\nmessage: started the container\ntype: Normal\n";
    assert!(s
        .kubectl_stdin(&["create", "-f", "-"], old_api)
        .status
        .success());
    let note = s.ok(&[
        "get",
        "events.v1.events.k8s.io",
        "e2",
        "-o",
        "jsonpath={.apiVersion} {.note} {.regarding.name}",
    ]);
    assert_eq!(note, "events.k8s.io/v1 started the container p1");
}
