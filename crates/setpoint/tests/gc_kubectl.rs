//! The garbage collector driven by the real `kubectl`: owners and dependents created with
//! `ownerReferences`, then `kubectl delete --cascade=background|foreground|orphan` behaving as
//! on Kubernetes.

use crate::common;

use std::time::Duration;

use common::Server;
use setpoint_testenv::eventually_blocking;

/// Creates config map `name` with no owner; returns its uid.
fn owner(s: &Server, name: &str) -> String {
    s.ok(&["create", "configmap", name]);
    s.ok(&["get", "configmap", name, "-o", "jsonpath={.metadata.uid}"])
}

/// Applies config map `name` owned by config map `owner` (uid `uid`), with
/// `blockOwnerDeletion` and optionally a finalizer that holds its own deletion up.
fn dependent(s: &Server, name: &str, owner: &str, uid: &str, hold: bool) {
    let finalizers = if hold {
        "\n  finalizers: [test.setpoint.dev/hold]"
    } else {
        ""
    };
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{finalizers}\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {uid}, blockOwnerDeletion: true}}\n"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn exists(s: &Server, name: &str) -> bool {
    let out = s.ok(&["get", "configmap", name, "--ignore-not-found", "-o", "name"]);
    !out.trim().is_empty()
}

#[test]
fn cascade_background_should_delete_dependents_after_the_owner() {
    let s = Server::start();
    let uid = owner(&s, "owner");
    dependent(&s, "child", "owner", &uid, false);
    let child_uid = s.ok(&[
        "get",
        "configmap",
        "child",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    dependent(&s, "grandchild", "child", &child_uid, false);
    s.ok(&["delete", "configmap", "owner", "--cascade=background"]);
    eventually_blocking("the dependents are gone", || {
        !exists(&s, "child") && !exists(&s, "grandchild")
    });
}

#[test]
fn cascade_foreground_should_delete_the_owner_after_its_dependents() {
    let s = Server::start();
    let uid = owner(&s, "owner");
    dependent(&s, "child", "owner", &uid, true);
    s.ok(&[
        "delete",
        "configmap",
        "owner",
        "--cascade=foreground",
        "--wait=false",
    ]);
    eventually_blocking("the child is being deleted", || {
        !s.ok(&[
            "get",
            "configmap",
            "child",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .is_empty()
    });
    // The owner waits for its dependent.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        s.ok(&[
            "get",
            "configmap",
            "owner",
            "-o",
            "jsonpath={.metadata.finalizers}"
        ]),
        r#"["foregroundDeletion"]"#
    );
    s.ok(&[
        "patch",
        "configmap",
        "child",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually_blocking("the owner is gone", || {
        !exists(&s, "owner") && !exists(&s, "child")
    });

    // Without a finalizer in the way, `kubectl delete` waits and returns once all are gone.
    let uid = owner(&s, "owner2");
    dependent(&s, "child2", "owner2", &uid, false);
    s.ok(&[
        "delete",
        "configmap",
        "owner2",
        "--cascade=foreground",
        "--timeout=60s",
    ]);
    assert!(!exists(&s, "owner2") && !exists(&s, "child2"));
}

#[test]
fn cascade_orphan_should_keep_dependents_without_their_owner_reference() {
    let s = Server::start();
    let uid = owner(&s, "owner");
    dependent(&s, "child", "owner", &uid, false);
    s.ok(&[
        "delete",
        "configmap",
        "owner",
        "--cascade=orphan",
        "--timeout=60s",
    ]);
    assert!(!exists(&s, "owner"));
    assert!(exists(&s, "child"));
    assert_eq!(
        s.ok(&[
            "get",
            "configmap",
            "child",
            "-o",
            "jsonpath={.metadata.ownerReferences}"
        ]),
        ""
    );
}
