//! The LoadBalancer Service's external object, its balancer, as the managed-resource loop sees
//! it ([`Connector`] and [`ExternalClient`] for `Service`):
//!
//! - observe: the balancer exists while its process runs; it is up to date while its
//!   configuration file is what the Service and its EndpointSlices make now (and it sits on
//!   `spec.loadBalancerIP` when one is asked for); it is ready once the process has applied
//!   that file and holds every listener. The status patch is the Service's
//!   `status.loadBalancer.ingress` (`ip`, `ipMode: VIP`, the ports), written once it listens.
//! - create: an address from the pool, the configuration written, the process started.
//! - update: the configuration rewritten (the process reloads it on SIGHUP).
//! - delete: the process stopped, the address released. A Service that stays (no longer a
//!   LoadBalancer of ours) then observes as missing with its ingress cleared.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;
use serde_json::{json, Value};
use setpoint_runtime::managed::Managed as _;
use setpoint_runtime::managed::{
    ConnectionDetails, Connector, Creation, ExternalClient, ExternalError, Observation, Readiness,
};
use setpoint_runtime::{ObjectCache, ObjectKey};

use crate::lb::config::Forwarding;
use crate::lb::config::{digest, state_path, BalancerConfig, ProxyState};
use crate::lb::desired::{balancer, SERVICE_NAME_LABEL};
use crate::lb::pool::{AddressPool, PoolError};
use crate::lb::supervisor::Supervisor;

/// The name of the slices' index by Service (`namespace/name`).
pub(crate) const BY_SERVICE: &str = "service-lb/service";
/// How soon a balancer that has not applied its configuration yet is looked at again.
const LOADING_RECHECK: Duration = Duration::from_millis(300);

/// Why a balancer could not be made or changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LbError {
    /// No address for it.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// `spec.loadBalancerIP` is not an IPv4 address.
    #[error("loadBalancerIP {0:?} is not an IPv4 address")]
    BadAddress(String),
    /// Its files or process could not be made.
    #[error("starting the balancer process")]
    Process(#[source] std::io::Error),
}

/// What every reconcile of the loop shares: the pool, the processes, the caches.
pub(crate) struct Balancers {
    pub(crate) services: ObjectCache<Service>,
    pub(crate) slices: ObjectCache<EndpointSlice>,
    /// The pool; `Err` when `--lb-address-pool` does not parse (every Service then shows it).
    pub(crate) pool: Result<Mutex<AddressPool>, PoolError>,
    /// Whether the pool has been seeded from the Services' status.
    pub(crate) seeded: Mutex<bool>,
    pub(crate) supervisor: Supervisor,
    /// Who moves the bytes (`--lb-forwarding`).
    pub(crate) forwarding: Forwarding,
}

/// The connector (and client: a balancer needs no connection) of the loop.
#[derive(Clone)]
pub(crate) struct LbConnector(pub(crate) Arc<Balancers>);

impl Balancers {
    fn pool(&self) -> Result<&Mutex<AddressPool>, PoolError> {
        self.pool.as_ref().map_err(Clone::clone)
    }

    /// Reserves, once, the addresses the Services' status already shows (a restart keeps
    /// every Service on its address).
    fn seed(&self) -> Result<(), PoolError> {
        let pool = self.pool()?;
        let mut seeded = self.seeded.lock();
        if *seeded {
            return Ok(());
        }
        let mut pool = pool.lock();
        for service in self.services.list() {
            if let Some(ip) = ingress_ip(&service) {
                pool.adopt(&ObjectKey::of(service.as_ref()), ip);
            }
        }
        *seeded = true;
        Ok(())
    }

    /// The configuration `service` should run on `address`.
    fn desired(&self, service: &Service, address: Ipv4Addr) -> BalancerConfig {
        let key = ObjectKey::of(service);
        let value = format!(
            "{}/{}",
            key.namespace.as_deref().unwrap_or_default(),
            key.name
        );
        let slices = self.slices.by_index(BY_SERVICE, &value).unwrap_or_default();
        let slices: Vec<&EndpointSlice> = slices.iter().map(AsRef::as_ref).collect();
        let mut config = balancer(service, &slices, IpAddr::V4(address));
        config.forwarding = self.forwarding;
        config
    }

    /// An address for `service` (see [`AddressPool::allocate`]).
    fn allocate(&self, service: &Service) -> Result<Ipv4Addr, LbError> {
        let wanted = wanted_ip(service)?;
        let ip =
            self.pool()?
                .lock()
                .allocate(&ObjectKey::of(service), wanted, ingress_ip(service))?;
        Ok(ip)
    }

    /// Writes the configuration and starts the process if needed.
    async fn apply(&self, service: &Service) -> Result<(), LbError> {
        let address = self.allocate(service)?;
        let config = self.desired(service, address).to_bytes();
        self.supervisor
            .apply(&ObjectKey::of(service), &config)
            .await
            .map_err(LbError::Process)?;
        Ok(())
    }
}

