//! A pod's volumes on this node: prepared under the pod's directory (`<pod>/volumes/<name>`)
//! before its containers start, API-data volumes rewritten atomically at every sync of the
//! pod (and when a ConfigMap or Secret changes), unmounted and removed with the pod.
//!
//! How a container sees them is decided per agent ([`MountMode`], `docs/design/volumes.md`):
//! in a mount namespace of its own with each volume bind-mounted at its `mountPath`, or —
//! without the privilege to mount — through environment variables naming each volume's path
//! on the host. The variables are set in both modes:
//! - `SETPOINT_MOUNT_MODE`: `namespace` or `emulated`;
//! - `SETPOINT_VOLUME_<NAME>`: a mounted volume's directory on the host (`<NAME>` is the
//!   volume's name upper-cased, every other character than A-Z and 0-9 made `_`);
//! - `SETPOINT_MOUNT_<PATH>`: what a mount's `mountPath` shows (with its `subPath`), `<PATH>`
//!   being the mount path made a name the same way (`/etc/config` → `ETC_CONFIG`);
//! - `SETPOINT_MOUNTS`: all of them as one JSON object, mount path → host path.

mod atomic;
mod fs_group;
mod host;
pub(crate) mod local_path;
pub(crate) mod namespace;
mod sources;
mod token;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};
use setpoint_runtime::Client;

pub use host::LOCAL_PATH_ANNOTATION;
pub(crate) use sources::{ObjectSources, SourceError};
pub(crate) use token::ServiceAccountTokens;

/// How containers see their volumes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MountMode {
    /// In a mount namespace per container, volumes bind-mounted at their `mountPath`, when
    /// the agent runs as root; otherwise as [`Emulated`](Self::Emulated).
    #[default]
    Auto,
    /// No mounts: each container is told where its volumes are through environment
    /// variables, and `medium: Memory` emptyDirs are plain directories.
    Emulated,
}

impl MountMode {
    /// Whether this agent mounts (root, and not told to emulate).
    pub(crate) fn mounts(self) -> bool {
        self == MountMode::Auto && rustix::process::geteuid().is_root()
    }
}

/// One bind mount of a container: what the shim mounts where, in the container's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MountSpec {
    /// The directory or file on the host.
    pub(crate) source: PathBuf,
    /// The `mountPath`.
    pub(crate) target: PathBuf,
    /// Mounted read-only.
    #[serde(default)]
    pub(crate) read_only: bool,
}

/// What the volumes of a pod need from the agent.
#[derive(Debug, Clone)]
pub(crate) struct VolumeContext {
    /// The API (claims and their volumes are read through it).
    pub(crate) client: Client,
    /// ConfigMaps and Secrets.
    pub(crate) sources: ObjectSources,
    /// Whether the agent mounts (tmpfs emptyDirs, mount namespaces).
    pub(crate) mounts: bool,
}

/// A pod's prepared volumes: name → directory (or file) on the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PodVolumes {
    paths: BTreeMap<String, PathBuf>,
    /// Volumes rewritten at every sync (API data).
    refreshed: std::collections::BTreeSet<String>,
}

/// The result of preparing: the volumes, and notes for the pod's events (what is skipped or
/// not enforced).
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    /// The volumes.
    pub(crate) volumes: PodVolumes,
    /// One line per thing the user should know.
    pub(crate) notes: Vec<String>,
}

/// Where a pod's volumes live.
pub(crate) fn volumes_dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("volumes")
}

