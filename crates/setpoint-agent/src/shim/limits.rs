//! The shim's resource and identity steps around starting the container: creating the run's
//! limit cgroups (`process/limits.rs`), writing their limits and joining them (with the
//! container's `oom_score_adj` set on the shim, which the container inherits), then leaving
//! them and restoring the shim's own score once the container is started; afterwards telling
//! whether the OOM killer struck in the container's memory cgroup, and removing the cgroups.
//! Also the user and group the container's process is started as.

use std::process::Command;

use crate::process::cgroup::{self, Joined};
use crate::process::limits::{self, CgroupVersion, LimitCgroup, RunLimits};
use crate::process::RunAs;

const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// The shim inside a run's limit cgroups, until it [`leaves`](Entered::leave).
#[derive(Debug, Default)]
pub(crate) struct Entered {
    cgroups: Vec<LimitCgroup>,
    joined: Vec<Joined>,
    /// The shim's own `oom_score_adj`, to restore.
    own_score: Option<String>,
    /// The memory cgroup's OOM-kill count when the container started.
    oom_kills_before: Option<u64>,
}

/// Creates and writes the limit cgroups of `limits` and joins the v1 ones (a v2 one is the
/// tracking cgroup, which the shim joins next); sets the container's `oom_score_adj`. On
/// failure nothing is left joined or created.
pub(crate) fn enter(limits: Option<&RunLimits>) -> Result<Entered, String> {
    let Some(limits) = limits else {
        return Ok(Entered::default());
    };
    let mut entered = Entered::default();
    for cg in &limits.cgroups {
        let dir = &cg.cgroup.dir;
        let step = std::fs::create_dir_all(dir)
            .map_err(|e| format!("creating the cgroup {}: {e}", dir.display()))
            .and_then(|()| {
                entered.cgroups.push(cg.clone());
                limits::apply(cg, limits)
                    .map_err(|e| format!("limiting the cgroup {}: {e}", dir.display()))
            })
            .and_then(|()| match cg.version {
                CgroupVersion::V1 => cgroup::join(&cg.cgroup)
                    .map(|joined| entered.joined.push(joined))
                    .map_err(|e| format!("joining the cgroup {}: {e}", dir.display())),
                CgroupVersion::V2 => Ok(()),
            });
        if let Err(message) = step {
            let _ = entered.leave();
            entered.remove();
            return Err(message);
        }
    }
    if let Some(score) = limits.oom_score_adj {
        entered.own_score = std::fs::read_to_string(OOM_SCORE_ADJ)
            .ok()
            .map(|s| s.trim().to_owned());
        if let Err(e) = std::fs::write(OOM_SCORE_ADJ, score.to_string()) {
            eprintln!("setpoint agent-shim: setting oom_score_adj {score}: {e}");
            entered.own_score = None;
        }
    }
    entered.oom_kills_before = limits::oom_kills(&entered.cgroups);
    Ok(entered)
}

impl Entered {
    /// The run's limit cgroups (for its run record).
    pub(crate) fn cgroups(&self) -> &[LimitCgroup] {
        &self.cgroups
    }

    /// Moves the shim back out of the v1 limit cgroups and restores its `oom_score_adj`.
    pub(crate) fn leave(&mut self) -> Result<(), String> {
        if let Some(score) = self.own_score.take() {
            if let Err(e) = std::fs::write(OOM_SCORE_ADJ, &score) {
                eprintln!("setpoint agent-shim: restoring oom_score_adj {score}: {e}");
            }
        }
        let mut result = Ok(());
        for joined in self.joined.drain(..) {
            if let Err(e) = joined.leave() {
                result = Err(format!("leaving a limit cgroup: {e}"));
            }
        }
        result
    }

    /// Whether the OOM killer killed a process of the container since it started.
    pub(crate) fn oom_killed(&self) -> bool {
        match (self.oom_kills_before, limits::oom_kills(&self.cgroups)) {
            (Some(before), Some(now)) => now > before,
            (None, Some(now)) => now > 0,
            _ => false,
        }
    }

    /// Removes the (emptied) v1 limit cgroups; the v2 one is the tracking cgroup, removed
    /// with it.
    pub(crate) fn remove(&self) {
        for cg in &self.cgroups {
            if cg.version == CgroupVersion::V1 {
                if let Err(e) = cgroup::remove(&cg.cgroup.dir) {
                    eprintln!(
                        "setpoint agent-shim: removing {}: {e}",
                        cg.cgroup.dir.display()
                    );
                }
            }
        }
    }
}

/// Starts the container's process as `run_as`, if given (the shim runs as root then; the
/// agent refuses other users when it is not).
pub(crate) fn set_identity(command: &mut Command, run_as: Option<RunAs>) {
    if let Some(RunAs { uid, gid }) = run_as {
        std::os::unix::process::CommandExt::uid(command, uid);
        std::os::unix::process::CommandExt::gid(command, gid);
    }
}
