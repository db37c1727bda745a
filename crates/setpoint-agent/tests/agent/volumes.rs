//! Volumes on the agent: API-data volumes written atomically and kept up to date, host-backed
//! volumes, a missing ConfigMap holding the pod back with `FailedMount`, and both mount
//! modes — emulated (paths in `SETPOINT_MOUNT_*`) and, when the tests run as root, mount
//! namespaces with bind mounts at each `mountPath`.

use std::os::unix::fs::PermissionsExt as _;

use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use setpoint_agent::MountMode;

use super::*;

fn is_root() -> bool {
    // SAFETY-free: the effective uid from /proc/self/status.
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

async fn create_config_map(h: &Harness, name: &str, data: serde_json::Value) {
    h.client
        .namespaced_api::<ConfigMap>(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "data": data}))
                .expect("a configmap"),
        )
        .await
        .expect("configmap created");
}

/// Waits until `path` holds text for which `check` is true; panics after 60 s.
async fn wait_file(path: &Path, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{}: timed out waiting for {what}; it holds {text:?}",
            path.display()
        );
        sleep(Duration::from_millis(100)).await;
    }
}

fn pod_dir(root: &Path, name: &str) -> PathBuf {
    let pods = root.join("pods");
    std::fs::read_dir(&pods)
        .expect("pods directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{NS}_{name}_")))
        })
        .unwrap_or_else(|| panic!("no directory for pod {name} under {}", pods.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_config_map_volume_should_follow_updates_through_the_environment() {
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Emulated).await;
    let work = tempfile::tempdir().expect("a working directory");
    create_config_map(&h, "cfg", json!({"greeting": "hello-1"})).await;
    h.create_pod(
        "reader",
        json!({
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
            "containers": [{
                "name": "app",
                "workingDir": work.path(),
                "command": ["sh", "-c",
                    "env | grep ^SETPOINT_ > env.txt; while true; do cat \"$SETPOINT_MOUNT_ETC_CFG/greeting\" > seen.tmp; mv seen.tmp seen.txt; sleep 0.1; done"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]
            }]
        }),
    )
    .await;
    wait_file(&work.path().join("seen.txt"), "the first value", |t| {
        t == "hello-1"
    })
    .await;
    let env = std::fs::read_to_string(work.path().join("env.txt")).expect("env.txt");
    assert!(env.contains("SETPOINT_MOUNT_MODE=emulated"), "{env}");
    assert!(env.contains("SETPOINT_VOLUME_CFG="), "{env}");
    assert!(env.contains("SETPOINT_MOUNTS={\"/etc/cfg\":"), "{env}");

    // The volume's files are symlinks through `..data`.
    let volume = pod_dir(h.root.path(), "reader").join("volumes/cfg");
    assert!(std::fs::symlink_metadata(volume.join("greeting"))
        .expect("greeting")
        .file_type()
        .is_symlink());
    assert!(std::fs::read_link(volume.join("..data")).is_ok());

    h.client
        .namespaced_api::<ConfigMap>(NS)
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"greeting": "hello-2"}})),
        )
        .await
        .expect("configmap updated");
    wait_file(&work.path().join("seen.txt"), "the updated value", |t| {
        t == "hello-2"
    })
    .await;

    // The pod says mounts are emulated.
    let events = h
        .client
        .namespaced_api::<Event>(NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("MountsEmulated")),
        "no MountsEmulated event: {:?}",
        events.items.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_config_map_should_hold_the_pod_with_failed_mount_until_it_exists() {
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Emulated).await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "waiting",
        json!({
            "volumes": [{"name": "cfg", "configMap": {"name": "later"}},
                        {"name": "opt", "configMap": {"name": "never", "optional": true}}],
            "containers": [{
                "name": "app",
                "workingDir": work.path(),
                // opt.txt first: once seen.txt holds the value, opt.txt is complete.
                "command": ["sh", "-c", "ls \"$SETPOINT_VOLUME_OPT\" > opt.txt; cat \"$SETPOINT_VOLUME_CFG/k\" > seen.txt; sleep 1000"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}, {"name": "opt", "mountPath": "/opt-cfg"}]
            }]
        }),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = h
            .client
            .namespaced_api::<Event>(NS)
            .list(&ListParams::default())
            .await
            .expect("events");
        if events.items.iter().any(|e| {
            e.reason.as_deref() == Some("FailedMount")
                && e.note.as_deref().is_some_and(|n| n.contains("\"later\""))
        }) {
            break;
        }
        assert!(Instant::now() < deadline, "no FailedMount event");
        sleep(Duration::from_millis(100)).await;
    }
    let pod = h.pods().get("waiting").await.expect("pod");
    assert_eq!(phase(&pod), "Pending");
    assert!(
        !work.path().join("seen.txt").exists(),
        "the container must not start"
    );

    create_config_map(&h, "later", json!({"k": "v"})).await;
    wait_file(
        &work.path().join("seen.txt"),
        "the container to start",
        |t| t == "v",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(work.path().join("opt.txt")).expect("opt.txt"),
        "",
        "an optional missing ConfigMap is an empty volume"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_downward_api_projected_and_host_path_should_be_written_with_their_modes() {
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Emulated).await;
    let work = tempfile::tempdir().expect("a working directory");
    let host = work.path().join("host-dir");
    h.client
        .namespaced_api::<Secret>(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cret", "other": "x"}}),
            )
            .expect("a secret"),
        )
        .await
        .expect("secret created");
    create_config_map(&h, "cfg", json!({"a": "1"})).await;
    h.client
        .namespaced_api::<k8s_openapi::api::core::v1::ServiceAccount>(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "files"}})).expect("an SA"),
        )
        .await
        .expect("SA created");
    h.create_pod(
        "files",
        json!({
            "serviceAccountName": "files",
            "volumes": [
                {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 0o400,
                    "items": [{"key": "token", "path": "dir/token"}]}},
                {"name": "down", "downwardAPI": {"items": [
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "proj", "projected": {"sources": [
                    {"configMap": {"name": "cfg"}},
                    {"secret": {"name": "creds", "items": [{"key": "other", "path": "other", "mode": 0o600}]}},
                    {"serviceAccountToken": {"path": "token"}}]}},
                {"name": "host", "hostPath": {"path": host, "type": "DirectoryOrCreate"}},
                {"name": "scratch", "emptyDir": {}}
            ],
            "containers": [{
                "name": "app",
                "workingDir": work.path(),
                "command": ["sh", "-c",
                    "cat $SETPOINT_MOUNT_SEC/dir/token $SETPOINT_MOUNT_DOWN/name $SETPOINT_MOUNT_PROJ/a $SETPOINT_MOUNT_PROJ/other > seen.txt; echo made > $SETPOINT_MOUNT_HOST/x; echo s > $SETPOINT_MOUNT_SCRATCH/y; sleep 1000"],
                "volumeMounts": [
                    {"name": "sec", "mountPath": "/sec"}, {"name": "down", "mountPath": "/down"},
                    {"name": "proj", "mountPath": "/proj"}, {"name": "host", "mountPath": "/host"},
                    {"name": "scratch", "mountPath": "/scratch"}]
            }]
        }),
    )
    .await;
    wait_file(&work.path().join("seen.txt"), "the files", |t| {
        t == "s3cretfiles1x"
    })
    .await;
    wait_file(&host.join("x"), "the hostPath write", |t| t == "made\n").await;
    let dir = pod_dir(h.root.path(), "files").join("volumes");
    let mode = |p: PathBuf| std::fs::metadata(p).expect("file").permissions().mode() & 0o777;
    assert_eq!(mode(dir.join("sec/dir/token")), 0o400);
    assert_eq!(mode(dir.join("down/name")), 0o644);
    assert_eq!(mode(dir.join("proj/other")), 0o600);
    // The token projection is written too (sa_tokens.rs checks the token itself).
    assert_eq!(mode(dir.join("proj/token")), 0o644);
    assert_eq!(
        std::fs::read_to_string(dir.join("scratch/y")).expect("y"),
        "s\n"
    );

    // Deleted, the pod's volumes go with its directory; the hostPath stays.
    h.delete_pod("files").await;
    h.wait_gone("files").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while dir.exists() {
        assert!(Instant::now() < deadline, "{} still exists", dir.display());
        sleep(Duration::from_millis(100)).await;
    }
    assert!(host.join("x").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_namespace_should_bind_volumes_at_their_mount_paths_when_root() {
    if !is_root() {
        eprintln!("skipped: mount namespaces need root");
        return;
    }
    let h = Harness::start_with(ContainerTracking::Auto, MountMode::Auto).await;
    let work = tempfile::tempdir().expect("a working directory");
    create_config_map(&h, "cfg", json!({"greeting": "hello-1"})).await;
    let data = work.path().join("mnt/data");
    let cfg = work.path().join("mnt/cfg");
    let mem = work.path().join("mnt/mem");
    h.create_pod(
        "mounted",
        json!({
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}},
                        {"name": "scratch", "emptyDir": {}},
                        {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
            "containers": [{
                "name": "app",
                "workingDir": work.path(),
                "command": ["sh", "-c", format!(
                    "echo $SETPOINT_MOUNT_MODE > mode.txt; echo written > {data}/x; \
                     if echo no > {cfg}/greeting 2>/dev/null; then echo rw > ro.txt; else echo ro > ro.txt; fi; \
                     if dd if=/dev/zero of={mem}/big bs=1024 count=2048 2>/dev/null; then echo fit > mem.txt; else echo full > mem.txt; fi; \
                     while true; do cat {cfg}/greeting > seen.tmp; mv seen.tmp seen.txt; sleep 0.1; done",
                    data = data.display(), cfg = cfg.display(), mem = mem.display())],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": cfg, "readOnly": true},
                    {"name": "scratch", "mountPath": data},
                    {"name": "mem", "mountPath": mem}]
            }]
        }),
    )
    .await;
    wait_file(&work.path().join("seen.txt"), "the first value", |t| {
        t == "hello-1"
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(work.path().join("mode.txt")).expect("mode"),
        "namespace\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("ro.txt")).expect("ro"),
        "ro\n",
        "a readOnly mount refuses writes"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("mem.txt")).expect("mem"),
        "full\n",
        "a 1Mi memory emptyDir refuses 2 MiB"
    );
    // The write went into the volume, through the bind mount; the host's mount point (made
    // by the shim) stays empty: the mount is only in the container's namespace.
    let volumes = pod_dir(h.root.path(), "mounted").join("volumes");
    assert_eq!(
        std::fs::read_to_string(volumes.join("scratch/x")).expect("x"),
        "written\n"
    );
    assert!(data.is_dir());
    assert!(
        !data.join("x").exists(),
        "the mount must not leak to the host"
    );

    h.client
        .namespaced_api::<ConfigMap>(NS)
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"greeting": "hello-2"}})),
        )
        .await
        .expect("configmap updated");
    wait_file(&work.path().join("seen.txt"), "the updated value", |t| {
        t == "hello-2"
    })
    .await;

    h.delete_pod("mounted").await;
    h.wait_gone("mounted").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while volumes.exists() {
        assert!(
            Instant::now() < deadline,
            "{} still exists",
            volumes.display()
        );
        sleep(Duration::from_millis(100)).await;
    }
}
