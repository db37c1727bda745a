//! Resource metrics: the CPU and memory the node and each running container use, sampled from
//! `/proc` every `interval` (and on demand) and served as JSON on the agent's
//! `/metrics/resource` for the API server's `metrics.k8s.io` (`kubectl top`).
//!
//! How a container is measured: its shim leads a session of its own (`setsid`) and starts the
//! container in it, so the container's processes — the main one, its children, and any that
//! left the container's process group — are the other processes of that session (only a
//! process that starts a session of its own escapes). Per sample:
//! - CPU: the sum over those processes of `utime + stime + cutime + cstime` from
//!   `/proc/<pid>/stat` (`cutime`/`cstime` carry the time of children they reaped, so short
//!   lived children count), kept monotone across samples; the rate is its increase over the
//!   window. CPU of a process that exits without being reaped inside the container (an
//!   orphan reaped by init) is lost for the window it exits in.
//! - memory: the sum of their resident set sizes (`rss`, field 24), the working set for our
//!   purposes; pages shared between them are counted once per process.
//! - the node: busy time from `/proc/stat` and `MemTotal − MemAvailable` from `/proc/meminfo`.
//!
//! cgroups are not used: the agent runs where it may not create them (no cgroup v2 cpu or
//! memory controller on the machine this was written on, only v1 hierarchies), and `/proc`
//! needs no privilege. A report covers the window between the last two samples.

mod containers;
mod procfs;
mod report;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use containers::running_containers;
use procfs::{parse_machine_cpu, parse_machine_memory, processes_by_session, Units};
pub(crate) use report::ResourceReport;
use report::{ContainerSample, Sample, MIN_WINDOW};

/// How often the agent samples resource usage unless told otherwise (the kubelet's resource
/// metrics are as fresh; metrics-server scrapes every 15 s).
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(10);

/// Samples the node's and its containers' usage and keeps the latest report. Shared by the
/// sampling task and the HTTPS endpoint.
#[derive(Debug)]
pub(crate) struct Sampler {
    node_name: String,
    root: PathBuf,
    interval: Duration,
    units: Units,
    state: Mutex<State>,
}

/// The latest sample and the report of the window that ended with it.
#[derive(Debug, Default)]
struct State {
    /// The newest sample; `report` (if any) ends with it.
    latest: Option<Sample>,
    /// The report between the sample before `latest` and `latest`.
    report: Option<Arc<ResourceReport>>,
}

impl Sampler {
    /// A sampler for node `node_name` whose pods live under `root`, sampling every `interval`
    /// (at least [`MIN_WINDOW`]).
    pub(crate) fn new(node_name: &str, root: PathBuf, interval: Duration) -> Arc<Sampler> {
        Arc::new(Sampler {
            node_name: node_name.to_owned(),
            root,
            interval: interval.max(MIN_WINDOW),
            units: Units::of_this_machine(),
            state: Mutex::new(State::default()),
        })
    }

    /// Samples every `interval` until `shutdown` (skipping a tick that comes less than half an
    /// interval after an on-demand sample, so windows stay long).
    pub(crate) fn spawn(self: &Arc<Self>, shutdown: CancellationToken) {
        let sampler = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(sampler.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let mut state = sampler.state.lock().await;
                let recent = state
                    .latest
                    .as_ref()
                    .is_some_and(|s| s.instant.elapsed() < sampler.interval / 2);
                if !recent {
                    sampler.sample_into(&mut state).await;
                }
            }
        });
    }

    /// The latest report, sampling first if the latest sample is older than twice the interval
    /// (the sampling task is stuck), or there is no report yet and the first sample is at least
    /// [`MIN_WINDOW`] old. `None` until two samples exist. Cancel-safe.
    pub(crate) async fn current(&self) -> Option<Arc<ResourceReport>> {
        let mut state = self.state.lock().await;
        let age = state.latest.as_ref().map(|s| s.instant.elapsed());
        let stale = match age {
            None => true,
            Some(age) if state.report.is_none() => age >= MIN_WINDOW,
            Some(age) => age >= self.interval * 2,
        };
        if stale {
            self.sample_into(&mut state).await;
        }
        state.report.clone()
    }

    /// Takes a sample and, with the one before, makes the report. Cancel-safe: the state
    /// changes only once the sample is taken.
    async fn sample_into(&self, state: &mut State) {
        let root = self.root.clone();
        let units = self.units;
        let previous_containers = state
            .latest
            .as_ref()
            .map(|p| p.containers.clone())
            .unwrap_or_default();
        let taken =
            tokio::task::spawn_blocking(move || take_sample(&root, units, &previous_containers))
                .await;
        let sample = match taken {
            Ok(sample) => sample,
            Err(e) => {
                tracing::warn!(error = %e, "resource sampling failed");
                return;
            }
        };
        if let Some(previous) = &state.latest {
            state.report = Some(Arc::new(report::report(&self.node_name, previous, &sample)));
        }
        state.latest = Some(sample);
    }
}

/// Reads `/proc` once: the machine's figures and each running container's.
fn take_sample(
    root: &std::path::Path,
    units: Units,
    previous: &HashMap<report::ContainerKey, ContainerSample>,
) -> Sample {
    let at = chrono::Utc::now();
    let instant = Instant::now();
    let node_cpu_nanos = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_machine_cpu(&s))
        .map(|cpu| units.ticks_to_nanos(cpu.busy_ticks));
    let node_memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| parse_machine_memory(&s));
    let running = running_containers(root);
    let sessions = if running.is_empty() {
        HashMap::new()
    } else {
        processes_by_session(std::path::Path::new("/proc"))
    };
    let mut containers = HashMap::new();
    for container in running {
        let processes = sessions
            .get(&container.shim.pid)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|p| p.pid != container.shim.pid);
        let (ticks, pages) = processes.fold((0u64, 0u64), |(t, m), p| {
            (t.saturating_add(p.cpu_ticks), m.saturating_add(p.rss_pages))
        });
        let raw_cpu_nanos = units.ticks_to_nanos(ticks);
        let key = (container.pod, container.name, container.run);
        let cpu_nanos = ContainerSample::following(previous.get(&key), raw_cpu_nanos);
        containers.insert(
            key,
            ContainerSample {
                raw_cpu_nanos,
                cpu_nanos,
                memory_bytes: pages.saturating_mul(units.page_size),
                started_at: container.started_at,
            },
        );
    }
    Sample {
        at,
        instant,
        node_cpu_nanos,
        node_memory_bytes,
        containers,
    }
}
