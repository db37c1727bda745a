//! Reading `Object` and `External` metric values. Setpoint has no custom or external metrics
//! API; instead a metric's name says where in the API its value is:
//!
//! - `Object`: `metric.name` is a field path ([`super::field_path`]) into `describedObject`,
//!   which is looked up in the autoscaler's namespace through discovery.
//! - `External`: `metric.name` is `RESOURCE[.GROUP]:PATH`. `RESOURCE` is matched as kubectl
//!   matches a resource type (plural, singular, short name or kind, any case) in the group's
//!   preferred version; the objects of that resource in the autoscaler's namespace (every
//!   namespace for a cluster-scoped resource) that `metric.selector` matches (all of them
//!   without one) are read, and their values at `PATH` summed — as Kubernetes sums the
//!   series an external metric selector matches.
//!
//! Every value is in milli-units; a failure is the text the autoscaler reports.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{ExternalMetricSource, MetricSpec, ObjectMetricSource};
use kube::api::{DynamicObject, ListParams};
use kube::Api;
use serde_json::Value;
use setpoint_core::LabelSelector;
use setpoint_runtime::Client;

use super::field_path::{milli_at, FieldPathError};
use super::target::discover;

/// Why a metric's value could not be read.
#[derive(Debug, thiserror::Error)]
enum SourceError {
    /// `describedObject`'s kind is unknown.
    #[error("no matches for kind \"{kind}\" in group version \"{api_version}\"")]
    UnknownKind { kind: String, api_version: String },
    /// The described object could not be read.
    #[error("{what}: {source}")]
    Get {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The objects of an external metric's resource could not be listed.
    #[error("listing {resource}: {source}")]
    List {
        resource: String,
        #[source]
        source: kube::Error,
    },
    /// The value at the path is missing or not a number.
    #[error("{what} {source}")]
    Field {
        what: String,
        #[source]
        source: FieldPathError,
    },
    /// An external metric's name is not `RESOURCE[.GROUP]:PATH`.
    #[error(
        "external metric name {0:?} is not RESOURCE[.GROUP]:PATH (e.g. configmaps:data.depth)"
    )]
    ExternalName(String),
    /// The resource of an external metric is unknown.
    #[error("the server doesn't have a resource type \"{0}\"")]
    UnknownResource(String),
    /// The selector of an external metric is invalid.
    #[error("invalid metric selector: {0}")]
    Selector(String),
    /// The selector matched no object.
    #[error("no metrics returned from external metrics API")]
    NoSeries,
}

/// Where an `Object` metric's value goes in the observation.
pub(crate) fn object_key(o: &ObjectMetricSource) -> String {
    let d = &o.described_object;
    format!(
        "object:{}/{}/{}:{}",
        d.api_version.as_deref().unwrap_or("v1"),
        d.kind,
        d.name,
        o.metric.name
    )
}

/// Where an `External` metric's value goes in the observation.
pub(crate) fn external_key(e: &ExternalMetricSource) -> String {
    let selector = serde_json::to_string(&e.metric.selector).unwrap_or_default();
    format!("external:{}:{selector}", e.metric.name)
}

/// The values of the `Object` and `External` metrics among `metrics`, by key.
pub(crate) async fn read(
    client: &Client,
    namespace: &str,
    metrics: &[MetricSpec],
) -> BTreeMap<String, Result<i64, String>> {
    let mut out = BTreeMap::new();
    for m in metrics {
        if let Some(o) = m.object.as_ref().filter(|_| m.type_ == "Object") {
            let value = object_value(client, namespace, o)
                .await
                .map_err(|e| format!("unable to get metric {}: {e}", o.metric.name));
            out.insert(object_key(o), value);
        } else if let Some(e) = m.external.as_ref().filter(|_| m.type_ == "External") {
            let value = external_value(client, namespace, e).await.map_err(|err| {
                format!(
                    "unable to get external metric {namespace}/{}: {err}",
                    e.metric.name
                )
            });
            out.insert(external_key(e), value);
        }
    }
    out
}

