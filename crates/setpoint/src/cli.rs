//! The command line: every subcommand and flag of `setpoint`, parsed with clap's derive API.
//! Parsing only; each subcommand's behaviour lives in its own module.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The `setpoint` command line.
#[derive(Debug, Parser)]
#[command(
    name = "setpoint",
    version,
    about = "A Kubernetes-compatible reconciliation control plane"
)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the control plane: the Kubernetes API over HTTPS on the embedded store (or etcd), the
    /// built-in controllers and scheduler, and a node agent for this machine (`--roles` picks
    /// which of them this process runs).
    Server(Box<ServerArgs>),
    /// Run a node agent alone: register a Node and run the pods bound to it as processes
    /// (or, with `cleanup`, stop every pod process of a data directory).
    Agent(crate::agent::AgentCli),
    /// Make a kubeconfig for a user (client certificate or static token) or a node, from the
    /// cluster's credentials in a server's data directory.
    #[command(subcommand)]
    Kubeconfig(crate::kubeconfig_cmd::KubeconfigCommand),
    /// Print a login URL for the web console (https://ADDR/ui/) carrying a one-time token
    /// (good once, for 5 minutes) minted by the server for the admin or --user.
    ConsoleUrl(crate::console_url::ConsoleUrlArgs),
    /// Copy every object between the embedded store and etcd (servers stopped), to move a
    /// cluster from one to the other.
    Migrate(MigrateArgs),
    /// Encryption at rest: which keys encrypt the stored objects, rewriting them with the
    /// current key, rotating the key.
    #[command(subcommand)]
    Encryption(crate::encryption::EncryptionCommand),
    /// Measure the performance of Setpoint's components on this machine.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The GitOps loops of a cluster: what a Sync would change (`diff`), a reconcile now
    /// (`reconcile`).
    #[command(subcommand)]
    Gitops(crate::gitops_cmd::GitopsCommand),
    /// Run one load balancer (a LoadBalancer Service's, started by the `service-lb` loop):
    /// listen where its configuration file says and forward to its backends, re-reading the
    /// file when it changes (or on SIGHUP).
    LbProxy(crate::lb_proxy_cmd::LbProxyArgs),
    /// The container shim the node agent starts for each container run; not for direct use.
    #[command(hide = true)]
    AgentShim {
        /// The shim's arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run deterministic simulations of Setpoint's control laws.
    #[command(subcommand)]
    Simulate(SimulateCommand),
    /// Tools for testing and debugging Setpoint itself; not a stable interface.
    #[command(subcommand, hide = true)]
    Debug(DebugCommand),
}

