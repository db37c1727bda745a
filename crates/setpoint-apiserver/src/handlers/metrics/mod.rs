//! The resource metrics API, `metrics.k8s.io/v1beta1` (what metrics-server serves, for
//! `kubectl top` and later the HPA): `pods` (namespaced, or across namespaces) and `nodes`
//! (cluster-scoped), verbs `get` and `list`, with label and field selectors on lists, as JSON
//! or as a `Table` (`kubectl get podmetrics`).
//!
//! Nothing is stored: each request reads the pods or nodes it is about from the watch caches
//! (a consistent read), asks the agents of the nodes involved for their latest reports (the
//! `pods/log` path: the node's `InternalIP` and daemon port, the API server's client
//! certificate; see [`agent`]) and answers with what came back. A pod is matched by namespace,
//! name and UID; a node whose agent cannot be asked (unreachable, no report yet) is missing
//! from lists, and a `get` of a pod or node without metrics is `404 NotFound`
//! (`podmetrics.metrics.k8s.io "ns/name" not found`), as metrics-server answers. Simulated nodes have no agent to ask: their usage is made up from
//! their pods' requests ([`simulated`]).
//!
//! Self-contained: the registry does not know this group; [`serve`] claims its requests before
//! resource routing, and discovery adds [`api_group`] and [`aggregated_group`].

mod agent;
mod discovery;
mod objects;
mod simulated;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use bytes::Bytes;

use http::{Response, StatusCode};
use serde_json::{Map, Value};
use setpoint_core::{ApiError, FieldSelector, GroupResource, LabelSelector, Reason};

use super::response::{self, Body, Form};
use super::Api;
use crate::node_client::NodeClient;
use crate::registry::ResourceDef;
use crate::request_info::{ResourceRequest, Target, Verb};
use crate::watchcache::{Filter, Objects};
pub(super) use discovery::{aggregated_group, api_group};
use discovery::{GROUP, VERSION};
use table::Item;

/// Answers `target` if it belongs to `metrics.k8s.io`; `None` leaves it to the rest of the API.
pub(super) async fn serve(
    api: &Api,
    target: &Target,
    query: &BTreeMap<String, String>,
    accept: Option<&str>,
) -> Option<Result<Response<Body>, ApiError>> {
    match target {
        Target::Group(group) if group == GROUP => {
            let mut body = api_group();
            body["kind"] = "APIGroup".into();
            body["apiVersion"] = "v1".into();
            Some(Ok(response::json(StatusCode::OK, &body)))
        }
        Target::GroupVersion { group, version } if group == GROUP && version == VERSION => Some(
            Ok(response::json(StatusCode::OK, &discovery::resource_list())),
        ),
        Target::Resource(r) if r.group == GROUP => Some(resource(api, r, query, accept).await),
        _ => None,
    }
}

/// Which metrics a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pods,
    Nodes,
}

impl Kind {
    /// The group-resource errors name (metrics-server's).
    fn error_resource(self) -> GroupResource {
        match self {
            Kind::Pods => GroupResource::new(GROUP, "podmetrics"),
            Kind::Nodes => GroupResource::new(GROUP, "nodemetrics"),
        }
    }

    /// The kind of the metrics objects.
    fn kind(self) -> &'static str {
        match self {
            Kind::Pods => "PodMetrics",
            Kind::Nodes => "NodeMetrics",
        }
    }

    /// The objects measured: pods or nodes.
    fn measured(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Nodes => "nodes",
        }
    }
}

