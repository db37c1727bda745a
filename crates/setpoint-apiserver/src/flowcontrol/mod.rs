//! API Priority and Fairness (kube-apiserver's KEP-1040): every authenticated request is
//! classified by the FlowSchemas into a priority level and a flow, waits for seats of that
//! level (queued fairly among flows, `queueset.rs`) and is refused with `429` and
//! `Retry-After` when its queue is full or its wait runs out. Responses carry
//! `X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`.
//!
//! - The configuration (`config.rs`) is compiled from the FlowSchema and
//!   PriorityLevelConfiguration watch caches whenever their revision moved; the default
//!   objects (`defaults.rs`) are created at start and their status kept (`maintain.rs`).
//! - Seats are held until the response's body has been sent (or dropped), as kube-apiserver
//!   holds them until its handler has written the response; a LIST takes one seat per 100
//!   objects the watch cache holds for its resource (fewer with a `limit`), at most the level's
//!   maximum (`width`). A LIST of more than 100 objects is executed on the wide-request pool,
//!   at a lower OS priority (`wide.rs`), so seats bind for the CPU a flood of them takes. A watch takes one seat until its head (its initial events come from
//!   the cache snapshot taken before the head); exec, attach, port-forward, proxy and followed
//!   logs are long-running and not limited, as kube-apiserver does.
//! - A queued request waits at most a quarter of its request timeout (`?timeout=` or
//!   `--request-timeout`; 15 s without one; at most 60 s), then gets `429`.
//! - Watches per user are capped (`watches.rs`). With APF off, the plain max-in-flight limits
//!   of `inflight.rs` apply.
//!
//! `docs/design/flowcontrol.md` says what is simplified.

mod config;
mod defaults;
mod inflight;
mod maintain;
mod metrics;
mod queueset;
mod rules;
mod watches;
mod wide;

use std::any::Any;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response};
use parking_lot::{Mutex, RwLock};
use setpoint_core::{ApiError, Details, Reason};

use crate::api::Api;
use crate::auth::User;
use crate::handlers::response;
use crate::request_info::{self, Target, Verb};
use crate::server::Body;
use config::Config;
use metrics::{Gauge, Metrics, Which};
use queueset::Seats;
use rules::{Asked, Digest};

pub(crate) use maintain::start;
pub use metrics::FlowControlFigures;

/// The header naming the FlowSchema that classified a request.
const SCHEMA_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
/// The header naming the priority level a request ran at.
const LEVEL_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";
/// kube-apiserver's answer to a request it will not serve now.
const TOO_MANY: &str = "Too many requests, please try again later.";
/// How many objects a LIST may return per seat it takes.
const OBJECTS_PER_SEAT: usize = 100;
/// How long a queued request waits when it has no timeout.
const DEFAULT_WAIT: Duration = Duration::from_secs(15);
/// The longest a queued request waits.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The group whose members are never limited.
const MASTERS: &str = "system:masters";

/// How the server limits requests.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowControlSettings {
    /// API Priority and Fairness on (`--enable-priority-and-fairness`); off: the plain
    /// max-in-flight limits.
    pub enabled: bool,
    /// Reads executing at once (`--max-requests-inflight`); with APF, part of the total seats.
    pub max_requests_inflight: usize,
    /// Writes executing at once (`--max-mutating-requests-inflight`); with APF, the rest of
    /// the total seats.
    pub max_mutating_requests_inflight: usize,
    /// The most watches one user may hold open (`--max-watches-per-user`); 0: no cap.
    pub max_watches_per_user: usize,
    /// The server's request timeout (`--request-timeout`), of which a queued request may
    /// spend a quarter waiting.
    pub request_timeout: Duration,
}

impl FlowControlSettings {
    /// The defaults for a machine with `cores` cores: 40 reads and 20 writes per core (kube's
    /// 400 + 200 are sized for a 10-core control plane; on a small machine that many
    /// concurrent LISTs would only queue on the CPU), 1,000 watches per user, kube's 60 s
    /// request timeout.
    #[must_use]
    pub fn for_cores(cores: usize) -> FlowControlSettings {
        let cores = cores.max(1);
        FlowControlSettings {
            enabled: true,
            max_requests_inflight: 40 * cores,
            max_mutating_requests_inflight: 20 * cores,
            max_watches_per_user: 1000,
            request_timeout: Duration::from_secs(60),
        }
    }

    /// The total seats API Priority and Fairness shares among the priority levels.
    #[must_use]
    pub fn total_seats(&self) -> usize {
        (self.max_requests_inflight + self.max_mutating_requests_inflight).max(1)
    }
}

