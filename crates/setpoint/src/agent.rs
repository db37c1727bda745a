//! `setpoint agent`: the node agent alone, against an API server named by a kubeconfig; the
//! local agent that `setpoint server` runs for its own machine; and `setpoint agent cleanup`,
//! which stops every pod process of a data directory (stopping an agent leaves them running,
//! for the next agent to adopt).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use setpoint_agent::{AgentConfig, SimulatedNodes};
use setpoint_runtime::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use setpoint_runtime::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `setpoint agent`: run an agent (its flags), or a subcommand.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AgentCli {
    /// A subcommand instead of running an agent.
    #[command(subcommand)]
    pub(crate) command: Option<AgentCommand>,
    /// The agent to run.
    #[command(flatten)]
    pub(crate) run: Option<AgentArgs>,
}

/// Subcommands of `setpoint agent`.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// Stop every pod process of a data directory (the server or agent using it stopped):
    /// SIGTERM, the grace period, SIGKILL. Run it before deleting a data directory; stopping
    /// a server leaves its pods' processes running, for the next start to adopt.
    Cleanup(CleanupArgs),
}

/// Flags of `setpoint agent cleanup`.
#[derive(Debug, Args)]
pub(crate) struct CleanupArgs {
    /// The data directory of a `setpoint server` (its local agent's pods, in `DIR/agent`).
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "root_dir",
        conflicts_with = "root_dir"
    )]
    pub(crate) data_dir: Option<PathBuf>,
    /// The root directory of a `setpoint agent --root-dir DIR`.
    #[arg(long, value_name = "DIR")]
    pub(crate) root_dir: Option<PathBuf>,
    /// How long containers get between SIGTERM and SIGKILL: `10s`, `0s`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cli::parse_duration)]
    pub(crate) grace_period: std::time::Duration,
}

/// Flags of `setpoint agent`.
#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The kubeconfig that reaches the API server.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: PathBuf,
    /// The Node's name.
    #[arg(long, value_name = "NAME")]
    pub(crate) node_name: String,
    /// Where pods' working directories and logs live.
    #[arg(long, value_name = "DIR")]
    pub(crate) root_dir: PathBuf,
    /// The node's address (its InternalIP, and every pod's IP).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub(crate) node_ip: IpAddr,
    /// Where the agent serves container logs to the API server (HTTPS, client certificates
    /// signed by the cluster's CA only); port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:10250")]
    pub(crate) listen: SocketAddr,
    /// Resources to report instead of the machine's own, e.g. `pods=250,cpu=8` (repeatable).
    #[arg(long, value_name = "NAME=QUANTITY", value_delimiter = ',')]
    pub(crate) capacity: Vec<String>,
    /// How often the node's and its containers' CPU and memory are sampled (for
    /// `kubectl top`): `10s`, `15s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::cli::parse_duration)]
    pub(crate) metrics_interval: std::time::Duration,
    /// How every process a container starts is tracked (to kill them all with it): `auto` (a
    /// cgroup per container where the agent can create one, else `subreaper`) or `subreaper`
    /// (never cgroups: the container's shim kills all its descendants).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = Tracking::Auto)]
    pub(crate) container_tracking: Tracking,
    /// How containers see their volumes: `auto` (bind-mounted at their mountPath in a mount
    /// namespace per container when running as root, else as `emulated`) or `emulated` (no
    /// mounts: paths given in SETPOINT_MOUNT_* environment variables).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = Mounts::Auto)]
    pub(crate) mounts: Mounts,
    /// How pods get their network: `auto` (`bridge` when root, else `host`), `bridge` (a
    /// network namespace per pod on the agent's bridge, addresses from the Node's podCIDR) or
    /// `host` (pods share the host's network).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = PodNetwork::Auto)]
    pub(crate) pod_network: PodNetwork,
    /// Simulate the node instead: its pods become Running without processes.
    #[arg(long)]
    pub(crate) simulated: bool,
    // The flags of [`ServiceArgs`], spelled out: clap's test whether the optional `AgentArgs`
    // were given ignores the agent's own flags when another `Args` struct is flattened into
    // it (`setpoint agent …` then ran as if given nothing).
    /// How the agent proxies Services: `auto` (nftables when root and `nft` runs, else
    /// userspace), `nftables`, `userspace` (NodePorts on 127.0.0.1 and the node address only)
    /// or `off`.
    #[arg(long = "proxy-mode", value_name = "MODE", value_enum, default_value_t = ProxyModeArg::Auto)]
    pub(crate) proxy_mode: ProxyModeArg,
    /// Where the agent's cluster DNS resolver listens (UDP and TCP), e.g. `127.0.0.1:5353`;
    /// none when unset.
    #[arg(long = "dns-listen", value_name = "ADDR")]
    pub(crate) dns_listen: Option<SocketAddr>,
    /// Where the cluster DNS resolver forwards names outside the cluster domain: `none`
    /// (answer REFUSED) or comma-separated addresses (port 53 unless given); default: the
    /// `nameserver` lines of the host's `/etc/resolv.conf`.
    #[arg(long = "dns-upstream", value_name = "none|ADDR,...", value_parser = parse_dns_upstream)]
    pub(crate) dns_upstream: Option<setpoint_agent::DnsUpstream>,
}

