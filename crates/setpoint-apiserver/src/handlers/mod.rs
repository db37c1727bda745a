//! The REST API over the registry, the watch caches and the store: one [`Api`] answers every
//! request that the transport has authenticated.

mod consistent;
mod delete;
mod delete_options;
mod discovery;
mod eviction;
pub(crate) mod meta;
mod openapi;
mod params;
mod pod_log;
mod read;
pub(crate) mod response;
mod subresource;
pub(crate) mod update;
mod watch;
mod write;

// Served beside the registry rather than from it (see its docs).
mod metrics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde_json::json;
use setpoint_core::{ApiError, GroupResource};
use setpoint_store::Store;

pub(crate) use write::store_error_plain as write_store_error;

use crate::node_client::NodeClient;
use crate::registry::{builtin_resources, compare_versions, Registry, ResourceDef};
use crate::request::{self, ResourceRequest, Target, Verb};
use crate::watchcache::{WatchCache, DEFAULT_WINDOW};
use response::Body;

/// The version the server reports on `/version` (the Kubernetes API it speaks).
pub(crate) const KUBERNETES_MINOR: &str = "33";

/// Namespaces that exist from the start.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// How long a consistent read waits for the watch cache to catch up with the store.
const CACHE_CATCH_UP: Duration = Duration::from_secs(3);

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
/// request sees one consistent set of resources, caches and documents.
pub(crate) struct Served {
    pub(crate) registry: Registry,
    caches: BTreeMap<Gvr, Arc<WatchCache>>,
    openapi: openapi::OpenApiDocs,
    /// The resources of each registered CRD, by CRD name.
    pub(crate) custom: BTreeMap<String, Vec<Arc<ResourceDef>>>,
}

/// The API: built-in resources and those of CustomResourceDefinitions, over a store.
pub struct Api {
    pub(crate) store: Arc<dyn Store>,
    served: parking_lot::RwLock<Arc<Served>>,
    builtins: Vec<Arc<ResourceDef>>,
    window: usize,
    /// Serializes changes to what is served (CRD registration).
    pub(crate) registration: tokio::sync::Mutex<()>,
    /// How `pods/log` reaches node agents; unset until credentials are given.
    node_client: std::sync::OnceLock<NodeClient>,
}

impl Api {
    /// Serves the built-in resources from `store`, creating the initial namespaces if missing.
    /// Must be called within a tokio runtime (the watch caches run as tasks).
    pub async fn new(store: Arc<dyn Store>) -> Result<Arc<Api>, ApiError> {
        Self::with_watch_window(store, DEFAULT_WINDOW).await
    }

    /// Like [`Api::new`], keeping `window` recent events per resource for watches to resume
    /// from (a watch from an older resource version gets `410 Expired`).
    pub async fn with_watch_window(
        store: Arc<dyn Store>,
        window: usize,
    ) -> Result<Arc<Api>, ApiError> {
        let builtins: Vec<Arc<ResourceDef>> = builtin_resources(crate::crd::definitions())
            .into_iter()
            .map(Arc::new)
            .collect();
        let registry = Registry::new(builtins.clone());
        let caches = registry
            .all()
            .map(|def| {
                (
                    gvr_of(def),
                    WatchCache::start(def.clone(), store.clone(), window),
                )
            })
            .collect();
        let openapi = openapi::OpenApiDocs::generate(&registry);
        let api = Arc::new(Api {
            store,
            served: parking_lot::RwLock::new(Arc::new(Served {
                registry,
                caches,
                openapi,
                custom: BTreeMap::new(),
            })),
            builtins,
            window,
            registration: tokio::sync::Mutex::new(()),
            node_client: std::sync::OnceLock::new(),
        });
        api.bootstrap().await?;
        crate::crd::controller::start(&api).await?;
        Ok(api)
    }

    /// What is served now.
    pub(crate) fn served(&self) -> Arc<Served> {
        self.served.read().clone()
    }

