//! Routing the Service CIDR to the pod bridge (research §8): host-originated packets are
//! routed before the output hook's DNAT, so with pods behind a bridge the Service CIDR must
//! lead there — and what no rule DNATs then dies on the bridge (and the table's post-DNAT
//! reject) instead of leaving through the default route.

use tokio::process::Command;

/// `ip route replace <cidr> dev <bridge> src <gateway>`; whether it worked (logged if not).
pub(crate) async fn add(cidr: &str, bridge: &str, gateway: std::net::Ipv4Addr) -> bool {
    let status = Command::new("ip")
        .args([
            "route",
            "replace",
            cidr,
            "dev",
            bridge,
            "src",
            &gateway.to_string(),
        ])
        .status()
        .await;
    let ok = status.as_ref().is_ok_and(|s| s.success());
    if ok {
        tracing::info!(%cidr, %bridge, "Service CIDR routed to the pod bridge");
    } else {
        tracing::warn!(%cidr, %bridge, ?status, "routing the Service CIDR to the pod bridge failed");
    }
    ok
}

/// Removes the route if it still leads to `bridge` (another agent may have replaced it).
pub(crate) async fn delete(cidr: &str, bridge: &str) {
    let _ = Command::new("ip")
        .args(["route", "del", cidr, "dev", bridge])
        .status()
        .await;
}
