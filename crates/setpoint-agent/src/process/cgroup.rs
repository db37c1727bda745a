//! Container cgroups: every process a container starts — whatever its session or process
//! group — is in the container's cgroup, so stopping the container can kill all of them.
//!
//! Layout: `<hierarchy>/setpoint/<root id>/<pod uid>-<container>-<run>`. `<hierarchy>` is the
//! first of these mounts (from `/proc/self/mountinfo`) where the agent can create its
//! directory: a cgroup v2 mount, a cgroup v1 hierarchy with the `freezer`, a named v1
//! hierarchy without controllers (`name=systemd`), the v1 `pids` hierarchy (never one whose
//! controllers limit resources: the container would leave the agent's limits). `<root id>` names the agent's root directory (a hash of its path), so agents with
//! different roots keep apart and `setpoint agent cleanup` finds a data directory's cgroups
//! even after the directory was deleted. No controller is ever enabled: these cgroups group
//! processes, they limit nothing.
//!
//! Joining ([`join`]): the shim moves itself into the run's cgroup, starts the container
//! (born in it, before its first instruction), and moves itself back to the cgroup it came
//! from, so the container and all it starts are inside and the shim is not when the cgroup is
//! killed.
//!
//! Killing ([`kill`]): `cgroup.kill` where the kernel has it (v2, Linux 5.14+); otherwise
//! freeze (v1 `freezer.state`, v2 `cgroup.freeze`, where present) so nothing forks meanwhile,
//! SIGKILL every process in `cgroup.procs`, thaw, and repeat until it is empty.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

/// The directory under a hierarchy that holds Setpoint's cgroups.
const SETPOINT_DIR: &str = "setpoint";
/// How often a kill checks whether the cgroup is empty.
const POLL: Duration = Duration::from_millis(10);

/// One run's cgroup: the hierarchy it is in and its directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCgroup {
    /// The mount point of its hierarchy.
    pub(crate) hierarchy: PathBuf,
    /// Its directory, under `hierarchy`.
    pub(crate) dir: PathBuf,
}

/// Where an agent's run cgroups go: `<hierarchy>/setpoint/<root id>`, created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupParent {
    hierarchy: PathBuf,
    dir: PathBuf,
}

impl CgroupParent {
    /// The parent for the agent whose root directory is `root_dir`, created in the first
    /// hierarchy that allows it; `None` if none does (no cgroup file system, or no right to
    /// write it): then containers are tracked without cgroups.
    pub(crate) fn create(root_dir: &Path) -> Option<CgroupParent> {
        let id = root_id(root_dir);
        for hierarchy in hierarchies() {
            let dir = hierarchy.join(SETPOINT_DIR).join(&id);
            match std::fs::create_dir_all(&dir) {
                Ok(()) => return Some(CgroupParent { hierarchy, dir }),
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot create a cgroup here");
                }
            }
        }
        None
    }

    /// The cgroup of run `n` of `container` of the pod with `pod_uid` (not yet created).
    pub(crate) fn run(&self, pod_uid: &str, container: &str, n: u32) -> RunCgroup {
        RunCgroup {
            hierarchy: self.hierarchy.clone(),
            dir: self.dir.join(format!("{pod_uid}-{container}-{n}")),
        }
    }

    /// The parent directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The mount point of its hierarchy.
    pub(crate) fn hierarchy(&self) -> &Path {
        &self.hierarchy
    }
}

/// Every existing `<hierarchy>/setpoint/<root id>` of the agent root `root_dir`, in every
/// mounted hierarchy (for cleaning up after an agent).
pub(crate) fn existing_parents(root_dir: &Path) -> Vec<PathBuf> {
    let id = root_id(root_dir);
    hierarchies()
        .into_iter()
        .map(|h| h.join(SETPOINT_DIR).join(&id))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The directories of the cgroups directly under `parent`.
pub(crate) fn children(parent: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(parent)
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                e.file_type().ok()?.is_dir().then(|| e.path())
            })
            .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// A short stable name for an agent root directory: FNV-1a of its absolute path (resolved