impl Default for FlowControlSettings {
    /// [`FlowControlSettings::for_cores`] this machine's cores.
    fn default() -> Self {
        FlowControlSettings::for_cores(std::thread::available_parallelism().map_or(1, usize::from))
    }
}

/// The state of the server's request limits.
pub(crate) struct FlowControl {
    settings: RwLock<FlowControlSettings>,
    config: RwLock<Option<Arc<Config>>>,
    /// Serializes recompiling the configuration.
    compiling: Mutex<()>,
    inflight: RwLock<Arc<inflight::Inflight>>,
    watches: Arc<watches::WatchCounts>,
    metrics: Arc<Metrics>,
}

impl FlowControl {
    fn new(settings: FlowControlSettings) -> FlowControl {
        let inflight = inflight::Inflight::new(
            settings.max_requests_inflight,
            settings.max_mutating_requests_inflight,
        );
        FlowControl {
            settings: RwLock::new(settings),
            config: RwLock::new(None),
            compiling: Mutex::new(()),
            inflight: RwLock::new(Arc::new(inflight)),
            watches: Arc::new(watches::WatchCounts::default()),
            metrics: Arc::new(Metrics::default()),
        }
    }
}

/// The flow control state of `api`, created with the defaults on first use.
fn state(api: &Api) -> Arc<FlowControl> {
    let any = api
        .flowcontrol_state
        .get_or_init(|| {
            Arc::new(FlowControl::new(FlowControlSettings::default())) as Arc<dyn Any + Send + Sync>
        })
        .clone();
    any.downcast::<FlowControl>()
        .unwrap_or_else(|_| Arc::new(FlowControl::new(FlowControlSettings::default())))
}

impl Api {
    /// Sets how requests are limited (see [`FlowControlSettings`]). Requests already admitted
    /// keep their seats; the levels' limits follow at the next request.
    pub fn set_flow_control(&self, settings: FlowControlSettings) {
        let fc = state(self);
        *fc.inflight.write() = Arc::new(inflight::Inflight::new(
            settings.max_requests_inflight,
            settings.max_mutating_requests_inflight,
        ));
        *fc.settings.write() = settings;
    }

    /// API Priority and Fairness' figures, for `/metrics`.
    #[must_use]
    pub fn flow_control_figures(&self) -> FlowControlFigures {
        let fc = state(self);
        let limits = current_config(self, &fc)
            .levels
            .values()
            .map(|l| (l.name.clone(), l.limit() as u64))
            .collect();
        fc.metrics.figures(limits)
    }
}

/// The configuration, recompiled if the FlowSchemas, the levels or the total seats changed.
fn current_config(api: &Api, fc: &FlowControl) -> Arc<Config> {
    let schemas = api.registry_store_of("flowcontrol.apiserver.k8s.io", "v1", "flowschemas");
    let levels = api.registry_store_of(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
    );
    // The caches' revisions follow every write to the store; what they received and hold
    // changes only with these objects.
    let stamp_of = |store: &Result<Arc<crate::registry::store::RegistryStore>, ApiError>| {
        store.as_ref().map_or(0, |s| {
            let cache = s.cache();
            let figures = cache.figures();
            let loaded = u64::from(cache.is_ready());
            (figures.events_received << 1 | loaded) ^ ((figures.objects as u64) << 40)
        })
    };
    let stamp = (stamp_of(&schemas), stamp_of(&levels));
    let total = fc.settings.read().total_seats();
    let fresh = |c: &Config| c.stamp == stamp && c.total_seats == total;
    if let Some(config) = fc.config.read().as_ref().filter(|c| fresh(c)) {
        return config.clone();
    }
    let _compiling = fc.compiling.lock();
    let previous = fc.config.read().clone();
    if let Some(config) = previous.as_ref().filter(|c| fresh(c)) {
        return config.clone();
    }
    let decode_all = |store: &Result<Arc<crate::registry::store::RegistryStore>, ApiError>| {
        store.as_ref().map_or_else(
            |_| Vec::new(),
            |s| {
                s.cache()
                    .snapshot()
                    .0
                    .values()
                    .map(|o| o.json.bytes())
                    .collect::<Vec<Bytes>>()
            },
        )
    };
    let schema_objects: Vec<_> = decode_all(&schemas)
        .iter()
        .filter_map(|json| serde_json::from_slice(json).ok())
        .collect();
    let level_objects: Vec<_> = decode_all(&levels)
        .iter()
        .filter_map(|json| serde_json::from_slice(json).ok())
        .collect();
    let config = Arc::new(config::compile(
        &schema_objects,
        &level_objects,
        total,
        stamp,
        previous.as_deref(),
    ));
    *fc.config.write() = Some(config.clone());
    config
}

