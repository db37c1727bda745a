//! What starting a container run needs, prepared from the pod: the process (command and
//! environment resolved), its volume mounts and the pod's `/etc` files, its identity, limits
//! and cgroups, its namespaces — the [`RunSpec`] the shim is started with. A container whose
//! configuration cannot be resolved is held in `CreateContainerConfigError` instead.

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{Which, Worker};
use crate::pods::{env, resources};
use crate::process::{RunAs, RunPaths, RunSpec};

/// A run ready to launch.
pub(super) struct Prepared {
    /// What the shim is given.
    pub(super) spec: RunSpec,
    /// Where its records go.
    pub(super) paths: RunPaths,
    /// The run's number within its container.
    pub(super) n: u32,
    /// Whether an earlier run of the container exists (a restart).
    pub(super) restarting: bool,
    /// The process's working directory.
    pub(super) working_dir: PathBuf,
}

impl Worker {
    /// Prepares the next run of `container` (at `which`, `i`), or records in its slot why it
    /// cannot be started (none then).
    pub(super) async fn prepare_run(
        &mut self,
        pod: &Arc<Pod>,
        which: Which,
        i: usize,
        container: &Container,
    ) -> Option<Prepared> {
        let process = match env::resolve(&self.ctx.client, pod, container).await {
            Ok(process) => process,
            Err(e) => {
                self.slot_mut(which, i).blocked =
                    Some(("CreateContainerConfigError".to_owned(), e.0));
                return None;
            }
        };
        let Some(volumes) = &self.volumes else {
            return None;
        };
        let lookup = |name: &str| {
            process
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mount_namespace = self.ctx.volumes.mounts;
        let (mounts, mount_env) =
            match crate::volumes::container_mounts(container, volumes, mount_namespace, &lookup) {
                Ok(found) => found,
                Err(e) => {
                    self.slot_mut(which, i).blocked =
                        Some(("CreateContainerConfigError".to_owned(), e.0));
                    return None;
                }
            };
        let mut mounts = mounts;
        self.add_network_files(pod, container, &mut mounts);
        let run_as = match resources::run_as(pod, container) {
            Ok(run_as) => run_as,
            Err(message) => {
                let slot = self.slot_mut(which, i);
                if slot.blocked.as_ref().map(|(_, m)| m) != Some(&message) {
                    self.ctx.events.publish_for(
                        &**pod,
                        setpoint_runtime::EventDetails::warning("Failed", "Failed")
                            .with_note(format!("Error: {message}")),
                    );
                }
                self.slot_mut(which, i).blocked =
                    Some(("CreateContainerConfigError".to_owned(), message));
                return None;
            }
        };
        let mut process = process;
        for (name, value) in mount_env {
            match process.env.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = value,
                None => process.env.push((name, value)),
            }
        }
        let slot = self.slot_mut(which, i);
        slot.blocked = None;
        let (n, restarting) = match &slot.latest {
            None => (0, false),
            Some((n, _)) => (n + 1, true),
        };
        let working_dir = container
            .working_dir
            .as_ref()
            .map_or_else(|| self.dir.join("work"), PathBuf::from);
        let _ = std::fs::create_dir_all(&working_dir);
        let paths = RunPaths::new(&self.dir, &container.name, n);
        let tracking = self
            .ctx
            .cgroups
            .as_ref()
            .map(|parent| parent.run(&self.uid, &container.name, n));
        let mut limits = resources::run_limits(pod, container, resources::memory_capacity());
        if let Some(parent) = &self.ctx.limits {
            limits.cgroups = parent.run(&self.uid, &container.name, n, tracking.as_ref());
        }
        if let (Some(RunAs { uid, gid, .. }), None) = (&run_as, &container.working_dir) {
            // The process starts in its pod's work directory as that user.
            let _ = std::os::unix::fs::chown(&working_dir, Some(*uid), Some(*gid));
        }
        let spec = RunSpec {
            argv: process.argv,
            env: process.env,
            working_dir: working_dir.clone(),
            log: paths.log.clone(),
            run_record: paths.run_record.clone(),
            exit_record: paths.exit_record.clone(),
            cgroup: tracking,
            mounts,
            mount_namespace,
            netns: self.pod_network.as_ref().map(|n| n.netns.clone()),
            hostname: self
                .pod_network
                .as_ref()
                .map(|_| crate::network::files::uts_hostname(pod)),
            limits: Some(limits),
            run_as,
            attach: crate::shim::attach::AttachSpec::of(container),
            pid_namespace: self.run_pid_namespace(),
        };
        Some(Prepared {
            spec,
            paths,
            n,
            restarting,
            working_dir,
        })
    }
}
