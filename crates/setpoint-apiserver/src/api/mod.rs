//! The server's state: what is served ([`Served`]: the registry, one registry store per
//! resource, the OpenAPI documents), over which store, and how node agents are reached. The
//! HTTP handlers (`handlers/`) answer requests with it; the CRD controller (`crd/`) changes
//! what it serves. It is built in `lib.rs`, which also starts the CRD controller. Beside it:
//! the components' health that ComponentStatus reports (`components.rs`) and the task keeping
//! an IPAddress for every Service cluster IP (`ip_addresses.rs`), the authenticator
//! (`authn.rs`) and the loop filling legacy ServiceAccount token Secrets (`legacy_tokens.rs`).

mod authn;
mod components;
mod ip_addresses;
mod legacy_tokens;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use setpoint_core::ApiError;
use setpoint_store::Store;

use crate::node_client::NodeClient;
use crate::openapi::OpenApiDocs;
use crate::registry::store::Scope;
use crate::registry::store::{store_error, RegistryStore};
use crate::registry::{
    compare_versions, default_service_cidr, system_class, with_ready_condition, Registry,
    ResourceDef, DEFAULT_SERVICE_CIDR, SYSTEM_PRIORITY_CLASSES,
};
use crate::telemetry::{Telemetry, TimedStore};

pub use components::ComponentCheck;

/// Namespaces that exist from the start.
/// The StorageClass every cluster starts with, marked the default.
const DEFAULT_STORAGE_CLASS: &str = "standard";

/// `standard`: volumes are directories on the node of their first pod
/// (`setpoint.dev/local-path`, provisioned by the `local-path-provisioner` loop), deleted
/// with their claim.
fn default_storage_class() -> serde_json::Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": DEFAULT_STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "setpoint.dev/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    })
}

const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The key of a resource: group, version, plural.
type Gvr = (String, String, String);

fn gvr_of(def: &ResourceDef) -> Gvr {
    (
        def.gvk.group.clone(),
        def.gvk.version.clone(),
        def.plural.clone(),
    )
}

/// What the API serves at one moment: swapped whole when a CRD changes what is served, so a
/// request sees one consistent set of resources, stores and documents.
pub(crate) struct Served {
    pub(crate) registry: Registry,
    stores: BTreeMap<Gvr, Arc<RegistryStore>>,
    pub(crate) openapi: OpenApiDocs,
    /// The resources of each registered CRD, by CRD name.
    pub(crate) custom: BTreeMap<String, Vec<Arc<ResourceDef>>>,
}

impl Served {
    /// Every resource's registry store.
    pub(crate) fn stores(&self) -> impl Iterator<Item = &Arc<RegistryStore>> {
        self.stores.values()
    }