/// Service proxying and cluster DNS flags of `setpoint server`'s local agent (`setpoint agent`
/// spells them out in `AgentArgs`).
#[derive(Debug, Args)]
pub(crate) struct ServiceArgs {
    /// How the agent proxies Services: `auto` (nftables when root and `nft` runs, else
    /// userspace), `nftables`, `userspace` (NodePorts on 127.0.0.1 and the node address only)
    /// or `off`.
    #[arg(long = "proxy-mode", value_name = "MODE", value_enum, default_value_t = ProxyModeArg::Auto)]
    pub(crate) proxy_mode: ProxyModeArg,
    /// Where the agent's cluster DNS resolver listens (UDP and TCP), e.g. `127.0.0.1:5353`;
    /// none when unset.
    #[arg(long = "dns-listen", value_name = "ADDR")]
    pub(crate) dns_listen: Option<SocketAddr>,
    /// Where the resolver forwards names outside the cluster domain: `none` (they are
    /// REFUSED), or resolvers separated by commas (`10.0.0.2`, `10.0.0.2:5353`, `[::1]:53`);
    /// unset: the `nameserver` lines of the host's `/etc/resolv.conf`, re-read when it changes.
    #[arg(long = "dns-upstream", value_name = "none|ADDR,...", value_parser = parse_dns_upstream)]
    pub(crate) dns_upstream: Option<setpoint_agent::DnsUpstream>,
}

/// `--dns-upstream`: `none` or a comma-separated list of addresses (port 53 unless given).
fn parse_dns_upstream(value: &str) -> Result<setpoint_agent::DnsUpstream, String> {
    if value.trim() == "none" {
        return Ok(setpoint_agent::DnsUpstream::None);
    }
    let servers = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<SocketAddr>()
                .or_else(|_| {
                    s.parse::<std::net::IpAddr>()
                        .map(|ip| SocketAddr::new(ip, 53))
                })
                .map_err(|_| format!("{s:?} is not an IP address or IP:port"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if servers.is_empty() {
        return Err("expected `none` or at least one address".to_owned());
    }
    Ok(setpoint_agent::DnsUpstream::Fixed(servers))
}

impl ServiceArgs {
    /// The agent's settings.
    pub(crate) fn config(&self) -> setpoint_agent::ServicesConfig {
        setpoint_agent::ServicesConfig {
            proxy: match self.proxy_mode {
                ProxyModeArg::Auto => setpoint_agent::ProxyMode::Auto,
                ProxyModeArg::Nftables => setpoint_agent::ProxyMode::Nftables,
                ProxyModeArg::Userspace => setpoint_agent::ProxyMode::Userspace,
                ProxyModeArg::Off => setpoint_agent::ProxyMode::Off,
            },
            dns_listen: self.dns_listen,
            dns_upstream: self.dns_upstream.clone().unwrap_or_default(),
            ..setpoint_agent::ServicesConfig::default()
        }
    }
}

/// `--proxy-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProxyModeArg {
    /// nftables when possible, else userspace.
    Auto,
    /// nftables.
    Nftables,
    /// Userspace NodePort listeners.
    Userspace,
    /// No proxying.
    Off,
}

/// `--container-tracking`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Tracking {
    /// Cgroups where possible.
    Auto,
    /// The shim's descendants, never cgroups.
    Subreaper,
}

impl From<Tracking> for setpoint_agent::ContainerTracking {
    fn from(t: Tracking) -> Self {
        match t {
            Tracking::Auto => setpoint_agent::ContainerTracking::Auto,
            Tracking::Subreaper => setpoint_agent::ContainerTracking::Subreaper,
        }
    }
}

/// `--mounts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mounts {
    /// Mount namespaces when root.
    Auto,
    /// Environment variables only.
    Emulated,
}

impl From<Mounts> for setpoint_agent::MountMode {
    fn from(m: Mounts) -> Self {
        match m {
            Mounts::Auto => setpoint_agent::MountMode::Auto,
            Mounts::Emulated => setpoint_agent::MountMode::Emulated,
        }
    }
}

/// `--pod-network`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PodNetwork {
    /// Bridge when root, else host.
    Auto,
    /// A network namespace per pod.
    Bridge,
    /// The host's network.
    Host,
}

