//! Volumes end to end: a ConfigMap volume updated with `kubectl apply` while the process reads
//! it in a loop (its log shows the new value), and a claim of the default StorageClass
//! provisioned on the local node — a pod writes a file, the pod is deleted and recreated and
//! finds the file, then the claim is deleted and its volume and directory go (policy Delete).
//!
//! The server runs as whoever runs the tests: as root the containers see their volumes at
//! their mount paths; otherwise through `SETPOINT_MOUNT_*` (the commands below read the mount
//! path if it is there, else the variable, so they work both ways).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::processes::Cleanup;
use crate::common::Server;

fn wait_for(what: &str, mut check: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn logs(s: &Server, pod: &str) -> String {
    let out = s.kubectl(&["logs", pod]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn config_map(value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {{greeting: {value}}}\n")
}

#[test]
fn config_map_volume_should_be_updated_in_place_while_the_process_reads_it() {
    config_map_volume_updated_in_place(Server::start(), "auto");
}

#[test]
fn config_map_volume_should_be_updated_in_place_with_emulated_mounts() {
    let tmp = tempfile::tempdir().expect("a data directory");
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--mounts", "emulated"],
    );
    config_map_volume_updated_in_place(s, "emulated");
    drop(tmp);
}

fn config_map_volume_updated_in_place(s: Server, mode: &str) {
    let marker = format!("cm-volume-{mode}-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let mount = s.dir.join("mnt/settings");
    s.kubectl_stdin(&["apply", "-f", "-"], &config_map("hello-1"));
    let pod = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: reader}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: settings
    configMap: {{name: settings}}
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "while true; do if [ -e {mount}/greeting ]; then cat {mount}/greeting; else cat $SETPOINT_MOUNT_{var}/greeting; fi; echo; sleep 0.2; done # {marker}"]
    volumeMounts:
    - {{name: settings, mountPath: {mount}, readOnly: true}}
"#,
        mount = mount.display(),
        var = env_name(&mount),
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the first value in the log", || {
        logs(&s, "reader").contains("hello-1").then_some(())?;
        Some(String::new())
    });
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &config_map("hello-2"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = wait_for("the updated value in the log", || {
        let log = logs(&s, "reader");
        log.contains("hello-2").then_some(log)
    });
    // The switch is atomic: every line is one of the two values, never a mix or empty.
    for line in log.lines() {
        assert!(
            line == "hello-1" || line == "hello-2",
            "unexpected line {line:?} in {log}"
        );
    }
    if mode == "emulated" {
        let events = s.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=reader",
        ]);
        assert!(events.contains("MountsEmulated"), "{events}");
    }
    s.ok(&["delete", "pod", "reader", "--wait=true"]);
}

/// `SETPOINT_MOUNT_<PATH>`'s suffix for a mount path.
fn env_name(path: &Path) -> String {
    path.display()
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_owned()
}

fn writer_pod(name: &str, mount: &Path, marker: &str, script: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {{claimName: data}}
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "D={mount}; [ -d $D ] && [ \"$SETPOINT_MOUNT_MODE\" = namespace ] || D=$SETPOINT_MOUNT_{var}; {script}; sleep 1000 # {marker}"]
    volumeMounts:
    - {{name: data, mountPath: {mount}}}
"#,
        mount = mount.display(),
        var = env_name(mount),
    )
}

#[test]
fn claim_data_should_outlive_its_pod_and_go_with_the_claim() {
    let s = Server::start();
    let marker = format!("pvc-volume-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let mount = s.dir.join("mnt/data");
    let claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], claim);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // WaitForFirstConsumer: nothing is provisioned before a pod needs the claim.
    let phase = s.ok(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Pending");

    let pod = writer_pod(
        "writer",
        &mount,
        &marker,
        "echo kept-data > $D/file; echo wrote",
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the writer's log", || {
        logs(&s, "writer")
            .contains("wrote")
            .then_some(String::new())
    });
    let volume = s.ok(&["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"]);
    assert!(volume.starts_with("pvc-"), "{volume}");
    let class = s.ok(&[
        "get",
        "pvc",
        "data",
        "-o",
        "jsonpath={.spec.storageClassName}",
    ]);
    assert_eq!(class, "standard");
    let path = s.ok(&["get", "pv", &volume, "-o", "jsonpath={.spec.local.path}"]);
    assert!(Path::new(&path).join("file").exists(), "{path}/file");

    s.ok(&["delete", "pod", "writer", "--wait=true"]);
    let pod = writer_pod("reader", &mount, &marker, "cat $D/file");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the data in the new pod's log", || {
        logs(&s, "reader")
            .contains("kept-data")
            .then_some(String::new())
    });

    // The claim is kept while the pod uses it.
    s.ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(Path::new(&path).exists());
    let out = s.ok(&[
        "get",
        "pvc",
        "data",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(
        !out.is_empty(),
        "the claim is terminating, kept by pvc-protection"
    );

    s.ok(&["delete", "pod", "reader", "--wait=true"]);
    wait_for("the volume gone", || {
        let out = s.kubectl(&["get", "pv", &volume]);
        (!out.status.success()).then_some(String::new())
    });
    assert!(
        !Path::new(&path).exists(),
        "{path} must be deleted with its volume"
    );
}
