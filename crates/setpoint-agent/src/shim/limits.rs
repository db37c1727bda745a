//! The shim's resource and identity steps around starting the container: creating the run's
//! limit cgroups (`process/limits.rs`), writing their limits and joining them (with the
//! container's `oom_score_adj` set on the shim, which the container inherits), then leaving
//! them and restoring the shim's own score once the container is started; afterwards telling
//! whether the OOM killer struck in the container's memory cgroup, and removing the cgroups.
//! Also the user, group and supplementary groups the container's process is started as,
//! through a helper invocation of the shim's own program (std's `Command` cannot set
//! supplementary groups, and `pre_exec` is off limits).

use std::ffi::OsString;
use std::process::{Command, ExitCode};

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
                let warnings = limits::apply(cg, limits)
                    .map_err(|e| format!("limiting the cgroup {}: {e}", dir.display()))?;
                for warning in warnings {
                    eprintln!("setpoint agent-shim: {}: {warning}", dir.display());
                }
                Ok(())
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

/// The shim's argument that makes it the identity helper (see [`exec_as_main`]).
pub(crate) const EXEC_AS: &str = "--exec-as";

/// The program and arguments that start `program args`: themselves, or — with `run_as` —
/// this shim's own program as the identity helper, `… --exec-as UID GID GROUPS -- program
/// args`, which takes the identity and then becomes the container's program (the same
/// process).
pub(crate) fn wrapped(
    program: &str,
    args: &[String],
    run_as: Option<&RunAs>,
) -> (String, Vec<String>) {
    let Some(run_as) = run_as else {
        return (program.to_owned(), args.to_vec());
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    // The words before `--spec` after the program: `agent-shim` for `setpoint agent-shim`.
    let mut wrapped: Vec<String> = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--spec")
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let groups: Vec<String> = run_as.groups.iter().map(u32::to_string).collect();
    wrapped.extend([
        EXEC_AS.to_owned(),
        run_as.uid.to_string(),
        run_as.gid.to_string(),
        groups.join(","),
        "--".to_owned(),
        program.to_owned(),
    ]);
    wrapped.extend(args.iter().cloned());
    (exe.to_string_lossy().into_owned(), wrapped)
}

/// The identity helper: `UID GID GROUPS -- program args…` (after [`EXEC_AS`]). In this fresh,
/// single-threaded process it sets the supplementary groups, the group and the user (rustix's
/// per-thread calls are the process's here), then executes the program in place. Returns only
/// on failure (exit 127, the reason on stderr, which is the container's log).
pub(crate) fn exec_as_main(args: &[OsString]) -> ExitCode {
    match exec_as(args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("setpoint agent-shim: {message}");
            ExitCode::from(127)
        }
    }
}

fn exec_as(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let usage = || "usage: --exec-as UID GID GROUPS -- PROGRAM [ARG…]".to_owned();
    let [uid, gid, groups, dashes, program, rest @ ..] = args else {
        return Err(usage());
    };
    if dashes != "--" {
        return Err(usage());
    }
    let number = |s: &OsString| s.to_str().and_then(|s| s.parse::<u32>().ok());
    let uid = number(uid).ok_or_else(usage)?;
    let gid = number(gid).ok_or_else(usage)?;
    let groups: Vec<rustix::process::Gid> = groups
        .to_str()
        .ok_or_else(usage)?
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| g.parse::<u32>().map(rustix::process::Gid::from_raw))
        .collect::<Result<_, _>>()
        .map_err(|_| usage())?;
    rustix::thread::set_thread_groups(&groups)
        .map_err(|e| format!("setting the supplementary groups {groups:?}: {e}"))?;
    rustix::thread::set_thread_res_gid(
        rustix::process::Gid::from_raw(gid),
        rustix::process::Gid::from_raw(gid),
        rustix::process::Gid::from_raw(gid),
    )
    .map_err(|e| format!("setting the group {gid}: {e}"))?;
    rustix::thread::set_thread_res_uid(
        rustix::process::Uid::from_raw(uid),
        rustix::process::Uid::from_raw(uid),
        rustix::process::Uid::from_raw(uid),
    )
    .map_err(|e| format!("setting the user {uid}: {e}"))?;
    let error = std::os::unix::process::CommandExt::exec(Command::new(program).args(rest));
    Err(format!("exec {program:?}: {error}"))
}
