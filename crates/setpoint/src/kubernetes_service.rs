//! The `kubernetes` Service in `default`, which in-cluster clients use to reach the API, kept
//! by every API server as kube-apiserver's endpoint reconciler keeps it: each API server renews
//! a Lease `kube-system/apiserver-<id>` (30 s, every 10 s) naming its address, and writes —
//! by server-side apply, so all of them write the same thing — the Service (`10.96.0.1:443`
//! when that address is free), its `Endpoints` and its `EndpointSlice`s listing the address of
//! every API server whose Lease is current. An API server that stops deletes its Lease.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{json, Value};
use setpoint_runtime::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the Lease is renewed and the Service written.
const PERIOD: Duration = Duration::from_secs(10);
/// How long a Lease counts without renewal.
const LEASE_SECONDS: i32 = 30;
/// The label of API server identity Leases, as kube-apiserver labels them.
const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The address an API server's Lease announces.
const ADDRESS_ANNOTATION: &str = "setpoint.dev/apiserver-address";
/// The field manager of these writes.
const MANAGER: &str = "kube-apiserver";
/// The Service's cluster IP: the first of the service range, as kube-apiserver reserves it.
const CLUSTER_IP: &str = "10.96.0.1";

/// Keeps the `kubernetes` Service until `shutdown`, for the API server at `address`.
pub(crate) fn start(
    client: Client,
    address: SocketAddr,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let id = format!("apiserver-{}", uuid_like());
        loop {
            if let Err(error) = sync(&client, &id, address).await {
                tracing::warn!(%error, "keeping the kubernetes Service");
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(PERIOD) => {}
            }
        }
        let leases: Api<Lease> = Api::namespaced(client.kube().clone(), "kube-system");
        let _ = leases.delete(&id, &DeleteParams::default()).await;
    })
}

/// A random identity for this process's Lease.
fn uuid_like() -> String {
    use rand::Rng as _;
    let mut rng = rand::thread_rng();
    (0..16)
        .map(|_| format!("{:x}", rng.gen_range(0..16u8)))
        .collect()
}

async fn sync(client: &Client, id: &str, address: SocketAddr) -> Result<(), kube::Error> {
    let kube = client.kube().clone();
    let apply = PatchParams::apply(MANAGER).force();
    let now = Timestamp::now();
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "kube-system");
    let mut lease = Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(id.to_owned()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    };
    lease.metadata.name = Some(id.to_owned());
    lease.metadata.labels = Some(BTreeMap::from([(
        IDENTITY_LABEL.to_owned(),
        "kube-apiserver".to_owned(),
    )]));
    lease.metadata.annotations = Some(BTreeMap::from([(
        ADDRESS_ANNOTATION.to_owned(),
        address.to_string(),
    )]));
    let mut lease = serde_json::to_value(&lease).unwrap_or_default();
    lease["apiVersion"] = json!("coordination.k8s.io/v1");
    lease["kind"] = json!("Lease");
    leases.patch(id, &apply, &Patch::Apply(lease)).await?;
    let current = leases
        .list(&ListParams::default().labels(&format!("{IDENTITY_LABEL}=kube-apiserver")))
        .await?;
    let addresses = live_addresses(&current.items, now);
    // Every API server writes the same objects: ports grouped, addresses sorted.
    let mut by_port: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for a in &addresses {
        by_port
            .entry(a.port())
            .or_default()
            .push(a.ip().to_string());
    }
    let Some((&first_port, _)) = by_port.iter().next() else {
        return Ok(());
    };
    let services: Api<Service> = Api::namespaced(kube.clone(), "default");
    let service = |cluster_ip: bool| {
        let mut spec = json!({
            "type": "ClusterIP",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": first_port}],
            "sessionAffinity": "None",
        });
        if cluster_ip {
            spec["clusterIP"] = json!(CLUSTER_IP);
        }
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
               "spec": spec})
    };
    if let Err(kube::Error::Api(e)) = services
        .patch("kubernetes", &apply, &Patch::Apply(service(true)))
        .await
    {
        // 10.96.0.1 given to another Service before this one existed: any free address.
        if e.code != 422 {
            return Err(kube::Error::Api(e));
        }
        services
            .patch("kubernetes", &apply, &Patch::Apply(service(false)))
            .await?;
    }
    let endpoints: Api<Endpoints> = Api::namespaced(kube.clone(), "default");
    let subsets: Vec<Value> = by_port
        .iter()
        .map(|(port, ips)| {
            json!({"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
                   "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
        })
        .collect();
    let object = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": subsets});
    endpoints
        .patch("kubernetes", &apply, &Patch::Apply(object))
        .await?;
    let slices: Api<EndpointSlice> = Api::namespaced(kube, "default");
    for (port, ips) in &by_port {
        let name = if *port == first_port {
            "kubernetes".to_owned()
        } else {
            format!("kubernetes-{port}")
        };
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "kubernetes",
                                                  "endpointslice.kubernetes.io/managed-by": "setpoint-apiserver"}},
            "addressType": "IPv4",
            "endpoints": ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>(),
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]});
        slices.patch(&name, &apply, &Patch::Apply(slice)).await?;
    }
    Ok(())
}

/// The addresses of the Leases renewed within their duration, sorted.
fn live_addresses(leases: &[Lease], now: Timestamp) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = leases
        .iter()
        .filter(|lease| {
            let spec = lease.spec.as_ref();
            let renewed = spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
            let seconds = spec
                .and_then(|s| s.lease_duration_seconds)
                .unwrap_or(LEASE_SECONDS);
            renewed.is_some_and(|r| {
                r.checked_add(SignedDuration::from_secs(i64::from(seconds)))
                    .is_ok_and(|end| end > now)
            })
        })
        .filter_map(|lease| {
            lease
                .metadata
                .annotations
                .as_ref()?
                .get(ADDRESS_ANNOTATION)?
                .parse()
                .ok()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
