//! The server on `--store etcd`, driven by the real `kubectl`: create, get, label, the patch
//! types, apply, watch and delete; objects under kube-apiserver's keys in etcd; a restarted
//! server finding its data; an etcd 3.4 with default flags (no watch progress notifications);
//! and an unreachable etcd answered with an error, not a hang, and refused at start with one
//! line and no backtrace. Each test runs its own local etcd member (the `etcd` binary on the
//! PATH or in `SETPOINT_ETCD`).

#![cfg(feature = "etcd")]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::Server;
use setpoint_store::{LocalEtcd, Store};

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, labels: {app: a}}\ndata: {a: \"1\"}\n";

fn start_etcd() -> LocalEtcd {
    LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"))
}

fn start_server(dir: &std::path::Path, etcd: &LocalEtcd) -> Server {
    Server::start_with(
        dir,
        "127.0.0.1:0",
        &["--store", "etcd", "--etcd-endpoints", etcd.endpoint()],
    )
}

fn json(s: &Server, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&s.ok(args)).expect("kubectl printed JSON")
}

/// `kubectl get cm -w --output-watch-events` on `s`, and a function that returns its next
/// event as (type, name).
fn watch_configmaps(s: &Server) -> (Child, impl FnMut() -> (String, String)) {
    let mut watch = s
        .kubectl_command()
        .args([
            "get",
            "cm",
            "-w",
            "--output-watch-events",
            "--request-timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl starts");
    let mut lines = BufReader::new(watch.stdout.take().expect("piped stdout")).lines();
    let next_event = move || loop {
        let line = lines
            .next()
            .expect("watch output ended early")
            .expect("watch output is text");
        let mut words = line.split_whitespace();
        if let Some(kind) = words
            .next()
            .filter(|k| ["ADDED", "MODIFIED", "DELETED"].contains(k))
        {
            let name = words.next().unwrap_or_default();
            // The root CA publisher's ConfigMap may be written at any time: not the test's.
            if name != "kube-root-ca.crt" {
                return (kind.to_owned(), name.to_owned());
            }
        }
    };
    (watch, next_event)
}

#[test]
fn kubectl_should_work_on_etcd_and_a_restarted_server_should_find_its_data() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut s = start_server(&dir, &etcd);

    let out = s.kubectl_stdin(&["create", "-f", "-"], CONFIGMAP);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.ok(&["get", "cm", "c1", "-o", "name"]).trim(),
        "configmap/c1"
    );

    // A watch from the start; the existing object's ADDED line shows it is established.
    let (mut watch, mut next_event) = watch_configmaps(&s);
    assert_eq!(next_event(), ("ADDED".into(), "c1".into()));

    s.ok(&["label", "cm", "c1", "tier=x"]);
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    s.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/data/a"}]"#,
    ]);
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2}\ndata: {k: v1}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2}\ndata: {k: v2}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&["create", "configmap", "gone", "--from-literal=x=y"]);
    s.ok(&["delete", "cm", "gone"]);

    let mut seen = Vec::new();
    while seen.len() < 7 {
        seen.push(next_event());
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let names = |kind: &str, name: &str| (kind.to_owned(), name.to_owned());
    assert_eq!(
        seen,
        [
            names("MODIFIED", "c1"),
            names("MODIFIED", "c1"),
            names("MODIFIED", "c1"),
            names("ADDED", "c2"),
            names("MODIFIED", "c2"),
            names("ADDED", "gone"),
            names("DELETED", "gone"),
        ]
    );

    let c1 = json(&s, &["get", "cm", "c1", "-o", "json"]);
    assert_eq!(c1["data"], serde_json::json!({"b": "2"}));
    assert_eq!(c1["metadata"]["labels"]["tier"], "x");
    let c2 = json(&s, &["get", "cm", "c2", "-o", "json"]);
    assert_eq!(c2["data"]["k"], "v2");

    // The object sits in etcd under kube-apiserver's key, its resourceVersion the etcd revision
    // as the backend reports it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stored = runtime.block_on(async {
        let store = setpoint_store::EtcdStore::connect(etcd.config().without_auto_compaction())
            .await
            .unwrap();
        store.get(b"/registry/configmaps/default/c1").await.unwrap()
    });
    let stored = stored.expect("the object under /registry/configmaps/default/c1");
    assert_eq!(
        c1["metadata"]["resourceVersion"].as_str().unwrap(),
        stored.mod_revision.to_string()
    );

    // A new server on the same etcd (and a fresh data directory of its own) finds everything.
    s.kill();
    let dir2 = tmp.path().join("data2");
    let s = start_server(&dir2, &etcd);
    let again = json(&s, &["get", "cm", "c1", "-o", "json"]);
    assert_eq!(again["data"], c1["data"]);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        c1["metadata"]["resourceVersion"]
    );
    assert_eq!(again["metadata"]["uid"], c1["metadata"]["uid"]);
    let listed = s.ok(&["get", "cm", "-o", "name"]);
    assert!(
        listed.contains("configmap/c2") && !listed.contains("configmap/gone"),
        "{listed}"
    );
    s.ok(&["delete", "cm", "c1", "--wait"]);
    s.fails(&["get", "cm", "c1"]);
}

