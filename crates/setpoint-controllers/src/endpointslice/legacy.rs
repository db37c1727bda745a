//! The legacy Endpoints controller (`endpoint`): one `v1` `Endpoints` object per selector
//! Service, named as the Service, with the same pod rules as the slices
//! ([`pod_endpoint`](super::pod_endpoint)): pods grouped into subsets by resolved port set,
//! ready ones under `addresses`, the others under `notReadyAddresses`. Terminating pods are
//! left out unless the Service publishes not-ready addresses (then every pod is ready).
//!
//! The object's labels are the Service's (plus `service.kubernetes.io/headless` without a
//! cluster IP). Past [`MAX_ADDRESSES`] addresses it is truncated as kube does (ready addresses
//! first, each subset keeping its share) and annotated
//! `endpoints.kubernetes.io/over-capacity: truncated`. Services without a selector are left
//! alone.
//!
//! The objects have no owner reference (as in Kubernetes), so a second controller deletes an
//! Endpoints object when its Service is deleted, and at start every object left without a
//! Service (but leader-election records) — as kube's controller does; an Endpoints object
//! created later without a Service is not touched until the Service named as it is deleted.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use k8s_openapi::jiff::Timestamp;
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
/// The annotation of leader-election records kept in Endpoints objects (never cleaned up).
const LEADER_RECORD: &str = "control-plane.alpha.kubernetes.io/leader";
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
    services: ObjectCache<Service>,
    trigger_times: super::trigger_time::TriggerTimes,
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
        services: services.clone(),
        trigger_times: super::trigger_time::TriggerTimes::default(),
        pods: ctx.factory.informer::<Pod>().store(),
    });
    let cleanup_context = Arc::new(Cleanup {
        client: ctx.client.clone(),
        services: services.clone(),
    });
    let sync = Controller::<Service>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .watches(move |pod: &Pod| selecting(&services, pod))
        .run(reconcile, context, shutdown.clone().cancelled_owned());
    // Endpoints objects themselves trigger the cleanup only when listed at start (created
    // before the second it started in: creation times have whole seconds); later, the deletion
    // of the Service named as one does.
    let now = Timestamp::now();
    let started = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let cleanup = Controller::<Endpoints>::new(&ctx.factory)
        .named(CLEANUP_NAME)
        .registered_in(&ctx.metrics)
        .predicate(Predicate::new(move |old, e: &Endpoints| {
            old.is_none()
                && e.metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|t| t.0 < started)
        }))
        .watches(|service: &Service| [ObjectKey::of(service)])
        .run(cleanup, cleanup_context, shutdown.cancelled_owned());
    let (sync, cleanup) = tokio::join!(sync, cleanup);
    sync.and(cleanup)
}

/// What the cleanup shares.
struct Cleanup {
    client: Client,
    services: ObjectCache<Service>,
}

/// Whether the object is a leader-election record (it has no Service, and must stay).
fn is_leader_record(endpoints: &Endpoints) -> bool {
    endpoints
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(LEADER_RECORD))
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
    let truncated = truncate(&mut groups);
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

/// Cuts the groups down to [`MAX_ADDRESSES`] addresses, if they hold more: ready addresses
/// first (when they alone are too many, not-ready ones all go), each group keeping its share
/// (rounded up, the last taking what is left). Returns whether it cut.
fn truncate(
    groups: &mut BTreeMap<Vec<ResolvedPort>, (Vec<EndpointAddress>, Vec<EndpointAddress>)>,
) -> bool {
    let ready: usize = groups.values().map(|(r, _)| r.len()).sum();
    let not_ready: usize = groups.values().map(|(_, n)| n.len()).sum();
    if ready + not_ready <= MAX_ADDRESSES {
        return false;
    }
    let cut_ready = ready > MAX_ADDRESSES;
    let (room, total) = if cut_ready {
        (MAX_ADDRESSES, ready)
    } else {
        (MAX_ADDRESSES - ready, not_ready)
    };
    let mut left = room;
    for (r, n) in groups.values_mut() {
        let list = if cut_ready { &mut *r } else { &mut *n };
        let share = (list.len() * room).div_ceil(total.max(1)).min(left);
        list.truncate(share);
        left -= list.len();
        if cut_ready {
            n.clear();
        }
    }
    true
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
    let pods = selected_pods(&ctx.pods, &service);
    let trigger = ctx
        .trigger_times
        .compute(&service, &pods, |k| ctx.services.get(k).is_some());
    let (subsets, truncated) = subsets(&service, &pods);
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.remove(HEADLESS);
    if !pod_endpoint::has_cluster_ip(&service) {
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
        None => {
            super::set_trigger_time(&mut next.metadata, trigger);
            api.create(&PostParams::default(), &next).await.map(drop)
        }
        Some(current) => {
            let same = current.subsets.clone().filter(|s| !s.is_empty()) == next.subsets
                && current.metadata.labels.clone().unwrap_or_default()
                    == next.metadata.labels.clone().unwrap_or_default()
                && current.metadata.annotations.clone().unwrap_or_default()
                    == next.metadata.annotations.clone().unwrap_or_default();
            if same {
                return Ok(Action::await_change());
            }
            super::set_trigger_time(&mut next.metadata, trigger);
            api.replace(&name, &PostParams::default(), &next)
                .await
                .map(drop)
        }
    };
    if result.as_ref().is_err_and(super::namespace_terminating) {
        return Ok(Action::await_change());
    }
    result.map_err(|source| SyncError {
        what: "writing",
        key,
        source,
    })?;
    Ok(Action::await_change())
}

/// Deletes an Endpoints object whose Service is gone (the cache says so first, then the API
/// confirms it, so a lagging cache never deletes a live Service's endpoints).
async fn cleanup(endpoints: Arc<Endpoints>, ctx: Arc<Cleanup>) -> Result<Action, SyncError> {
    if is_leader_record(&endpoints) || endpoints.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx
        .services
        .get(&ObjectKey::of(endpoints.as_ref()))
        .is_some()
    {
        return Ok(Action::await_change());
    }
    let client = &ctx.client;
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
        // More ready addresses than fit: only ready ones, shared between the port sets.
        let mut groups = BTreeMap::new();
        let address = |i: usize| EndpointAddress {
            ip: format!("10.9.{}.{}", i / 250, i % 250),
            ..EndpointAddress::default()
        };
        let port = |n: i32| {
            vec![ResolvedPort {
                name: String::new(),
                port: n,
                protocol: "TCP".to_owned(),
                app_protocol: None,
            }]
        };
        groups.insert(
            port(1),
            ((0..900).map(address).collect(), vec![address(2000)]),
        );
        groups.insert(port(2), ((900..1200).map(address).collect(), Vec::new()));
        assert!(truncate(&mut groups));
        let sizes: Vec<(usize, usize)> = groups.values().map(|(r, n)| (r.len(), n.len())).collect();
        assert_eq!(sizes, vec![(750, 0), (250, 0)]);
    }
}
