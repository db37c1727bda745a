//! The Service endpoint loops: the EndpointSlice controller (`endpointslice`, this file and
//! [`slices`]) and the legacy Endpoints controller (`endpoint`, [`legacy`]), both applying the
//! pod rules of [`pod_endpoint`].
//!
//! For every Service with a selector (not `ExternalName`), the EndpointSlice loop keeps
//! `discovery.k8s.io/v1` slices labelled `kubernetes.io/service-name` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`, controlled by the
//! Service (so the garbage collector removes them with it): one group of slices per address
//! type (the Service's `ipFamilies`) and resolved port set, at most
//! [`LoopSettings::max_endpoints_per_slice`](crate::LoopSettings) endpoints per slice. Each
//! selected pod with an IP that has not finished is an endpoint (terminating ones too, flagged
//! `terminating`). Services without a selector are left alone: their slices are the user's.
//!
//! The loop reads the Service's slices from the API on each sync (a slice it just created
//! with `generateName` is not necessarily in a cache yet, and a second sync must not create it
//! again); Services are synced on their own changes, on changes of the pods they select (old
//! and new labels) and of the slices they control.

mod legacy;
mod pod_endpoint;
mod slices;
mod trigger_time;

pub(crate) use legacy::run as run_endpoints;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Resource;
use setpoint_runtime::{Action, Client, Controller, ControllerError, ObjectCache, ObjectKey};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use slices::{GroupKey, MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL};

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "endpointslice";
/// Services synced at once.
const CONCURRENCY: usize = 5;
/// The node label whose value is an endpoint's `zone`.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Why one sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// Reading or writing slices failed.
    #[error("{what} for Service {service}")]
    Api {
        /// What was being done.
        what: &'static str,
        /// `namespace/name`.
        service: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What every sync shares.
struct Context {
    client: Client,
    services: ObjectCache<Service>,
    trigger_times: trigger_time::TriggerTimes,
    pods: ObjectCache<Pod>,
    nodes: ObjectCache<Node>,
    max_per_slice: usize,
}

/// Runs the EndpointSlice loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let services = ctx.factory.informer::<Service>().store();
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        services: services.clone(),
        trigger_times: trigger_time::TriggerTimes::default(),
        pods: ctx.factory.informer::<Pod>().store(),
        nodes: ctx.factory.informer::<Node>().store(),
        max_per_slice: ctx.settings.max_endpoints_per_slice,
    });
    Controller::<Service>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .owns::<EndpointSlice>()
        .watches(move |pod: &Pod| selecting(&services, pod))
        .run(reconcile, context, shutdown.cancelled_owned())
        .await
}

/// The Services of the pod's namespace whose selectors match it.
pub(crate) fn selecting(services: &ObjectCache<Service>, pod: &Pod) -> Vec<ObjectKey> {
    services
        .list_namespace(pod.metadata.namespace.as_deref().unwrap_or_default())
        .iter()
        .filter(|s| pod_endpoint::selector(s).is_some_and(|sel| pod_endpoint::selects(sel, pod)))
        .map(|s| ObjectKey::of(s.as_ref()))
        .collect()
}

/// Whether a create failed because the namespace is being deleted (the Service goes with it;
/// retrying would only fail again).
pub(crate) fn namespace_terminating(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if e.code == 403 && e.message.contains("being terminated"))
}

/// Whether the loops keep endpoints for the Service: it has a selector and is not an
/// `ExternalName` Service.
pub(crate) fn is_managed(service: &Service) -> bool {
    pod_endpoint::selector(service).is_some()
        && service.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("ExternalName")
}

/// The pods the Service selects, from the cache.
pub(crate) fn selected_pods(pods: &ObjectCache<Pod>, service: &Service) -> Vec<Arc<Pod>> {
    let Some(selector) = pod_endpoint::selector(service) else {
        return Vec::new();
    };
    let mut selected: Vec<Arc<Pod>> = pods
        .list_namespace(service.metadata.namespace.as_deref().unwrap_or_default())
        .into_iter()
        .filter(|p| pod_endpoint::selects(selector, p))
        .collect();
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    selected
}