#[test]
fn an_unreachable_etcd_should_be_an_error_not_a_hang() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let s = start_server(&tmp.path().join("data"), &etcd);
    s.ok(&["create", "configmap", "c", "--from-literal=x=y"]);
    drop(etcd);
    let err = s.fails(&[
        "create",
        "configmap",
        "d",
        "--from-literal=x=y",
        "--request-timeout=60s",
    ]);
    // The server's answer (kubectl's own timeout would not name etcd).
    assert!(err.contains("etcd"), "{err}");
    // The server itself is still up, and its health checks say what is wrong.
    s.ok(&["get", "--raw", "/livez/ping"]);
    let readyz = s.fails(&["get", "--raw", "/readyz"]);
    assert!(
        readyz.contains("InternalError") || readyz.contains("500"),
        "{readyz}"
    );

    // Starting a server on an etcd that is not there fails with a clear message.
    let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["server", "--data-dir"])
        .arg(tmp.path().join("other"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--store",
            "etcd",
            "--etcd-endpoints",
        ])
        .arg("http://127.0.0.1:9")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("connecting to etcd at http://127.0.0.1:9"),
        "{stderr}"
    );
}

#[test]
fn kubectl_should_work_on_an_etcd_with_default_flags() {
    // Regression (issue 14.12): on etcd 3.4 before 3.4.31 with default flags (no
    // `--experimental-watch-progress-notify-interval`), `setpoint server --store etcd` exited at
    // start with `504 (Timeout): Too large resource version: 4, current: 0`: the watch cache of
    // a quiet resource never learned that it was current. Consistent reads now go to etcd.
    let etcd = LocalEtcd::start_with_default_flags().unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().unwrap();
    let s = start_server(&tmp.path().join("data"), &etcd);

    // Quiet resources (nothing written to them since their caches loaded) list at once.
    assert!(s
        .ok(&["get", "ns", "-o", "name"])
        .contains("namespace/kube-system"));
    assert_eq!(s.ok(&["get", "pods", "-A", "-o", "name"]), "");
    assert_eq!(s.ok(&["get", "deployments", "-A", "-o", "name"]), "");

    let out = s.kubectl_stdin(&["create", "-f", "-"], CONFIGMAP);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&["create", "namespace", "quiet"]);
    assert_eq!(
        s.ok(&["get", "cm", "c1", "-o", "name"]).trim(),
        "configmap/c1"
    );
    assert_eq!(
        s.ok(&["get", "cm", "-l", "app=a", "-o", "name"]).trim(),
        "configmap/c1"
    );
    // A list at a revision the configmaps' cache has not seen (written to namespaces since).
    assert_eq!(
        s.ok(&[
            "get",
            "cm",
            "-o",
            "name",
            "--field-selector=metadata.name!=kube-root-ca.crt"
        ])
        .trim(),
        "configmap/c1"
    );
    assert_eq!(s.ok(&["get", "pods", "-n", "quiet", "-o", "name"]), "");

    // A watch from such a list's revision gets the changes after it.
    let (mut watch, mut next_event) = watch_configmaps(&s);
    assert_eq!(next_event(), ("ADDED".into(), "c1".into()));
    s.ok(&["create", "configmap", "c2", "--from-literal=x=y"]);
    assert_eq!(next_event(), ("ADDED".into(), "c2".into()));
    s.ok(&["delete", "configmap", "c1"]);
    assert_eq!(next_event(), ("DELETED".into(), "c1".into()));
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        s.ok(&[
            "get",
            "cm",
            "-o",
            "name",
            "--field-selector=metadata.name!=kube-root-ca.crt"
        ])
        .trim(),
        "configmap/c2"
    );
}