    /// Serves `resources` for the CRD `crd_name` (none: stops serving it), reusing the watch
    /// caches of resources whose definition did not change and stopping those of the ones
    /// that go. The caller holds [`Api::registration`].
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
        let mut caches = BTreeMap::new();
        for def in registry.all() {
            let key = gvr_of(def);
            let cache = match current.caches.get(&key) {
                Some(c) if Arc::ptr_eq(&c.def, def) => c.clone(),
                _ => WatchCache::start(def.clone(), self.store.clone(), self.window),
            };
            caches.insert(key, cache);
        }
        for (key, cache) in &current.caches {
            if !caches.get(key).is_some_and(|c| Arc::ptr_eq(c, cache)) {
                cache.stop();
            }
        }
        let openapi = openapi::OpenApiDocs::generate(&registry);
        *self.served.write() = Arc::new(Served {
            registry,
            caches,
            openapi,
            custom,
        });
    }

    async fn bootstrap(&self) -> Result<(), ApiError> {
        let def = self
            .served()
            .registry
            .get("", "v1", "namespaces")
            .cloned()
            .ok_or_else(|| ApiError::internal("no namespaces resource"))?;
        for name in INITIAL_NAMESPACES {
            let key = def.key(None, name);
            if self
                .store
                .get(key.as_bytes())
                .await
                .map_err(write::store_error_plain)?
                .is_some()
            {
                continue;
            }
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            match write::create_object(self, &def, None, ns, false).await {
                Ok(_) => {}
                Err(e) if e.reason == setpoint_core::Reason::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Gives the API the client it calls node agents with (for `pods/log`). Only the first
    /// call has an effect; returns whether it was that one. [`serve`](crate::serve) calls it
    /// with the cluster's admin certificate.
    pub fn set_node_client(&self, client: NodeClient) -> bool {
        self.node_client.set(client).is_ok()
    }

    /// The watch cache of a resource; `404` if the resource is no longer served.
    pub(crate) fn cache(&self, def: &ResourceDef) -> Result<Arc<WatchCache>, ApiError> {
        self.served()
            .caches
            .get(&gvr_of(def))
            .cloned()
            .ok_or_else(ApiError::no_such_path)
    }

    /// Answers one authenticated request.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Body> {
        match self.route(request).await {
            Ok(response) => response,
            Err(e) => response::error(&e),
        }
    }

    async fn route(&self, request: Request<Bytes>) -> Result<Response<Body>, ApiError> {
        let query = request::parse_query(request.uri().query());
        let target = request::resolve(request.method(), request.uri().path(), &query)?;
        let accept = request
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(answer) = metrics::serve(self, &target, &query, accept.as_deref()).await {
            return answer;
        }
        match target {
            Target::CoreGroup => Ok(discovery::core_group(self, accept.as_deref())),
            Target::Groups => Ok(discovery::groups(self, accept.as_deref())),
            Target::Group(group) => discovery::group(self, &group),
            Target::GroupVersion { group, version } => {
                discovery::group_version(self, &group, &version)
            }
            Target::Other(path) => self.other(request.method(), &path, accept.as_deref()),
            Target::Resource(r) => self.resource(r, request, query, accept.as_deref()).await,
        }
    }

    fn other(
        &self,
        method: &Method,
        path: &str,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        if method == Method::GET {
            if path == "/version" {
                return Ok(response::json_bytes(StatusCode::OK, version()));
            }
            if let Some(r) = self.served().openapi.serve(path, accept)? {
                return Ok(r);
            }
        }
        Err(ApiError::no_such_path())
    }

    async fn resource(
        &self,
        r: ResourceRequest,
        request: Request<Bytes>,
        query: BTreeMap<String, String>,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let def = self
            .served()
            .registry
            .get(&r.group, &r.version, &r.resource)
            .cloned()
            .ok_or_else(ApiError::no_such_path)?;
        if r.namespace.is_some() && !def.namespaced {
            return Err(ApiError::no_such_path());
        }
        let ctx = Ctx {
            api: self,
            def: &def,
            req: &r,
            query: &query,
            accept,
            content_type: request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned(),
            body: request.into_body(),
        };
        if let Some(sub) = &r.subresource {
            if !def.has_subresource(sub) {
                return Err(ApiError::no_such_path());
            }
            return subresource::handle(&ctx, sub).await;
        }
        if !def.supports(r.verb.as_str()) {
            return Err(ApiError::method_not_supported(
                &def.group_resource(),
                r.verb.as_str(),
            ));
        }
        if r.verb == Verb::Create {
            if let Some(e) = def.strategy.refuse_create() {
                return Err(e);
            }
        }
        let response = match r.verb {
            Verb::Get => read::get(&ctx).await,
            Verb::List => read::list(&ctx).await,
            Verb::Watch => watch::watch(&ctx).await,
            Verb::Create => write::create(&ctx).await,
            Verb::Update => update::update(&ctx).await,
            Verb::Patch => update::patch(&ctx).await,
            Verb::Delete => delete::delete(&ctx).await,
            Verb::DeleteCollection => delete::delete_collection(&ctx).await,
        };
        // A CRD write changes what is served: apply it before answering, so the new
        // resource is in discovery as soon as the client hears back.
        if def.strategy.defines_resources()
            && !matches!(r.verb, Verb::Get | Verb::List | Verb::Watch)
            && response.is_ok()
        {
            crate::crd::controller::reconcile_after_write(self, r.name.as_deref()).await;
        }
        response
    }
}

/// Everything a resource handler needs about its request.
pub(crate) struct Ctx<'a> {
    pub(crate) api: &'a Api,
    pub(crate) def: &'a Arc<ResourceDef>,
    pub(crate) req: &'a ResourceRequest,
    pub(crate) query: &'a BTreeMap<String, String>,
    pub(crate) accept: Option<&'a str>,
    pub(crate) content_type: String,
    pub(crate) body: Bytes,
}

impl Ctx<'_> {
    pub(crate) fn gr(&self) -> GroupResource {
        self.def.group_resource()
    }

    pub(crate) fn name(&self) -> &str {
        self.req.name.as_deref().unwrap_or_default()
    }

    pub(crate) fn key(&self) -> String {
        self.def.key(self.req.namespace.as_deref(), self.name())
    }

    pub(crate) fn dry_run(&self) -> Result<bool, ApiError> {
        match self.query.get("dryRun").map(String::as_str) {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }
}

/// The `/version` document, as kube-apiserver writes it: `version.Info`'s fields in order,
/// indented by two spaces, without a trailing newline (it is not written by the API encoder).
pub(crate) fn version() -> Vec<u8> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Info {
        major: &'static str,
        minor: &'static str,
        git_version: String,
        git_commit: &'static str,
        git_tree_state: &'static str,
        build_date: &'static str,
        go_version: &'static str,
        compiler: &'static str,
        platform: String,
    }
    let info = Info {
        major: "1",
        minor: KUBERNETES_MINOR,
        git_version: format!(
            "v1.{KUBERNETES_MINOR}.0-setpoint.{}",
            env!("CARGO_PKG_VERSION")
        ),
        git_commit: "",
        git_tree_state: "clean",
        build_date: "",
        go_version: "",
        compiler: "rustc",
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    };
    serde_json::to_vec_pretty(&info).expect("the version document serializes")
}
