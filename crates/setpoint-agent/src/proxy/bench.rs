//! What `setpoint bench services` measures, exposed for the `setpoint` binary: the nftables
//! transactions for `services` Services × `endpoints` endpoints (a full sync, then one
//! endpoint added to one Service), built from real Service and EndpointSlice objects, with
//! the time computing them took. Applying them (in a throwaway network namespace) is the
//! caller's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::{model, ruleset};

/// The transactions of one benchmark run.
#[derive(Debug, Clone)]
pub struct ServiceRulesets {
    /// The full sync (`nft -f` text).
    pub full: String,
    /// The incremental sync after one endpoint was added to one Service.
    pub incremental: String,
    /// Chains in the full sync's Service part.
    pub chains: usize,
    /// Time spent computing the full sync from the objects (rules, objects, text).
    pub full_compute: Duration,
    /// Time spent computing the incremental sync.
    pub incremental_compute: Duration,
}

/// The rulesets for `services` ClusterIP Services of `endpoints` ready endpoints each, in
/// table `table`.
pub fn service_rulesets(table: &str, services: usize, endpoints: usize) -> ServiceRulesets {
    let mut svcs: Vec<Arc<Service>> = Vec::new();
    let mut slices: Vec<Arc<EndpointSlice>> = Vec::new();
    for i in 0..services {
        let ip = format!("10.96.{}.{}", i / 250, i % 250 + 1);
        if let Ok(svc) = serde_json::from_value(json!({
            "metadata": {"namespace": "bench", "name": format!("svc-{i}")},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 80, "protocol": "TCP"}]},
        })) {
            svcs.push(Arc::new(svc));
        }
        slices.push(bench_slice(i, endpoints));
    }
    let started = Instant::now();
    let before = ruleset::Programmed::of(&model::service_rules(&svcs, &slices, "bench"));
    let full = ruleset::full(table, "10.96.0.0/12", &before);
    let full_compute = started.elapsed();
    if let Some(first) = slices.first_mut() {
        *first = bench_slice(0, endpoints + 1);
    }
    let started = Instant::now();
    let after = ruleset::Programmed::of(&model::service_rules(&svcs, &slices, "bench"));
    let incremental = ruleset::incremental(table, &before, &after);
    let incremental_compute = started.elapsed();
    ServiceRulesets {
        full,
        incremental,
        chains: before.chain_count(),
        full_compute,
        incremental_compute,
    }
}

fn bench_slice(i: usize, endpoints: usize) -> Arc<EndpointSlice> {
    let addresses: Vec<_> = (0..endpoints)
        .map(|e| {
            let n = i * endpoints + e;
            json!({"addresses": [format!("10.{}.{}.{}", 128 + n / 65_536, (n / 256) % 256, n % 256)],
                   "conditions": {"ready": true}})
        })
        .collect();
    let slice = serde_json::from_value(json!({
        "metadata": {"namespace": "bench", "name": format!("svc-{i}-x"),
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": addresses,
    }));
    Arc::new(slice.unwrap_or_else(|_| EndpointSlice {
        address_type: "IPv4".to_owned(),
        ..EndpointSlice::default()
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_small_run_has_every_service_and_a_one_chain_change() {
        let sets = super::service_rulesets("t", 20, 3);
        assert_eq!(sets.chains, 20);
        assert_eq!(
            sets.full.matches("add element ip t service-ips").count(),
            20
        );
        assert!(
            sets.incremental
                .starts_with("flush chain ip t svc-bench/svc-0/tcp/80\n"),
            "{}",
            sets.incremental
        );
        assert_eq!(sets.incremental.lines().count(), 3);
    }
}