/// Flags of `setpoint server`.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Where the store, the certificates and `admin.kubeconfig` live (created mode 0700).
    /// Needed by the `apiserver` role, and by the `agent` role for its pods. Servers sharing
    /// one etcd must share the cluster's credentials: copy the first server's `DIR/pki` into
    /// the others' data directories before their first start.
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Which parts of the control plane this process runs, comma-separated: `apiserver`,
    /// `controllers`, `scheduler`, `agent`. Without `apiserver`, the others reach an API
    /// server through `--kubeconfig`.
    #[arg(
        long,
        value_name = "ROLE,...",
        default_value = "apiserver,controllers,scheduler,agent"
    )]
    pub(crate) roles: crate::roles::Roles,
    /// The kubeconfig through which the roles reach the API server when this process does not
    /// run the `apiserver` role.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig`: several API servers of the cluster (`https://` URLs, sharing its
    /// CA and credentials) to use instead of the kubeconfig's one; an unreachable server's
    /// reads and unsent requests go to the next.
    #[arg(
        long,
        value_name = "URL,...",
        value_delimiter = ',',
        requires = "kubeconfig"
    )]
    pub(crate) api_servers: Vec<http::Uri>,
    /// Leader election of the controllers and the scheduler.
    #[command(flatten)]
    pub(crate) leader_elect: crate::roles::LeaderElectArgs,
    /// The address to serve HTTPS on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    pub(crate) listen: std::net::SocketAddr,
    /// How long a request may take to send its body and get its answer before it is answered
    /// with 504 (kube-apiserver's `--request-timeout`); watches and followed logs are not cut.
    /// `0s`: no timeout.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub(crate) request_timeout: std::time::Duration,
    /// Request limits: API Priority and Fairness, max in-flight, watches per user.
    #[command(flatten)]
    pub(crate) limits: crate::limits::LimitArgs,
    /// Where objects live: the embedded store (in the data directory) or an etcd v3 cluster
    /// (`--etcd-endpoints`; the data directory then holds only certificates and kubeconfig).
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// Encryption at rest: kube-apiserver's `EncryptionConfiguration` file. Default:
    /// `DIR/pki/encryption-config.yaml`, generated at the first start with an AES-GCM key for
    /// Secrets. A file whose first provider is `identity` stores new values in plaintext.
    #[arg(long, value_name = "FILE")]
    pub(crate) encryption_provider_config: Option<PathBuf>,
    /// Which built-in controllers run: comma-separated names, `*` for every one on by default
    /// (all but `cluster-api`), `-name` to leave one out (e.g. `*,-namespace`), `name` to add
    /// one (`*,cluster-api`); empty for none.
    #[arg(long, value_name = "LIST", default_value = "*")]
    pub(crate) controllers: setpoint_controllers::LoopSelection,
    /// How many recent events each resource's watch cache keeps for watches to resume from;
    /// a watch from an older resourceVersion gets `410 Gone` and the client relists. Hidden:
    /// tests shrink it to force relists.
    #[arg(long, value_name = "EVENTS", default_value_t = 10_000, hide = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) watch_cache_window: u32,
    /// How long a node may stay silent before it is marked `Ready=Unknown`, tainted
    /// unreachable, and (after its pods' toleration) emptied: `40s`, `500ms`, `2m`.
    #[arg(long, value_name = "DURATION", default_value = "40s", value_parser = parse_duration)]
    pub(crate) node_monitor_grace_period: std::time::Duration,
    /// How often each HorizontalPodAutoscaler is evaluated (kube-controller-manager's
    /// `--horizontal-pod-autoscaler-sync-period`): `15s`, `2s`.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub(crate) hpa_sync_period: std::time::Duration,
    /// How often the providers (load balancers, PostgreSQL, certificates) observe each external
    /// object when nothing changed (Crossplane's `--poll-interval`): `1m`, `2s`.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub(crate) managed_poll_interval: std::time::Duration,
    /// The addresses LoadBalancer Services get: `FIRST-LAST` or a CIDR. The default is on the
    /// loopback interface, which needs no root and reaches no other machine.
    #[arg(
        long,
        value_name = "RANGE",
        default_value = "127.0.100.1-127.0.100.254"
    )]
    pub(crate) lb_address_pool: String,
    /// Who moves a LoadBalancer's bytes: `kernel` (an nftables DNAT table per balancer for the
    /// ports the kernel can forward — round robin, IPv4, loopback addresses to loopback
    /// backends only; needs root and nft, else user space) or `userspace` (the balancer
    /// process copies every connection, retrying a refused one on another backend).
    #[arg(
        long,
        value_name = "WHO",
        default_value = "kernel",
        value_parser = setpoint_providers::lb::config::Forwarding::parse
    )]
    pub(crate) lb_forwarding: setpoint_providers::lb::config::Forwarding,
    /// How often the availability of each APIService served by another server (an aggregated
    /// API) is checked; changes to APIServices, Services and endpoints are checked within a
    /// second anyway: `30s`, `2s`.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(crate) apiservice_check_interval: std::time::Duration,
    /// The range the nodes' pod ranges (`spec.podCIDR`) are cut from by the `node-ipam`
    /// controller; `none` assigns none.
    #[arg(long, value_name = "CIDR", default_value = "10.244.0.0/16", value_parser = parse_cluster_cidr)]
    pub(crate) cluster_cidr: ClusterCidr,
    /// The prefix length of each node's pod range.
    #[arg(long, value_name = "BITS", default_value_t = 24,
          value_parser = clap::value_parser!(u8).range(8..=30))]
    pub(crate) node_cidr_mask_size: u8,
    /// Authentication: ServiceAccount token issuer and audiences, static token file.
    #[command(flatten)]
    pub(crate) authn: crate::authn_args::AuthnArgs,
    /// The audit log.
    #[command(flatten)]
    pub(crate) audit: crate::audit_args::AuditArgs,
    /// The CA certificate (PEM) the CSR signer signs with; default `DATA_DIR/pki/ca.crt` when
    /// this process has the data directory. For controllers reaching a remote API server.
    #[arg(long, value_name = "FILE", requires = "cluster_signing_key_file")]
    pub(crate) cluster_signing_cert_file: Option<PathBuf>,
    /// The CA key (PEM) matching `--cluster-signing-cert-file`.
    #[arg(long, value_name = "FILE", requires = "cluster_signing_cert_file")]
    pub(crate) cluster_signing_key_file: Option<PathBuf>,
    /// The longest a certificate the CSR signer issues lasts (`s`, `m`, `h`, `d`, `y`).
    #[arg(long, value_name = "DURATION", default_value = "1y",
          value_parser = crate::kubeconfig_cmd::parse_duration)]
    pub(crate) cluster_signing_duration: time::Duration,
    /// The local node agent.
    #[command(flatten)]
    pub(crate) agent: crate::agent::LocalAgentArgs,
    /// Simulated nodes.
    #[command(flatten)]
    pub(crate) simulated: crate::simulated::SimulatedArgs,
}