    /// The registry store of a served resource.
    pub(crate) fn store(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&Arc<RegistryStore>> {
        self.stores
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }
}

/// The API: built-in resources and those of CustomResourceDefinitions, over a store.
pub struct Api {
    pub(crate) store: Arc<dyn Store>,
    served: parking_lot::RwLock<Arc<Served>>,
    builtins: Vec<Arc<ResourceDef>>,
    window: usize,
    /// Serializes changes to what is served (CRD registration).
    pub(crate) registration: tokio::sync::Mutex<()>,
    /// How `pods/log` and `metrics.k8s.io` reach node agents; unset until credentials are given.
    pub(crate) node_client: std::sync::OnceLock<NodeClient>,
    /// What the embedding process says of its components, for ComponentStatus.
    pub(crate) component_checks: parking_lot::RwLock<BTreeMap<String, ComponentCheck>>,
    /// The authenticator chain and ServiceAccount token issuer (`authn.rs`); set when
    /// credentials are given, or on first use with an in-memory key.
    pub(crate) token_authenticator: std::sync::OnceLock<crate::auth::TokenAuthenticator>,
    /// How to authenticate ([`Api::set_authentication`]); defaults when unset.
    pub(crate) authn_config: std::sync::OnceLock<crate::auth::AuthenticationConfig>,
    /// The web console's one-time login tokens and sessions (`auth/console.rs`).
    pub(crate) console_sessions: crate::auth::console::ConsoleSessions,
    /// Requests, watches and store calls counted for `/metrics`.
    pub(crate) telemetry: Arc<Telemetry>,
    /// Renders `/metrics`; unset (404) until the embedding process provides it.
    pub(crate) metrics_renderer: std::sync::OnceLock<MetricsRenderer>,
    /// Admission's state (compiled webhook configurations, connections to webhooks), of a
    /// type `admission/` owns and creates on first use.
    pub(crate) admission_state: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// Aggregation's state (the APIServices compiled, the front-proxy identity, aggregated
    /// servers' discovery), of a type `aggregation/` owns and creates on first use.
    pub(crate) aggregation_state: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// The audit log, of a type `audit/` owns; unset (nothing recorded) until
    /// [`Api::enable_audit`].
    pub(crate) audit: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// API Priority and Fairness' state (settings, compiled configuration, queues), of a type
    /// `flowcontrol/` owns and creates on first use.
    pub(crate) flowcontrol_state: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// This API, for what it serves that must reach it back (a CRD's conversion webhook
    /// resolves Services through it).
    pub(crate) this: std::sync::Weak<Api>,
    /// Who may do what: `[system:masters → node authorizer → RBAC]` (`authz/`).
    authorizer: Arc<crate::authz::Chain>,
}

/// Renders the whole Prometheus text exposition of the process serving the API.
pub type MetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

impl Api {
    /// Serves `builtins` from `store` (keeping `window` recent events per resource for watches
    /// to resume from), creating the initial namespaces if missing, and starts keeping the
    /// IPAddresses of cluster IPs (`ip_addresses.rs`). The CRD controller is not started:
    /// `lib.rs` does that.
    pub(crate) async fn build(
        store: Arc<dyn Store>,
        window: usize,
        builtins: Vec<ResourceDef>,
    ) -> Result<Arc<Api>, ApiError> {
        let telemetry = Arc::new(Telemetry::default());
        let store: Arc<dyn Store> = Arc::new(TimedStore::new(store, telemetry.clone()));
        let builtins: Vec<Arc<ResourceDef>> = builtins.into_iter().map(Arc::new).collect();
        let registry = Registry::new(builtins.clone());
        let stores: BTreeMap<Gvr, Arc<RegistryStore>> = registry
            .all()
            .map(|def| {
                (
                    gvr_of(def),
                    Arc::new(RegistryStore::start(def.clone(), store.clone(), window)),
                )
            })
            .collect();
        let openapi = OpenApiDocs::generate(&registry);
        let authorizer = Arc::new(crate::authz::Chain::over(|group, plural| {
            let gvr = (group.into(), "v1".into(), plural.into());
            stores
                .get(&gvr)
                .map(|s: &Arc<RegistryStore>| s.cache().clone())
        })?);
        let api = Arc::new_cyclic(|this| Api {
            store,
            served: parking_lot::RwLock::new(Arc::new(Served {
                registry,
                stores,
                openapi,
                custom: BTreeMap::new(),
            })),
            builtins,
            window,
            registration: tokio::sync::Mutex::new(()),
            node_client: std::sync::OnceLock::new(),
            token_authenticator: std::sync::OnceLock::new(),
            authn_config: std::sync::OnceLock::new(),
            console_sessions: crate::auth::console::ConsoleSessions::default(),
            component_checks: parking_lot::RwLock::new(BTreeMap::new()),
            telemetry,
            metrics_renderer: std::sync::OnceLock::new(),
            admission_state: std::sync::OnceLock::new(),
            aggregation_state: std::sync::OnceLock::new(),
            audit: std::sync::OnceLock::new(),
            flowcontrol_state: std::sync::OnceLock::new(),
            this: this.clone(),
            authorizer,
        });
        api.bootstrap().await?;
        ip_addresses::start(&api);
        legacy_tokens::start(&api);
        Ok(api)
    }

    /// The authorizer chain every request is checked by.
    pub(crate) fn authorizer(&self) -> &Arc<crate::authz::Chain> {
        &self.authorizer
    }

    /// What is served now.
    pub(crate) fn served(&self) -> Arc<Served> {
        self.served.read().clone()
    }

    /// Each served group-resource's watch cache figures. A resource served in several versions
    /// has a cache per version over the same objects; the first version's counts.
    pub(crate) fn cache_figures(&self) -> Vec<crate::telemetry::CacheSnapshot> {
        let mut out: BTreeMap<(String, String), crate::telemetry::CacheSnapshot> = BTreeMap::new();
        for store in self.served().stores() {
            let def = &store.def;
            let key = (def.gvk.group.clone(), def.plural.clone());
            if out.contains_key(&key) {
                continue;
            }
            let f = store.cache().figures();
            let (own_bytes, shared_bytes) = store.cache().held_bytes();
            out.insert(
                key.clone(),
                crate::telemetry::CacheSnapshot {
                    group: key.0,
                    resource: key.1,
                    objects: f.objects as u64,
                    events: f.events as u64,
                    capacity: f.capacity as u64,
                    events_received: f.events_received,
                    revision: f.revision.0,
                    own_bytes,
                    shared_bytes,
                },
            );
        }
        out.into_values().collect()
    }

    /// The registry store of `def`; `404` if the resource is no longer served.
    pub(crate) fn registry_store(&self, def: &ResourceDef) -> Result<Arc<RegistryStore>, ApiError> {
        self.registry_store_of(&def.gvk.group, &def.gvk.version, &def.plural)
    }

