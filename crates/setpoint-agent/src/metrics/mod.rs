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
//! A container with limit cgroups (`process/limits.rs`: the agent may write them) is measured
//! from their counters instead, as the kubelet does: CPU from v1 `cpuacct.usage` or v2
//! `cpu.stat usage_usec` (every process it ever started, counted exactly), memory as the
//! working set, usage (v1 `memory.usage_in_bytes`, v2 `memory.current`) minus inactive file
//! cache (`memory.stat`). `/proc` is the fallback, needing no privilege. A report covers the
//! window between the last two samples.
//!
//! A container that has just started is sampled at once, not at the next tick: the pod
//! worker calls [`Sampler::container_started`] before it reports the container running, so a
//! report asked for after the pod shows `Running` includes it, and the sampling task samples
//! as soon as the latest sample is [`MIN_WINDOW`] old.

mod containers;
mod procfs;
mod report;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify};
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
    /// How many containers have started (ever): bumped by [`Sampler::container_started`].
    started: AtomicU64,
    /// Wakes the sampling task when a container has started.
    started_notify: Notify,
    state: Mutex<State>,
}

/// The latest sample and the report of the window that ended with it.
#[derive(Debug, Default)]
struct State {
    /// The newest sample; `report` (if any) ends with it.
    latest: Option<Sample>,
    /// The sample `report`'s window starts with: the one before `latest`, or an older one
    /// when `latest` followed its predecessor by less than [`MIN_WINDOW`] (a sample taken
    /// for a new container), so that windows stay at least that long.
    base: Option<Sample>,
    /// The report between `base` and `latest`.
    report: Option<Arc<ResourceReport>>,
    /// The value of `Sampler::started` read before `latest` was taken: containers started
    /// since then may be missing from it.
    started_seen: u64,
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
            started: AtomicU64::new(0),
            started_notify: Notify::new(),
            state: Mutex::new(State::default()),
        })
    }

    /// Says a container has just started (its run record is written): the next report asked
    /// for samples first, so it includes the container, and the sampling task samples soon.
    pub(crate) fn container_started(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.started_notify.notify_one();
    }

    /// Samples every `interval` until `shutdown` (skipping a tick that comes less than half an
    /// interval after an on-demand sample, so windows stay long), and when a container has
    /// started (once the latest sample is [`MIN_WINDOW`] old).
    pub(crate) fn spawn(self: &Arc<Self>, shutdown: CancellationToken) {
        let sampler = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(sampler.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                    () = sampler.started_notify.notified() => {
                        sampler.sample_new_containers(&shutdown).await;
                        continue;
                    }
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

    /// Samples for containers started since the latest sample, once it is [`MIN_WINDOW`]
    /// old (so a burst of starts costs a sample per window, not one per container).
    async fn sample_new_containers(&self, shutdown: &CancellationToken) {
        let age = self
            .state
            .lock()
            .await
            .latest
            .as_ref()
            .map(|s| s.instant.elapsed());
        if let Some(wait) = age.and_then(|age| MIN_WINDOW.checked_sub(age)) {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
        let mut state = self.state.lock().await;
        if state.started_seen != self.started.load(Ordering::SeqCst) {
            self.sample_into(&mut state).await;
        }
    }

    /// The latest report, sampling first if a container has started since the latest sample,
    /// if the latest sample is older than twice the interval (the sampling task is stuck), or
    /// if there is no report yet (once the first sample is [`MIN_WINDOW`] old: an agent that
    /// has just started answers a little later rather than not at all). `None` when no sample
    /// existed yet. Cancel-safe.
    pub(crate) async fn current(&self) -> Option<Arc<ResourceReport>> {
        let mut state = self.state.lock().await;
        let age = state.latest.as_ref().map(|s| s.instant.elapsed());
        let new_container = state.started_seen != self.started.load(Ordering::SeqCst);
        let stale = match age {
            None => true,
            Some(age) if state.report.is_none() => {
                if let Some(rest) = MIN_WINDOW.checked_sub(age) {
                    tokio::time::sleep(rest).await;
                }
                true
            }
            Some(_) if new_container => true,
            Some(age) => age >= self.interval * 2,
        };
        if stale {
            self.sample_into(&mut state).await;
        }
        state.report.clone()
    }

    /// Takes a sample and, with the one before (or, if that one is less than [`MIN_WINDOW`]
    /// old, the one it was measured from), makes the report. Cancel-safe: the state changes
    /// only once the sample is taken.
    async fn sample_into(&self, state: &mut State) {
        let started = self.started.load(Ordering::SeqCst);
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
        let latest_is_recent = state
            .latest
            .as_ref()
            .is_some_and(|l| sample.instant.saturating_duration_since(l.instant) < MIN_WINDOW);
        if !(latest_is_recent && state.base.is_some()) {
            state.base = state.latest.take();
        }
        if let Some(base) = &state.base {
            state.report = Some(Arc::new(report::report(&self.node_name, base, &sample)));
        }
        state.latest = Some(sample);
        state.started_seen = started;
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
        // The cgroups' counters where the container has them (every process it started,
        // exited ones' CPU included), else the sum over its live processes in /proc.
        let (cgroup_cpu, cgroup_memory) = crate::process::limits::usage(&container.limit_cgroups);
        let raw_cpu_nanos = cgroup_cpu.unwrap_or_else(|| units.ticks_to_nanos(ticks));
        let memory_bytes = cgroup_memory.unwrap_or_else(|| pages.saturating_mul(units.page_size));
        let key = (container.pod, container.name, container.run);
        let cpu_nanos = ContainerSample::following(previous.get(&key), raw_cpu_nanos);
        containers.insert(
            key,
            ContainerSample {
                raw_cpu_nanos,
                cpu_nanos,
                memory_bytes,
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