/// Which store backs the API, and how to reach etcd.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The store: `embedded` (in the data directory) or `etcd` (at `--etcd-endpoints`).
    #[arg(
        long = "store",
        value_name = "KIND",
        value_enum,
        default_value = "embedded"
    )]
    pub(crate) kind: StoreKind,
    /// How to reach etcd.
    #[command(flatten)]
    pub(crate) etcd: EtcdArgs,
    /// How often to compact etcd's history (to the revision seen one interval earlier, taking
    /// turns with other API servers); `0s` leaves compaction to etcd or to others.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub(crate) etcd_compaction_interval: std::time::Duration,
}

/// How to reach an etcd cluster.
#[derive(Debug, Args)]
pub(crate) struct EtcdArgs {
    /// The etcd cluster's client URLs, comma-separated (`http://` or `https://`).
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub(crate) etcd_endpoints: Vec<String>,
    /// The CA certificate (PEM) that signed the etcd members' certificates.
    #[arg(long, value_name = "FILE")]
    pub(crate) etcd_cacert: Option<PathBuf>,
    /// The client certificate (PEM) to present to etcd.
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    pub(crate) etcd_cert: Option<PathBuf>,
    /// The key (PEM) of `--etcd-cert`.
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub(crate) etcd_key: Option<PathBuf>,
}

/// Flags of `setpoint migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The server's data directory, whose embedded store (`DIR/store`) is the source or the
    /// destination. No server may be running on it.
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: PathBuf,
    /// The destination: `etcd` copies the embedded store into etcd, `embedded` copies etcd into
    /// the embedded store. The destination must hold no objects.
    #[arg(long, value_name = "KIND", value_enum)]
    pub(crate) to: StoreKind,
    /// How to reach etcd.
    #[command(flatten)]
    pub(crate) etcd: EtcdArgs,
}

/// The store kinds `--store` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StoreKind {
    /// The embedded store, in the data directory.
    Embedded,
    /// An etcd v3 cluster.
    Etcd,
}

/// `--cluster-cidr`: an IPv4 range, or none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClusterCidr(pub(crate) Option<setpoint_core::cidr::Ipv4Cidr>);