/// Prepares every volume of `pod` (again): directories and claims once (kept from
/// `previous`), API-data volumes rewritten if their data changed.
pub(crate) async fn prepare(
    ctx: &VolumeContext,
    pod: &Pod,
    pod_dir: &Path,
    previous: Option<&PodVolumes>,
) -> Result<Prepared, SourceError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = Prepared::default();
    let base = volumes_dir(pod_dir);
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let name = &volume.name;
        if let Some(rendered) = sources::render(&ctx.sources, pod, volume).await? {
            let dir = base.join(name);
            atomic::write(&dir, &rendered.payload)
                .map_err(|e| SourceError(format!("volume {name:?}: {e}")))?;
            out.notes.extend(rendered.skipped);
            give_to_fs_group(pod, &dir, true, &mut out.notes);
            out.volumes.paths.insert(name.clone(), dir);
            out.volumes.refreshed.insert(name.clone());
            continue;
        }
        if let Some(path) = previous.and_then(|p| p.paths.get(name)) {
            out.volumes.paths.insert(name.clone(), path.clone());
            continue;
        }
        let path = if let Some(spec) = &volume.empty_dir {
            let dir = base.join(name);
            if let Some(note) = host::empty_dir(&dir, spec, ctx.mounts)? {
                out.notes.push(format!("volume {name:?}: {note}"));
            }
            dir
        } else if let Some(spec) = &volume.host_path {
            host::host_path(spec).map_err(|e| SourceError(format!("volume {name:?}: {e}")))?
        } else if let Some(claim) = &volume.persistent_volume_claim {
            host::claim_path(&ctx.client, namespace, &claim.claim_name).await?
        } else {
            return Err(SourceError(format!(
                "volume {name:?}: this kind of volume is not supported by setpoint's agent (supported: emptyDir, configMap, secret, downwardAPI, projected, hostPath, persistentVolumeClaim)"
            )));
        };
        if volume.host_path.is_none() {
            give_to_fs_group(pod, &path, false, &mut out.notes);
        }
        out.volumes.paths.insert(name.clone(), path);
    }
    Ok(out)
}

/// Applies the pod's `fsGroup` (if any) to the volume at `path`; a failure is a note.
fn give_to_fs_group(pod: &Pod, path: &Path, read_only: bool, notes: &mut Vec<String>) {
    let fs_group = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref()?.fs_group);
    let Some(gid) = fs_group.and_then(|g| u32::try_from(g).ok()) else {
        return;
    };
    if let Err(e) = fs_group::apply(path, gid, read_only) {
        notes.push(format!(
            "fsGroup {gid} not applied to {}: {e}",
            path.display()
        ));
    }
}

