//! The Service proxy (kube-proxy's part of the agent): watches Services and EndpointSlices
//! and programs Service ports on this node — nftables rules when the agent is root and `nft`
//! exists, else the userspace NodePort fallback ([`userspace`]). Design:
//! `docs/design/services.md` ("Service proxy").
//!
//! Level-triggered: any Service or EndpointSlice event wakes the loop, which waits a short
//! debounce, recomputes every rule from the caches ([`model::service_rules`]) and applies the
//! difference from what it last programmed as one transaction (a full table rewrite at start
//! and after a failed transaction).

mod bench;
mod condition;
pub(crate) mod model;
pub(crate) mod nft;
pub(crate) mod route;
pub(crate) mod ruleset;
pub(crate) mod userspace;

pub use bench::{service_rulesets, userspace_throughput, ServiceRulesets};

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use setpoint_runtime::{Deleted, EventHandler, InformerFactory, InformerOptions, SharedInformer};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How Service traffic is handled on the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProxyMode {
    /// nftables when the agent is root and `nft` runs, else userspace.
    #[default]
    Auto,
    /// nftables rules (fails over to userspace when they cannot be programmed at start).
    Nftables,
    /// NodePort listeners on 127.0.0.1 and the node address only.
    Userspace,
    /// No Service proxying on this node.
    Off,
}

/// Service proxy and cluster DNS settings of an agent.
#[derive(Debug, Clone)]
pub struct ServicesConfig {
    /// How Service traffic is handled.
    pub proxy: ProxyMode,
    /// The Service CIDR (IPv4): traffic to it that no rule DNATs is rejected, never routed out.
    pub service_cidr: String,
    /// The cluster domain (`cluster.local`).
    pub cluster_domain: String,
    /// Where the cluster DNS resolver listens (UDP and TCP); `None`: no resolver.
    pub dns_listen: Option<std::net::SocketAddr>,
    /// Where the resolver forwards names outside the cluster domain.
    pub dns_upstream: crate::DnsUpstream,
}

/// The file in the agent's root directory naming its nftables table (for `cleanup`).
const TABLE_FILE: &str = "proxy-nft-table";

/// Deletes the nftables table an agent of `root_dir` programmed, if its file names one (the
/// agent was killed, not stopped). Returns what it did, for the cleanup report.
pub(crate) fn cleanup_table(root_dir: &std::path::Path) -> Option<String> {
    let file = root_dir.join(TABLE_FILE);
    let table = std::fs::read_to_string(&file).ok()?;
    let table = table.trim();
    let deleted = std::process::Command::new(nft::program())
        .args(["delete", "table", "ip", table])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&file);
    nft::unregister(table);
    deleted.then(|| format!("nftables table {table}: deleted"))
}

impl Default for ServicesConfig {
    fn default() -> ServicesConfig {
        ServicesConfig {
            proxy: ProxyMode::Auto,
            service_cidr: "10.96.0.0/12".to_owned(),
            cluster_domain: "cluster.local".to_owned(),
            dns_listen: None,
            dns_upstream: crate::DnsUpstream::default(),
        }
    }
}

/// How long the loop gathers events before it syncs.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// How long after a failed sync the loop tries again without news.
const RETRY: Duration = Duration::from_secs(5);

/// Wakes the sync loop on any change.
struct Wake(Arc<Notify>);

impl<K: Send + Sync + 'static> EventHandler<K> for Wake {
    fn on_add(&self, _object: &Arc<K>, _in_initial_list: bool) {
        self.0.notify_one();
    }
    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {
        self.0.notify_one();
    }
    fn on_delete(&self, _deleted: &Deleted<K>) {
        self.0.notify_one();
    }
}

/// The Service and EndpointSlice informers the proxy and the resolver share.
#[derive(Clone)]
pub(crate) struct ServiceInformers {
    pub(crate) services: SharedInformer<Service>,
    pub(crate) slices: SharedInformer<EndpointSlice>,
}

impl ServiceInformers {
    /// Registers both informers with `factory` (started with the factory).
    pub(crate) fn new(factory: &InformerFactory) -> ServiceInformers {
        ServiceInformers {
            services: factory.informer_with(InformerOptions::default().strip_managed_fields()),
            slices: factory.informer_with(InformerOptions::default().strip_managed_fields()),
        }
    }

    /// The rules for the current caches.
    pub(crate) fn rules(&self, node: &str) -> Vec<model::ServicePortRule> {
        model::service_rules(
            &self.services.store().list(),
            &self.slices.store().list(),
            node,
        )
    }
}

