//! Resource limits of container runs through cgroups: which hierarchy holds each controller,
//! the limit cgroups of a run, the files written into them, the OOM-kill counter and the
//! usage figures read back from them.
//!
//! Hierarchy per controller (`cpu`, `cpuacct`, `memory`): cgroup v2 only when the v2 mount
//! the container-tracking cgroups live in (see [`cgroup`](super::cgroup)) lists the
//! controller in its `cgroup.controllers` and it can be enabled in the `cgroup.subtree_control`
//! of every directory down to the agent's parent; then the run's tracking cgroup itself gets
//! the limits (a process is in one v2 cgroup only). Otherwise the v1 hierarchy mounted with
//! the controller: a run cgroup `<mount>/<agent's own cgroup>/setpoint/<root id>/<pod
//! uid>-<container>-<run>` in each, nested under the agent's own cgroup (from
//! `/proc/self/cgroup`) so the container stays within the agent's limits. A hybrid machine
//! whose v2 mount has no cpu/memory controllers uses v1 for them and v2 for tracking only.
//!
//! The shim creates the run's limit cgroups, writes the limits, and joins them with the
//! tracking cgroup before it starts the container (`shim/limits.rs`).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cgroup::{self, RunCgroup};

/// The CFS period the CPU limit is expressed in (µs), as the kubelet uses.
pub(crate) const CPU_PERIOD_US: u64 = 100_000;
/// The smallest CFS quota the kernel accepts (µs).
const MIN_CPU_QUOTA_US: u64 = 1_000;
/// `cpu.shares` bounds (v1), as the kubelet clamps them.
const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;

/// A resource controller the agent limits or reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Controller {
    /// CPU bandwidth (quota) and weight (shares).
    Cpu,
    /// CPU accounting (v1 only; v2 counts in `cpu.stat`).
    Cpuacct,
    /// Memory limit, OOM-kill counter, usage.
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Memory => "memory",
        }
    }
}

/// Which cgroup version a limit cgroup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum CgroupVersion {
    /// A v1 hierarchy: the shim joins it besides the tracking cgroup.
    V1,
    /// The v2 tracking cgroup itself: joined as the tracking cgroup.
    V2,
}

/// One cgroup of a run that limits or accounts resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LimitCgroup {
    /// v1 or v2.
    pub(crate) version: CgroupVersion,
    /// The controllers this cgroup is used for.
    pub(crate) controllers: Vec<Controller>,
    /// Its hierarchy and directory.
    pub(crate) cgroup: RunCgroup,
}

/// What a run is limited to, and the cgroups that do it (in the run's spec).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunLimits {
    /// `resources.limits.memory` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memory_bytes: Option<u64>,
    /// `resources.limits.cpu` in millicores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cpu_limit_milli: Option<u64>,
    /// `resources.requests.cpu` (defaulting to the limit) in millicores; none: the smallest
    /// weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cpu_request_milli: Option<u64>,
    /// The container's `oom_score_adj` (by its pod's QoS class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) oom_score_adj: Option<i32>,
    /// The cgroups to create, write and join.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cgroups: Vec<LimitCgroup>,
}

/// `cpu.shares` for a CPU request (kubelet's conversion: 1024 per core, within [2, 262144]).
pub(crate) fn cpu_shares(request_milli: Option<u64>) -> u64 {
    match request_milli {
        None | Some(0) => MIN_SHARES,
        Some(m) => (m.saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES),
    }
}

/// v2 `cpu.weight` for `cpu.shares` (the linear mapping of [2, 262144] onto [1, 10000]).
pub(crate) fn cpu_weight(shares: u64) -> u64 {
    1 + (shares.clamp(MIN_SHARES, MAX_SHARES) - MIN_SHARES) * 9_999 / (MAX_SHARES - MIN_SHARES)
}

/// The CFS quota (µs per [`CPU_PERIOD_US`]) for a CPU limit.
pub(crate) fn cpu_quota_us(limit_milli: u64) -> u64 {
    (limit_milli.saturating_mul(CPU_PERIOD_US) / 1000).max(MIN_CPU_QUOTA_US)
}