/// Parses `--cluster-cidr`: an IPv4 CIDR, or `none`.
fn parse_cluster_cidr(s: &str) -> Result<ClusterCidr, String> {
    if s == "none" {
        return Ok(ClusterCidr(None));
    }
    s.parse()
        .map(|c| ClusterCidr(Some(c)))
        .map_err(|e| format!("{e}"))
}

/// Parses a duration as Kubernetes' flags write them: a number and a unit (`ms`, `s`, `m`,
/// `h`), e.g. `40s`, `500ms`, `5m`.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit: write e.g. 40s, 500ms or 5m"))?;
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} does not start with a number: write e.g. 40s"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}: use ms, s, m or h")),
    };
    std::time::Duration::try_from_secs_f64(seconds).map_err(|e| format!("{s:?}: {e}"))
}

/// The `setpoint bench` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Benchmark the store on disk (embedded, or etcd): durable writes, lists, watches and file
    /// size.
    Store(StoreBenchArgs),
    /// Benchmark the API server over HTTPS: creates, gets, lists, watch fan-out and memory.
    Api(ApiBenchArgs),
    /// Benchmark whole workloads: Deployments on simulated nodes (apply to Running, rolling
    /// update) and pods as real processes on a node agent.
    Workloads(WorkloadsBenchArgs),
    /// Benchmark the node agent's Service rules: an nftables full sync of many Services and
    /// one incremental change, in a throwaway network namespace (needs root and `nft`).
    Services(ServicesBenchArgs),
    /// Benchmark pod network setup and teardown (network namespace, veth, address, routes)
    /// on a bridge of its own; needs root.
    PodNetwork(PodNetworkBenchArgs),
    /// Benchmark exec and port-forward through the API server to a node agent: `kubectl exec
    /// … -- true` round trips (and the same over a WebSocket from Rust), port-forward
    /// throughput through `kubectl port-forward` and over a WebSocket tunnel.
    Streams(StreamsBenchArgs),
    /// Benchmark API Priority and Fairness: a user and a controller's latency alone and while
    /// another user floods LISTs, with APF on and off.
    Flood(FloodBenchArgs),
    /// Benchmark the GitOps loops: ConfigMaps in a local git repository applied by a Sync —
    /// the first full sync, a no-op reconcile (and its writes), commit → applied, drift →
    /// corrected.
    Gitops(GitopsBenchArgs),
    /// Benchmark the providers of pattern 3 (API → outside world): load-balancer throughput
    /// and added latency against a direct connection, Databases created and Ready, drift
    /// reverted, Certificates issued.
    Providers(ProvidersBenchArgs),
    /// Benchmark a growing store (issue 23): ConfigMaps created in steps up to `--objects`;
    /// at each step creates/s, updates/s, deletes/s, the server's memory against the bytes
    /// stored, restart → `/readyz` and → first full list, and a paged against a whole list.
    Scale(ScaleBenchArgs),
    /// Benchmark the web console (issue 24): the objects page's load with many pods in
    /// headless Chromium, its responsiveness while pods change, and the CPU the console adds
    /// to the server.
    Console(ConsoleBenchArgs),
}

/// Flags of `setpoint bench console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleBenchArgs {
    /// Pods in the store, all listed on the objects page.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) pods: u64,
    /// Pod status changes per second while the page is watched.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) rate: u64,
    /// How many times the page's load is timed.
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) loads: u64,
    /// How long each CPU and responsiveness phase lasts.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub(crate) window: std::time::Duration,
    /// Pairs of 5-second phases (blank page, then the list open) comparing the server's CPU
    /// per change.
    #[arg(long, value_name = "N", default_value_t = 7,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) pairs: u32,
    /// The browser (default: `SETPOINT_CHROMIUM`, else `/usr/bin/chromium`).
    #[arg(long, value_name = "PATH")]
    pub(crate) chromium: Option<PathBuf>,
    /// The folder holding `node_modules/playwright-core` (default: `SETPOINT_PLAYWRIGHT_DIR`,
    /// else `target/console-node`).
    #[arg(long, value_name = "DIR")]
    pub(crate) playwright_dir: Option<PathBuf>,
}