/// The node the proxy runs for.
pub(crate) struct ProxyNode {
    /// The Node's name.
    pub(crate) name: String,
    /// Its address (userspace listeners bind it).
    pub(crate) ip: IpAddr,
    /// The agent's root directory (the table's name and records).
    pub(crate) root_dir: std::path::PathBuf,
    /// The pod bridge and its gateway address, in bridge mode: the Service CIDR is routed there.
    pub(crate) bridge: Option<(String, std::net::Ipv4Addr)>,
    /// For the Node condition.
    pub(crate) client: setpoint_runtime::Client,
}

/// Which programming the loop settled on.
enum Programmer {
    Nftables {
        table: String,
        applied: Option<ruleset::Programmed>,
    },
    Userspace(userspace::UserspaceProxy),
}

/// Starts the proxy loop for `node`; it runs until `shutdown` and then removes what it
/// programmed (its nftables table, its listeners).
pub(crate) fn start(
    informers: &ServiceInformers,
    config: &ServicesConfig,
    at: ProxyNode,
    shutdown: CancellationToken,
) -> Option<JoinHandle<()>> {
    let ProxyNode {
        name: node,
        ip: node_ip,
        root_dir,
        bridge,
        client,
    } = at;
    if config.proxy == ProxyMode::Off {
        tracing::info!("Service proxy off on this node");
        tokio::spawn(condition::publish(
            client,
            node.to_owned(),
            (
                "False",
                "Off",
                "--proxy-mode off: Services are not proxied on this node".to_owned(),
            ),
            shutdown,
        ));
        return None;
    }
    let wake = Arc::new(Notify::new());
    let registrations = (
        informers.services.add_handler(Wake(wake.clone())),
        informers.slices.add_handler(Wake(wake.clone())),
    );
    let informers = informers.clone();
    let config = config.clone();
    Some(tokio::spawn(async move {
        let _registrations = registrations;
        tokio::select! {
            () = informers.services.wait_until_synced() => {}
            () = shutdown.cancelled() => return,
        }
        tokio::select! {
            () = informers.slices.wait_until_synced() => {}
            () = shutdown.cancelled() => return,
        }
        let mut programmer = choose(&config, &node, node_ip, &root_dir, &shutdown).await;
        let said = match &programmer {
            Programmer::Nftables { table, .. } => (
                "True",
                "Nftables",
                format!("ClusterIPs and NodePorts are programmed in nftables table {table}"),
            ),
            Programmer::Userspace(proxy) => (
                "False",
                "Userspace",
                format!(
                    "userspace fallback ({}): TCP NodePorts on 127.0.0.1 and the node address only; ClusterIPs are unreachable",
                    proxy.why
                ),
            ),
        };
        tokio::spawn(condition::publish(
            client,
            node.clone(),
            said,
            shutdown.clone(),
        ));
        let routed = match (&programmer, &bridge) {
            (Programmer::Nftables { .. }, Some((bridge, gateway))) => {
                route::add(&config.service_cidr, bridge, *gateway).await
            }
            _ => false,
        };
        loop {
            let rules = informers.rules(&node);
            let retry = if sync(&mut programmer, &config, &rules).await {
                Duration::MAX
            } else {
                RETRY
            };
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(retry) => {}
                () = shutdown.cancelled() => break,
            }
            tokio::time::sleep(DEBOUNCE).await;
        }
        match &mut programmer {
            Programmer::Nftables { table, .. } => {
                if let Err(e) = nft::delete_table(table).await {
                    tracing::warn!(error = %e, "removing the Service rules");
                }
                let _ = std::fs::remove_file(root_dir.join(TABLE_FILE));
                nft::unregister(table);
                if let (true, Some((bridge, _))) = (routed, &bridge) {
                    route::delete(&config.service_cidr, bridge).await;
                }
            }
            Programmer::Userspace(proxy) => proxy.stop(),
        }
    }))
}

