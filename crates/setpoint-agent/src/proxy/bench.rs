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

/// Pushes `bytes` through the userspace fallback (a NodePort on 127.0.0.1 spliced to a sink
/// on 127.0.0.1) over one connection; the time until the sink has read them all.
pub async fn userspace_throughput(bytes: u64) -> std::io::Result<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink_port = sink.local_addr()?.port();
    let node_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut proxy = super::userspace::UserspaceProxy::new(
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        "benchmark",
        shutdown.clone(),
    );
    proxy
        .sync(&[model::ServicePortRule {
            id: "bench/sink/tcp/80".to_owned(),
            cluster_ips: Vec::new(),
            port: 80,
            protocol: model::Protocol::Tcp,
            node_port: Some(node_port),
            backends: vec![model::Backend {
                ip: std::net::Ipv4Addr::LOCALHOST,
                port: sink_port,
            }],
            local_backends: None,
            affinity_timeout: None,
        }])
        .await;
    let reader = tokio::spawn(async move {
        let (mut conn, _) = sink.accept().await?;
        let mut buffer = vec![0u8; 1 << 16];
        let mut total = 0u64;
        while total < bytes {
            let n = conn.read(&mut buffer).await?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        Ok::<u64, std::io::Error>(total)
    });
    let started = Instant::now();
    let mut client = tokio::net::TcpStream::connect(("127.0.0.1", node_port)).await?;
    let chunk = vec![7u8; 1 << 16];
    let mut sent = 0u64;
    while sent < bytes {
        client.write_all(&chunk).await?;
        sent += chunk.len() as u64;
    }
    client.shutdown().await?;
    let received = reader.await.map_err(std::io::Error::other)??;
    let elapsed = started.elapsed();
    proxy.stop();
    shutdown.cancel();
    if received < bytes {
        return Err(std::io::Error::other(format!(
            "the sink read {received} of {bytes} bytes"
        )));
    }
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_userspace_fallback_carries_bytes_through() {
        let took = super::userspace_throughput(4 << 20)
            .await
            .expect("through the proxy");
        assert!(took > std::time::Duration::ZERO);
    }

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
