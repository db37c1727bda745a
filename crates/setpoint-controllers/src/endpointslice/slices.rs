//! Planning a Service's EndpointSlices: from the slices it has and the endpoints it should have
//! (grouped by address type and resolved port set), the slices to create, update and delete,
//! with as few writes as possible — as kube's reconciler does: endpoints stay in the slice that
//! holds them, changed ones are rewritten in place, new ones fill slices already being
//! rewritten before new slices are made, and a last partial batch goes into an untouched slice
//! with room rather than a new one. Each address type is planned apart; one without any
//! endpoint keeps a single empty placeholder slice. Slices carry the Service's labels.

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
/// The label on the slices of a Service without a cluster IP.
pub(crate) const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";

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

/// The labels of the Service's slices: the Service's own (but the reserved ones), the
/// headless label when it has no cluster IP, the Service's name and this controller's.
pub(crate) fn labels_for(service: &Service) -> BTreeMap<String, String> {
    let reserved = [SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL];
    let mut labels: BTreeMap<String, String> = service
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !reserved.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !super::pod_endpoint::has_cluster_ip(service) {
        labels.insert(HEADLESS_LABEL.to_owned(), String::new());
    }
    labels.insert(
        SERVICE_NAME_LABEL.to_owned(),
        service.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    labels
}

/// A new slice of the Service.
fn new_slice(service: &Service, key: &GroupKey, endpoints: Vec<Endpoint>) -> EndpointSlice {
    let name = service.metadata.name.clone().unwrap_or_default();
    let prefix: String = name.chars().take(57).collect();
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: service.metadata.namespace.clone(),
            labels: Some(labels_for(service)),
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
/// with at most `max` endpoints per slice. Each of the Service's `address_types` is planned
/// apart, and one that ends up without any slice gets an empty placeholder (an existing one is
/// kept); slices of other address types are deleted.
pub(crate) fn plan(
    service: &Service,
    existing: Vec<EndpointSlice>,
    mut desired: BTreeMap<GroupKey, Vec<Endpoint>>,
    max: usize,
    address_types: &[String],
) -> Plan {
    let max = max.max(1);
    let labels = labels_for(service);
    let mut plan = Plan::default();
    let mut by_type: BTreeMap<String, BTreeMap<Vec<ResolvedPort>, Vec<EndpointSlice>>> =
        BTreeMap::new();
    for slice in existing {
        if address_types.contains(&slice.address_type) {
            by_type
                .entry(slice.address_type.clone())
                .or_default()
                .entry(ports_of(&slice))
                .or_default()
                .push(slice);
        } else {
            plan.delete.push(slice);
        }
    }
    for address_type in address_types {
        let mut existing = by_type.remove(address_type).unwrap_or_default();
        let groups: Vec<(GroupKey, Vec<Endpoint>)> = {
            let keys: Vec<GroupKey> = desired
                .keys()
                .filter(|(t, _)| t == address_type)
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| desired.remove_entry(&k))
                .collect()
        };
        let mut typed = Plan::default();
        for (ports, slices) in &mut existing {
            if !groups.iter().any(|((_, p), _)| p == ports) {
                typed.delete.append(slices);
            }
        }
        let existing_count = existing.values().map(Vec::len).sum::<usize>() + typed.delete.len();
        for (key, endpoints) in groups {
            let slices = existing.remove(&key.1).unwrap_or_default();
            plan_group(service, &labels, &key, slices, endpoints, max, &mut typed);
        }
        if typed.create.is_empty() && typed.delete.len() == existing_count {
            let key: GroupKey = (address_type.clone(), Vec::new());
            let keep = typed.delete.len() == 1
                && typed.delete.first().is_some_and(|s| {
                    s.endpoints.is_empty()
                        && s.ports.as_ref().is_none_or(Vec::is_empty)
                        && s.metadata.labels.as_ref() == Some(&labels)
                });
            if keep {
                typed.delete.clear();
            } else {
                typed.create.push(new_slice(service, &key, Vec::new()));
            }
        }
        plan.create.append(&mut typed.create);
        plan.update.append(&mut typed.update);
        plan.delete.append(&mut typed.delete);
    }
    plan
}

/// [`plan`] for one group.
fn plan_group(
    service: &Service,
    labels: &BTreeMap<String, String>,
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
        let relabel = slice.metadata.labels.as_ref() != Some(labels);
        if kept.is_empty() {
            plan.delete.push(slice);
        } else if kept != slice.endpoints || relabel {
            slice.endpoints = kept;
            slice.metadata.labels = Some(labels.clone());
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
            &["IPv4".to_owned()],
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
            &["IPv4".to_owned()],
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
            &["IPv4".to_owned()],
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
            &["IPv4".to_owned()],
        );
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].metadata.name.as_deref(), Some("a"));
        let p = plan(
            &service(),
            vec![a, b],
            BTreeMap::new(),
            3,
            &["IPv4".to_owned()],
        );
        assert_eq!((p.create.len(), p.delete.len()), (1, 2));
        assert!(p.create[0].endpoints.is_empty());
    }
}