#[test]
fn a_startup_error_should_be_one_line_without_a_backtrace() {
    // Regression (issue 14.12): a configuration error at start printed anyhow's report with a
    // `Stack backtrace:` under RUST_BACKTRACE=1 (as scripts/check sets it).
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["server", "--data-dir"])
        .arg(tmp.path().join("data"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--store",
            "etcd",
            "--etcd-endpoints",
        ])
        .arg("http://127.0.0.1:9")
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(
            "setpoint: error: connecting to etcd at http://127.0.0.1:9 (check --etcd-endpoints"
        ),
        "{stderr}"
    );

    // A bad flag value is clap's usage error, also without a backtrace.
    let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["server", "--listen", "not-an-address"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not-an-address"), "{stderr}");
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");
}

/// Runs `setpoint migrate` and checks that it succeeds.
fn migrate(data_dir: &std::path::Path, to: &str, etcd: &LocalEtcd) {
    let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["migrate", "--data-dir"])
        .arg(data_dir)
        .args(["--to", to, "--etcd-endpoints", etcd.endpoint()])
        .output()
        .expect("run setpoint migrate");
    assert!(
        out.status.success(),
        "setpoint migrate --to {to} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn migrate_should_move_a_cluster_from_the_embedded_store_to_etcd_and_back() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut s = Server::start_in(&dir);
    s.ok(&["create", "namespace", "moved"]);
    s.ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        "moved",
        "--from-literal=k=v",
    ]);
    s.ok(&["create", "secret", "generic", "s", "--from-literal=p=q"]);
    let before = json(&s, &["get", "cm", "c", "-n", "moved", "-o", "json"]);
    s.kill();

    migrate(&dir, "etcd", &etcd);
    let mut s = start_server(&dir, &etcd);
    let on_etcd = json(&s, &["get", "cm", "c", "-n", "moved", "-o", "json"]);
    assert_eq!(on_etcd["data"], before["data"]);
    assert_eq!(on_etcd["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(
        json(&s, &["get", "secret", "s", "-o", "json"])["data"]["p"],
        "cQ=="
    );
    s.ok(&["label", "cm", "c", "-n", "moved", "on=etcd"]);
    s.kill();

    // A second migration into the same etcd is refused: it is not empty.
    let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
        .args(["migrate", "--data-dir"])
        .arg(&dir)
        .args(["--to", "etcd", "--etcd-endpoints", etcd.endpoint()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already holds objects"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Back into a fresh data directory's embedded store, with the change made on etcd.
    let back = tmp.path().join("back");
    migrate(&back, "embedded", &etcd);
    // The Secret moved encrypted: the new directory needs the key that reads it (a server
    // whose keys cannot read the stored Secrets refuses to start).
    std::fs::create_dir_all(back.join("pki")).unwrap();
    std::fs::copy(
        dir.join("pki/encryption-config.yaml"),
        back.join("pki/encryption-config.yaml"),
    )
    .unwrap();
    let s = Server::start_in(&back);
    let again = json(&s, &["get", "cm", "c", "-n", "moved", "-o", "json"]);
    assert_eq!(again["metadata"]["labels"]["on"], "etcd");
    assert_eq!(again["metadata"]["uid"], before["metadata"]["uid"]);
}