    /// The registry store of a served resource, by group, version and plural.
    pub(crate) fn registry_store_of(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Result<Arc<RegistryStore>, ApiError> {
        self.served()
            .store(group, version, plural)
            .cloned()
            .ok_or_else(ApiError::no_such_path)
    }

    /// Serves `resources` for the CRD `crd_name` (none: stops serving it), reusing the
    /// registry stores (and watch caches) of resources whose definition did not change and
    /// stopping those of the ones that go. The caller holds [`Api::registration`].
    pub(crate) fn set_custom(&self, crd_name: &str, resources: Vec<Arc<ResourceDef>>) {
        let current = self.served();
        let mut custom = current.custom.clone();
        if resources.is_empty() {
            custom.remove(crd_name);
        } else {
            custom.insert(crd_name.to_owned(), resources);
        }
        let mut defs = self.builtins.clone();
        let mut extra: Vec<Arc<ResourceDef>> = custom.values().flatten().cloned().collect();
        extra.sort_by(|a, b| {
            a.gvk
                .group
                .cmp(&b.gvk.group)
                .then_with(|| compare_versions(&a.gvk.version, &b.gvk.version))
        });
        defs.extend(extra);
        let registry = Registry::new(defs);
        let mut stores = BTreeMap::new();
        for def in registry.all() {
            let key = gvr_of(def);
            let store = match current.stores.get(&key) {
                Some(s) if Arc::ptr_eq(&s.def, def) => s.clone(),
                _ => Arc::new(RegistryStore::start(
                    def.clone(),
                    self.store.clone(),
                    self.window,
                )),
            };
            stores.insert(key, store);
        }
        for (key, store) in &current.stores {
            if !stores.get(key).is_some_and(|s| Arc::ptr_eq(s, store)) {
                store.stop();
            }
        }
        let openapi = OpenApiDocs::generate(&registry);
        *self.served.write() = Arc::new(Served {
            registry,
            stores,
            openapi,
            custom,
        });
    }

    /// Creates what a new cluster starts with and does not have yet: the initial namespaces
    /// and the built-in priority classes, the default ServiceCIDR (made `Ready`), the
    /// default StorageClass `standard` (local-path volumes on the pod's node), and the default
    /// RBAC policy (`authz/bootstrap/`).
    async fn bootstrap(&self) -> Result<(), ApiError> {
        let namespaces = self.registry_store_of("", "v1", "namespaces")?;
        for name in INITIAL_NAMESPACES {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            self.create_missing(&namespaces, name, ns).await?;
        }
        let classes = self.registry_store_of("scheduling.k8s.io", "v1", "priorityclasses")?;
        for (name, value, description) in SYSTEM_PRIORITY_CLASSES {
            let class = system_class(name, value, description);
            self.create_missing(&classes, name, class).await?;
        }
        let storage_classes = self.registry_store_of("storage.k8s.io", "v1", "storageclasses")?;
        self.create_missing(
            &storage_classes,
            DEFAULT_STORAGE_CLASS,
            default_storage_class(),
        )
        .await?;
        let cidrs = self.registry_store_of("networking.k8s.io", "v1", "servicecidrs")?;
        self.create_missing(&cidrs, DEFAULT_SERVICE_CIDR, default_service_cidr())
            .await?;
        cidrs
            .update(
                None,
                DEFAULT_SERVICE_CIDR,
                Scope::Status,
                false,
                &|current| Ok(with_ready_condition(current, chrono::Utc::now())),
            )
            .await?;
        let rbac = "rbac.authorization.k8s.io";
        crate::authz::bootstrap::ensure(
            &*self.registry_store_of(rbac, "v1", "clusterroles")?,
            &*self.registry_store_of(rbac, "v1", "clusterrolebindings")?,
        )
        .await?;
        Ok(())
    }

    /// Creates the cluster-scoped `object` named `name` through `store` unless it exists.
    async fn create_missing(
        &self,
        store: &RegistryStore,
        name: &str,
        object: serde_json::Value,
    ) -> Result<(), ApiError> {
        let key = store.def.key(None, name);
        if self
            .store
            .get(key.as_bytes())
            .await
            .map_err(store_error)?
            .is_some()
        {
            return Ok(());
        }
        match store.create(None, object, false).await {
            Ok(_) => Ok(()),
            Err(e) if e.reason == setpoint_core::Reason::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Gives the API the client it calls node agents with (for `pods/log`). Only the first
    /// call has an effect; returns whether it was that one. [`serve`](crate::serve) calls it
    /// with the cluster's admin certificate.
    pub fn set_node_client(&self, client: NodeClient) -> bool {
        self.node_client.set(client).is_ok()
    }
}