/// Flags of `setpoint bench scale`.
#[derive(Debug, Args)]
pub(crate) struct ScaleBenchArgs {
    /// Create the (temporary, deleted afterwards) data directory under this directory.
    /// Default: `./target` if it exists, else the system's temporary directory. The store
    /// grows to about 2.5 KiB per object on disk there.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The number of ConfigMaps the store grows to: the last step.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) objects: u64,
    /// The store sizes to measure at, ascending, comma-separated (overrides `--objects`).
    /// Default: those of 100000,250000,500000 below `--objects`, then `--objects`.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub(crate) steps: Vec<u64>,
    /// Concurrent HTTPS clients (one HTTP/1.1 connection each) sending the writes.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) clients: u16,
    /// Updates, and deletes followed by re-creates, timed at each step (default 5,000; 1,000
    /// with `--quick`; at most the step's size).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) sample: Option<u64>,
    /// Steps of 10,000, 20,000 and 50,000 objects (unless `--steps`), samples of 1,000: a
    /// check that the command runs, not a measurement.
    #[arg(long)]
    pub(crate) quick: bool,
    /// The store under the server: `embedded`, or `etcd` (a local member, fsyncs on, data
    /// under `--dir`; needs a build with `--features etcd` and the `etcd` binary on the PATH
    /// or in `SETPOINT_ETCD`).
    #[arg(long, value_name = "KIND", value_enum, default_value = "embedded")]
    pub(crate) store: StoreKind,
    /// Extra arguments for the `setpoint server` under test, one per use (it always runs with
    /// `--no-agent --controllers=`), e.g. `--server-arg=--no-audit`.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) server_args: Vec<String>,
}

/// One benchmark of `setpoint bench providers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProvidersBench {
    /// A LoadBalancer Service's balancer against a direct connection.
    Lb,
    /// PostgreSQL Databases created and Ready; drift reverted.
    Postgres,
    /// Certificates issued.
    Certs,
}

/// Flags of `setpoint bench providers`.
#[derive(Debug, Args)]
pub(crate) struct ProvidersBenchArgs {
    /// Run only these (repeat or comma-separate); all by default.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<ProvidersBench>,
    /// Smaller sizes: a check that the scenarios run, not a measurement.
    #[arg(long)]
    pub(crate) quick: bool,
}

/// Flags of `setpoint bench gitops`.
#[derive(Debug, Args)]
pub(crate) struct GitopsBenchArgs {
    /// ConfigMaps in git.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) objects: usize,
    /// Commits timed from `git commit` to applied.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) commits: usize,
    /// Hand edits timed from the edit to its correction.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) drifts: usize,
    /// 100 objects, 5 commits, 5 edits.
    #[arg(long)]
    pub(crate) quick: bool,
}

/// Flags of `setpoint bench flood`.
#[derive(Debug, Args)]
pub(crate) struct FloodBenchArgs {
    /// How many ConfigMaps each flood LIST returns.
    #[arg(long, default_value_t = 2000)]
    pub(crate) configmaps: usize,
    /// How many concurrent LIST loops the flooding user runs.
    #[arg(long, default_value_t = 32)]
    pub(crate) flooders: usize,
    /// How long the victims are timed in each round.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(crate) duration: std::time::Duration,
}

/// Flags of `setpoint bench services`.
#[derive(Debug, Args)]
pub(crate) struct ServicesBenchArgs {
    /// Services programmed.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) services: usize,
    /// Ready endpoints per Service.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) endpoints: usize,
    /// 100 Services instead of `--services`.
    #[arg(long)]
    pub(crate) quick: bool,
}

/// Flags of `setpoint bench pod-network`.
#[derive(Debug, Args)]
pub(crate) struct PodNetworkBenchArgs {
    /// How many pods.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(1..=250))]
    pub(crate) pods: u16,
    /// The pod range of the benchmark's bridge (must not be routed on this machine).
    #[arg(long, value_name = "CIDR", default_value = "10.199.0.0/24")]
    pub(crate) pod_cidr: setpoint_core::cidr::Ipv4Cidr,
}

