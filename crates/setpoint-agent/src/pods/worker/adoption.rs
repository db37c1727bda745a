//! Adoption: the containers that earlier agents started and left running (or that exited
//! while no agent watched) are taken over from the pod's directory, so an agent restart
//! neither restarts nor loses them.

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::time::Instant;

use super::super::probing::ContainerProbes;
use super::super::slot::{Run, Slot};
use super::Worker;
use crate::process::{find_latest_run, read_json, FoundRun, RunPaths, RunSpec};

impl Worker {
    /// For a pod gone from the API: the containers its directory records.
    pub(super) fn load_from_disk(&mut self) {
        self.loaded = true;
        let names: Vec<String> = std::fs::read_dir(self.dir.join("runs"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        for name in names {
            let slot = self.adopt_unspecified(name);
            self.main.push(slot);
        }
    }

    fn adopt_unspecified(&mut self, name: String) -> Slot {
        let mut slot = Slot::new(name.clone(), String::new());
        if let Some((n, found, previous)) = find_latest_run(&self.dir, &name) {
            slot.previous = previous;
            slot.latest = Some((n, self.adopted_run(&name, n, found, None)));
        }
        slot
    }

    pub(super) fn adopt(&mut self, pod: &Pod, container: Option<&Container>, name: String) -> Slot {
        let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
        let mut slot = Slot::new(name.clone(), image);
        if let Some((n, found, previous)) = find_latest_run(&self.dir, &name) {
            slot.previous = previous;
            let probes = container.map(|c| (pod, c));
            slot.latest = Some((n, self.adopted_run(&name, n, found, probes)));
        }
        slot
    }

    fn adopted_run(
        &self,
        name: &str,
        n: u32,
        found: FoundRun,
        container: Option<(&Pod, &Container)>,
    ) -> Run {
        match found {
            FoundRun::Running(record, watch) => {
                tracing::info!(pod = %self.label, container = name, pid = record.container_pid, "adopted a running container");
                let probes = match container {
                    Some((_, c)) => {
                        let spec = read_json::<RunSpec>(&RunPaths::new(&self.dir, name, n).spec)
                            .ok()
                            .flatten();
                        match spec {
                            Some(spec) => self.probes(c, spec.env, spec.working_dir),
                            None => ContainerProbes::default(),
                        }
                    }
                    None => ContainerProbes::default(),
                };
                Run::Running {
                    record,
                    _watcher: self.watch_exit(name, n, watch),
                    probes: Box::new(probes),
                }
            }
            FoundRun::Exited(exit) => Run::Exited {
                exit,
                at: Instant::now(),
            },
        }
    }
}
