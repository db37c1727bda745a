//! API aggregation, as kube-apiserver's aggregator does it: an `apiregistration.k8s.io/v1`
//! APIService names a group-version, served here (`spec.service: null`, "Local") or by
//! another server behind a Service, to which its requests are proxied.
//!
//! - [`local`]: one APIService per group-version this server serves, kept up to date as CRDs
//!   come and go (labelled `kube-aggregator.kubernetes.io/automanaged`), `Available=True
//!   Local`.
//! - [`registered`]: every APIService, compiled from its watch cache once per change.
//! - [`proxy`]: a request under `/apis/{group}/{version}` of an APIService with a Service goes
//!   there over HTTPS (verified against `caBundle` for `NAME.NAMESPACE.svc`), with the user in
//!   `X-Remote-*` headers and the front-proxy client certificate ([`transport`]); the answer
//!   streams back.
//! - [`availability`]: the `Available` condition of each APIService with a Service (Service,
//!   endpoints, a discovery request), re-checked periodically and on changes; it also refreshes
//!   [`discovery`], the aggregated servers' resources that `/apis` and aggregated discovery
//!   merge in, and their OpenAPI v2 definitions, merged into `/openapi/v2` ([`openapi_v2`]).
//! - [`authentication`]: `kube-system/extension-apiserver-authentication`, which tells
//!   aggregated servers whom to trust.
//!
//! docs/design/apiserver.md ("API aggregation") says what differs from kube-apiserver.

pub(crate) mod authentication;
mod availability;
pub(crate) mod discovery;
pub(crate) mod local;
pub(crate) mod proxy;
pub(crate) mod registered;
mod transport;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::api::Api;
use crate::pki::Pki;
use registered::Registered;
pub(crate) use transport::Identity;

/// An APIService's `Available` condition, if it has one.
pub(crate) fn available_condition(api_service: &serde_json::Value) -> Option<&serde_json::Value> {
    api_service["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")
}

/// How often each APIService with a Service is checked by default (kube-apiserver: 30 s).
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(30);

/// Swagger 2.0 `definitions`, by name.
type Definitions = serde_json::Map<String, serde_json::Value>;

/// Aggregation's state, kept in [`Api::aggregation_state`].
#[derive(Default)]
pub(crate) struct State {
    /// Every APIService, compiled.
    registered: registered::Compiled,
    /// The front-proxy client certificate; unset until the credentials are loaded.
    identity: OnceLock<Identity>,
    /// What the aggregated servers serve, as their discovery said.
    pub(crate) discovery: discovery::Cache,
    /// Idle connections to aggregated servers.
    pub(crate) pool: Arc<transport::Pool>,
    /// How often APIServices are checked (unset: [`DEFAULT_CHECK_INTERVAL`]).
    interval: OnceLock<Duration>,
    /// The Swagger 2.0 `definitions` of each aggregated server (by APIService), and how many
    /// times they changed.
    openapi_v2: parking_lot::Mutex<(u64, BTreeMap<String, Definitions>)>,
    /// `/openapi/v2` with them merged, for (own document, change count).
    merged_v2: parking_lot::Mutex<Option<((usize, u64), bytes::Bytes)>>,
}

impl State {
    /// Keeps the v2 `definitions` of `apiservice`'s server.
    pub(crate) fn set_openapi_v2(
        &self,
        apiservice: &str,
        definitions: serde_json::Map<String, serde_json::Value>,
    ) {
        let mut v2 = self.openapi_v2.lock();
        if v2.1.get(apiservice) != Some(&definitions) {
            v2.1.insert(apiservice.to_owned(), definitions);
            v2.0 += 1;
        }
    }

    /// Forgets the v2 definitions of APIServices not in `keep`.
    pub(crate) fn retain_openapi_v2(&self, keep: &[String]) {
        let mut v2 = self.openapi_v2.lock();
        let before = v2.1.len();
        v2.1.retain(|name, _| keep.contains(name));
        if v2.1.len() != before {
            v2.0 += 1;
        }
    }
}

/// `/openapi/v2` (protobuf) with the definitions of aggregated servers merged in, or `None`
/// when there are none (serve `own` as it is). Merged once per change.
pub(crate) fn openapi_v2(api: &Api, own: &bytes::Bytes) -> Option<bytes::Bytes> {
    let state = state(api);
    let (generation, extra) = {
        let v2 = state.openapi_v2.lock();
        if v2.1.values().all(serde_json::Map::is_empty) {
            return None;
        }
        let mut extra = serde_json::Map::new();
        for definitions in v2.1.values() {
            for (name, schema) in definitions {
                extra.entry(name.clone()).or_insert_with(|| schema.clone());
            }
        }
        (v2.0, extra)
    };
    let key = (own.as_ptr() as usize, generation);
    if let Some((k, merged)) = &*state.merged_v2.lock() {
        if *k == key {
            return Some(merged.clone());
        }
    }
    let merged = bytes::Bytes::from(crate::openapi::with_definitions(own, &extra)?);
    *state.merged_v2.lock() = Some((key, merged.clone()));
    Some(merged)
}