/// Flags of `setpoint bench streams`.
#[derive(Debug, Args)]
pub(crate) struct StreamsBenchArgs {
    /// Create the (temporary, deleted afterwards) server data directory under this directory.
    /// Default: `./target` if it exists, else the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Exec round trips per client (kubectl, WebSocket).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) runs: u32,
    /// MiB sent through each port-forward path.
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub(crate) mib: u64,
}

/// Flags of `setpoint bench store`.
#[derive(Debug, Args)]
pub(crate) struct StoreBenchArgs {
    /// Create the (temporary, deleted afterwards) data directory under this directory.
    /// Default: `./target` if it exists, else the system's temporary directory. Results depend
    /// on its filesystem: a tmpfs makes fsync free.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Smaller workloads, for a result in well under a minute.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Run only these benchmarks (default: all).
    #[arg(long, value_name = "NAME", num_args = 1.., value_delimiter = ',')]
    pub(crate) only: Vec<StoreBench>,
    /// The store measured: `embedded`, or `etcd` (a fresh local member per benchmark, fsyncs
    /// on, with its data under `--dir`; needs the `etcd` binary, on the PATH or in
    /// `SETPOINT_ETCD`).
    #[arg(long, value_name = "KIND", value_enum, default_value = "embedded")]
    pub(crate) store: StoreKind,
}

/// The benchmarks of `setpoint bench store`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StoreBench {
    /// Durable creates and conditional updates at 1, 16 and 64 concurrent writers.
    Writes,
    /// Lists of 10,000 keys at the current and at an older revision.
    List,
    /// 100 watchers following concurrent writers.
    Watch,
    /// Data directory size under a long run of updates with automatic compaction.
    Size,
}

impl StoreBench {
    /// Every benchmark, in the order they run.
    pub(crate) const ALL: [StoreBench; 4] = [
        StoreBench::Writes,
        StoreBench::List,
        StoreBench::Watch,
        StoreBench::Size,
    ];
}

/// Flags of `setpoint bench api`.
#[derive(Debug, Args)]
pub(crate) struct ApiBenchArgs {
    /// Create the (temporary, deleted afterwards) server data directory under this directory.
    /// Default: `./target` if it exists, else the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Smaller workloads, for a result in about a minute.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Run only these benchmarks (default: all).
    #[arg(long, value_name = "NAME", num_args = 1.., value_delimiter = ',')]
    pub(crate) only: Vec<ApiBench>,
    /// Concurrent writers in the live watch run (each on its own HTTP/1.1 connection), as many
    /// as the creates benchmark's clients; live deliveries are bounded by their write rate
    /// times the 100 watchers.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) watch_writers: u16,
    /// Extra arguments for the `setpoint server` under test, one per use (e.g.
    /// `--server-arg=--controllers=` to run it without controllers, to see what they cost).
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) server_args: Vec<String>,
}

/// The benchmarks of `setpoint bench api`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApiBench {
    /// ConfigMap creates from 32 concurrent clients, over HTTP/1.1 and HTTP/2.
    Creates,
    /// ConfigMap gets by name from 32 concurrent clients, over HTTP/1.1 and HTTP/2.
    Gets,
    /// Lists of 10,000 ConfigMaps, whole and in pages of 500.
    List,
    /// 100 watchers following concurrent writers.
    Watch,
    /// Server-side apply of ConfigMaps and Deployments against merge patches of the same
    /// objects, and what `managedFields` add to each stored object.
    Apply,
    /// ConfigMap creates from 32 clients through one no-op validating webhook over HTTPS.
    Webhook,
    /// Secret creates from 32 clients with encryption at rest on (the server under test), then
    /// off (a second server with an identity-only configuration).
    Secrets,
    /// Secret creates from 32 clients with every lock on (an `edit` user decided by RBAC, audit
    /// at Metadata, encryption at rest), then off (system:masters, no audit, plaintext), both
    /// with kube-apiserver's default seats; then on with Setpoint's default seats.
    Locks,
    /// The server's resident memory after start and after the other benchmarks.
    Idle,
}