/// A request let through: what its response needs (headers) and what it holds until its
/// response's body has been sent or dropped.
pub(crate) struct Admission {
    headers: Vec<(&'static str, HeaderValue)>,
    seats: Option<Seats>,
    executing: Option<Gauge>,
    inflight: Option<tokio::sync::OwnedSemaphorePermit>,
    /// A watch counted against its user's cap.
    watch: Option<watches::OpenWatch>,
    /// Whether the request is executed on the wide-request pool (`wide.rs`).
    wide: bool,
}

/// What an admitted request holds while its response body lives.
struct Held {
    _seats: Option<Seats>,
    _executing: Option<Gauge>,
    _inflight: Option<tokio::sync::OwnedSemaphorePermit>,
    _watch: Option<watches::OpenWatch>,
}

impl Admission {
    fn unlimited() -> Admission {
        Admission {
            headers: Vec::new(),
            seats: None,
            executing: None,
            inflight: None,
            watch: None,
            wide: false,
        }
    }

    /// Whether the request should be executed on the wide-request pool.
    pub(crate) fn is_wide(&self) -> bool {
        self.wide
    }

    /// Completes `response` (headers), holding the seats and the watch count until its body
    /// has been sent or dropped. A watch's seats are given back at once: its initial events
    /// come from the cache snapshot taken before the head, and the rest is long-running.
    pub(crate) fn finish(self, mut response: Response<Body>) -> Response<Body> {
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        let held = if self.watch.is_some() {
            drop((self.seats, self.executing, self.inflight));
            Held {
                _seats: None,
                _executing: None,
                _inflight: None,
                _watch: self.watch,
            }
        } else {
            Held {
                _seats: self.seats,
                _executing: self.executing,
                _inflight: self.inflight,
                _watch: None,
            }
        };
        if held._seats.is_none() && held._inflight.is_none() && held._watch.is_none() {
            return response;
        }
        response.map(|body| {
            use http_body_util::BodyExt as _;
            body.map_frame(move |frame| {
                let _held_while_the_body_lives = &held;
                frame
            })
            .boxed()
        })
    }
}

/// Executes `request` on the wide-request pool (`wide.rs`) with `api`; where it is if the pool
/// is unavailable.
pub(crate) async fn execute_wide(api: Arc<Api>, request: Request<Bytes>) -> Response<Body> {
    match wide::run(async move { Api::handle(&api, request).await }).await {
        Some(response) => response,
        None => response::error(&ApiError::new(
            Reason::ServiceUnavailable,
            "the server is shutting down",
        )),
    }
}

/// What `request` is, for limits.
struct Kind {
    asked: Asked,
    long_running: bool,
    watch: bool,
    mutating: bool,
    /// The objects a LIST would return, if it is one.
    listed: Option<usize>,
}

fn kind_of(api: &Api, request: &Request<Bytes>) -> Kind {
    let method = request.method();
    let path = request.uri().path();
    let query = request_info::parse_query(request.uri().query());
    let non_resource = || Kind {
        asked: Asked::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_owned(),
        },
        long_running: false,
        watch: false,
        mutating: !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS),
        listed: None,
    };
    let Ok(Target::Resource(r)) = request_info::resolve(method, path, &query) else {
        return non_resource();
    };
    let follow = request_info::flag(&query, "follow").unwrap_or(false);
    let long_running = match r.subresource.as_deref() {
        Some("exec" | "attach" | "portforward" | "proxy") => true,
        Some("log") => follow,
        _ => false,
    };
    let listed = (r.verb == Verb::List).then(|| {
        let stored = api
            .registry_store_of(&r.group, &r.version, &r.resource)
            .map_or(0, |s| s.cache().figures().objects);
        let selective = query.contains_key("labelSelector") || query.contains_key("fieldSelector");
        match query.get("limit").and_then(|l| l.parse::<usize>().ok()) {
            Some(limit) if limit > 0 && !selective => stored.min(limit),
            _ => stored,
        }
    });
    let resource = match &r.subresource {
        Some(sub) => format!("{}/{sub}", r.resource),
        None => r.resource.clone(),
    };
    Kind {
        mutating: !matches!(r.verb, Verb::Get | Verb::List | Verb::Watch),
        watch: r.verb == Verb::Watch,
        asked: Asked::Resource {
            verb: r.verb.as_str().to_owned(),
            group: r.group,
            resource,
            namespace: r.namespace,
        },
        long_running,
        listed,
    }
}

