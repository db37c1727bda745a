//! Which `kubectl` the tests run.
//!
//! The `kubectl` on these machines' PATH is Google Cloud SDK's version dispatcher: on every call
//! it asks the server for its version, then runs `kubectl.1.<minor>` from its own folder. That
//! is a second Go process and a second TLS connection per call; with a few thousand calls in a
//! test run it was about 40 % of the CPU that kubectl used. Tests therefore run the binary the
//! dispatcher would pick for a Setpoint server directly. Elsewhere (a plain kubectl on the
//! PATH) they run that one; `SETPOINT_KUBECTL` names another.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The minor version Setpoint's `/version` reports (`1.33`): what the dispatcher matches.
/// `kubectl_basics::discovery` checks that the server still says so.
pub const SERVED_MINOR: u32 = 33;

/// The `kubectl` program tests run: `SETPOINT_KUBECTL`; else, when the PATH's `kubectl` is a
/// version dispatcher, the `kubectl.1.<SERVED_MINOR>` beside it (what it would run); else
/// `kubectl` from the PATH.
pub fn kubectl_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        if let Some(named) = std::env::var_os("SETPOINT_KUBECTL") {
            return PathBuf::from(named);
        }
        match which_kubectl() {
            Some(on_path) if is_dispatcher(&on_path) => {
                kubectl_version(SERVED_MINOR).unwrap_or(on_path)
            }
            Some(on_path) => on_path,
            None => PathBuf::from("kubectl"),
        }
    })
}

/// A [`Command`] for [`kubectl_program`].
pub fn kubectl_command() -> Command {
    Command::new(kubectl_program())
}

/// The kubectl binaries of other minor versions (`kubectl.1.<minor>`), beside the one on the
/// PATH.
pub fn kubectl_version(minor: u32) -> Option<PathBuf> {
    let on_path = which_kubectl()?;
    let dir = std::fs::canonicalize(on_path).ok()?.parent()?.to_owned();
    let candidate = dir.join(format!("kubectl.1.{minor}"));
    candidate.exists().then_some(candidate)
}

/// Whether `kubectl` is the dispatcher (its client version ends in `-dispatcher`).
fn is_dispatcher(kubectl: &Path) -> bool {
    Command::new(kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("-dispatcher"))
}

fn which_kubectl() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("kubectl"))
        .find(|p| p.exists())
}
