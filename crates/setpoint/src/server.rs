//! `setpoint server`: the roles `--roles` picks (all by default) until SIGINT or SIGTERM —
//! the store (embedded, or etcd) with the Kubernetes API over HTTPS, the built-in controllers
//! and the scheduler (each group leader-elected, see [`crate::roles`]), the local node agent and
//! any simulated nodes.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use setpoint_apiserver::{serve, Api, TransportConfig};
use setpoint_controllers::LoopSettings;
use setpoint_runtime::Client;
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Store};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::cli::{EtcdArgs, ServerArgs, StoreArgs, StoreKind};
use crate::identities::Identities;
use crate::roles::Role;

/// Runs the server until asked to stop.
pub(crate) async fn server(args: ServerArgs) -> Result<()> {
    let apiserver = args.roles.has(Role::Apiserver);
    let local_agent = args.roles.has(Role::Agent) && !args.agent.no_agent;
    let data_dir = match &args.data_dir {
        Some(dir) => Some(dir.clone()),
        None if apiserver => anyhow::bail!("the apiserver role needs --data-dir DIR"),
        None if local_agent => {
            anyhow::bail!("the agent role needs --data-dir DIR for its pods (or --no-agent)")
        }
        None => None,
    };
    if let Some(dir) = &data_dir {
        private_data_dir(dir)?;
    }
    if apiserver && args.kubeconfig.is_some() {
        anyhow::bail!("--kubeconfig is for the roles without the apiserver role, which serve the API themselves");
    }
    let shutdown = CancellationToken::new();
    let metrics = setpoint_runtime::Metrics::new();
    let mut serving = None;
    // Each component acts as its own user (identities.rs).
    let identities = match (&data_dir, &args.kubeconfig) {
        (Some(data_dir), None) if apiserver => {
            let (running, embedded, api) = start_api(&args, data_dir, &shutdown, &metrics).await?;
            serving = Some((running, embedded, api.clone()));
            Identities::InProcess(api)
        }
        (_, Some(kubeconfig)) if args.api_servers.is_empty() => Identities::Kubeconfig(
            Client::from_kubeconfig(kubeconfig)
                .await
                .with_context(|| format!("reading {}", kubeconfig.display()))?,
        ),
        (_, Some(kubeconfig)) => Identities::Kubeconfig(
            Client::from_kubeconfig_with_servers(kubeconfig, &args.api_servers)
                .await
                .with_context(|| format!("reading {}", kubeconfig.display()))?,
        ),
        _ => {
            anyhow::bail!("without the apiserver role, --kubeconfig FILE must name the API server")
        }
    };
    let settings = LoopSettings {
        node_monitor_grace_period: args.node_monitor_grace_period,
        hpa_sync_period: args.hpa_sync_period,
        root_ca: cluster_ca(data_dir.as_deref(), args.kubeconfig.as_deref()),
        cluster_cidr: args.cluster_cidr.0,
        node_cidr_mask_size: args.node_cidr_mask_size,
        signing_ca: crate::kubeconfig_cmd::signing_ca(
            data_dir.as_deref(),
            args.cluster_signing_cert_file.as_deref(),
            args.cluster_signing_key_file.as_deref(),
        )?,
        cluster_signing_duration: std::time::Duration::try_from(args.cluster_signing_duration)
            .unwrap_or(std::time::Duration::from_secs(365 * 86_400)),
        // The GitOps loops' mirrors and artifacts (made 0700 when a GitOps loop starts).
        gitops_dir: data_dir.as_ref().map(|d| d.join("gitops")),
        // The providers' state on this machine (balancers' configurations and pid files).
        providers: setpoint_providers::ProviderSettings {
            poll_interval: args.managed_poll_interval,
            dir: data_dir.as_ref().map(|d| d.join("providers")),
            lb_address_pool: args.lb_address_pool.clone(),
            lb_proxy_command: None,
            lb_forwarding: args.lb_forwarding,
        },
        ..LoopSettings::default()
    };
    let loops = crate::roles::start_loops(
        &args.roles,
        &args.controllers,
        crate::roles::Term {
            settings,
            metrics: metrics.clone(),
        },
        &args.leader_elect,
        args.leader_elect
            .enabled(apiserver && args.store.kind == StoreKind::Embedded),
        &identities,
        &shutdown,
    )?;
    if let Some((_, _, api)) = &serving {
        report_components(api, &loops);
    }
    // Agents stop before the controllers and the API: their pods' processes are stopped while
    // the API can still record it.
    let agent_shutdown = CancellationToken::new();
    let mut agents = Vec::new();
    if args.roles.has(Role::Agent) {
        if let Some(data_dir) = &data_dir {
            let assigns_pod_ranges = args.roles.has(Role::Controllers).then(|| {
                args.cluster_cidr.0.is_some()
                    && args
                        .controllers
                        .loops()
                        .contains(&setpoint_controllers::Loop::NodeIpam)
            });
            agents.extend(crate::agent::start_local(
                &args.agent,
                assigns_pod_ranges,
                &identities,
                data_dir,
                args.kubeconfig.as_deref(),
                agent_shutdown.clone(),
            )?);
        }
        agents.extend(crate::simulated::start(
            &args.simulated,
            identities.simulated_nodes(),
            agent_shutdown.clone(),
        ));
    }
    wait_for_signal().await?;
    agent_shutdown.cancel();
    for agent in agents {
        match agent.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %format!("{e:#}"), "an agent failed"),
            Err(e) => tracing::error!(error = %e, "an agent's task failed"),
        }
    }
    shutdown.cancel();
    for started in loops {
        match started.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %format!("{e:#}"), "a controller failed"),
            Err(e) => tracing::error!(error = %e, "the controllers' task failed"),
        }
    }
    if let Some((running, embedded, _api)) = serving {
        running.wait().await.context("stopping the server")?;
        if let Some(store) = embedded {
            store.close();
        }
    }
    Ok(())
}