impl From<PodNetwork> for setpoint_agent::PodNetworkMode {
    fn from(m: PodNetwork) -> Self {
        match m {
            PodNetwork::Auto => setpoint_agent::PodNetworkMode::Auto,
            PodNetwork::Bridge => setpoint_agent::PodNetworkMode::Bridge,
            PodNetwork::Host => setpoint_agent::PodNetworkMode::Host,
        }
    }
}

/// Flags of `setpoint server` about its local agent.
#[derive(Debug, Args)]
pub(crate) struct LocalAgentArgs {
    /// Do not run a node agent for this machine (pods then run only on other agents' or
    /// simulated nodes).
    #[arg(long)]
    pub(crate) no_agent: bool,
    /// How often the local agent samples the node's and its containers' CPU and memory (for
    /// `kubectl top`): `10s`, `15s`, `500ms`.
    #[arg(long = "metrics-interval", value_name = "DURATION", default_value = "10s", value_parser = crate::cli::parse_duration)]
    pub(crate) metrics_interval: std::time::Duration,
    /// How the local agent tracks every process a container starts: `auto` (cgroups where
    /// possible) or `subreaper`.
    #[arg(long = "container-tracking", value_name = "HOW", value_enum, default_value_t = Tracking::Auto)]
    pub(crate) container_tracking: Tracking,
    /// How the local agent's containers see their volumes: `auto` (mounted in a mount
    /// namespace per container when root) or `emulated` (SETPOINT_MOUNT_* variables).
    #[arg(long = "mounts", value_name = "HOW", value_enum, default_value_t = Mounts::Auto)]
    pub(crate) mounts: Mounts,
    #[command(flatten)]
    pub(crate) services: ServiceArgs,
    /// How the local agent's pods get their network: `auto` (`bridge` when root and this
    /// server assigns pod ranges, else `host`), `bridge` or `host`.
    #[arg(long = "pod-network", value_name = "MODE", value_enum, default_value_t = PodNetwork::Auto)]
    pub(crate) pod_network: PodNetwork,
}

/// Runs `setpoint agent` until SIGINT or SIGTERM.
pub(crate) async fn agent(cli: AgentCli) -> Result<()> {
    let Some(args) = cli.run else {
        anyhow::bail!(
            "setpoint agent needs --kubeconfig, --node-name and --root-dir (or a subcommand: setpoint agent cleanup --data-dir DIR)"
        );
    };
    let client = Client::from_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let shutdown = CancellationToken::new();
    let agent = if args.simulated {
        let nodes = SimulatedNodes::named(&args.node_name);
        tokio::spawn(setpoint_agent::run_simulated(
            client,
            nodes,
            shutdown.clone(),
        ))
    } else {
        let config = AgentConfig {
            node_name: args.node_name,
            root_dir: args.root_dir,
            node_ip: args.node_ip,
            listen: args.listen,
            client_ca_pem: kubeconfig_ca(&args.kubeconfig)?,
            shim: shim_command()?,
            capacity_override: capacity_overrides(&args.capacity)?,
            metrics_interval: args.metrics_interval,
            container_tracking: args.container_tracking.into(),
            mount_mode: args.mounts.into(),
            services: ServiceArgs {
                proxy_mode: args.proxy_mode,
                dns_listen: args.dns_listen,
                dns_upstream: args.dns_upstream,
            }
            .config(),
            pod_network: args.pod_network.into(),
        };
        tokio::spawn(setpoint_agent::run(client, config, shutdown.clone()))
    };
    crate::server::wait_for_signal().await?;
    shutdown.cancel();
    agent.await.context("the agent task failed")??;
    Ok(())
}

/// `setpoint agent cleanup`: stops every pod process of the data (or agent root) directory
/// and prints what it stopped.
pub(crate) fn cleanup(args: &CleanupArgs) -> Result<()> {
    let root = match (&args.data_dir, &args.root_dir) {
        (Some(data_dir), _) => data_dir.join("agent"),
        (None, Some(root)) => root.clone(),
        (None, None) => anyhow::bail!("setpoint agent cleanup needs --data-dir or --root-dir"),
    };
    let report = setpoint_agent::cleanup(&root, args.grace_period);
    for line in &report.stopped {
        println!("stopped {line}");
    }
    if report.stopped.is_empty() {
        println!("no pod process of {} was running", root.display());
    }
    Ok(())
}

/// The name of `setpoint server`'s own node.
const LOCAL_NODE: &str = "local";