async fn resource(
    api: &Api,
    r: &ResourceRequest,
    query: &BTreeMap<String, String>,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let not_found = || ApiError::no_such_path();
    let kind = match (r.version.as_str(), r.resource.as_str(), &r.namespace) {
        (VERSION, "pods", _) => Kind::Pods,
        (VERSION, "nodes", None) => Kind::Nodes,
        _ => return Err(not_found()),
    };
    if r.subresource.is_some() {
        return Err(not_found());
    }
    if !matches!(r.verb, Verb::Get | Verb::List) {
        return Err(ApiError::method_not_supported(
            &GroupResource::new(GROUP, &r.resource),
            r.verb.as_str(),
        ));
    }
    let client = api.node_client.get().ok_or_else(|| {
        ApiError::new(
            Reason::ServiceUnavailable,
            "metrics.k8s.io is unavailable: this API server has no credentials to call node agents",
        )
    })?;
    let def = builtin(api, kind.measured())?;
    let filter = Filter {
        namespace: r.namespace.clone(),
        labels: match query.get("labelSelector").map(String::as_str) {
            None | Some("") => LabelSelector::everything(),
            Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
        },
        fields: match query.get("fieldSelector").map(String::as_str) {
            None | Some("") => FieldSelector::everything(),
            Some(s) => FieldSelector::parse(s)
                .and_then(|f| f.resolve(&def.selectable()))
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        },
    };
    let measured = measured_objects(api, &def, &filter, r.name.as_deref()).await?;
    let items = match kind {
        Kind::Pods => pod_items(api, client, &measured).await?,
        Kind::Nodes => node_items(api, client, &measured).await?,
    };
    if let (Some(name), true) = (&r.name, items.is_empty()) {
        let shown = match &r.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        return Err(ApiError::not_found(&kind.error_resource(), &shown));
    }
    let body = match (response::form(accept), &r.name) {
        (Form::Table { v1beta1 }, _) => {
            let include = query
                .get("includeObject")
                .map_or("Metadata", String::as_str);
            table::table(&items, v1beta1, include)
        }
        (_, Some(_)) => items
            .into_iter()
            .map(|i| i.object)
            .next()
            .unwrap_or_default(),
        (_, None) => objects::list(kind.kind(), items.into_iter().map(|i| i.object).collect()),
    };
    Ok(response::json(StatusCode::OK, &body))
}

/// A pod or node the request is about.
struct Measured {
    /// The decoded object.
    object: Value,
    /// Its labels, as the metrics objects carry them.
    labels: Map<String, Value>,
}

/// The objects of `def` the filter (and `name`, for a get) selects, in key order (namespace,
/// then name), from a consistent read of the watch cache.
async fn measured_objects(
    api: &Api,
    def: &ResourceDef,
    filter: &Filter,
    name: Option<&str>,
) -> Result<Vec<Measured>, ApiError> {
    let objects = snapshot(api, def, true).await?;
    let selected: Vec<_> = match name {
        Some(name) => objects
            .get(def.key(filter.namespace.as_deref(), name).as_bytes())
            .into_iter()
            .filter(|o| filter.matches(o))
            .cloned()
            .collect(),
        None => {
            let prefix = Bytes::from(def.collection_prefix(filter.namespace.as_deref()));
            let end = setpoint_store::prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
            objects
                .range((Bound::Included(prefix), end))
                .filter(|(_, o)| filter.matches(o))
                .map(|(_, o)| o.clone())
                .collect()
        }
    };
    Ok(selected
        .into_iter()
        .filter_map(|o| {
            let object: Value = serde_json::from_slice(&o.json.bytes()).ok()?;
            let labels = o
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            Some(Measured { object, labels })
        })
        .collect())
}