impl Connector<Service> for LbConnector {
    type External = LbConnector;

    async fn connect(&self, _service: &Service) -> Result<LbConnector, ExternalError> {
        self.0.seed()?;
        Ok(self.clone())
    }
}

impl ExternalClient<Service> for LbConnector {
    async fn observe(&self, service: &Service) -> Result<Observation, ExternalError> {
        let lb = &self.0;
        let key = ObjectKey::of(service);
        let Some(pid) = lb.supervisor.running(&key) else {
            let mut missing = Observation::missing();
            if !service.wants_external() {
                // Released (no longer a LoadBalancer of ours): its address goes too. A
                // Service that still wants one keeps it while its balancer is restarted.
                missing.status = Some(json!({"loadBalancer": {"ingress": null}}));
            }
            return Ok(missing);
        };
        let path = lb.supervisor.config_path(&key);
        let on_file = std::fs::read(&path).unwrap_or_default();
        let running = BalancerConfig::from_bytes(&on_file).ok();
        // The address it holds; a balancer left by an earlier run is adopted on its address.
        let held = {
            let mut pool = lb.pool()?.lock();
            match pool.held_by(&key) {
                Some(ip) => Some(ip),
                None => running
                    .as_ref()
                    .and_then(|c| match c.address {
                        IpAddr::V4(ip) => Some(ip),
                        IpAddr::V6(_) => None,
                    })
                    .filter(|ip| pool.adopt(&key, *ip)),
            }
        };
        let Some(address) = held else {
            // Running on an address it cannot keep: the update moves it.
            return Ok(Observation {
                exists: true,
                up_to_date: false,
                diff: Some("the balancer's address is not its own".to_owned()),
                ..Observation::available()
            });
        };
        let wanted = wanted_ip(service)?;
        let desired = lb.desired(service, address).to_bytes();
        let mut observation = Observation::available();
        if on_file != desired || wanted.is_some_and(|w| w != address) {
            observation.up_to_date = false;
            observation.diff = Some(match wanted {
                Some(w) if w != address => format!("address {address}, loadBalancerIP {w}"),
                _ => "ports or endpoints changed".to_owned(),
            });
        }
        let state: Option<ProxyState> = std::fs::read(state_path(&path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let applied = state
            .as_ref()
            .filter(|s| s.pid == pid && s.applied == digest(&on_file));
        match (applied, &running) {
            (None, _) | (_, None) => {
                observation.readiness = Readiness::Unavailable(
                    "the balancer has not applied its configuration yet".to_owned(),
                );
                observation.next_observation = Some(LOADING_RECHECK);
            }
            (Some(state), Some(config)) => {
                if !state.errors.is_empty() {
                    observation.readiness = Readiness::Unavailable(state.errors.join("; "));
                }
                observation.status = Some(json!({"loadBalancer": {"ingress": [ingress(config)]}}));
            }
        }
        Ok(observation)
    }

    async fn create(&self, service: &Service) -> Result<Creation, ExternalError> {
        self.0.apply(service).await?;
        Ok(Creation::default())
    }

    async fn update(&self, service: &Service) -> Result<ConnectionDetails, ExternalError> {
        self.0.apply(service).await?;
        Ok(ConnectionDetails::new())
    }

    async fn delete(&self, service: &Service) -> Result<(), ExternalError> {
        let key = ObjectKey::of(service);
        self.0.supervisor.stop(&key).await;
        if let Ok(pool) = self.0.pool() {
            pool.lock().release(&key);
        }
        Ok(())
    }
}

/// One `status.loadBalancer.ingress` entry for a balancer running `config`.
fn ingress(config: &BalancerConfig) -> Value {
    let ports: Vec<Value> = config
        .ports
        .iter()
        .map(|p| json!({"port": p.port, "protocol": p.protocol.to_string()}))
        .collect();
    json!({"ip": config.address.to_string(), "ipMode": "VIP", "ports": ports})
}

/// The first IPv4 address of the Service's `status.loadBalancer.ingress`.
fn ingress_ip(service: &Service) -> Option<Ipv4Addr> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .iter()
        .find_map(|i| i.ip.as_deref()?.parse().ok())
}

/// `spec.loadBalancerIP`, when set.
fn wanted_ip(service: &Service) -> Result<Option<Ipv4Addr>, LbError> {
    match service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.as_deref())
        .filter(|s| !s.is_empty())
    {
        None => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| LbError::BadAddress(text.to_owned())),
    }
}

/// The index of slices by their Service (`namespace/name` from the service-name label).
pub(crate) fn slice_service(slice: &EndpointSlice) -> Vec<String> {
    let namespace = slice.metadata.namespace.clone().unwrap_or_default();
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SERVICE_NAME_LABEL))
        .map(|name| vec![format!("{namespace}/{name}")])
        .unwrap_or_default()
}