/// Writes `limits` into the files of `cg` (which exists). A CPU quota the kernel refuses (v1:
/// above a quota of the agent's own cgroup) is not fatal: it is returned as a warning.
pub(crate) fn apply(cg: &LimitCgroup, limits: &RunLimits) -> io::Result<Vec<String>> {
    let mut warnings = Vec::new();
    let dir = &cg.cgroup.dir;
    let shares = cpu_shares(limits.cpu_request_milli.or(limits.cpu_limit_milli));
    for controller in &cg.controllers {
        match (cg.version, controller) {
            (CgroupVersion::V1, Controller::Memory) => {
                if let Some(bytes) = limits.memory_bytes {
                    write(dir, "memory.limit_in_bytes", &bytes.to_string())?;
                    // No swap beyond the limit, where the kernel accounts swap.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        write(dir, "memory.memsw.limit_in_bytes", &bytes.to_string())?;
                    }
                }
            }
            (CgroupVersion::V1, Controller::Cpu) => {
                write(dir, "cpu.shares", &shares.to_string())?;
                if let Some(milli) = limits.cpu_limit_milli {
                    let quota = write(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())
                        .and_then(|()| {
                            write(dir, "cpu.cfs_quota_us", &cpu_quota_us(milli).to_string())
                        });
                    if let Err(e) = quota {
                        warnings.push(format!("CPU limit not applied: {e}"));
                    }
                }
            }
            (CgroupVersion::V2, Controller::Memory) => {
                if let Some(bytes) = limits.memory_bytes {
                    write(dir, "memory.max", &bytes.to_string())?;
                    if dir.join("memory.swap.max").exists() {
                        write(dir, "memory.swap.max", "0")?;
                    }
                }
                // The whole container dies on an OOM kill, as the kubelet sets it.
                if dir.join("memory.oom.group").exists() {
                    write(dir, "memory.oom.group", "1")?;
                }
            }
            (CgroupVersion::V2, Controller::Cpu) => {
                write(dir, "cpu.weight", &cpu_weight(shares).to_string())?;
                if let Some(milli) = limits.cpu_limit_milli {
                    let max = format!("{} {CPU_PERIOD_US}", cpu_quota_us(milli));
                    if let Err(e) = write(dir, "cpu.max", &max) {
                        warnings.push(format!("CPU limit not applied: {e}"));
                    }
                }
            }
            (_, Controller::Cpuacct) => {}
        }
    }
    Ok(warnings)
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(dir.join(file), value)
        .map_err(|e| io::Error::new(e.kind(), format!("writing {value} to {file}: {e}")))
}

/// How many times the OOM killer killed a process in the memory cgroup of `cgroups` (v1
/// `memory.oom_control`, v2 `memory.events`); `None` without a readable memory cgroup.
pub(crate) fn oom_kills(cgroups: &[LimitCgroup]) -> Option<u64> {
    let cg = memory_cgroup(cgroups)?;
    let (file, key) = match cg.version {
        CgroupVersion::V1 => ("memory.oom_control", "oom_kill"),
        CgroupVersion::V2 => ("memory.events", "oom_kill"),
    };
    keyed(&cg.cgroup.dir.join(file), key)
}

/// A container's usage read from its cgroups: cumulative CPU time (ns) and memory working set
/// (usage minus inactive file cache, bytes); each `None` where no cgroup accounts it.
pub(crate) fn usage(cgroups: &[LimitCgroup]) -> (Option<u64>, Option<u64>) {
    let cpu = cgroups.iter().find_map(|cg| match cg.version {
        CgroupVersion::V1 if cg.controllers.contains(&Controller::Cpuacct) => {
            read_number(&cg.cgroup.dir.join("cpuacct.usage"))
        }
        CgroupVersion::V2 if cg.controllers.contains(&Controller::Cpu) => {
            keyed(&cg.cgroup.dir.join("cpu.stat"), "usage_usec").map(|us| us.saturating_mul(1000))
        }
        _ => None,
    });
    let memory = memory_cgroup(cgroups).and_then(|cg| {
        let dir = &cg.cgroup.dir;
        let (usage, inactive) = match cg.version {
            CgroupVersion::V1 => (
                read_number(&dir.join("memory.usage_in_bytes"))?,
                keyed(&dir.join("memory.stat"), "total_inactive_file"),
            ),
            CgroupVersion::V2 => (
                read_number(&dir.join("memory.current"))?,
                keyed(&dir.join("memory.stat"), "inactive_file"),
            ),
        };
        Some(usage.saturating_sub(inactive.unwrap_or(0)))
    });
    (cpu, memory)
}

