//! Provider 1: load balancers for `Service`s of type `LoadBalancer`, as k3s's ServiceLB and
//! MetalLB give them, reconciled as managed resources (`setpoint_runtime::managed`). Each such
//! Service (no `loadBalancerClass`, or `setpoint.dev/service-lb`) gets a balancer process on
//! this machine (`setpoint lb-proxy`, [`proxy`]) listening on an address of the pool
//! (`--lb-address-pool`, loopback by default: no root needed) on each TCP and UDP port,
//! forwarding to the Service's ready endpoints with health checks; its address goes to
//! `status.loadBalancer.ingress`, kube's `service.kubernetes.io/load-balancer-cleanup`
//! finalizer holds the Service until the balancer is gone. A killed balancer is restarted at
//! once (the loop waits on the processes it starts), a changed Service or endpoint set is
//! applied by rewriting the balancer's configuration, which it reloads in place.
//!
//! Files: `config.rs` (the balancer's configuration file and state file), `desired.rs`
//! (Service + EndpointSlices → configuration), `pool.rs` (addresses), `supervisor.rs` (the
//! processes), `external.rs` (observe / create / update / delete), `proxy/` (the data plane).
//! `docs/providers.md` ("Load balancers") is the user's guide.

pub mod config;
mod desired;
mod external;
pub mod pool;
pub mod proxy;
mod supervisor;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;
use setpoint_runtime::managed::{ManagedOptions, ManagedReconciler};
use setpoint_runtime::{
    Controller, ControllerError, Enqueuer, EventHandler, InformerOptions, ObjectKey, Predicate,
};
use tokio_util::sync::CancellationToken;

pub use self::desired::ALGORITHM_ANNOTATION;
use self::desired::SERVICE_NAME_LABEL;
use self::external::{slice_service, Balancers, LbConnector, BY_SERVICE};
use self::pool::AddressPool;
use self::supervisor::Supervisor;
use crate::ProviderContext;

/// The loop's name (controller, field manager, events).
const LOOP_NAME: &str = "service-lb";

/// Runs the load-balancer loop until `shutdown` is cancelled; then stops every balancer.
pub async fn run(ctx: ProviderContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    let dir = ctx.settings.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("setpoint-providers-{}", std::process::id()))
    });
    let command = ctx
        .settings
        .lb_proxy_command
        .clone()
        .unwrap_or_else(default_command);
    let pool = AddressPool::parse(&ctx.settings.lb_address_pool);
    if let Err(error) = &pool {
        tracing::error!(%error, "no LoadBalancer Service gets an address");
    }
    let slices = ctx.factory.informer::<EndpointSlice>();
    slices.add_index(BY_SERVICE, Arc::new(slice_service));
    let balancers = Arc::new(Balancers {
        services: ctx.factory.informer::<Service>().store(),
        slices: slices.store(),
        pool: pool.map(Mutex::new),
        seeded: Mutex::new(false),
        supervisor: Supervisor::new(dir.join("lb"), command),
        forwarding: ctx.settings.lb_forwarding,
    });
    let on_exit = Arc::clone(&balancers.supervisor.on_exit);
    let mut options = ManagedOptions::new(LOOP_NAME);
    options.poll_interval = ctx.settings.poll_interval;
    let reconciler = ManagedReconciler::new(
        ctx.client.clone(),
        LbConnector(Arc::clone(&balancers)),
        options,
    );
    let result = Controller::<Service>::new(&ctx.factory)
        .named(LOOP_NAME)
        .registered_in(&ctx.metrics)
        .predicate(service_changes())
        .watches_handler(
            InformerOptions::<EndpointSlice>::default(),
            move |enqueuer| {
                // The same queue takes the Services of balancers that exited.
                let _ = on_exit.set(enqueuer.clone());
                EnqueueSliceService(enqueuer)
            },
        )
        .run(reconciler, Arc::new(()), shutdown.cancelled_owned())
        .await;
    balancers.supervisor.stop_all();
    result
}

/// `setpoint lb-proxy`: this executable.
fn default_command() -> Vec<String> {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "setpoint".to_owned());
    vec![exe, "lb-proxy".to_owned()]
}

/// Which Service changes reconcile it: the managed loop's (labels, annotations, finalizers,
/// deletion), and the spec — Services have no `generation` to go by. Not status-only writes
/// (the loop's own).
fn service_changes() -> Predicate<Service> {
    Predicate::new(|old: Option<&Service>, new: &Service| {
        old.is_none_or(|old| old.spec != new.spec)
    })
    .or(setpoint_runtime::managed::changes())
}

/// Enqueues a slice's Service (old and new, for an update).
struct EnqueueSliceService(Enqueuer<ObjectKey>);

impl EnqueueSliceService {
    fn enqueue(&self, slice: &EndpointSlice) {
        let name = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL));
        if let (Some(namespace), Some(name)) = (&slice.metadata.namespace, name) {
            self.0.add(ObjectKey::namespaced(namespace, name));
        }
    }
}

impl EventHandler<EndpointSlice> for EnqueueSliceService {
    fn on_add(&self, slice: &Arc<EndpointSlice>, _in_initial_list: bool) {
        self.enqueue(slice);
    }

    fn on_update(&self, old: &Arc<EndpointSlice>, new: &Arc<EndpointSlice>) {
        self.enqueue(old);
        if old.metadata.labels != new.metadata.labels {
            self.enqueue(new);
        }
    }

    fn on_delete(&self, deleted: &setpoint_runtime::Deleted<EndpointSlice>) {
        self.enqueue(deleted.object());
    }
}