/// Unmounts what the agent mounted under a pod's directory (memory emptyDirs), so that the
/// directory can be removed.
pub(crate) fn teardown(pod_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(volumes_dir(pod_dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if host::is_mount_point(&path) {
            if let Err(e) = rustix::mount::unmount(&path, rustix::mount::UnmountFlags::DETACH) {
                tracing::warn!(path = %path.display(), error = %e, "unmounting a pod's volume");
            }
        }
    }
}

/// A container's mounts, and the environment variables describing them.
pub(crate) type ContainerMounts = (Vec<MountSpec>, Vec<(String, String)>);

/// The mounts of `container` and the environment variables describing them. `lookup`
/// resolves `$(VAR)` in `subPathExpr`.
pub(crate) fn container_mounts(
    container: &Container,
    volumes: &PodVolumes,
    namespaces: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ContainerMounts, SourceError> {
    let mut mounts = Vec::new();
    let mut env = vec![(
        "SETPOINT_MOUNT_MODE".to_owned(),
        if namespaces { "namespace" } else { "emulated" }.to_owned(),
    )];
    let mut table = serde_json::Map::new();
    for mount in container.volume_mounts.iter().flatten() {
        let base = volumes.paths.get(&mount.name).ok_or_else(|| {
            SourceError(format!(
                "container {:?} mounts volume {:?}, which the pod does not have",
                container.name, mount.name
            ))
        })?;
        let sub_path = match (&mount.sub_path, &mount.sub_path_expr) {
            (Some(p), _) if !p.is_empty() => Some(p.clone()),
            (_, Some(expr)) if !expr.is_empty() => Some(crate::pods::expand(expr, lookup)),
            _ => None,
        };
        let source = match &sub_path {
            None => base.clone(),
            Some(sub) => sub_path_source(base, sub, volumes.refreshed.contains(&mount.name))?,
        };
        let target = PathBuf::from(&mount.mount_path);
        if !target.is_absolute() {
            return Err(SourceError(format!(
                "mountPath {:?} is not absolute",
                mount.mount_path
            )));
        }
        env.push((
            format!("SETPOINT_VOLUME_{}", env_name(&mount.name)),
            base.display().to_string(),
        ));
        env.push((
            format!("SETPOINT_MOUNT_{}", env_name(&mount.mount_path)),
            source.display().to_string(),
        ));
        table.insert(
            mount.mount_path.clone(),
            serde_json::Value::String(source.display().to_string()),
        );
        mounts.push(MountSpec {
            source,
            target,
            read_only: mount.read_only.unwrap_or(false),
        });
    }
    env.push((
        "SETPOINT_MOUNTS".to_owned(),
        serde_json::Value::Object(table).to_string(),
    ));
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    Ok((mounts, env))
}

/// The host path of `base/sub`: checked to stay inside the volume; created as a directory if
/// missing (as the kubelet does) unless the volume is API data, whose files are resolved
/// through their symlinks — such a mount shows the data of the container's start and is not
/// updated, as on Kubernetes.
fn sub_path_source(base: &Path, sub: &str, api_data: bool) -> Result<PathBuf, SourceError> {
    let relative = Path::new(sub);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(SourceError(format!(
            "subPath {sub:?} must be a relative path without '..'"
        )));
    }
    let joined = base.join(relative);
    if !api_data && std::fs::symlink_metadata(&joined).is_err() {
        std::fs::create_dir_all(&joined)
            .map_err(|e| SourceError(format!("creating subPath {}: {e}", joined.display())))?;
    }
    let resolved = joined
        .canonicalize()
        .map_err(|e| SourceError(format!("subPath {}: {e}", joined.display())))?;
    let root = base
        .canonicalize()
        .map_err(|e| SourceError(format!("volume {}: {e}", base.display())))?;
    if !resolved.starts_with(&root) {
        return Err(SourceError(format!(
            "subPath {sub:?} leads outside its volume"
        )));
    }
    Ok(resolved)
}

/// A name or path as an environment variable suffix: upper case, anything but A-Z and 0-9
/// made `_`, leading and trailing `_` dropped.
pub(crate) fn env_name(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    mapped.trim_matches('_').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_name_should_make_names_and_paths_variable_suffixes() {
        assert_eq!(env_name("config-vol"), "CONFIG_VOL");
        assert_eq!(env_name("/etc/config"), "ETC_CONFIG");
        assert_eq!(env_name("/data/"), "DATA");
    }

    #[test]
    fn sub_path_should_stay_inside_the_volume() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().join("vol");
        std::fs::create_dir_all(&base).expect("vol");
        let made = sub_path_source(&base, "a/b", false).expect("made");
        assert!(made.is_dir());
        assert!(sub_path_source(&base, "../x", false).is_err());
        assert!(sub_path_source(&base, "/etc", false).is_err());
        std::os::unix::fs::symlink("/etc", base.join("escape")).expect("link");
        assert!(sub_path_source(&base, "escape", false).is_err());
    }

    #[test]
    fn container_mounts_should_describe_each_mount_in_the_environment() {
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/config", "readOnly": true}]
        }))
        .expect("container");
        let mut volumes = PodVolumes::default();
        volumes
            .paths
            .insert("cfg".to_owned(), PathBuf::from("/root/pods/x/volumes/cfg"));
        let (mounts, env) =
            container_mounts(&container, &volumes, false, &|_| None).expect("mounts");
        assert_eq!(mounts.len(), 1);
        assert!(mounts[0].read_only);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SETPOINT_MOUNT_MODE"), Some("emulated"));
        assert_eq!(get("SETPOINT_VOLUME_CFG"), Some("/root/pods/x/volumes/cfg"));
        assert_eq!(
            get("SETPOINT_MOUNT_ETC_CONFIG"),
            Some("/root/pods/x/volumes/cfg")
        );
        assert_eq!(
            get("SETPOINT_MOUNTS"),
            Some(r#"{"/etc/config":"/root/pods/x/volumes/cfg"}"#)
        );
        let missing: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]
        }))
        .expect("container");
        assert!(container_mounts(&missing, &volumes, false, &|_| None).is_err());
    }
}