/// The Service's address types: its `ipFamilies`; when unset (a Service stored before they
/// were defaulted), the family of its cluster IP, or both for a headless Service.
pub(crate) fn address_types(service: &Service) -> Vec<String> {
    let spec = service.spec.as_ref();
    let mut types: Vec<String> = spec
        .and_then(|s| s.ip_families.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f == "IPv4" || f == "IPv6")
        .collect();
    types.dedup();
    if !types.is_empty() {
        return types;
    }
    match spec
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default()
    {
        "" | "None" => vec!["IPv4".to_owned(), "IPv6".to_owned()],
        ip if ip.contains(':') => vec!["IPv6".to_owned()],
        _ => vec!["IPv4".to_owned()],
    }
}

/// A reference to the pod.
pub(crate) fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// The endpoints the Service should have, by group.
fn desired(
    service: &Service,
    pods: &[Arc<Pod>],
    ctx: &Context,
) -> BTreeMap<GroupKey, Vec<Endpoint>> {
    let mut groups: BTreeMap<GroupKey, Vec<Endpoint>> = BTreeMap::new();
    for family in address_types(service) {
        for pod in pods.iter().filter(|p| pod_endpoint::is_candidate(p, true)) {
            let addresses = pod_endpoint::addresses_of(pod, &family);
            if addresses.is_empty() {
                continue;
            }
            let conditions = pod_endpoint::conditions(pod, service);
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty());
            let zone = node_name.as_ref().and_then(|n| {
                ctx.nodes
                    .get(&ObjectKey::cluster(n.clone()))
                    .and_then(|node| node.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned())
            });
            let endpoint = Endpoint {
                addresses,
                conditions: Some(EndpointConditions {
                    ready: Some(conditions.ready),
                    serving: Some(conditions.serving),
                    terminating: Some(conditions.terminating),
                }),
                hostname: pod_endpoint::hostname(pod, service),
                node_name,
                target_ref: Some(pod_reference(pod)),
                zone,
                ..Endpoint::default()
            };
            groups
                .entry((family.clone(), pod_endpoint::resolved_ports(service, pod)))
                .or_default()
                .push(endpoint);
        }
    }
    groups
}

/// Sets `endpoints.kubernetes.io/last-change-trigger-time` on an object about to be written,
/// or clears it when the write has no trigger time.
pub(crate) fn set_trigger_time(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    time: Option<k8s_openapi::jiff::Timestamp>,
) {
    let mut annotations = meta.annotations.take().unwrap_or_default();
    match time {
        Some(t) => {
            annotations.insert(trigger_time::ANNOTATION.to_owned(), trigger_time::format(t));
        }
        None => {
            annotations.remove(trigger_time::ANNOTATION);
        }
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

async fn reconcile(service: Arc<Service>, ctx: Arc<Context>) -> Result<Action, SyncError> {
    if !is_managed(&service) || service.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = service.meta().namespace.clone().unwrap_or_default();
    let name = service.meta().name.clone().unwrap_or_default();
    let err = |what: &'static str| {
        let service = format!("{namespace}/{name}");
        move |source| SyncError::Api {
            what,
            service,
            source,
        }
    };
    let api = ctx.client.namespaced_api::<EndpointSlice>(&namespace);
    let selector = format!("{SERVICE_NAME_LABEL}={name},{MANAGED_BY_LABEL}={MANAGED_BY}");
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(err("listing slices"))?
        .items;
    let pods = selected_pods(&ctx.pods, &service);
    let trigger = ctx
        .trigger_times
        .compute(&service, &pods, |k| ctx.services.get(k).is_some());
    let mut plan = slices::plan(
        &service,
        existing,
        desired(&service, &pods, &ctx),
        ctx.max_per_slice,
        &address_types(&service),
    );
    for slice in plan.create.iter_mut().chain(plan.update.iter_mut()) {
        set_trigger_time(&mut slice.metadata, trigger);
    }
    // Creates and updates before deletes: an endpoint moving between slices is never absent.
    for slice in &plan.create {
        match api.create(&PostParams::default(), slice).await {
            Ok(_) => {}
            Err(e) if namespace_terminating(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(err("creating a slice")(e)),
        }
    }
    for slice in &plan.update {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        let mut slice = slice.clone();
        slice.metadata.managed_fields = None;
        api.replace(&slice_name, &PostParams::default(), &slice)
            .await
            .map_err(err("updating a slice"))?;
    }
    for slice in &plan.delete {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&slice_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(err("deleting a slice")(e)),
        }
    }
    Ok(Action::await_change())
}