/// Removes the v1 limit cgroups of a lost run (its shim is gone), killing what is left in
/// them first; the v2 one is its tracking cgroup, removed with it.
pub(crate) fn remove_lost(cgroups: &[LimitCgroup]) {
    for cg in cgroups.iter().filter(|cg| cg.version == CgroupVersion::V1) {
        if let Err(e) = cgroup::kill(&cg.cgroup.dir, std::time::Duration::from_secs(5)) {
            tracing::warn!(error = %e, "killing what is left of a lost run");
        }
        let _ = cgroup::remove(&cg.cgroup.dir);
    }
}

fn memory_cgroup(cgroups: &[LimitCgroup]) -> Option<&LimitCgroup> {
    cgroups
        .iter()
        .find(|cg| cg.controllers.contains(&Controller::Memory))
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed cgroup file (`key value` lines).
fn keyed(path: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Where an agent's limit cgroups go: one parent directory per hierarchy used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LimitParent {
    parents: Vec<Parent>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Parent {
    version: CgroupVersion,
    controllers: Vec<Controller>,
    hierarchy: PathBuf,
    /// v1: the created parent directory; v2: unused (the tracking cgroup is the run's).
    dir: PathBuf,
}

impl LimitParent {
    /// The limit parents of the agent whose root directory is `root_dir`, whose tracking
    /// cgroups go under `tracking` (if any); created where the agent may. `None` if no
    /// controller can be used (no cgroup file system, or not allowed to write it): then limits
    /// are recorded, not enforced.
    pub(crate) fn create(
        root_dir: &Path,
        tracking: Option<&cgroup::CgroupParent>,
    ) -> Option<LimitParent> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut parents = Vec::new();
        let mut covered: Vec<Controller> = Vec::new();
        if let Some(tracking) = tracking {
            if let Some(v2) = v2_parent(tracking.hierarchy(), tracking.dir()) {
                covered.extend(&v2.controllers);
                parents.push(v2);
            }
        }
        let id = cgroup::root_id(root_dir);
        for (mount, controllers) in v1_mounts(&mountinfo) {
            let wanted: Vec<Controller> = controllers
                .into_iter()
                .filter(|c| !covered.contains(c))
                .collect();
            let Some(first) = wanted.first() else {
                continue;
            };
            let own_path = own_cgroup(&own, first.name()).unwrap_or_default();
            let dir = mount
                .join(own_path.trim_start_matches('/'))
                .join("setpoint")
                .join(&id);
            match std::fs::create_dir_all(&dir) {
                Ok(()) => {
                    covered.extend(&wanted);
                    parents.push(Parent {
                        version: CgroupVersion::V1,
                        controllers: wanted,
                        hierarchy: mount,
                        dir,
                    });
                }
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot create a limit cgroup here");
                }
            }
        }
        (!parents.is_empty()).then_some(LimitParent { parents })
    }

    /// The limit cgroups of run `n` of `container` of the pod `pod_uid`, whose tracking
    /// cgroup is `tracking` (not yet created).
    pub(crate) fn run(
        &self,
        pod_uid: &str,
        container: &str,
        n: u32,
        tracking: Option<&RunCgroup>,
    ) -> Vec<LimitCgroup> {
        self.parents
            .iter()
            .filter_map(|p| {
                let cgroup = match p.version {
                    CgroupVersion::V1 => RunCgroup {
                        hierarchy: p.hierarchy.clone(),
                        dir: p.dir.join(format!("{pod_uid}-{container}-{n}")),
                    },
                    CgroupVersion::V2 => tracking.filter(|t| t.hierarchy == p.hierarchy)?.clone(),
                };
                Some(LimitCgroup {
                    version: p.version,
                    controllers: p.controllers.clone(),
                    cgroup,
                })
            })
            .collect()
    }

    /// A description for the agent's log: `memory: v1 /sys/fs/cgroup/memory/…`, ….
    pub(crate) fn describe(&self) -> String {
        self.parents
            .iter()
            .map(|p| {
                let names: Vec<&str> = p.controllers.iter().map(|c| c.name()).collect();
                format!(
                    "{} {:?} {}",
                    names.join("+"),
                    p.version,
                    if p.version == CgroupVersion::V1 {
                        p.dir.display()
                    } else {
                        p.hierarchy.display()
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every existing v1 limit parent `<mount>/<own cgroup>/setpoint/<root id>` of the agent root
/// `root_dir` (for cleaning up after an agent).
pub(crate) fn existing_parents(root_dir: &Path) -> Vec<PathBuf> {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let id = cgroup::root_id(root_dir);
    v1_mounts(&mountinfo)
        .into_iter()
        .filter_map(|(mount, controllers)| {
            let own_path = own_cgroup(&own, controllers.first()?.name()).unwrap_or_default();
            let dir = mount
                .join(own_path.trim_start_matches('/'))
                .join("setpoint")
                .join(&id);
            dir.is_dir().then_some(dir)
        })
        .collect()
}

/// The v2 limits parent when `hierarchy` (the tracking hierarchy) is a v2 mount offering cpu
/// and/or memory: enables them in `cgroup.subtree_control` from the mount down to `dir` (the
/// tracking parent). `None` if it is not v2, offers neither, or enabling fails.
fn v2_parent(hierarchy: &Path, dir: &Path) -> Option<Parent> {
    let offered = std::fs::read_to_string(hierarchy.join("cgroup.controllers")).ok()?;
    let controllers: Vec<Controller> = [Controller::Cpu, Controller::Memory]
        .into_iter()
        .filter(|c| offered.split_whitespace().any(|o| o == c.name()))
        .collect();
    if controllers.is_empty() {
        return None;
    }
    let enable = controllers
        .iter()
        .map(|c| format!("+{}", c.name()))
        .collect::<Vec<_>>()
        .join(" ");
    let relative = dir.strip_prefix(hierarchy).ok()?;
    let mut at = hierarchy.to_owned();
    let mut steps = vec![at.clone()];
    for part in relative.components() {
        at.push(part);
        steps.push(at.clone());
    }
    for step in steps {
        if let Err(e) = std::fs::write(step.join("cgroup.subtree_control"), &enable) {
            tracing::info!(dir = %step.display(), error = %e, "cannot enable cgroup v2 controllers: limits use v1 where mounted");
            return None;
        }
    }
    Some(Parent {
        version: CgroupVersion::V2,
        controllers,
        hierarchy: hierarchy.to_owned(),
        dir: dir.to_owned(),
    })
}

/// The v1 hierarchies mounted with `cpu`, `cpuacct` or `memory`, with those controllers.
fn v1_mounts(mountinfo: &str) -> Vec<(PathBuf, Vec<Controller>)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mount_point = before.split(' ').nth(4)?;
            let mut after = after.split(' ');
            if after.next()? != "cgroup" {
                return None;
            }
            let options: Vec<&str> = after.nth(1).unwrap_or_default().split(',').collect();
            let controllers: Vec<Controller> =
                [Controller::Cpu, Controller::Cpuacct, Controller::Memory]
                    .into_iter()
                    .filter(|c| options.contains(&c.name()))
                    .collect();
            (!controllers.is_empty()).then(|| {
                (
                    PathBuf::from(cgroup::unescape_mount_path(mount_point)),
                    controllers,
                )
            })
        })
        .collect()
}

/// This process's cgroup path in the v1 hierarchy of `controller`, from `/proc/self/cgroup`
/// (`id:controllers:path` lines).
fn own_cgroup(proc_cgroup: &str, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_owned())
    })
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