/// Tells the API how the loops this process runs are, for ComponentStatus: a component is
/// healthy while its task runs (components this process does not run are judged by their
/// Lease, see `setpoint_apiserver::ComponentCheck`).
fn report_components(api: &Api, loops: &[crate::roles::Started]) {
    for started in loops {
        let running = started.running.clone();
        let component = started.component;
        api.set_component_check(
            component,
            Arc::new(move || {
                if running.load(std::sync::atomic::Ordering::Acquire) {
                    Ok(())
                } else {
                    Err(format!(
                        "the {component} loops in this process have stopped"
                    ))
                }
            }),
        );
    }
}

/// The apiserver role: opens the store and serves the API on it (and the `kubernetes`
/// Service, written as the API server's own loopback user); returns the API, which the other
/// roles reach in-process each as its own user.
async fn start_api(
    args: &ServerArgs,
    data_dir: &Path,
    shutdown: &CancellationToken,
    metrics: &setpoint_runtime::Metrics,
) -> Result<(
    setpoint_apiserver::RunningServer,
    Option<EmbeddedStore>,
    Arc<Api>,
)> {
    let (store, embedded) = open_store(
        &args.store,
        data_dir,
        args.encryption_provider_config.as_deref(),
    )
    .await?;
    let api = Api::with_watch_window(store, args.watch_cache_window as usize)
        .await
        .context("starting the API")?;
    crate::metrics::serve_with_api(metrics, &api);
    if let Some(audit) = args.audit.config(data_dir)? {
        let log = audit.log.clone();
        api.enable_audit(audit).context("starting the audit log")?;
        tracing::info!(log = ?log, "recording requests in the audit log");
    }
    api.set_apiservice_check_interval(args.apiservice_check_interval);
    api.set_authentication(args.authn.config());
    api.set_flow_control(args.limits.settings(args.request_timeout));
    // ServiceAccount admission needs each namespace's `default` ServiceAccount: on unless this
    // process runs the controllers without the loop that creates it.
    if !args.roles.has(Role::Controllers)
        || args
            .controllers
            .loops()
            .contains(&setpoint_controllers::Loop::ServiceAccount)
    {
        api.enable_service_account_admission();
    }
    let mut transport = TransportConfig::new(data_dir, args.listen);
    transport.request_timeout = args.request_timeout;
    let running = serve(transport, api.clone(), shutdown.clone())
        .await
        .with_context(|| format!("serving on {}", args.listen))?;
    tracing::info!(
        listen = %running.local_addr(),
        kubeconfig = %running.kubeconfig_path().display(),
        data_dir = %data_dir.display(),
        "setpoint is serving the Kubernetes API; try: kubectl --kubeconfig {} get namespaces",
        running.kubeconfig_path().display()
    );
    let client = {
        let api = api.clone();
        Client::in_process(move |request| {
            let api = api.clone();
            async move { api.handle_loopback(request).await }
        })
    };
    crate::kubernetes_service::start(client, running.local_addr(), shutdown.clone());
    Ok((running, embedded, api))
}

/// The cluster CA bundle (PEM) the root CA publisher hands out: the API server's own CA in
/// `DATA_DIR/pki/ca.crt`, else the one the kubeconfig trusts (`certificate-authority-data` or
/// `certificate-authority` of its first cluster); `None` if neither is readable.
fn cluster_ca(data_dir: Option<&Path>, kubeconfig: Option<&Path>) -> Option<String> {
    if let Some(pem) = data_dir.and_then(|d| std::fs::read_to_string(d.join("pki/ca.crt")).ok()) {
        return Some(pem);
    }
    let text = std::fs::read_to_string(kubeconfig?).ok()?;
    let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).ok()?;
    let cluster = &config["clusters"][0]["cluster"];
    if let Some(data) = cluster["certificate-authority-data"].as_str() {
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()?;
        return String::from_utf8(pem).ok();
    }
    std::fs::read_to_string(cluster["certificate-authority"].as_str()?).ok()
}