impl ApiBench {
    /// Every benchmark, in the order they run.
    pub(crate) const ALL: [ApiBench; 9] = [
        ApiBench::Creates,
        ApiBench::Gets,
        ApiBench::List,
        ApiBench::Watch,
        ApiBench::Apply,
        ApiBench::Webhook,
        ApiBench::Secrets,
        ApiBench::Locks,
        ApiBench::Idle,
    ];
}

/// Flags of `setpoint bench workloads`.
#[derive(Debug, Args)]
pub(crate) struct WorkloadsBenchArgs {
    /// Create the (temporary, deleted afterwards) data directories under this directory.
    /// Default: `./target` if it exists, else the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Smaller workloads (1,000 simulated replicas on 20 nodes, 50 processes), for a result
    /// in about a minute.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Run only these benchmarks (default: all).
    #[arg(long, value_name = "NAME", num_args = 1.., value_delimiter = ',')]
    pub(crate) only: Vec<WorkloadsBench>,
}

/// The benchmarks of `setpoint bench workloads`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorkloadsBench {
    /// Deployments of 5,000 and 10,000 replicas on 100 simulated nodes: apply to all pods
    /// Running, per-pod start latency, binds/s, and a rolling update of the larger one.
    Simulated,
    /// 200 pods as real processes on one node agent (a separate process): apply to Running,
    /// the agent's CPU and memory while they run, and a killed process's restart.
    Processes,
    /// A DaemonSet over 1,000 simulated nodes: create → all available, then a rolling update
    /// → all updated and available.
    #[value(name = "daemonsets")]
    DaemonSets,
    /// A 1,000-replica StatefulSet (`Parallel`) on simulated nodes: create → all ready.
    #[value(name = "statefulsets")]
    StatefulSets,
    /// A Job of 10,000 completions (1,000 with `--quick`), parallelism 500, on 50 simulated
    /// nodes: create to `Complete`.
    Jobs,
}

impl WorkloadsBench {
    /// Every benchmark, in the order they run.
    pub(crate) const ALL: [WorkloadsBench; 5] = [
        WorkloadsBench::Simulated,
        WorkloadsBench::Processes,
        WorkloadsBench::DaemonSets,
        WorkloadsBench::StatefulSets,
        WorkloadsBench::Jobs,
    ];
}

/// The hidden `setpoint debug` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum DebugCommand {
    /// Write to an embedded store forever, printing one `ack` line per acknowledged write; the
    /// crash test kills it and checks that every acknowledged write survived.
    StoreWriter(StoreWriterArgs),
    /// Panic `--count` times in caught panics, as a server's request handlers may, and print
    /// the resident memory before and after: shows what a panic report costs.
    Panics(PanicsArgs),
    /// Listen on `127.0.0.1:--port` and, per connection, read an 8-byte big-endian length and
    /// that many bytes, then answer the count read (8 bytes, big-endian): the sink of
    /// `setpoint bench streams`' port-forward runs.
    StreamSink(StreamSinkArgs),
}

/// Flags of `setpoint debug stream-sink`.
#[derive(Debug, Args)]
pub(crate) struct StreamSinkArgs {
    /// The port to listen on (127.0.0.1).
    #[arg(long)]
    pub(crate) port: u16,
}

/// Flags of `setpoint debug panics`.
#[derive(Debug, Args)]
pub(crate) struct PanicsArgs {
    /// How many panics, each in code of its own (a different place to symbolize).
    #[arg(long, default_value_t = 3)]
    pub(crate) count: usize,
}

