//! Pod networking on this node (`docs/design/pod-network.md`).
//!
//! In bridge mode (root, `--pod-network=bridge` or `auto`), the agent owns a bridge
//! (`spbr<hash of the node name>`) holding the first address of the node's `spec.podCIDR`
//! (the pods' gateway), and gives each pod that is not `hostNetwork`:
//! - a network namespace pinned at `<root>/netns/<pod uid>` ([`netns`]);
//! - a veth pair: `eth0` inside, `sp<12 hex of the uid>` on the bridge (hairpin on);
//! - an address from the file-backed allocator over the podCIDR ([`ipam`]), `lo` up, a
//!   default route via the gateway.
//!
//! The pod's containers join the namespace (the shim's `setns`, `RunSpec::netns`). Traffic
//! routed from the pods is fenced off the uplinks ([`links`]). Removing a pod deletes its
//! veth, unpins its namespace and releases its address; at start, what belongs to pods
//! without a directory any more (deleted while no agent ran) is swept.
//!
//! In host-network mode (not root, or `--pod-network=host`), pods share the host's network
//! as processes always did; the Node says so with the condition `PodNetworkIsolated=False`.

mod bench;
pub(crate) mod files;
mod ipam;
pub(crate) mod links;
pub(crate) mod netns;
mod startup;

pub(crate) use startup::{start as start_for_node, Startup, DEFAULT_CIDR_WAIT};

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use setpoint_core::cidr::Ipv4Cidr;
use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

pub use bench::{bench_pod_network, PodNetworkTimes};
pub(crate) use ipam::{Ipam, IpamError};
pub(crate) use links::LinkError;

/// The Node condition that says whether pods get network namespaces of their own.
pub(crate) const ISOLATION_CONDITION: &str = "PodNetworkIsolated";

/// How long an agent in bridge mode waits for its Node's `spec.podCIDR` before falling back
/// to the host's network.
pub(crate) const POD_CIDR_WAIT: Duration = Duration::from_secs(20);

/// How pods get their network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PodNetworkMode {
    /// Bridge mode when the agent runs as root, else host-network mode.
    #[default]
    Auto,
    /// A network namespace per pod on the agent's bridge (needs root).
    Bridge,
    /// Every pod on the host's network.
    Host,
}

impl PodNetworkMode {
    /// Whether this agent should try bridge mode; `Err` says why not (for the warning).
    pub(crate) fn wants_bridge(self) -> Result<(), &'static str> {
        match self {
            PodNetworkMode::Host => Err("--pod-network=host"),
            _ if !rustix::process::geteuid().is_root() => Err("the agent does not run as root"),
            _ => Ok(()),
        }
    }
}

/// Why pod networking failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NetworkError {
    /// A link, address, route or namespace could not be set up.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// No address could be allocated.
    #[error(transparent)]
    Ipam(#[from] IpamError),
}

/// The node's pod network in bridge mode.
#[derive(Debug)]
pub(crate) struct NodeNetwork {
    /// The bridge's interface name.
    pub(crate) bridge: String,
    /// The bridge's address: the pods' default gateway (and DNS resolver address).
    pub(crate) gateway: Ipv4Addr,
    /// The node's pod range.
    pub(crate) pod_cidr: Ipv4Cidr,
    netns_dir: PathBuf,
    ipam: Ipam,
    shim: Vec<OsString>,
    /// The owner lock of the root's network, held while this agent lives: another agent finds
    /// the bridge of a root whose lock it can take stale ([`links::claim_range`]).
    _owner: Option<std::fs::File>,
}

/// One pod's network, set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodNetwork {
    /// Its address.
    pub(crate) ip: Ipv4Addr,
    /// Its pinned namespace.
    pub(crate) netns: PathBuf,
}