/// Creates the data directory with mode 0700, or tightens an existing one that group or
/// others may read: it holds the store, keys and pod logs. The files in it are 0600 or
/// tightened by their owners (the store, the PKI, the agent).
pub(crate) fn private_data_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))?;
    let meta = std::fs::metadata(dir)
        .with_context(|| format!("reading the data directory {}", dir.display()))?;
    anyhow::ensure!(
        meta.is_dir(),
        "--data-dir {} is not a directory: name a directory (it is created if missing)",
        dir.display()
    );
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700)).with_context(
            || {
                format!(
                    "the data directory {} is open to other users (mode {mode:o}) and could not \
                     be tightened to 0700: chmod 700 it, or name another directory",
                    dir.display()
                )
            },
        )?;
        tracing::warn!(
            data_dir = %dir.display(),
            was = format!("{mode:o}"),
            now = format!("{:o}", mode & 0o700),
            "the data directory was open to other users; tightened its mode"
        );
    }
    Ok(())
}

/// Opens the store the flags choose, encrypting what `encryption_config` (default: the data
/// directory's, generated at the first start) says to; the embedded one is also returned, to
/// be closed at the end.
async fn open_store(
    args: &StoreArgs,
    data_dir: &Path,
    encryption_config: Option<&Path>,
) -> Result<(Arc<dyn Store>, Option<EmbeddedStore>)> {
    let (store, embedded) = open_plain_store(args, data_dir).await?;
    let store = crate::encryption::encrypted(store, data_dir, encryption_config).await?;
    Ok((store, embedded))
}

/// Opens the store the flags choose, as stored.
async fn open_plain_store(
    args: &StoreArgs,
    data_dir: &Path,
) -> Result<(Arc<dyn Store>, Option<EmbeddedStore>)> {
    match args.kind {
        StoreKind::Embedded => {
            if !args.etcd.etcd_endpoints.is_empty() {
                anyhow::bail!("--etcd-endpoints needs --store etcd");
            }
            let store_dir = data_dir.join("store");
            let store = EmbeddedStore::open(EmbeddedConfig::on_disk(&store_dir))
                .with_context(|| format!("opening the store in {}", store_dir.display()))?;
            Ok((Arc::new(store.clone()), Some(store)))
        }
        StoreKind::Etcd => Ok((
            open_etcd(&args.etcd, Some(args.etcd_compaction_interval)).await?,
            None,
        )),
    }
}

/// Connects to the etcd the flags name.
#[cfg(feature = "etcd")]
pub(crate) async fn open_etcd(
    args: &EtcdArgs,
    compaction_interval: Option<std::time::Duration>,
) -> Result<Arc<dyn Store>> {
    use setpoint_store::{EtcdConfig, EtcdStore, EtcdTls};
    if args.etcd_endpoints.is_empty() {
        anyhow::bail!("etcd needs --etcd-endpoints URL[,URL...]");
    }
    let mut config = EtcdConfig::new(args.etcd_endpoints.iter().cloned());
    if args.etcd_cacert.is_some() || args.etcd_cert.is_some() {
        config.tls = Some(EtcdTls {
            ca_cert: args.etcd_cacert.clone(),
            client_cert: args.etcd_cert.clone(),
            client_key: args.etcd_key.clone(),
        });
    }
    config.compaction_interval = compaction_interval.filter(|interval| !interval.is_zero());
    let store = EtcdStore::connect(config).await.with_context(|| {
        format!(
            "connecting to etcd at {} (check --etcd-endpoints and that etcd runs there)",
            args.etcd_endpoints.join(",")
        )
    })?;
    tracing::info!(version = %store.server_version(), "the store is etcd");
    Ok(Arc::new(store))
}

/// Connects to the etcd the flags name.
#[cfg(not(feature = "etcd"))]
pub(crate) async fn open_etcd(
    _args: &EtcdArgs,
    _compaction_interval: Option<std::time::Duration>,
) -> Result<Arc<dyn Store>> {
    anyhow::bail!(
        "this setpoint was built without etcd support: rebuild with `cargo build --release --features etcd` (needs `protoc`, Debian package protobuf-compiler)"
    )
}

/// Waits for SIGINT or SIGTERM.
pub(crate) async fn wait_for_signal() -> Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
        _ = term.recv() => tracing::info!("terminated; shutting down"),
    }
    Ok(())
}
