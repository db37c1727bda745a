//! The networking.k8s.io/v1 IPAddress of every allocated cluster IP, as kube-apiserver 1.33
//! keeps them: each address of a Service's `spec.clusterIPs` has an IPAddress named by it,
//! labelled as the allocator's (`ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io`,
//! `ipaddress.kubernetes.io/ip-family`), whose `parentRef` is the Service; it goes when the
//! Service goes. Unlike kube-apiserver, where the IPAddress is written as the allocation itself,
//! a task following the Services' watch cache writes them just after the Service is stored
//! (the allocator still finds the taken addresses among the Services). The task starts with
//! the API and first reconciles everything — adds what is missing, removes the allocator's
//! IPAddresses whose Service is gone or no longer holds the address — and does so again
//! whenever it falls behind the cache's event window.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use setpoint_core::{ApiError, Reason};

use super::Api;
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::RegistryStore;
use crate::watchcache::{EventType, Filter};

/// The label naming who manages an IPAddress, and the allocator's value.
const MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const ALLOCATOR: &str = "ipallocator.k8s.io";
/// The label naming an IPAddress's family.
const IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";

/// How often the task checks that the API is still there while no event comes.
const RECHECK: Duration = Duration::from_secs(1);

/// Starts keeping the IPAddresses of `api`'s Services (in a task that ends with the API).
pub(crate) fn start(api: &Arc<Api>) {
    tokio::spawn(follow(Arc::downgrade(api)));
}

/// The stores of Services and IPAddresses, while the API is there.
fn stores(api: &Api) -> Option<(Arc<RegistryStore>, Arc<RegistryStore>)> {
    let services = api.registry_store_of("", "v1", "services").ok()?;
    let addresses = api
        .registry_store_of("networking.k8s.io", "v1", "ipaddresses")
        .ok()?;
    Some((services, addresses))
}

/// Reconciles everything, then follows the Services' events; again from the start whenever
/// the watch falls behind. Ends when the API is gone.
async fn follow(api: Weak<Api>) {
    let mut tick = tokio::time::interval(RECHECK);
    loop {
        let Some(a) = api.upgrade() else { return };
        let Some((services, addresses)) = stores(&a) else {
            return;
        };
        drop(a);
        let cache = services.cache().clone();
        if !cache.is_ready() {
            tick.tick().await;
            continue;
        }
        let start = cache.revision();
        if let Err(error) = reconcile_all(&services, &addresses).await {
            tracing::warn!(%error, "cannot reconcile the IPAddresses of cluster IPs");
            tick.tick().await;
            continue;
        }
        let Ok(mut watcher) = cache.watch(start, Filter::default()) else {
            continue; // fell behind the window already: look at everything again
        };
        drop(cache);
        loop {
            tokio::select! {
                events = watcher.next() => {
                    if api.upgrade().is_none() {
                        return;
                    }
                    let Ok(events) = events else { break };
                    for e in events {
                        let service: Value = serde_json::from_slice(&e.object.json.bytes()).unwrap_or(Value::Null);
                        let done = match e.kind {
                            EventType::Deleted => release(&addresses, &service).await,
                            EventType::Added | EventType::Modified => ensure(&addresses, &service).await,
                        };
                        if let Err(error) = done {
                            tracing::warn!(%error, "cannot keep the IPAddresses of a Service");
                        }
                    }
                }
                _ = tick.tick() => {
                    if api.upgrade().is_none() {
                        return;
                    }
                }
            }
        }
    }
}

/// The cluster IPs a Service holds.
fn cluster_ips(service: &Value) -> Vec<&str> {
    service["spec"]["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
        .collect()
}

/// `(namespace, name)` of a Service.
fn service_key(service: &Value) -> (String, String) {
    let meta = &service["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_owned(),
        meta["name"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The Service an IPAddress the allocator manages belongs to, if it is one.
fn managed_parent(address: &Value) -> Option<(String, String)> {
    if address["metadata"]["labels"][MANAGED_BY] != ALLOCATOR {
        return None;
    }
    let parent = &address["spec"]["parentRef"];
    if parent["resource"] != "services" || !parent["group"].as_str().unwrap_or_default().is_empty()
    {
        return None;
    }
    Some((
        parent["namespace"].as_str().unwrap_or_default().to_owned(),
        parent["name"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// The IPAddress of `ip` held by `service`.
fn address_of(ip: &str, service: &Value) -> Value {
    let (namespace, name) = service_key(service);
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {"name": ip, "labels": {IP_FAMILY: family, MANAGED_BY: ALLOCATOR}},
        "spec": {"parentRef": {"resource": "services", "namespace": namespace, "name": name}},
    })
}

/// Creates the missing IPAddresses of `service`'s cluster IPs.
async fn ensure(addresses: &RegistryStore, service: &Value) -> Result<(), ApiError> {
    for ip in cluster_ips(service) {
        match addresses.create(None, address_of(ip, service), false).await {
            Ok(_) => {}
            Err(e) if e.reason == Reason::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes the allocator's IPAddresses of a deleted `service`.
async fn release(addresses: &RegistryStore, service: &Value) -> Result<(), ApiError> {
    let owner = service_key(service);
    for ip in cluster_ips(service) {
        let address = match addresses.get(None, ip).await {
            Ok(a) => a,
            Err(e) if e.reason == Reason::NotFound => continue,
            Err(e) => return Err(e),
        };
        if managed_parent(&address).as_ref() == Some(&owner) {
            delete(addresses, ip).await?;
        }
    }
    Ok(())
}

async fn delete(addresses: &RegistryStore, name: &str) -> Result<(), ApiError> {
    match addresses
        .delete(None, name, &DeleteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.reason == Reason::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes the IPAddresses match the Services: adds the missing ones, removes the allocator's
/// whose Service is gone or no longer holds the address.
async fn reconcile_all(
    services: &RegistryStore,
    addresses: &RegistryStore,
) -> Result<(), ApiError> {
    let services = services.consistent_values().await?;
    let mut held: BTreeMap<String, (String, String)> = BTreeMap::new();
    for service in &services {
        for ip in cluster_ips(service) {
            held.insert(ip.to_owned(), service_key(service));
        }
    }
    for address in addresses.consistent_values().await? {
        let name = address["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(parent) = managed_parent(&address) {
            if held.get(name) != Some(&parent) {
                delete(addresses, name).await?;
            }
        }
    }
    for service in &services {
        ensure(addresses, service).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_should_name_its_service_and_be_the_allocators() {
        let web = json!({"metadata": {"namespace": "shop", "name": "web"},
            "spec": {"clusterIPs": ["10.96.0.10", "fd00::a"]}});
        assert_eq!(cluster_ips(&web), ["10.96.0.10", "fd00::a"]);
        let v6 = address_of("fd00::a", &web);
        assert_eq!(v6["metadata"]["labels"][IP_FAMILY], "IPv6");
        assert_eq!(managed_parent(&v6), Some(("shop".into(), "web".into())));
        let headless = json!({"spec": {"clusterIPs": ["None"]}});
        assert!(cluster_ips(&headless).is_empty());
        let mut foreign = v6.clone();
        foreign["metadata"]["labels"][MANAGED_BY] = json!("someone-else");
        assert_eq!(managed_parent(&foreign), None);
    }
}