/// nftables when allowed and working, else userspace (logged: which mode and why).
async fn choose(
    config: &ServicesConfig,
    node: &str,
    node_ip: IpAddr,
    root_dir: &std::path::Path,
    shutdown: &CancellationToken,
) -> Programmer {
    let root = rustix::process::geteuid().is_root();
    let want_nft = matches!(config.proxy, ProxyMode::Auto | ProxyMode::Nftables);
    if want_nft && root && nft::available().await {
        let table = ruleset::table_name(node, root_dir);
        if let Err(e) = crate::process::write_private(&root_dir.join(TABLE_FILE), &table) {
            tracing::warn!(error = %e, "recording the Service table's name");
        }
        let swept = nft::sweep_stale().await;
        if !swept.is_empty() {
            tracing::info!(tables = ?swept, "deleted the Service tables of agents whose root directory is gone");
        }
        nft::register(&table, root_dir);
        tracing::info!(%table, "Service proxy: nftables (ClusterIP and NodePort in the kernel)");
        return Programmer::Nftables {
            table,
            applied: None,
        };
    }
    let why = if !want_nft {
        "asked for"
    } else if !root {
        "the agent is not root"
    } else {
        "no nft binary"
    };
    tracing::warn!(
        reason = why,
        "Service proxy: userspace fallback — NodePorts on 127.0.0.1 and the node address (TCP); ClusterIPs unreachable"
    );
    Programmer::Userspace(userspace::UserspaceProxy::new(
        node_ip,
        why,
        shutdown.child_token(),
    ))
}

/// Programs `rules`: the difference from the last applied state, or the whole table. False
/// when the rules could not be programmed.
async fn sync(
    programmer: &mut Programmer,
    config: &ServicesConfig,
    rules: &[model::ServicePortRule],
) -> bool {
    match programmer {
        Programmer::Userspace(proxy) => {
            proxy.sync(rules).await;
            true
        }
        Programmer::Nftables { table, applied } => {
            let now = ruleset::Programmed::of(rules);
            if applied.as_ref() == Some(&now) {
                return true;
            }
            let script = match applied.as_ref() {
                Some(old) => ruleset::incremental(table, old, &now),
                None => ruleset::full(table, &config.service_cidr, &now),
            };
            match nft::run(&script, false).await {
                Ok(()) => {
                    tracing::debug!(
                        services = rules.len(),
                        chains = now.chain_count(),
                        "Service rules programmed"
                    );
                    *applied = Some(now);
                    true
                }
                Err(e) => {
                    tracing::warn!(error = %e, "programming Service rules failed; rewriting the table");
                    let script = ruleset::full(table, &config.service_cidr, &now);
                    match nft::run(&script, false).await {
                        Ok(()) => {
                            *applied = Some(now);
                            true
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "rewriting the Service table failed");
                            *applied = None;
                            false
                        }
                    }
                }
            }
        }
    }
}

/// Starts the Service proxy and the cluster DNS resolver (both fed by one pair of Service and
/// EndpointSlice informers of `factory`). The resolver listens on `config.dns_listen`, else on
/// the pod network's gateway port 53 (the address pods' `resolv.conf` names), else not at all.
/// With a pod network, the Service CIDR is routed to its bridge. Fails when the resolver
/// cannot listen on the configured address (on the gateway it only warns).
pub(crate) async fn start_with_dns(
    factory: &InformerFactory,
    config: &ServicesConfig,
    node: &str,
    node_ip: IpAddr,
    root_dir: &std::path::Path,
    network: Option<&Arc<crate::network::NodeNetwork>>,
    shutdown: &CancellationToken,
) -> Result<(Option<JoinHandle<()>>, Option<JoinHandle<()>>), crate::AgentError> {
    let informers = ServiceInformers::new(factory);
    let listen = config
        .dns_listen
        .or_else(|| network.map(|n| std::net::SocketAddr::new(IpAddr::V4(n.gateway), 53)));
    let dns = match listen {
        Some(at) => {
            let served = crate::dns::server::serve(
                at,
                Arc::new(informers.clone()),
                config.cluster_domain.clone(),
                config.dns_upstream.clone(),
                shutdown.child_token(),
            )
            .await;
            match served {
                Ok((bound, task)) => {
                    tracing::info!(%bound, zone = %config.cluster_domain, "cluster DNS resolver listening");
                    Some(task)
                }
                // An address asked for must work; the gateway's is best effort.
                Err(source) if config.dns_listen.is_some() => {
                    return Err(crate::AgentError::Io {
                        what: format!("serving cluster DNS on {at}"),
                        source,
                    });
                }
                Err(e) => {
                    tracing::warn!(%at, error = %e, "no cluster DNS on this node: pods' resolv.conf names an address nothing answers on");
                    None
                }
            }
        }
        None => None,
    };
    let bridge = network.map(|n| (n.bridge.clone(), n.gateway));
    let at = ProxyNode {
        name: node.to_owned(),
        ip: node_ip,
        root_dir: root_dir.to_owned(),
        bridge,
        client: factory.client().clone(),
    };
    let proxy = start(&informers, config, at, shutdown.child_token());
    Ok((proxy, dns))
}