/// The reports of the agents of `nodes` (made up for simulated nodes), by node name.
async fn reports_of(
    api: &Api,
    client: &NodeClient,
    nodes: BTreeSet<String>,
) -> Result<BTreeMap<String, agent::AgentReport>, ApiError> {
    let def = builtin(api, "nodes")?;
    let objects = snapshot(api, &def, false).await?;
    let mut addresses = Vec::new();
    let mut simulated_nodes = BTreeSet::new();
    for name in nodes {
        let Some(node) = objects
            .get(def.key(None, &name).as_bytes())
            .and_then(|n| serde_json::from_slice::<Value>(&n.json.bytes()).ok())
        else {
            continue;
        };
        if simulated::is_simulated(&node) {
            simulated_nodes.insert(name);
        } else if let Ok(address) = super::pod_log::agent_address(&node, &name) {
            addresses.push((name, address));
        }
    }
    let mut reports: BTreeMap<String, agent::AgentReport> = agent::reports(client, addresses)
        .await
        .into_iter()
        .collect();
    if !simulated_nodes.is_empty() {
        let pods_def = builtin(api, "pods")?;
        let pods = snapshot(api, &pods_def, true).await?;
        let mut bound: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for pod in pods.values() {
            let Some(node) = pod.fields.get("spec.nodeName") else {
                continue;
            };
            let Some(node) = simulated_nodes.get(node) else {
                continue;
            };
            if let Ok(object) = serde_json::from_slice(&pod.json.bytes()) {
                bound.entry(node.as_str()).or_default().push(object);
            }
        }
        for name in &simulated_nodes {
            let pods: Vec<&Value> = bound.get(name.as_str()).into_iter().flatten().collect();
            reports.insert(name.clone(), simulated::synthetic_report(&pods));
        }
    }
    Ok(reports)
}

/// The objects of `def` in its watch cache, after it has caught up with the store if
/// `consistent`. (With `builtin`, the only places this module reaches into the registry and
/// the caches.)
async fn snapshot(api: &Api, def: &ResourceDef, consistent: bool) -> Result<Objects, ApiError> {
    let store = api.registry_store(def)?;
    if consistent {
        return Ok(store.consistent().await?.0);
    }
    Ok(store.cache().snapshot().0)
}

/// A built-in core/v1 resource.
fn builtin(api: &Api, plural: &str) -> Result<std::sync::Arc<ResourceDef>, ApiError> {
    api.served()
        .registry
        .get("", "v1", plural)
        .cloned()
        .ok_or_else(|| ApiError::internal(format!("no {plural} resource")))
}

/// `PodMetrics` of the `pods` whose agents reported them.
async fn pod_items(
    api: &Api,
    client: &NodeClient,
    pods: &[Measured],
) -> Result<Vec<Item>, ApiError> {
    let node_of = |pod: &Value| pod["spec"]["nodeName"].as_str().map(str::to_owned);
    let nodes: BTreeSet<String> = pods.iter().filter_map(|p| node_of(&p.object)).collect();
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let reports = reports_of(api, client, nodes).await?;
    Ok(pods
        .iter()
        .filter_map(|pod| {
            let report = reports.get(&node_of(&pod.object)?)?;
            let meta = &pod.object["metadata"];
            let usage = report.pods.iter().find(|u| {
                meta["uid"] == u.uid.as_str()
                    && meta["name"] == u.name.as_str()
                    && meta["namespace"] == u.namespace.as_str()
            })?;
            Some(Item {
                object: objects::pod_metrics(usage, &pod.labels),
                cpu_nano_cores: usage.containers.iter().map(|c| c.cpu_nano_cores).sum(),
                memory_bytes: usage
                    .containers
                    .iter()
                    .map(|c| c.memory_working_set_bytes)
                    .sum(),
            })
        })
        .collect())
}

/// `NodeMetrics` of the `nodes` whose agents reported their usage.
async fn node_items(
    api: &Api,
    client: &NodeClient,
    nodes: &[Measured],
) -> Result<Vec<Item>, ApiError> {
    let names: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.object["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let reports = reports_of(api, client, names).await?;
    Ok(nodes
        .iter()
        .filter_map(|node| {
            let name = node.object["metadata"]["name"].as_str()?;
            let usage = reports.get(name)?.node.as_ref()?;
            Some(Item {
                object: objects::node_metrics(name, usage, &node.labels),
                cpu_nano_cores: usage.cpu_nano_cores,
                memory_bytes: usage.memory_working_set_bytes,
            })
        })
        .collect())
}
