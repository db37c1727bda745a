//! Encryption at rest with real kubectl and `setpoint server`: on by default for Secrets
//! (`DATA_DIR/pki/encryption-config.yaml`, 0600), nothing of a Secret's value in the data
//! directory's files after a create and a replace while a ConfigMap's stays plain;
//! `setpoint encryption status` and `rotate` (the Secret reads after a restart with the new
//! key only); and, with etcd, `setpoint migrate` carrying the ciphertext into etcd, where a
//! server on etcd keeps encrypting (etcd's keys read raw, and its files, show no value).

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use setpoint_testenv::process::{setpoint_binary, Server};

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let needle = needle.as_bytes();
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|e| e.path()));
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// Asserts that neither `value` nor its base64 form is in any file under `dir`.
fn assert_nowhere(dir: &Path, value: &str) {
    for needle in [value.to_owned(), b64(value)[..20].to_owned()] {
        let found = files_containing(dir, &needle);
        assert!(found.is_empty(), "{needle:?} is in plaintext in {found:?}");
    }
}

/// `setpoint encryption ARGS…`: its stdout; panics on failure.
fn encryption(args: &[&str]) -> String {
    let out = Command::new(setpoint_binary())
        .arg("encryption")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setpoint encryption {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn secret_value(s: &Server, name: &str) -> String {
    let data = s.ok(&["get", "secret", name, "-o", "jsonpath={.data.k}"]);
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .unwrap(),
    )
    .unwrap()
}

const API_ONLY: [&str; 4] = ["--no-agent", "--controllers=", "--store", "embedded"];

#[test]
fn secrets_should_be_encrypted_on_disk_by_default_and_read_after_a_key_rotation() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut s = Server::start_with(&dir, "127.0.0.1:0", &API_ONLY);
    let config = dir.join("pki/encryption-config.yaml");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let (first, second, plain) = (
        "enc-first-3f9a1c",
        "enc-second-8b2d7e",
        "enc-cm-plain-41c6d0",
    );
    s.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        &format!("--from-literal=k={first}"),
    ]);
    let replacement = s.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        &format!("--from-literal=k={second}"),
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    let out = s.kubectl_stdin(&["replace", "-f", "-"], &replacement);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.ok(&[
        "create",
        "configmap",
        "c",
        &format!("--from-literal=k={plain}"),
    ]);
    assert_eq!(secret_value(&s, "s"), second);

    let store = dir.join("store");
    assert_nowhere(&store, first);
    assert_nowhere(&store, second);
    assert!(
        !files_containing(&store, plain).is_empty(),
        "ConfigMaps stay plain"
    );

    s.kill();
    let data_dir = dir.to_str().unwrap();
    let status = encryption(&["status", "--data-dir", data_dir]);
    let line = status
        .lines()
        .find(|l| l.starts_with("secrets ") && l.contains("aesgcm:key1"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(line.trim_end().ends_with(" 1"), "{status}");
    let rotated = encryption(&["rotate", "--data-dir", data_dir]);
    assert!(
        rotated.contains("rotated to key \"key2\": rewrote 1 objects"),
        "{rotated}"
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("name: key2") && !text.contains("name: key1"),
        "{text}"
    );
    let status = encryption(&["status", "--data-dir", data_dir]);
    assert!(
        status.contains("aesgcm:key2") && !status.contains("aesgcm:key1"),
        "{status}"
    );

    let s = Server::start_with(&dir, "127.0.0.1:0", &API_ONLY);
    assert_eq!(secret_value(&s, "s"), second);
    assert_nowhere(&store, second);
}

/// What `etcdctl get --prefix PREFIX` shows (etcdctl is not in the etcd-server package; the
/// store's own etcd client reads the same keys and values): each key and value, lossily as text.
#[cfg(feature = "etcd")]
fn etcd_get(etcd: &setpoint_store::LocalEtcd, prefix: &str) -> String {
    use setpoint_store::{EtcdStore, ListRequest, Store as _};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = EtcdStore::connect(etcd.config()).await.unwrap();
        let listed = store
            .list(ListRequest::prefix(prefix.to_owned()))
            .await
            .unwrap();
        listed
            .kvs
            .iter()
            .map(|kv| {
                format!(
                    "{}\n{}\n",
                    String::from_utf8_lossy(&kv.key),
                    String::from_utf8_lossy(&kv.value)
                )
            })
            .collect()
    })
}

#[cfg(feature = "etcd")]
#[test]
fn secrets_should_stay_encrypted_through_migrate_into_etcd_and_on_etcd() {
    let etcd = setpoint_store::LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut s = Server::start_with(&dir, "127.0.0.1:0", &API_ONLY);
    let (embedded_value, etcd_value, plain) = (
        "enc-embedded-5e0c2a",
        "enc-on-etcd-92d4b7",
        "enc-cm-etcd-1f7a3b",
    );
    s.ok(&[
        "create",
        "secret",
        "generic",
        "m",
        &format!("--from-literal=k={embedded_value}"),
    ]);
    s.kill();

    let out = Command::new(setpoint_binary())
        .args(["migrate", "--data-dir"])
        .arg(&dir)
        .args(["--to", "etcd", "--etcd-endpoints", etcd.endpoint()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let on_etcd = [
        "--no-agent",
        "--controllers=",
        "--store",
        "etcd",
        "--etcd-endpoints",
        etcd.endpoint(),
    ];
    let s = Server::start_with(&dir, "127.0.0.1:0", &on_etcd);
    assert_eq!(secret_value(&s, "m"), embedded_value);
    s.ok(&[
        "create",
        "secret",
        "generic",
        "e",
        &format!("--from-literal=k={etcd_value}"),
    ]);
    s.ok(&[
        "create",
        "configmap",
        "c",
        &format!("--from-literal=k={plain}"),
    ]);
    assert_eq!(secret_value(&s, "e"), etcd_value);

    let secrets = etcd_get(&etcd, "/registry/secrets/default/");
    assert_eq!(
        secrets.matches("k8s:enc:aesgcm:v1:key1:").count(),
        2,
        "{secrets}"
    );
    for value in [embedded_value, etcd_value] {
        assert!(
            !secrets.contains(value) && !secrets.contains(&b64(value)[..20]),
            "{secrets}"
        );
    }
    assert_nowhere(&etcd.data_dir(), embedded_value);
    assert_nowhere(&etcd.data_dir(), etcd_value);
    // The scans see what is there: the ConfigMap's value is plain in etcd and its files.
    assert!(etcd_get(&etcd, "/registry/configmaps/default/c").contains(plain));
    assert!(!files_containing(&etcd.data_dir(), plain).is_empty());

    // A second server with a data directory of its own (its own generated key) refuses to
    // start rather than fail every read of the cluster's Secrets.
    let out = Command::new(setpoint_binary())
        .args(["server", "--data-dir"])
        .arg(tmp.path().join("fresh"))
        .args(["--listen", "127.0.0.1:0"])
        .args(on_etcd)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("servers sharing a store must share its keys"),
        "{stderr}"
    );

    // Status reads etcd beside the running server.
    let status = encryption(&[
        "status",
        "--data-dir",
        dir.to_str().unwrap(),
        "--store",
        "etcd",
        "--etcd-endpoints",
        etcd.endpoint(),
    ]);
    assert!(
        status
            .lines()
            .any(|l| l.contains("aesgcm:key1") && l.trim_end().ends_with(" 2")),
        "{status}"
    );
}
