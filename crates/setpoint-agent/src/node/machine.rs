//! Facts about the machine the agent runs on, as the kubelet reports them: its resources
//! (`cpu`, `memory`, `ephemeral-storage`, `pods`) and its system info (kernel, OS image,
//! machine id, boot id, architecture).
//!
//! Every reader degrades gracefully: a fact that cannot be read (no `/proc`, no
//! `/etc/machine-id`) is left out or empty rather than failing registration.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::NodeSystemInfo;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The version the agent reports as `nodeInfo.kubeletVersion` (and kube-proxy's): the
/// Kubernetes API version Setpoint serves, marked as ours.
pub(crate) const KUBELET_VERSION: &str = "v1.33.0-setpoint";

/// Pods a node accepts unless told otherwise (the kubelet's `--max-pods` default).
pub(crate) const DEFAULT_MAX_PODS: u32 = 110;

/// The machine's resources: `cpu` (available parallelism), `memory` (`MemTotal` of
/// `/proc/meminfo`), `ephemeral-storage` (size of the file system holding `/`) and `pods`
/// ([`DEFAULT_MAX_PODS`]). Resources that cannot be read are left out.
pub(crate) fn capacity() -> BTreeMap<String, Quantity> {
    let mut capacity = BTreeMap::new();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    capacity.insert("cpu".to_owned(), Quantity(cpus.to_string()));
    if let Some(kib) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_kib(&text))
    {
        capacity.insert("memory".to_owned(), Quantity(format!("{kib}Ki")));
    }
    if let Ok(fs) = rustix::fs::statvfs("/") {
        let bytes = fs.f_blocks.saturating_mul(fs.f_frsize);
        if bytes > 0 {
            capacity.insert("ephemeral-storage".to_owned(), Quantity(bytes.to_string()));
        }
    }
    capacity.insert("pods".to_owned(), Quantity(DEFAULT_MAX_PODS.to_string()));
    capacity
}

/// `MemTotal` of a `/proc/meminfo` text, in KiB.
fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The architecture as Kubernetes names it (Go's `GOARCH`): `amd64`, `arm64`, ….
pub(crate) fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The system info of this machine, for `status.nodeInfo`.
pub(crate) fn system_info() -> NodeSystemInfo {
    let uname = rustix::system::uname();
    NodeSystemInfo {
        architecture: architecture().to_owned(),
        boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        container_runtime_version: format!("setpoint://{}", env!("CARGO_PKG_VERSION")),
        kernel_version: uname.release().to_string_lossy().into_owned(),
        kube_proxy_version: KUBELET_VERSION.to_owned(),
        kubelet_version: KUBELET_VERSION.to_owned(),
        machine_id: read_trimmed("/etc/machine-id"),
        operating_system: std::env::consts::OS.to_owned(),
        os_image: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|text| pretty_name(&text))
            .unwrap_or_default(),
        swap: None,
        system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid"),
    }
}

/// `PRETTY_NAME` of an `/etc/os-release` text, unquoted.
fn pretty_name(os_release: &str) -> Option<String> {
    os_release
        .lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_owned())
}

/// A one-line file's content, trimmed; empty if unreadable.
fn read_trimmed(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_should_yield_mem_total() {
        let text = "MemTotal:       16318504 kB\nMemFree:         1234 kB\n";
        assert_eq!(mem_total_kib(text), Some(16_318_504));
        assert_eq!(mem_total_kib("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn os_release_should_yield_unquoted_pretty_name() {
        let text = "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            pretty_name(text).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
    }

    #[test]
    fn capacity_should_always_report_cpu_and_pods() {
        let c = capacity();
        assert!(c.contains_key("cpu"), "{c:?}");
        assert_eq!(c.get("pods"), Some(&Quantity("110".to_owned())));
    }
}
