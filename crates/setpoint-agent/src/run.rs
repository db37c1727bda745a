//! The agent's main loop: the HTTPS endpoint (container logs, resource metrics) and its
//! resource sampler, the Node's registration and Lease, and a worker per pod bound to the
//! node, fed by one pod informer (`spec.nodeName=<node>`).
//!
//! Stopping the agent (cancelling `shutdown`) stops its tasks and leaves the containers
//! running, as stopping the kubelet does: the next agent started with the same root
//! directory adopts them.

use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::{Client, EventRecorder, InformerFactory, InformerOptions, Reporter};
use tokio_util::sync::CancellationToken;

use crate::config::ContainerTracking;
use crate::node::NodeRegistration;
use crate::pods::{PodContext, PodEvents, PodWorkers};
use crate::process::CgroupParent;
use crate::{AgentConfig, AgentError};

/// Runs the agent for `config.node_name` until `shutdown` is cancelled; then returns once its
/// tasks have stopped, leaving the pods' processes running.
///
/// Fails at start if the root directory cannot be created or the HTTPS endpoint cannot
/// listen; afterwards API errors are retried, never fatal.
pub async fn run(
    client: Client,
    config: AgentConfig,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let pods_dir = config.root_dir.join("pods");
    std::fs::create_dir_all(&pods_dir).map_err(|source| AgentError::Io {
        what: format!("creating {}", pods_dir.display()),
        source,
    })?;
    let cgroups = match config.container_tracking {
        ContainerTracking::Auto => CgroupParent::create(&config.root_dir),
        ContainerTracking::Subreaper => None,
    };
    match &cgroups {
        Some(parent) => {
            tracing::info!(cgroups = %parent.dir().display(), "each container runs in a cgroup of its own")
        }
        None => {
            tracing::info!("containers are tracked without cgroups: the shims are child subreapers")
        }
    }
    let limits = match config.container_tracking {
        ContainerTracking::Auto => {
            crate::process::limits::LimitParent::create(&config.root_dir, cgroups.as_ref())
        }
        ContainerTracking::Subreaper => None,
    };
    match &limits {
        Some(l) => tracing::info!(limits = %l.describe(), "container resource limits are enforced"),
        None => tracing::warn!(
            "container resource limits are not enforced: no cgroup controller this agent may write"
        ),
    }
    let metrics = crate::metrics::Sampler::new(
        &config.node_name,
        config.root_dir.clone(),
        config.metrics_interval,
    );
    metrics.spawn(shutdown.child_token());
    let endpoint = crate::server::serve(
        config.listen,
        &config.client_ca_pem,
        config.root_dir.clone(),
        metrics.clone(),
        config.shim.clone(),
        shutdown.child_token(),
    )
    .await
    .map_err(|source| AgentError::Io {
        what: format!("serving the agent's endpoint on {}", config.listen),
        source,
    })?;
    tracing::info!(node = %config.node_name, endpoint = %endpoint, root = %config.root_dir.display(), "node agent starting");

    let registration = NodeRegistration::for_this_machine(
        &config.node_name,
        config.node_ip,
        &config.capacity_override,
    )
    .with_daemon_port(endpoint.port());
    let node = tokio::spawn(crate::node::keep_registered(
        client.clone(),
        registration,
        shutdown.clone(),
    ));

    let network = crate::network::start_for_node(
        crate::network::Startup {
            client: &client,
            node_name: &config.node_name,
            root_dir: &config.root_dir,
            shim: &config.shim,
            mode: config.pod_network,
            cidr_wait: crate::network::DEFAULT_CIDR_WAIT,
        },
        &shutdown,
    )
    .await;

    let factory = InformerFactory::new(client.clone());
    let informer = factory.informer_with::<Pod>(
        InformerOptions {
            field_selector: Some(format!("spec.nodeName={}", config.node_name)),
            ..InformerOptions::default()
        }
        .strip_managed_fields(),
    );
    let (proxy, dns) = crate::proxy::start_with_dns(
        &factory,
        &config.services,
        &config.node_name,
        config.node_ip,
        &config.root_dir,
        network.as_ref(),
        &shutdown,
    )
    .await?;
    let mounts = config.mount_mode.mounts();
    tracing::info!(
        mounts = if mounts { "namespace" } else { "emulated" },
        "containers see their volumes {}",
        if mounts {
            "mounted in a mount namespace of their own"
        } else {
            "through SETPOINT_MOUNT_* variables (no mounts)"
        }
    );
    if network.is_some() && !mounts {
        tracing::warn!("pods' /etc/hosts, /etc/hostname and /etc/resolv.conf are not mounted: the agent does not mount (--mounts emulated)");
    }
    let volumes = crate::volumes::VolumeContext {
        client: client.clone(),
        sources: crate::volumes::ObjectSources {
            client: client.clone(),
            tokens: crate::volumes::ServiceAccountTokens::new(client.clone()),
        },
        mounts,
    };
    let events = EventRecorder::new(
        client.clone(),
        Reporter::new("kubelet", config.node_name.clone()),
    );
    let workers = PodWorkers::new(
        PodContext {
            client: client.clone(),
            root_dir: config.root_dir.clone(),
            node_ip: config.node_ip,
            shim: config.shim.clone(),
            cgroups,
            limits,
            metrics,
            volumes,
            events,
            network,
        },
        shutdown.clone(),
    );
    let _handler = informer.add_handler(PodEvents(workers.clone()));
    let local_path_root = crate::volumes::local_path::root_of(&config.root_dir);
    let publish = tokio::spawn(crate::volumes::local_path::publish_root(
        client.clone(),
        config.node_name.clone(),
        local_path_root.clone(),
        shutdown.clone(),
    ));
    let cleanup = {
        let factory = factory.clone();
        let client = client.clone();
        let node = config.node_name.clone();
        let pods = informer.store();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::volumes::local_path::run_cleanup(
                &factory,
                client,
                node,
                local_path_root,
                pods,
                shutdown,
            )
            .await
            {
                tracing::warn!(error = %e, "the local-path cleanup stopped");
            }
        })
    };
    factory.start();
    tokio::select! {
        () = factory.wait_for_sync() => workers.collect_orphans(&informer.store()),
        () = shutdown.cancelled() => {}
    }
    shutdown.cancelled().await;
    tracing::info!(node = %config.node_name, pods = workers.len(), "node agent stopping; containers keep running");
    factory.shut_down();
    workers.wait().await;
    let _ = node.await;
    let _ = publish.await;
    let _ = cleanup.await;
    for task in [proxy, dns].into_iter().flatten() {
        let _ = task.await;
    }
    Ok(())
}
