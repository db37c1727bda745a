//! Cluster IPs for services: a new `ClusterIP`, `NodePort` or `LoadBalancer` service without
//! one gets a free address of the service range (10.96.0.0/12, as kubeadm clusters default to);
//! an address asked for must be in the range and free. Which addresses are taken is read from
//! the other services, read consistently ([`Peers`]), and the pick is random, so two creates
//! racing for the same address are unlikely; the store has no uniqueness index to make them
//! impossible (kube-apiserver keeps an allocation bitmap for that).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::strategy::Peers;

/// The service range, as the default ServiceCIDR holds it.
pub(crate) const SERVICE_RANGE: &str = "10.96.0.0/12";
/// The service range: 10.96.0.0/12.
const RANGE_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const RANGE_BITS: u32 = 12;

fn in_range(ip: Ipv4Addr) -> bool {
    (u32::from(ip) >> (32 - RANGE_BITS)) == (RANGE_BASE >> (32 - RANGE_BITS))
}

/// Assigns (or checks) the cluster IP of a service about to be created.
pub(crate) async fn assign(peers: &dyn Peers, service: &mut Value) -> Result<(), ApiError> {
    let spec = &service["spec"];
    if spec["type"] == "ExternalName" || spec["clusterIP"] == "None" {
        return Ok(());
    }
    let taken: BTreeSet<Ipv4Addr> = peers
        .objects()
        .await?
        .iter()
        .filter_map(|s| {
            s["spec"]["clusterIP"]
                .as_str()
                .and_then(|ip| ip.parse().ok())
        })
        .collect();
    let name = service["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let invalid = |value: &Value, detail: &str| {
        ApiError::invalid(
            "Service",
            "",
            &name,
            vec![Cause::invalid("spec.clusterIPs", value, detail)],
        )
    };
    let ip = match spec["clusterIP"].as_str().filter(|s| !s.is_empty()) {
        Some(asked) => {
            let ip: Ipv4Addr = asked.parse().map_err(|_| {
                invalid(
                    &spec["clusterIP"],
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )
            })?;
            if !in_range(ip) {
                return Err(invalid(&spec["clusterIP"], "failed to allocate IP: the provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"));
            }
            if taken.contains(&ip) {
                return Err(invalid(
                    &spec["clusterIP"],
                    "failed to allocate IP: provided IP is already allocated",
                ));
            }
            ip
        }
        None => pick(&taken).ok_or_else(|| ApiError::internal("the service IP range is full"))?,
    };
    let spec = service["spec"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("a service needs a spec"))?;
    spec.insert("clusterIP".into(), json!(ip.to_string()));
    spec.insert("clusterIPs".into(), json!([ip.to_string()]));
    spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
    spec.entry("ipFamilyPolicy")
        .or_insert_with(|| json!("SingleStack"));
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| json!("Cluster"));
    Ok(())
}

/// A random free address of the range (not the network address, not `.1`, which clusters give
/// the `kubernetes` service).
fn pick(taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let size = 1u32 << (32 - RANGE_BITS);
    let mut rng = rand::thread_rng();
    for _ in 0..64 {
        let ip = Ipv4Addr::from(RANGE_BASE + rng.gen_range(2..size - 1));
        if !taken.contains(&ip) {
            return Some(ip);
        }
    }
    (2..size - 1)
        .map(|o| Ipv4Addr::from(RANGE_BASE + o))
        .find(|ip| !taken.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_should_stay_in_the_range_and_avoid_taken_addresses() {
        let taken: BTreeSet<Ipv4Addr> = ["10.96.0.5".parse().unwrap()].into();
        for _ in 0..1000 {
            let ip = pick(&taken).unwrap();
            assert!(
                in_range(ip) && ip != "10.96.0.5".parse::<Ipv4Addr>().unwrap(),
                "{ip}"
            );
        }
        assert!(!in_range("10.112.0.1".parse().unwrap()));
        assert!(in_range("10.111.255.254".parse().unwrap()));
        let base = Ipv4Addr::from(RANGE_BASE);
        assert_eq!(SERVICE_RANGE, format!("{base}/{RANGE_BITS}"));
    }
}