/// How long a queued request may wait: a quarter of its timeout, 15 s without one, at most 60 s.
fn wait_limit(request: &Request<Bytes>, server_timeout: Duration) -> Duration {
    let query = request_info::parse_query(request.uri().query());
    let asked = query
        .get("timeout")
        .and_then(|t| humantime_like(t))
        .filter(|t| !t.is_zero());
    let timeout = match (asked, server_timeout.is_zero()) {
        (Some(asked), true) => asked,
        (Some(asked), false) => asked.min(server_timeout),
        (None, false) => server_timeout,
        (None, true) => return DEFAULT_WAIT,
    };
    (timeout / 4).min(MAX_WAIT)
}

/// Parses a Go duration as clients send `?timeout=` (`30s`, `1m0s`, `500ms`).
fn humantime_like(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => value * 3600.0,
            "m" => value * 60.0,
            "s" => value,
            "ms" => value / 1e3,
            "us" | "µs" => value / 1e6,
            "ns" => value / 1e9,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(seconds).ok()?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// The hash a flow (FlowSchema, distinguisher value) is dealt its queues from.
fn flow_hash(schema: &str, flow: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (schema, flow).hash(&mut hasher);
    hasher.finish()
}

/// A `429` with `Retry-After`.
fn too_many(message: &str, headers: Vec<(&'static str, HeaderValue)>) -> Response<Body> {
    let mut error = ApiError::new(Reason::TooManyRequests, message);
    error.details = Some(Box::new(Details {
        retry_after_seconds: Some(1),
        ..Default::default()
    }));
    let mut response = response::error(&error);
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    response
}

/// Admits `request` (whose [`User`] is among its extensions), or answers it with `429`.
/// Cancel-safe: a request dropped while queued leaves its queue.
pub(crate) async fn admit(
    api: &Api,
    request: &Request<Bytes>,
) -> Result<Admission, Response<Body>> {
    let fc = state(api);
    let loopback = User::loopback();
    let user = request.extensions().get::<User>().unwrap_or(&loopback);
    let kind = kind_of(api, request);
    if kind.long_running {
        return Ok(Admission::unlimited());
    }
    let settings = fc.settings.read().clone();
    let masters = user.in_group(MASTERS);
    let mut admission = Admission::unlimited();
    admission.wide = kind.listed.is_some_and(|n| n > OBJECTS_PER_SEAT);
    if kind.watch && !masters {
        match fc.watches.open(&user.name, settings.max_watches_per_user) {
            Some(open) => admission.watch = Some(open),
            None => {
                return Err(too_many(
                    &format!(
                        "Too many watches: user {:?} already holds {} open watches, the most allowed (--max-watches-per-user); close some and try again.",
                        user.name, settings.max_watches_per_user
                    ),
                    Vec::new(),
                ))
            }
        }
    }
    if !settings.enabled {
        if masters || kind.watch {
            return Ok(admission);
        }
        let pool = fc.inflight.read().clone();
        return match pool.try_take(kind.mutating) {
            Some(permit) => {
                admission.inflight = Some(permit);
                Ok(admission)
            }
            None => Err(too_many(TOO_MANY, Vec::new())),
        };
    }
    let config = current_config(api, &fc);
    let digest = Digest {
        user,
        asked: kind.asked.clone(),
    };
    let Some((schema, level)) = config.classify(&digest) else {
        return Ok(admission); // the mandatory catch-all was changed to match nothing
    };
    for (name, uid) in [(SCHEMA_HEADER, &schema.uid), (LEVEL_HEADER, &level.uid)] {
        if let Ok(value) = HeaderValue::from_str(uid) {
            if !uid.is_empty() {
                admission.headers.push((name, value));
            }
        }
    }
    let seats = kind
        .listed
        .map_or(1, |n| n.div_ceil(OBJECTS_PER_SEAT))
        .clamp(1, level.max_seats());
    let started = Instant::now();
    let queued = fc.metrics.hold(Which::InQueue, &level.name, &schema.name);
    let acquired = level
        .acquire(
            flow_hash(&schema.name, &schema.flow(&digest)),
            seats,
            wait_limit(request, settings.request_timeout),
        )
        .await;
    drop(queued);
    fc.metrics.waited(
        &level.name,
        &schema.name,
        acquired.is_ok(),
        started.elapsed(),
    );
    match acquired {
        Ok(seats) => {
            admission.seats = Some(seats);
            admission.executing =
                Some(fc.metrics.hold(Which::Executing, &level.name, &schema.name));
            Ok(admission)
        }
        Err(refusal) => {
            fc.metrics
                .rejected(&level.name, &schema.name, refusal.reason());
            Err(too_many(TOO_MANY, admission.headers))
        }
    }
}

#[cfg(test)]
mod tests;
