//! Planning a Service's EndpointSlices: from the slices it has and the endpoints it should have
//! (grouped by address type and resolved port set), the slices to create, update and delete,
//! with as few writes as possible — as kube's reconciler does: endpoints stay in the slice that
//! holds them, changed ones are rewritten in place, new ones fill slices already being
//! rewritten before new slices are made, and a last partial batch goes into an untouched slice
//! with room rather than a new one. A Service without any endpoint keeps one empty placeholder
//! slice.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::pod_endpoint::ResolvedPort;

/// The label naming a slice's Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming the controller that manages a slice.
pub(crate) const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub(crate) const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// A group of slices: one address type and one resolved port set.
pub(crate) type GroupKey = (String, Vec<ResolvedPort>);

/// What to write.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// New slices (named by `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices with new endpoints (carrying the resource version they were read at).
    pub update: Vec<EndpointSlice>,
    /// Slices to delete.
    pub delete: Vec<EndpointSlice>,
}

/// The port set of an existing slice, as a [`GroupKey`] part.
fn ports_of(slice: &EndpointSlice) -> Vec<ResolvedPort> {
    let mut ports: Vec<ResolvedPort> = slice
        .ports
        .iter()
        .flatten()
        .map(|p| ResolvedPort {
            name: p.name.clone().unwrap_or_default(),
            port: p.port.unwrap_or_default(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    ports.sort();
    ports
}

/// An endpoint's identity within a group: its first address.
fn identity(endpoint: &Endpoint) -> String {
    endpoint.addresses.first().cloned().unwrap_or_default()
}

/// A new slice of the Service.
fn new_slice(service: &Service, key: &GroupKey, endpoints: Vec<Endpoint>) -> EndpointSlice {
    let name = service.metadata.name.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        (SERVICE_NAME_LABEL.to_owned(), name.clone()),
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
    ]);
    let prefix: String = name.chars().take(57).collect();
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: service.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Service".to_owned(),
                name,
                uid: service.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        address_type: key.0.clone(),
        endpoints,
        ports: Some(
            key.1
                .iter()
                .map(|p| EndpointPort {
                    name: Some(p.name.clone()),
                    port: Some(p.port),
                    protocol: Some(p.protocol.clone()),
                    app_protocol: p.app_protocol.clone(),
                })
                .collect(),
        ),
    }
}

/// The writes that take `existing` (this controller's slices of the Service) to `desired`,
/// with at most `max` endpoints per slice.
pub(crate) fn plan(
    service: &Service,
    existing: Vec<EndpointSlice>,
    desired: BTreeMap<GroupKey, Vec<Endpoint>>,
    max: usize,
    placeholder_type: &str,
) -> Plan {
    let max = max.max(1);
    let mut plan = Plan::default();
    let mut by_group: BTreeMap<GroupKey, Vec<EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        by_group
            .entry((slice.address_type.clone(), ports_of(&slice)))
            .or_default()
            .push(slice);
    }
    if desired.is_empty() {
        // No endpoint at all: one empty placeholder slice stays (or is made).
        let placeholder_key: GroupKey = (placeholder_type.to_owned(), Vec::new());
        let mut kept = false;
        for (key, slices) in by_group {
            for slice in slices {
                if !kept && key == placeholder_key && slice.endpoints.is_empty() {
                    kept = true;
                } else {
                    plan.delete.push(slice);
                }
            }
        }
        if !kept {
            plan.create
                .push(new_slice(service, &placeholder_key, Vec::new()));
        }
        return plan;
    }
    for (key, slices) in &mut by_group {
        if !desired.contains_key(key) {
            plan.delete.append(slices);
        }
    }
    for (key, endpoints) in desired {
        let slices = by_group.remove(&key).unwrap_or_default();
        plan_group(service, &key, slices, endpoints, max, &mut plan);
    }
    plan
}

