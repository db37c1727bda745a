//! The scale target of an autoscaler: finding its resource through discovery, reading its
//! `scale` subresource, and observing the pods its selector matches with their
//! `metrics.k8s.io` PodMetrics — shared by the HPA and PID autoscaler loops (which read
//! `Object` and `External` metric values with [`super::metric_source`]).

use std::time::Duration;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, MetricSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::Api;
use serde_json::{json, Value};
use setpoint_control::Observation;
use setpoint_runtime::Client;

/// The API resource of a kind in an `apiVersion`, from discovery.
pub(crate) async fn resource_of(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Option<ApiResource> {
    discover(client, api_version, |r| r.kind == kind)
        .await
        .map(|(r, _)| r)
}

/// The first resource of `api_version` (not a subresource) `matches` accepts, from discovery,
/// and whether it is namespaced.
pub(crate) async fn discover(
    client: &Client,
    api_version: &str,
    matches: impl Fn(&APIResource) -> bool,
) -> Option<(ApiResource, bool)> {
    let list = if api_version.contains('/') {
        client.kube().list_api_group_resources(api_version).await
    } else {
        client.kube().list_core_api_resources(api_version).await
    }
    .ok()?;
    let r = list
        .resources
        .iter()
        .find(|r| !r.name.contains('/') && matches(r))?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Some((
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &r.kind), &r.name),
        r.namespaced,
    ))
}

/// What reading the target gave: its scale, or why not (reason, message).
async fn read_scale(
    client: &Client,
    namespace: &str,
    target: &CrossVersionObjectReference,
) -> Result<(Api<DynamicObject>, Scale), (&'static str, String)> {
    let api_version = target.api_version.as_deref().unwrap_or("v1");
    let Some(resource) = resource_of(client, api_version, &target.kind).await else {
        return Err((
            "FailedGetScale",
            format!(
                "the HPA controller was unable to get the target's current scale: no matches for kind \"{}\" in group version \"{api_version}\"",
                target.kind
            ),
        ));
    };
    let api = Api::<DynamicObject>::namespaced_with(client.kube().clone(), namespace, &resource);
    match api.get_scale(&target.name).await {
        Ok(scale) => Ok((api, scale)),
        Err(e) => Err((
            "FailedGetScale",
            format!("the HPA controller was unable to get the target's current scale: {e}"),
        )),
    }
}

/// What an autoscaler reads of its target each sync.
pub(crate) struct Target {
    /// The target's resource, to write its scale through.
    api: Api<DynamicObject>,
    /// `spec.replicas` of the scale.
    pub(crate) current: i32,
    /// `status.replicas` of the scale.
    pub(crate) status_replicas: i32,
    /// Whether the scale names a pod selector (without one no pod is observed).
    pub(crate) has_selector: bool,
    /// The pods, their metrics and the values of the Object and External metrics.
    pub(crate) observation: Observation,
}

/// Reads the scale of `target_ref`, the pods its selector matches with their metrics, and the
/// Object and External values `metrics` name; `Err` (reason, message) when the scale cannot be
/// read.
pub(crate) async fn read(
    client: &Client,
    namespace: &str,
    target_ref: &CrossVersionObjectReference,
    metrics: &[MetricSpec],
) -> Result<Target, (&'static str, String)> {
    let (api, scale) = read_scale(client, namespace, target_ref).await?;
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let status_replicas = scale.status.as_ref().map_or(0, |s| s.replicas);
    let selector = scale.status.as_ref().and_then(|s| s.selector.as_deref());
    let mut observation = match selector {
        Some(sel) => observe(client, namespace, sel, current, status_replicas).await,
        None => Observation {
            spec_replicas: current,
            status_replicas,
            ..Observation::default()
        },
    };
    observation.values = super::metric_source::read(client, namespace, metrics).await;
    Ok(Target {
        api,
        current,
        status_replicas,
        has_selector: selector.is_some(),
        observation,
    })
}

impl Target {
    /// Writes `replicas` to the scale of the target named `name`.
    pub(crate) async fn rescale(&self, name: &str, replicas: i32) -> Result<(), kube::Error> {
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        self.api
            .patch_scale(name, &PatchParams::default(), &patch)
            .await
            .map(drop)
    }
}

/// The pods a selector matches and their metrics, with the target's spec and status replica
/// counts.
pub(crate) async fn observe(
    client: &Client,
    namespace: &str,
    selector: &str,
    replicas: i32,
    status_replicas: i32,
) -> Observation {
    let lp = ListParams::default().labels(selector);
    let pods = client
        .namespaced_api::<Pod>(namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let metrics_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "PodMetrics"),
        "pods",
    );
    let metrics =
        Api::<DynamicObject>::namespaced_with(client.kube().clone(), namespace, &metrics_resource)
            .list(&lp)
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .collect::<Vec<Value>>()
            })
            .unwrap_or_default();
    Observation {
        spec_replicas: replicas,
        status_replicas,
        pods: pods.iter().map(super::observe::pod_info).collect(),
        metrics: super::observe::pod_metrics(&metrics),
        values: Default::default(),
    }
}

pub(crate) fn rfc3339(at: Duration) -> String {
    chrono::DateTime::from_timestamp(i64::try_from(at.as_secs()).unwrap_or(0), 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