/// A short stable hash (FNV-1a) of a name, for interface names and table numbers.
pub(crate) fn short_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The bridge of the agent of `node_name` with root directory `root` (≤ 15 characters;
/// several agents on one machine — test servers all name their node `local` — get
/// different bridges).
pub(crate) fn bridge_name(node_name: &str, root: &Path) -> String {
    format!(
        "spbr{:08x}",
        short_hash(&format!("{node_name}\0{}", root.display()))
    )
}

/// The host end of a pod's veth (≤ 15 characters).
pub(crate) fn veth_name(uid: &str) -> String {
    let hex: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    if hex.len() == 12 {
        format!("sp{hex}")
    } else {
        format!("sp{:08x}", short_hash(uid))
    }
}

impl NodeNetwork {
    /// Sets up the bridge, sysctls and fence for `pod_cidr` under `root_dir`, and sweeps what
    /// pods without a directory left behind.
    pub(crate) fn start(
        root_dir: &Path,
        node_name: &str,
        pod_cidr: Ipv4Cidr,
        shim: Vec<OsString>,
    ) -> Result<NodeNetwork, NetworkError> {
        let bridge = bridge_name(node_name, root_dir);
        let gateway = pod_cidr.host(1).ok_or_else(|| LinkError {
            what: format!("the pod range {pod_cidr}"),
            message: "too small for a gateway".to_owned(),
        })?;
        let owner = take_owner_lock(root_dir);
        {
            // Agents starting at once on one machine take turns to claim their ranges.
            let _lock = MachineLock::take();
            links::claim_range(&bridge, pod_cidr)?;
            links::ensure_bridge(&bridge, gateway, pod_cidr, root_dir)?;
        }
        links::ensure_fence(&bridge)?;
        let dir = root_dir.join("network");
        let ipam = Ipam::open(
            &dir.join("ipam")
                .join(pod_cidr.to_string().replace('/', "_")),
            pod_cidr,
        )?;
        let network = NodeNetwork {
            bridge,
            gateway,
            pod_cidr,
            netns_dir: dir.join("netns"),
            ipam,
            shim,
            _owner: owner,
        };
        network.sweep(&pod_uids(&root_dir.join("pods")));
        Ok(network)
    }

    /// The pinned namespace of pod `uid`, if it has one (for the agent's stream routes:
    /// port-forward dials from inside it).
    #[allow(dead_code)]
    pub(crate) fn netns_path(&self, uid: &str) -> Option<PathBuf> {
        let pin = self.pin(uid);
        netns::is_pinned(&pin).then_some(pin)
    }

    fn pin(&self, uid: &str) -> PathBuf {
        self.netns_dir.join(uid)
    }

    /// Sets up pod `uid`'s network, or finds it set up (after an agent restart); a half-made
    /// one (an agent that died midway) is removed and made again. Blocking: runs `ip`.
    pub(crate) fn add_pod(&self, uid: &str) -> Result<PodNetwork, NetworkError> {
        let ip = self.ipam.allocate(uid)?;
        let pin = self.pin(uid);
        let veth = veth_name(uid);
        if netns::is_pinned(&pin) && links::link_exists(&veth) {
            return Ok(PodNetwork { ip, netns: pin });
        }
        links::delete_link(&veth);
        netns::unpin(&pin);
        let result = self.create(uid, ip, &pin, &veth);
        if result.is_err() {
            links::delete_link(&veth);
            netns::unpin(&pin);
            self.ipam.release(uid);
        }
        result.map(|()| PodNetwork { ip, netns: pin })
    }

    fn create(&self, uid: &str, ip: Ipv4Addr, pin: &Path, veth: &str) -> Result<(), NetworkError> {
        let Some((program, args)) = self.shim.split_first() else {
            return Err(LinkError {
                what: "creating a network namespace".to_owned(),
                message: "no shim program".to_owned(),
            }
            .into());
        };
        let agent_pid = std::process::id();
        let pod_side = format!(
            "link set lo up\n\
             link add eth0 type veth peer name {veth} netns {agent_pid}\n\
             addr add {ip}/{prefix} dev eth0\n\
             link set eth0 up\n\
             route add default via {gateway} dev eth0\n",
            prefix = self.pod_cidr.prefix(),
            gateway = self.gateway,
        );
        let mut command = Command::new(program);
        command.args(args).arg("--netns-pin").arg(pin);
        links::run_with_input(
            command,
            &pod_side,
            &format!("creating the network namespace of pod {uid}"),
        )?;
        links::ip_batch(
            &format!(
                "link set {veth} master {bridge} up\nlink set {veth} type bridge_slave hairpin on\n",
                bridge = self.bridge
            ),
            false,
            &format!("attaching pod {uid} to the bridge"),
        )?;
        Ok(())
    }

    /// Removes pod `uid`'s network: its veth, its namespace's pin, its address. Blocking.
    pub(crate) fn remove_pod(&self, uid: &str) {
        links::delete_link(&veth_name(uid));
        netns::unpin(&self.pin(uid));
        self.ipam.release(uid);
    }

    /// Removes the networks of pods not in `live` (pins and addresses).
    pub(crate) fn sweep(&self, live: &BTreeSet<String>) {
        let mut owners: BTreeSet<String> = std::fs::read_dir(&self.netns_dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        owners.extend(self.ipam.allocations().into_iter().map(|(_, uid)| uid));
        for uid in owners.difference(live) {
            tracing::info!(pod = %uid, "removing the network of a pod that is gone");
            self.remove_pod(uid);
        }
    }
}

/// The file whose `flock` marks the agent rooted at a directory as alive.
pub(crate) fn owner_lock_path(root: &Path) -> PathBuf {
    root.join("network").join("owner.lock")
}

/// Takes the owner lock of `root`'s network (waiting up to 10 s for an agent of the same root
/// that is stopping in this process or exiting in another); `None`, with a warning, when it
/// cannot (the bridge then merely looks alive to other agents, as before the lock existed).
fn take_owner_lock(root: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = owner_lock_path(root);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let file = match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot open the network's owner lock");
            return None;
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Some(file),
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "another agent holds this root's network");
                return None;
            }
        }
    }
}