pub(crate) fn state(api: &Api) -> Arc<State> {
    let any: Arc<dyn Any + Send + Sync> = api
        .aggregation_state
        .get_or_init(|| Arc::new(State::default()))
        .clone();
    // The slot only ever holds a `State` (set just above, here only).
    any.downcast::<State>().unwrap_or_default()
}

impl State {
    /// The front-proxy identity, if the credentials are loaded.
    pub(crate) fn identity(&self) -> Option<&Identity> {
        self.identity.get()
    }
}

/// Every APIService now, in name order.
pub(crate) fn registered(api: &Api) -> Arc<Vec<Arc<Registered>>> {
    let state = state(api);
    match api
        .served()
        .store("apiregistration.k8s.io", "v1", "apiservices")
    {
        Some(store) => state.registered.get(store.cache()),
        None => Arc::default(),
    }
}

/// The APIService with a Service that serves `group`/`version`, if any.
pub(crate) fn remote(api: &Api, group: &str, version: &str) -> Option<Arc<Registered>> {
    registered(api)
        .iter()
        .find(|r| r.service.is_some() && r.group == group && r.version == version)
        .cloned()
}

/// A group with APIServices that have a Service: what discovery merges in.
pub(crate) struct RemoteGroup {
    pub(crate) name: String,
    /// The highest `groupPriorityMinimum` of its APIServices.
    pub(crate) priority: i64,
    /// Its APIServices, the preferred version first (`versionPriority`, then Kubernetes'
    /// version order).
    pub(crate) versions: Vec<Arc<Registered>>,
}

/// The groups of APIServices with a Service, by descending priority, then name.
pub(crate) fn remote_groups(api: &Api) -> Vec<RemoteGroup> {
    let mut groups: Vec<RemoteGroup> = Vec::new();
    for r in registered(api).iter().filter(|r| r.service.is_some()) {
        match groups.iter_mut().find(|g| g.name == r.group) {
            Some(g) => {
                g.priority = g.priority.max(r.group_priority);
                g.versions.push(r.clone());
            }
            None => groups.push(RemoteGroup {
                name: r.group.clone(),
                priority: r.group_priority,
                versions: vec![r.clone()],
            }),
        }
    }
    for g in &mut groups {
        g.versions.sort_by(|a, b| {
            b.version_priority
                .cmp(&a.version_priority)
                .then_with(|| crate::registry::compare_versions(&a.version, &b.version))
        });
    }
    groups.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.name.cmp(&b.name))
    });
    groups
}

/// The discovery entry (`APIVersionDiscovery`) of an aggregated group-version: as its server
/// last said, or, never reached, the version without resources and `Stale` (as kube-apiserver
/// lists it; clients report "stale GroupVersion discovery").
pub(crate) fn discovered(api: &Api, registered: &Registered) -> serde_json::Value {
    state(api)
        .discovery
        .get(&registered.name)
        .unwrap_or_else(|| {
            serde_json::json!({"version": registered.version, "resources": [], "freshness": "Stale"})
        })
}

/// The `/openapi/v3` index entries of aggregated group-versions: `apis/{group}/{version}` and
/// the document's URL, whose `hash` changes when the server's discovery does.
pub(crate) fn openapi_paths(api: &Api) -> Vec<(String, String)> {
    use std::hash::{Hash as _, Hasher as _};
    remote_groups(api)
        .iter()
        .flat_map(|g| g.versions.iter())
        .map(|r| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            r.name.hash(&mut hasher);
            discovered(api, r)["resources"]
                .to_string()
                .hash(&mut hasher);
            let gv = format!("apis/{}/{}", r.group, r.version);
            let url = format!("/openapi/v3/{gv}?hash={:016X}", hasher.finish());
            (gv, url)
        })
        .collect()
}

impl Api {
    /// Sets how often the availability of APIServices with a Service is checked (default
    /// [`DEFAULT_CHECK_INTERVAL`]); changes of APIServices, Services and endpoints are checked
    /// within a second anyway. Only the first call, before serving, counts.
    pub fn set_apiservice_check_interval(&self, interval: Duration) {
        let _ = state(self).interval.set(interval);
    }
}

/// Registers the local APIServices and starts keeping them (called once the API is built).
pub(crate) async fn start(api: &Arc<Api>) {
    local::start(api).await;
}

/// The credentials are loaded: takes the front-proxy client certificate, publishes
/// `extension-apiserver-authentication`, and starts the availability checks.
pub(crate) fn credentials_loaded(api: &Api, pki: &Pki) {
    let state = state(api);
    let (cert, key) = pki.front_proxy_client();
    match Identity::from_pem(cert, key) {
        Ok(identity) => {
            let _ = state.identity.set(identity);
        }
        Err(error) => {
            tracing::warn!(%error, "requests to aggregated API servers will carry no client certificate");
        }
    }
    let Some(api) = api.this.upgrade() else {
        return;
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let data = authentication::data(pki);
    let publisher = api.clone();
    tokio::spawn(async move { authentication::publish(&publisher, data).await });
    let interval = state
        .interval
        .get()
        .copied()
        .unwrap_or(DEFAULT_CHECK_INTERVAL);
    availability::start(&api, interval);
}
