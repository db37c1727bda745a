//! The legacy Endpoints controller (`endpoint`): one `v1` `Endpoints` object per selector
//! Service, named as the Service, with the same pod rules as the slices
//! ([`pod_endpoint`](super::pod_endpoint)): pods grouped into subsets by resolved port set,
//! ready ones under `addresses`, the others under `notReadyAddresses`. Terminating pods are
//! left out unless the Service publishes not-ready addresses (then every pod is ready).
//!
//! Past [`MAX_ADDRESSES`] addresses the object is truncated (ready addresses kept first) and
//! annotated `endpoints.kubernetes.io/over-capacity: truncated`. The objects this loop writes
//! carry `endpointslice.kubernetes.io/skip-mirror: "true"` (they are not to be mirrored into
//! slices), and a second controller deletes such an object once its Service is gone (the
//! objects have no owner reference, as in Kubernetes). Services without a selector are left
//! alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use kube::api::{DeleteParams, PostParams};
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, ObjectCache, ObjectKey, Predicate,
};
use tokio_util::sync::CancellationToken;

use super::pod_endpoint::{self, ResolvedPort};
use super::{is_managed, pod_reference, selected_pods, selecting};
use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "endpoint";
/// The name of the controller that deletes Endpoints of deleted Services.
const CLEANUP_NAME: &str = "endpoint-cleanup";
/// Services synced at once.
const CONCURRENCY: usize = 5;
/// The most addresses one Endpoints object holds.
pub(crate) const MAX_ADDRESSES: usize = 1000;
/// The annotation on a truncated object.
const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// The label on the objects this loop writes.
const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// The label on the objects of headless Services.
const HEADLESS: &str = "service.kubernetes.io/headless";

/// Why one sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("{what} Endpoints {key}")]
pub(crate) struct SyncError {
    what: &'static str,
    key: String,
    #[source]
    source: kube::Error,
}

struct Context {
    client: Client,
    pods: ObjectCache<Pod>,
}

/// Runs the Endpoints loop (and its cleanup) until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let services = ctx.factory.informer::<Service>().store();
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        pods: ctx.factory.informer::<Pod>().store(),
    });
    let sync = Controller::<Service>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .watches(move |pod: &Pod| selecting(&services, pod))
        .run(reconcile, context, shutdown.clone().cancelled_owned());
    let cleanup = Controller::<Endpoints>::new(&ctx.factory)
        .named(CLEANUP_NAME)
        .registered_in(&ctx.metrics)
        .predicate(Predicate::new(|_, e: &Endpoints| is_ours(e)))
        .watches(|service: &Service| [ObjectKey::of(service)])
        .run(
            cleanup,
            Arc::new(ctx.client.clone()),
            shutdown.cancelled_owned(),
        );
    let (sync, cleanup) = tokio::join!(sync, cleanup);
    sync.and(cleanup)
}

/// Whether this loop wrote the object.
fn is_ours(endpoints: &Endpoints) -> bool {
    endpoints
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SKIP_MIRROR))
        .is_some_and(|v| v == "true")
}

/// `namespace/name` of an object.
fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The subsets of the Service's pods, and whether they had to be truncated.
fn subsets(service: &Service, pods: &[Arc<Pod>]) -> (Vec<EndpointSubset>, bool) {
    let publish = pod_endpoint::publishes_not_ready(service);
    let family = super::address_types(service)
        .into_iter()
        .next()
        .unwrap_or_default();
    let has_ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|p| !p.is_empty());
    // Port set → (ready, not ready).
    let mut groups: BTreeMap<Vec<ResolvedPort>, (Vec<EndpointAddress>, Vec<EndpointAddress>)> =
        BTreeMap::new();
    for pod in pods
        .iter()
        .filter(|p| pod_endpoint::is_candidate(p, publish))
    {
        let Some(ip) = pod_endpoint::addresses_of(pod, &family).into_iter().next() else {
            continue;
        };
        let ports = pod_endpoint::resolved_ports(service, pod);
        if has_ports && ports.is_empty() {
            continue;
        }
        let address = EndpointAddress {
            ip,
            hostname: pod_endpoint::hostname(pod, service),
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            target_ref: Some(pod_reference(pod)),
        };
        let group = groups.entry(ports).or_default();
        if pod_endpoint::conditions(pod, service).ready {
            group.0.push(address);
        } else {
            group.1.push(address);
        }
    }
    let mut budget = MAX_ADDRESSES;
    let total: usize = groups.values().map(|(r, n)| r.len() + n.len()).sum();
    let truncated = total > MAX_ADDRESSES;
    for (ready, _) in groups.values_mut() {
        ready.truncate(budget);
        budget -= ready.len();
    }
    for (_, not_ready) in groups.values_mut() {
        not_ready.truncate(budget);
        budget -= not_ready.len();
    }
    let subsets = groups
        .into_iter()
        .filter(|(_, (r, n))| !r.is_empty() || !n.is_empty())
        .map(|(ports, (mut ready, mut not_ready))| {
            ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then(|| {
                    ports
                        .into_iter()
                        .map(|p| EndpointPort {
                            name: (!p.name.is_empty()).then_some(p.name),
                            port: p.port,
                            protocol: Some(p.protocol),
                            app_protocol: p.app_protocol,
                        })
                        .collect()
                }),
            }
        })
        .collect();
    (subsets, truncated)
}