/// Starts the local agent of `setpoint server`, unless switched off.
/// The agent keeps its pods in `data_dir/agent` and trusts the cluster CA: the server's own
/// (`data_dir/pki/ca.crt`) or, without the apiserver role, the one `kubeconfig` trusts.
///
/// `assigns_pod_ranges`: `Some(false)` when this process runs the controllers but not
/// node IPAM (no `spec.podCIDR` will come: `auto` then means `host`).
pub(crate) fn start_local(
    args: &LocalAgentArgs,
    assigns_pod_ranges: Option<bool>,
    identities: &crate::identities::Identities,
    data_dir: &Path,
    kubeconfig: Option<&Path>,
    shutdown: CancellationToken,
) -> Result<Option<JoinHandle<Result<()>>>> {
    if args.no_agent {
        return Ok(None);
    }
    let client_ca_pem = match kubeconfig {
        Some(kubeconfig) => kubeconfig_ca(kubeconfig)?,
        None => {
            let ca_path = data_dir.join("pki").join("ca.crt");
            std::fs::read_to_string(&ca_path)
                .with_context(|| format!("reading the cluster CA {}", ca_path.display()))?
        }
    };
    let node_name = LOCAL_NODE;
    // The agent acts as its node, `system:node:local`.
    let client = identities.node(node_name);
    let config = AgentConfig {
        node_name: node_name.to_owned(),
        root_dir: data_dir.join("agent"),
        node_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        client_ca_pem,
        shim: shim_command()?,
        capacity_override: BTreeMap::new(),
        metrics_interval: args.metrics_interval,
        container_tracking: args.container_tracking.into(),
        mount_mode: args.mounts.into(),
        services: args.services.config(),
        pod_network: match (args.pod_network, assigns_pod_ranges) {
            (PodNetwork::Auto, Some(false)) => setpoint_agent::PodNetworkMode::Host,
            (mode, _) => mode.into(),
        },
    };
    Ok(Some(tokio::spawn(async move {
        setpoint_agent::run(client, config, shutdown)
            .await
            .context("the local node agent")
    })))
}

/// `--capacity` entries as resource quantities.
fn capacity_overrides(entries: &[String]) -> Result<BTreeMap<String, Quantity>> {
    entries
        .iter()
        .filter(|e| !e.trim().is_empty())
        .map(|entry| {
            let (name, quantity) = entry
                .split_once('=')
                .with_context(|| format!("--capacity {entry:?}: expected NAME=QUANTITY"))?;
            Ok((name.trim().to_owned(), Quantity(quantity.trim().to_owned())))
        })
        .collect()
}

/// This very binary, as the container shim.
pub(crate) fn shim_command() -> Result<Vec<OsString>> {
    let exe = std::env::current_exe().context("finding the setpoint binary to run as the shim")?;
    Ok(vec![exe.into_os_string(), OsString::from("agent-shim")])
}

/// The CA a kubeconfig trusts for its current cluster, as PEM.
fn kubeconfig_ca(path: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let current = config["current-context"].as_str().unwrap_or_default();
    let context = config["contexts"]
        .as_sequence()
        .and_then(|cs| cs.iter().find(|c| c["name"].as_str() == Some(current)))
        .map(|c| c["context"]["cluster"].as_str().unwrap_or_default())
        .with_context(|| format!("{}: no context {current:?}", path.display()))?;
    let cluster = config["clusters"]
        .as_sequence()
        .and_then(|cs| cs.iter().find(|c| c["name"].as_str() == Some(context)))
        .map(|c| &c["cluster"])
        .with_context(|| format!("{}: no cluster {context:?}", path.display()))?;
    if let Some(data) = cluster["certificate-authority-data"].as_str() {
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .with_context(|| {
                format!(
                    "{}: certificate-authority-data is not base64",
                    path.display()
                )
            })?;
        return String::from_utf8(pem).context("certificate-authority-data is not PEM text");
    }
    if let Some(file) = cluster["certificate-authority"].as_str() {
        let file = path.parent().unwrap_or(Path::new(".")).join(file);
        return std::fs::read_to_string(&file)
            .with_context(|| format!("reading the CA {}", file.display()));
    }
    anyhow::bail!(
        "{}: cluster {context:?} names no certificate-authority; the agent needs the cluster's CA to check the API server's calls",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::parse_dns_upstream;
    use setpoint_agent::DnsUpstream;

    #[test]
    fn dns_upstream_is_none_or_addresses_with_port_53_by_default() {
        assert_eq!(parse_dns_upstream("none"), Ok(DnsUpstream::None));
        let addrs = ["10.0.0.2:53", "127.0.0.1:5353", "[::1]:53"];
        let expected = addrs.map(|a| a.parse().expect("an address")).to_vec();
        assert_eq!(
            parse_dns_upstream("10.0.0.2, 127.0.0.1:5353,::1"),
            Ok(DnsUpstream::Fixed(expected))
        );
        assert!(parse_dns_upstream("resolver.example").is_err());
        assert!(parse_dns_upstream(",").is_err());
    }
}
