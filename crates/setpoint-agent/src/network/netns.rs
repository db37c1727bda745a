//! Network namespaces pinned at files: created by a short-lived helper process (the shim
//! binary's `--netns-pin PIN` mode: a fresh single-threaded process, so `unshare` needs no
//! `unsafe` and touches no agent thread) that moves into a new network namespace,
//! bind-mounts it onto `PIN`, then becomes `ip -batch -` (exec) to configure it with the agent's
//! commands on its standard input. The namespace lives as long as the pin (and whatever
//! process is inside); [`unpin`] lazily unmounts and removes the pin.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The shim's `--netns-pin PIN` mode (arguments after the flag): create and pin a network
/// namespace, then run `ip -batch -` inside it on this process's standard input.
pub(crate) fn pin_main(args: Vec<OsString>) -> ExitCode {
    let [pin] = args.as_slice() else {
        eprintln!("usage: setpoint agent-shim --netns-pin PIN  (ip batch commands on stdin)");
        return ExitCode::from(2);
    };
    let pin = PathBuf::from(pin);
    if let Err(message) = create_pinned(&pin) {
        eprintln!("setpoint agent-shim: {message}");
        return ExitCode::FAILURE;
    }
    // Replaced by `ip` (which inherits the namespace and this process's standard input):
    // one process fewer than spawning it.
    let error = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(super::links::ip_program()).args(["-batch", "-"]),
    );
    eprintln!("setpoint agent-shim: running ip: {error}");
    ExitCode::FAILURE
}

fn create_pinned(pin: &Path) -> Result<(), String> {
    // `unshare` is deprecated in favour of an `unsafe` variant because of `CLONE_FILES`; only
    // `CLONE_NEWNET` is asked here, in a process that has started no thread.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNET)
        .map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
    if let Some(dir) = pin.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(pin)
        .map_err(|e| format!("creating {}: {e}", pin.display()))?;
    rustix::mount::mount_bind("/proc/thread-self/ns/net", pin)
        .map_err(|e| format!("pinning the namespace at {}: {e}", pin.display()))
}

/// Whether `pin` holds a pinned namespace (a mount of another file system than its
/// directory's).
pub(crate) fn is_pinned(pin: &Path) -> bool {
    let (Ok(file), Some(Ok(dir))) = (std::fs::metadata(pin), pin.parent().map(std::fs::metadata))
    else {
        return false;
    };
    file.dev() != dir.dev()
}

/// Unmounts (lazily) and removes the pin; the namespace goes when nothing else holds it.
pub(crate) fn unpin(pin: &Path) {
    while is_pinned(pin) {
        if rustix::mount::unmount(pin, rustix::mount::UnmountFlags::DETACH).is_err() {
            break;
        }
    }
    let _ = std::fs::remove_file(pin);
}