async fn object_value(
    client: &Client,
    namespace: &str,
    o: &ObjectMetricSource,
) -> Result<i64, SourceError> {
    let d = &o.described_object;
    let api_version = d.api_version.as_deref().unwrap_or("v1");
    let (resource, namespaced) = discover(client, api_version, |r| r.kind == d.kind)
        .await
        .ok_or_else(|| SourceError::UnknownKind {
            kind: d.kind.clone(),
            api_version: api_version.to_owned(),
        })?;
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client.kube().clone(), namespace, &resource)
    } else {
        Api::all_with(client.kube().clone(), &resource)
    };
    let what = if namespaced {
        format!("{} {namespace}/{}", d.kind, d.name)
    } else {
        format!("{} {}", d.kind, d.name)
    };
    let object = api.get(&d.name).await.map_err(|source| SourceError::Get {
        what: what.clone(),
        source,
    })?;
    let json = serde_json::to_value(&object).unwrap_or(Value::Null);
    milli_at(&json, &o.metric.name).map_err(|source| SourceError::Field { what, source })
}

/// `RESOURCE[.GROUP]` and `PATH` of an external metric's name.
fn split_external(name: &str) -> Option<(&str, &str, &str)> {
    let (resource, path) = name.split_once(':')?;
    let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
    (!resource.is_empty() && !path.is_empty()).then_some((resource, group, path))
}

/// The `apiVersion` discovery prefers for `group` (`v1` for the core group).
async fn preferred_version(client: &Client, group: &str) -> Option<String> {
    if group.is_empty() {
        return Some("v1".to_owned());
    }
    let groups = client.kube().list_api_groups().await.ok()?;
    let g = groups.groups.into_iter().find(|g| g.name == group)?;
    g.preferred_version
        .or_else(|| g.versions.into_iter().next())
        .map(|v| v.group_version)
}

async fn external_value(
    client: &Client,
    namespace: &str,
    e: &ExternalMetricSource,
) -> Result<i64, SourceError> {
    let name = &e.metric.name;
    let (wanted, group, path) =
        split_external(name).ok_or_else(|| SourceError::ExternalName(name.clone()))?;
    let unknown = || SourceError::UnknownResource(wanted.to_owned());
    let api_version = preferred_version(client, group).await.ok_or_else(unknown)?;
    let (resource, namespaced) = discover(client, &api_version, |r| {
        r.name.eq_ignore_ascii_case(wanted)
            || r.singular_name.eq_ignore_ascii_case(wanted)
            || r.kind.eq_ignore_ascii_case(wanted)
            || r.short_names
                .iter()
                .flatten()
                .any(|s| s.eq_ignore_ascii_case(wanted))
    })
    .await
    .ok_or_else(unknown)?;
    let selector = match &e.metric.selector {
        Some(s) => {
            let json = serde_json::to_value(s).unwrap_or(Value::Null);
            LabelSelector::from_structured(&json)
                .map_err(|err| SourceError::Selector(err.to_string()))?
        }
        None => LabelSelector::everything(),
    };
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client.kube().clone(), namespace, &resource)
    } else {
        Api::all_with(client.kube().clone(), &resource)
    };
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| SourceError::List {
            resource: resource.plural.clone(),
            source,
        })?;
    let mut sum: Option<i64> = None;
    for object in &list.items {
        let json = serde_json::to_value(object).unwrap_or(Value::Null);
        if !selector.matches_object(&json) {
            continue;
        }
        let value = milli_at(&json, path).map_err(|source| SourceError::Field {
            what: format!(
                "{} {}",
                resource.kind,
                object.metadata.name.as_deref().unwrap_or_default()
            ),
            source,
        })?;
        sum = Some(sum.unwrap_or(0).saturating_add(value));
    }
    sum.ok_or(SourceError::NoSeries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_names_should_split_into_resource_group_and_path() {
        assert_eq!(
            split_external("queues.example.com:.status.depth"),
            Some(("queues", "example.com", ".status.depth"))
        );
        assert_eq!(
            split_external("configmaps:data.depth"),
            Some(("configmaps", "", "data.depth"))
        );
        assert_eq!(
            split_external("cm:.metadata.labels['a.b/c']"),
            Some(("cm", "", ".metadata.labels['a.b/c']"))
        );
        assert_eq!(split_external("configmaps"), None);
        assert_eq!(split_external(":data.depth"), None);
        assert_eq!(split_external("configmaps:"), None);
    }
}