/// Flags of `setpoint debug store-writer`.
#[derive(Debug, Args)]
pub(crate) struct StoreWriterArgs {
    /// The store's data directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// How many concurrent writers; writer `w` owns the keys `/crash/w{w}/k0` to `k7`.
    #[arg(long, default_value_t = 8)]
    pub(crate) writers: usize,
    /// Keep little history and compact, snapshot and rotate log segments often (instead of the
    /// default retention), so that kills also land in the middle of those.
    #[arg(long)]
    pub(crate) aggressive_compaction: bool,
    /// Exit when standard input reaches its end, so that the process dies with the parent that
    /// holds the other end of the pipe.
    #[arg(long)]
    pub(crate) exit_on_stdin_eof: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_should_be_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn agent_flags_should_reach_the_agent() {
        // Regression: a flattened `Args` struct inside the optional agent flags made clap
        // report them absent, and `setpoint agent` refused every command line.
        let cli = Cli::try_parse_from([
            "setpoint",
            "agent",
            "--simulated",
            "--node-name",
            "x",
            "--kubeconfig",
            "k",
            "--root-dir",
            "r",
            "--proxy-mode",
            "off",
        ])
        .expect("parsed");
        let Command::Agent(agent) = cli.command else {
            panic!("not the agent command");
        };
        let run = agent.run.expect("the agent's flags");
        assert_eq!(run.node_name, "x");
        assert!(run.simulated);
        assert_eq!(run.proxy_mode, crate::agent::ProxyModeArg::Off);
    }

    #[test]
    fn durations_should_parse_with_units_and_refuse_without() {
        use std::time::Duration;
        assert_eq!(parse_duration("40s"), Ok(Duration::from_secs(40)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("40").expect_err("no unit").contains("unit"));
        assert!(parse_duration("4x")
            .expect_err("bad unit")
            .contains("unknown unit"));
    }

    #[test]
    fn bench_store_should_accept_several_only_names() {
        let cli = Cli::try_parse_from([
            "setpoint", "bench", "store", "--only", "list", "watch", "--quick",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Store(args)) = cli.command else {
            panic!("parsed as {cli:?}");
        };
        assert_eq!(args.only, [StoreBench::List, StoreBench::Watch]);
        assert!(args.quick);
    }

    #[test]
    fn bench_api_should_accept_comma_separated_only_names() {
        let cli = Cli::try_parse_from(["setpoint", "bench", "api", "--only", "creates,watch"])
            .expect("parses");
        let Command::Bench(BenchCommand::Api(args)) = cli.command else {
            panic!("parsed as {cli:?}");
        };
        assert_eq!(args.only, [ApiBench::Creates, ApiBench::Watch]);
        assert!(!args.quick);
    }

    #[test]
    fn bench_scale_should_take_steps_and_server_args() {
        let cli = Cli::try_parse_from([
            "setpoint",
            "bench",
            "scale",
            "--steps",
            "1000,5000",
            "--server-arg=--no-audit",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Scale(args)) = cli.command else {
            panic!("parsed as {cli:?}");
        };
        assert_eq!(args.steps, [1_000, 5_000]);
        assert_eq!(args.objects, 1_000_000);
        assert_eq!(args.clients, 32);
        assert_eq!(args.store, StoreKind::Embedded);
        assert_eq!(args.server_args, ["--no-audit"]);
    }
}

/// The simulations of `setpoint simulate`.
#[derive(Debug, Subcommand)]
pub(crate) enum SimulateCommand {
    /// The Kubernetes HPA and Setpoint's PID autoscaler against the same simulated service
    /// (4x load step up, step down, a step inside the HPA's tolerance): prints overshoot,
    /// settling time, direction changes, steady-state error, backlog and pod-seconds, and
    /// writes one SVG plot per scenario.
    Autoscaling(SimulateAutoscalingArgs),
}

/// Flags of `setpoint simulate autoscaling`.
#[derive(Debug, Args)]
pub(crate) struct SimulateAutoscalingArgs {
    /// Seed of the load noise; the same seed gives the same numbers and plots.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Directory for the SVG plots and the results table (created if missing).
    #[arg(long, value_name = "DIR", default_value = "autoscaling-simulation")]
    pub(crate) out: PathBuf,
}