async fn reconcile(service: Arc<Service>, ctx: Arc<Context>) -> Result<Action, SyncError> {
    if !is_managed(&service) || service.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let name = service.metadata.name.clone().unwrap_or_default();
    let key = key_of(&service.metadata);
    let api = ctx.client.namespaced_api::<Endpoints>(&namespace);
    let current = api.get_opt(&name).await.map_err(|source| SyncError {
        what: "reading",
        key: key.clone(),
        source,
    })?;
    let (subsets, truncated) = subsets(&service, &selected_pods(&ctx.pods, &service));
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.insert(SKIP_MIRROR.to_owned(), "true".to_owned());
    if pod_endpoint::is_headless(&service) {
        labels.insert(HEADLESS.to_owned(), String::new());
    }
    let mut next = current.clone().unwrap_or_else(|| Endpoints {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        subsets: None,
    });
    let mut annotations = next.metadata.annotations.clone().unwrap_or_default();
    if truncated {
        annotations.insert(OVER_CAPACITY.to_owned(), "truncated".to_owned());
    } else {
        annotations.remove(OVER_CAPACITY);
    }
    next.metadata.labels = Some(labels);
    next.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    next.subsets = (!subsets.is_empty()).then_some(subsets);
    next.metadata.managed_fields = None;
    let result = match &current {
        None => api.create(&PostParams::default(), &next).await.map(drop),
        Some(current) => {
            let same = current.subsets.clone().filter(|s| !s.is_empty()) == next.subsets
                && current.metadata.labels.clone().unwrap_or_default()
                    == next.metadata.labels.clone().unwrap_or_default()
                && current.metadata.annotations.clone().unwrap_or_default()
                    == next.metadata.annotations.clone().unwrap_or_default();
            if same {
                return Ok(Action::await_change());
            }
            api.replace(&name, &PostParams::default(), &next)
                .await
                .map(drop)
        }
    };
    result.map_err(|source| SyncError {
        what: "writing",
        key,
        source,
    })?;
    Ok(Action::await_change())
}

/// Deletes an Endpoints object this loop wrote once its Service is gone (asked of the API, not
/// a cache, so a lagging cache never deletes a live Service's endpoints).
async fn cleanup(endpoints: Arc<Endpoints>, client: Arc<Client>) -> Result<Action, SyncError> {
    if !is_ours(&endpoints) || endpoints.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = endpoints.metadata.namespace.clone().unwrap_or_default();
    let name = endpoints.metadata.name.clone().unwrap_or_default();
    let key = key_of(&endpoints.metadata);
    let service = client
        .namespaced_api::<Service>(&namespace)
        .get_opt(&name)
        .await
        .map_err(|source| SyncError {
            what: "reading the Service of",
            key: key.clone(),
            source,
        })?;
    if service.is_some() {
        return Ok(Action::await_change());
    }
    match client
        .namespaced_api::<Endpoints>(&namespace)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(SyncError {
            what: "deleting",
            key,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subsets_should_split_ready_and_truncate_past_capacity() {
        let service: Service = serde_json::from_value(json!({"metadata": {"name": "s"},
            "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}}))
        .expect("service");
        let pods: Vec<Arc<Pod>> = (0..1005)
            .map(|i| {
                let ready = if i % 2 == 0 { "True" } else { "False" };
                Arc::new(
                    serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
                        "status": {"podIP": format!("10.0.{}.{}", i / 250, i % 250),
                                   "conditions": [{"type": "Ready", "status": ready}]}}))
                    .expect("pod"),
                )
            })
            .collect();
        let (few, truncated) = subsets(&service, &pods[..3]);
        assert!(!truncated);
        assert_eq!(few.len(), 1);
        assert_eq!(few[0].addresses.as_ref().map(Vec::len), Some(2));
        assert_eq!(few[0].not_ready_addresses.as_ref().map(Vec::len), Some(1));
        let (all, truncated) = subsets(&service, &pods);
        assert!(truncated);
        assert_eq!(all[0].addresses.as_ref().map(Vec::len), Some(503));
        assert_eq!(all[0].not_ready_addresses.as_ref().map(Vec::len), Some(497));
    }
}