/// [`plan`] for one group.
fn plan_group(
    service: &Service,
    key: &GroupKey,
    slices: Vec<EndpointSlice>,
    endpoints: Vec<Endpoint>,
    max: usize,
    plan: &mut Plan,
) {
    let mut order: Vec<String> = Vec::with_capacity(endpoints.len());
    let mut wanted: HashMap<String, Endpoint> = HashMap::with_capacity(endpoints.len());
    for endpoint in endpoints {
        let id = identity(&endpoint);
        if wanted.insert(id.clone(), endpoint).is_none() {
            order.push(id);
        }
    }
    let mut updates: Vec<EndpointSlice> = Vec::new();
    let mut unchanged: Vec<EndpointSlice> = Vec::new();
    for mut slice in slices {
        let kept: Vec<Endpoint> = slice
            .endpoints
            .iter()
            .filter_map(|e| wanted.remove(&identity(e)))
            .collect();
        if kept.is_empty() {
            plan.delete.push(slice);
        } else if kept != slice.endpoints {
            slice.endpoints = kept;
            updates.push(slice);
        } else {
            unchanged.push(slice);
        }
    }
    let mut remaining: Vec<Endpoint> = order.iter().filter_map(|id| wanted.remove(id)).collect();
    remaining.reverse();
    // New endpoints first fill the slices that are written anyway.
    for slice in &mut updates {
        while slice.endpoints.len() < max {
            let Some(endpoint) = remaining.pop() else {
                break;
            };
            slice.endpoints.push(endpoint);
        }
    }
    remaining.reverse();
    // Full new slices; a last partial batch goes into the fullest untouched slice it fits.
    let mut chunks: Vec<Vec<Endpoint>> = remaining.chunks(max).map(<[Endpoint]>::to_vec).collect();
    if let Some(last) = chunks.last() {
        if last.len() < max {
            let fits = unchanged
                .iter()
                .enumerate()
                .filter(|(_, s)| s.endpoints.len() + last.len() <= max)
                .max_by_key(|(_, s)| s.endpoints.len())
                .map(|(i, _)| i);
            if let Some(i) = fits {
                let mut slice = unchanged.swap_remove(i);
                slice.endpoints.extend(chunks.pop().unwrap_or_default());
                updates.push(slice);
            }
        }
    }
    plan.update.extend(updates);
    plan.create.extend(
        chunks
            .into_iter()
            .map(|endpoints| new_slice(service, key, endpoints)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(ip: &str) -> Endpoint {
        Endpoint {
            addresses: vec![ip.to_owned()],
            ..Endpoint::default()
        }
    }

    fn key() -> GroupKey {
        ("IPv4".to_owned(), Vec::new())
    }

    fn service() -> Service {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "s", "namespace": "d", "uid": "u"}}),
        )
        .expect("service")
    }

    fn existing(name: &str, ips: &[&str]) -> EndpointSlice {
        let mut slice = new_slice(
            &service(),
            &key(),
            ips.iter().map(|ip| endpoint(ip)).collect(),
        );
        slice.metadata.name = Some(name.to_owned());
        slice
    }

    #[test]
    fn many_endpoints_should_split_into_full_slices() {
        let eps: Vec<Endpoint> = (0..250)
            .map(|i| endpoint(&format!("10.0.{}.{}", i / 200, i % 200)))
            .collect();
        let plan = plan(
            &service(),
            Vec::new(),
            BTreeMap::from([(key(), eps)]),
            100,
            "IPv4",
        );
        let sizes: Vec<usize> = plan.create.iter().map(|s| s.endpoints.len()).collect();
        assert_eq!(sizes, vec![100, 100, 50]);
        assert!(plan.update.is_empty() && plan.delete.is_empty());
        let meta = &plan.create[0].metadata;
        assert_eq!(meta.generate_name.as_deref(), Some("s-"));
        assert_eq!(
            meta.owner_references.as_ref().map(|o| o[0].controller),
            Some(Some(true))
        );
    }

    #[test]
    fn unchanged_slices_should_not_be_written_and_new_endpoints_fill_a_partial_one() {
        let a = existing("a", &["1.1.1.1", "1.1.1.2"]);
        let b = existing("b", &["1.1.1.3"]);
        let same = vec![
            endpoint("1.1.1.1"),
            endpoint("1.1.1.2"),
            endpoint("1.1.1.3"),
        ];
        let p = plan(
            &service(),
            vec![a.clone(), b.clone()],
            BTreeMap::from([(key(), same.clone())]),
            3,
            "IPv4",
        );
        assert!(
            p.create.is_empty() && p.update.is_empty() && p.delete.is_empty(),
            "{p:?}"
        );
        // One more endpoint: it goes into the fullest slice with room for it, not a new one.
        let mut more = same;
        more.push(endpoint("1.1.1.4"));
        let p = plan(
            &service(),
            vec![a.clone(), b.clone()],
            BTreeMap::from([(key(), more)]),
            3,
            "IPv4",
        );
        assert!(p.create.is_empty(), "{p:?}");
        assert_eq!(p.update.len(), 1);
        assert_eq!(p.update[0].metadata.name.as_deref(), Some("a"));
        assert_eq!(p.update[0].endpoints.len(), 3);
        // `a` loses both endpoints: deleted; the placeholder appears when nothing is left.
        let p = plan(
            &service(),
            vec![a.clone(), b.clone()],
            BTreeMap::from([(key(), vec![endpoint("1.1.1.3")])]),
            3,
            "IPv4",
        );
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].metadata.name.as_deref(), Some("a"));
        let p = plan(&service(), vec![a, b], BTreeMap::new(), 3, "IPv4");
        assert_eq!((p.create.len(), p.delete.len()), (1, 2));
        assert!(p.create[0].endpoints.is_empty());
    }
}