/// through symbolic links where it exists), in hex.
pub(crate) fn root_id(root_dir: &Path) -> String {
    let path = std::fs::canonicalize(root_dir)
        .or_else(|_| std::path::absolute(root_dir))
        .unwrap_or_else(|_| root_dir.to_owned());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The cgroup hierarchies mounted here that can hold containers' cgroups, best first.
fn hierarchies() -> Vec<PathBuf> {
    ranked_hierarchies()
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// The usable cgroup hierarchies with their rank: 0 a v2 mount (`cgroup.kill`, freezing); 1 a
/// v1 hierarchy with the freezer; 2 a named v1 hierarchy without controllers
/// (`name=systemd`); 3 the v1 `pids` hierarchy. Other v1 hierarchies (cpu, memory, …) are
/// never used: moving a container there would take it out of the limits the agent runs under.
fn ranked_hierarchies() -> Vec<(u8, PathBuf)> {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<(u8, PathBuf)> = mountinfo
        .lines()
        .filter_map(|line| {
            // `id parent dev root mountpoint options [optional…] - fstype source superoptions`
            let (before, after) = line.split_once(" - ")?;
            let mount_point = before.split(' ').nth(4)?;
            let mut after = after.split(' ');
            let fs_type = after.next()?;
            let options: Vec<&str> = after.nth(1).unwrap_or_default().split(',').collect();
            let has = |o: &str| options.contains(&o);
            let rank = match fs_type {
                "cgroup2" => 0,
                "cgroup" if has("freezer") => 1,
                "cgroup"
                    if options.iter().any(|o| o.starts_with("name="))
                        && options.iter().all(|o| {
                            matches!(
                                *o,
                                "rw" | "ro"
                                    | "relatime"
                                    | "noatime"
                                    | "nosuid"
                                    | "nodev"
                                    | "noexec"
                                    | "xattr"
                                    | "none"
                            ) || o.starts_with("name=")
                                || o.starts_with("release_agent=")
                        }) =>
                {
                    2
                }
                "cgroup"
                    if has("pids")
                        && options
                            .iter()
                            .filter(|o| !matches!(**o, "rw" | "ro"))
                            .count()
                            == 1 =>
                {
                    3
                }
                _ => return None,
            };
            Some((rank, PathBuf::from(unescape_mount_path(mount_point))))
        })
        .collect();
    found.sort_by_key(|(rank, _)| *rank);
    found
}

/// A mount point as mountinfo writes it (`\040` for a space, and so on).
pub(crate) fn unescape_mount_path(path: &str) -> String {
    let mut out = Vec::with_capacity(path.len());
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|_| bytes[i] == b'\\')
            .and_then(|o| std::str::from_utf8(o).ok())
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match octal {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The shim inside a run's cgroup, until it [`leaves`](Joined::leave).
#[derive(Debug)]
#[must_use = "the shim must leave the cgroup before the cgroup is killed"]
pub(crate) struct Joined {
    /// The cgroup the shim came from.
    original: PathBuf,
}

/// Creates `cgroup` and moves this process into it; what it starts from now on is born
/// inside. Fails (leaving the process where it was) if it cannot.
pub(crate) fn join(cgroup: &RunCgroup) -> io::Result<Joined> {
    let me = std::process::id();
    let original =
        current_cgroup(&cgroup.hierarchy, me).unwrap_or_else(|| cgroup.hierarchy.clone());
    std::fs::create_dir_all(&cgroup.dir)?;
    if let Err(e) = std::fs::write(cgroup.dir.join("cgroup.procs"), me.to_string()) {
        let _ = std::fs::remove_dir(&cgroup.dir);
        return Err(e);
    }
    Ok(Joined { original })
}

impl Joined {
    /// Moves this process back to the cgroup it came from.
    pub(crate) fn leave(self) -> io::Result<()> {
        std::fs::write(
            self.original.join("cgroup.procs"),
            std::process::id().to_string(),
        )
    }
}

/// The cgroup of `hierarchy` that process `pid` is in: the line of `/proc/<pid>/cgroup` whose
/// path, under `hierarchy`, lists `pid` in its `cgroup.procs`.
fn current_cgroup(hierarchy: &Path, pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let dir = hierarchy.join(path.trim_start_matches('/'));
        procs(&dir)
            .contains(&i32::try_from(pid).ok()?)
            .then_some(dir)
    })
}

/// The processes in the cgroup `dir` now (none if it does not exist).
pub(crate) fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Sends `signal` to every process in the cgroup `dir`; returns how many there were.
pub(crate) fn signal_all(dir: &Path, signal: Signal) -> usize {
    let pids = procs(dir);
    for pid in &pids {
        if let Some(pid) = Pid::from_raw(*pid) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
    pids.len()
}

/// Kills every process in the cgroup `dir` and waits (at most `wait`) until it is empty;
/// returns how many processes it held. Fails if processes remain.
pub(crate) fn kill(dir: &Path, wait: Duration) -> io::Result<usize> {
    kill_with(dir, wait, KillFile::UseIfPresent)
}

/// Whether [`kill_with`] may use `cgroup.kill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillFile {
    UseIfPresent,
    /// Signal each process (as on kernels without `cgroup.kill`); for tests.
    #[cfg_attr(not(test), allow(dead_code))]
    Ignore,
}

fn kill_with(dir: &Path, wait: Duration, kill_file_use: KillFile) -> io::Result<usize> {
    let deadline = Instant::now() + wait;
    let held = procs(dir).len();
    let kill_file = dir.join("cgroup.kill");
    let use_kill_file = kill_file_use == KillFile::UseIfPresent && kill_file.exists();
    loop {
        if procs(dir).is_empty() {
            return Ok(held);
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "processes remain in {} after SIGKILL",
                dir.display()
            )));
        }
        if !(use_kill_file && std::fs::write(&kill_file, "1").is_ok()) {
            let frozen = freeze(dir, true);
            signal_all(dir, Signal::KILL);
            if frozen {
                freeze(dir, false);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Freezes (or thaws) the cgroup `dir` if it can be; true if it did. Freezing waits (briefly)
/// for the cgroup to be frozen.
fn freeze(dir: &Path, frozen: bool) -> bool {
    let (file, value, done) = if dir.join("cgroup.freeze").exists() {
        ("cgroup.freeze", if frozen { "1" } else { "0" }, "frozen 1")
    } else if dir.join("freezer.state").exists() {
        (
            "freezer.state",
            if frozen { "FROZEN" } else { "THAWED" },
            "FROZEN",
        )
    } else {
        return false;
    };
    if std::fs::write(dir.join(file), value).is_err() {
        return false;
    }
    if frozen {
        let state = if file == "cgroup.freeze" {
            "cgroup.events"
        } else {
            "freezer.state"
        };
        let deadline = Instant::now() + Duration::from_millis(100);
        while Instant::now() < deadline
            && !std::fs::read_to_string(dir.join(state)).is_ok_and(|s| s.contains(done))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    true
}

/// Removes the (empty) cgroup `dir`, retrying briefly: the kernel may take a moment after its
/// last process exited. Missing is fine.
pub(crate) fn remove(dir: &Path) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_id_should_be_stable_and_differ_between_roots() {
        let a = root_id(Path::new("/nonexistent/setpoint/a"));
        assert_eq!(a, root_id(Path::new("/nonexistent/setpoint/a")));
        assert_ne!(a, root_id(Path::new("/nonexistent/setpoint/b")));
        assert_eq!(a.len(), 16);
    }

    /// The processes whose command line holds `arg`.
    fn with_arg(arg: &str) -> Vec<i32> {
        crate::process::proc::all_pids()
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                    && crate::process::proc::Stat::of(*pid).is_some_and(|s| !s.exited())
            })
            .collect()
    }

    #[test]
    fn kill_should_empty_a_cgroup_in_every_kind_of_hierarchy() {
        // Regression (issue 14.13): a process that left its container's session outlived it.
        // Here: a shell in a cgroup starts a `setsid` sleep; killing the cgroup kills both,
        // with `cgroup.kill` and without (freezing where the hierarchy can, else not).
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: moving processes between cgroups needs root");
            return;
        }
        let mut kinds_seen = Vec::new();
        for (rank, hierarchy) in ranked_hierarchies() {
            if kinds_seen.contains(&rank) {
                continue;
            }
            kinds_seen.push(rank);
            for kill_file in [KillFile::UseIfPresent, KillFile::Ignore] {
                let dir = hierarchy
                    .join("setpoint-test")
                    .join(format!("{}-{rank}-{kill_file:?}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("a test cgroup");
                let arg = format!("1002.{}{rank}{}", std::process::id(), kill_file as u8);
                let mut shell = std::process::Command::new("sh")
                    .args(["-c", &format!("read go; setsid sleep {arg} & sleep 1000")])
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .expect("sh");
                std::fs::write(dir.join("cgroup.procs"), shell.id().to_string())
                    .expect("moved into the cgroup");
                use std::io::Write as _;
                let _ = writeln!(shell.stdin.take().expect("stdin"), "go");
                let deadline = Instant::now() + Duration::from_secs(10);
                while with_arg(&arg).is_empty() || procs(&dir).len() < 3 {
                    assert!(
                        Instant::now() < deadline,
                        "{}: {:?}",
                        dir.display(),
                        procs(&dir)
                    );
                    std::thread::sleep(POLL);
                }
                let killed = kill_with(&dir, Duration::from_secs(10), kill_file);
                let _ = shell.wait();
                let left = with_arg(&arg);
                let _ = remove(&dir);
                assert_eq!(killed.ok(), Some(3), "{}", dir.display());
                assert!(left.is_empty(), "{}: {left:?} survived", dir.display());
            }
            let _ = std::fs::remove_dir(hierarchy.join("setpoint-test"));
        }
        if kinds_seen.is_empty() {
            eprintln!("skipped: no usable cgroup hierarchy here");
        }
    }

    #[test]
    fn mount_paths_should_be_unescaped() {
        assert_eq!(unescape_mount_path(r"/a\040b/c"), "/a b/c");
        assert_eq!(unescape_mount_path(r"/plain\x"), r"/plain\x");
    }
}
