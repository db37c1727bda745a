//! The shim's network step: before the mount namespace and the spawn, join the pod's
//! network namespace (`RunSpec::netns`, pinned by the agent) and, with a hostname to set
//! (`RunSpec::hostname`), move into a UTS namespace of its own carrying the pod's hostname.

use crate::process::RunSpec;

/// Joins the spec's network namespace and sets its hostname; an error means the container
/// must not start (it would run on the host's network).
pub(crate) fn enter(spec: &RunSpec) -> Result<(), String> {
    if let Some(pin) = &spec.netns {
        let file = std::fs::File::open(pin)
            .map_err(|e| format!("opening the pod's network namespace {}: {e}", pin.display()))?;
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(|e| format!("joining the pod's network namespace {}: {e}", pin.display()))?;
    }
    if let Some(hostname) = &spec.hostname {
        // Only `CLONE_NEWUTS`, in a shim that has started no thread yet (see `netns.rs`).
        #[allow(deprecated)]
        rustix::thread::unshare(rustix::thread::UnshareFlags::NEWUTS)
            .map_err(|e| format!("unshare(CLONE_NEWUTS): {e}"))?;
        rustix::system::sethostname(hostname.as_bytes())
            .map_err(|e| format!("setting the hostname {hostname:?}: {e}"))?;
    }
    Ok(())
}