/// Whether an agent holds `root`'s owner lock. A root without the file (an agent from before
/// the lock existed) counts as held: only a lock that can be taken proves its owner gone.
pub(crate) fn owner_alive(root: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .write(true)
        .open(owner_lock_path(root))
    else {
        return true;
    };
    // Taken, then released when `file` closes.
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err()
}

/// Whether a pod of the agent rooted at `root` still runs: a shim (`agent-shim`) naming the
/// root in its command line. A crashed agent's pods keep running for the next agent to adopt,
/// so its bridge is not taken from them.
pub(crate) fn pods_running(root: &Path) -> bool {
    let pids = crate::process::proc::all_pids();
    // Not even this process: `/proc` cannot be read, so assume they may.
    pids.is_empty()
        || pids
            .into_iter()
            .any(|pid| crate::process::proc::is_shim_of(pid, root))
}

/// An exclusive lock shared by the agents of this machine (`flock` on a file in `/run`, or
/// the temporary directory), held while a range is claimed; best effort.
struct MachineLock {
    _file: Option<std::fs::File>,
}

impl MachineLock {
    fn take() -> MachineLock {
        let dir = if Path::new("/run").is_dir() {
            PathBuf::from("/run")
        } else {
            std::env::temp_dir()
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("setpoint-pod-network.lock"))
            .ok();
        if let Some(f) = &file {
            let _ = rustix::fs::flock(f, rustix::fs::FlockOperation::LockExclusive);
        }
        MachineLock { _file: file }
    }
}

/// Removes the bridge of the agent rooted at `root` (found by its alias), with its fence,
/// the pods' namespace pins and veths, and the address records (`setpoint agent cleanup`,
/// once every pod process is stopped).
pub(crate) fn remove_all(root: &Path) {
    let dir = root.join("network");
    if let Ok(pins) = std::fs::read_dir(dir.join("netns")) {
        for pin in pins.flatten() {
            if let Some(uid) = pin.file_name().to_str() {
                links::delete_link(&veth_name(uid));
            }
            netns::unpin(&pin.path());
        }
    }
    for bridge in links::bridges_of(root) {
        links::remove_bridge(&bridge);
    }
    let _ = std::fs::remove_dir_all(dir.join("ipam"));
}

/// The uids of the pod directories under `pods_dir` (`<namespace>_<name>_<uid>`).
fn pod_uids(pods_dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(pods_dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name();
                    Some(name.to_str()?.rsplit_once('_')?.1.to_owned())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (up to `limit`) for the Node to carry a pod range.
pub(crate) async fn wait_for_pod_cidr(
    client: &Client,
    node_name: &str,
    limit: Duration,
    shutdown: &CancellationToken,
) -> Option<Ipv4Cidr> {
    let api = client.api::<Node>();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Ok(Some(node)) = api.get_opt(node_name).await {
            let spec = node.spec.unwrap_or_default();
            let found = spec
                .pod_cidrs
                .iter()
                .flatten()
                .chain(spec.pod_cidr.iter())
                .find_map(|c| c.parse::<Ipv4Cidr>().ok());
            if found.is_some() {
                return found;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_should_fit_ifnamsiz_and_differ_per_agent() {
        let a = bridge_name("local", Path::new("/srv/a/agent"));
        let b = bridge_name("local", Path::new("/srv/b/agent"));
        assert_ne!(a, b, "two servers' local agents get two bridges");
        assert!(a.len() <= 15 && a.starts_with("spbr"), "{a}");
        let veth = veth_name("7184ea1a-eefa-46dc-a521-08bcf8ad6e75");
        assert_eq!(veth, "sp7184ea1aeefa");
        assert!(veth_name("x").len() <= 15);
    }

    #[test]
    fn pod_directories_should_name_their_uids() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for name in ["default_web_u-1", "kube-system_dns_u-2", "junk"] {
            std::fs::create_dir(dir.path().join(name)).expect("dir");
        }
        let uids: Vec<String> = pod_uids(dir.path()).into_iter().collect();
        assert_eq!(uids, vec!["u-1".to_owned(), "u-2".to_owned()]);
    }
}

#[cfg(test)]
mod owner_lock_tests {
    use super::{owner_alive, take_owner_lock};

    #[test]
    fn a_root_should_be_alive_while_its_owner_lock_is_held_and_only_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("agent");
        assert!(owner_alive(&root), "no lock file: counted as alive");
        let held = take_owner_lock(&root).expect("the lock taken");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(super::owner_lock_path(&root))
                .expect("the lock file")
                .permissions(),
        );
        assert_eq!(
            mode & 0o777,
            0o600,
            "private, as every file of the data directory"
        );
        assert!(owner_alive(&root), "held by this agent");
        // Checking does not take it away from its holder.
        assert!(owner_alive(&root));
        drop(held);
        assert!(!owner_alive(&root), "free once its holder is gone");
        let again = take_owner_lock(&root);
        assert!(again.is_some(), "a new agent of the root takes it");
    }
}
