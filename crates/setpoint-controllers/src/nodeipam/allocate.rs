//! The range choice of the node IPAM loop, without I/O: which ranges are in use, which is the
//! lowest free one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use setpoint_core::cidr::Ipv4Cidr;

/// The Node's IPv4 pod range, if it has one (`podCIDRs`, else `podCIDR`).
pub(crate) fn assigned(node: &Node) -> Option<Ipv4Cidr> {
    let spec = node.spec.as_ref()?;
    spec.pod_cidrs
        .iter()
        .flatten()
        .chain(spec.pod_cidr.iter())
        .find_map(|c| c.parse().ok())
}

/// Drops pending assignments the cache now shows, and those of Nodes gone from it.
pub(crate) fn forget_settled(pending: &mut BTreeMap<String, Ipv4Cidr>, nodes: &[Arc<Node>]) {
    let present: BTreeMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, &**n)))
        .collect();
    pending.retain(|name, _| {
        present
            .get(name.as_str())
            .is_some_and(|n| assigned(n).is_none())
    });
}

/// The lowest `/mask` range of `cluster` that no Node in `nodes` and no pending assignment
/// overlaps.
pub(crate) fn lowest_free(
    cluster: Ipv4Cidr,
    mask: u8,
    nodes: &[Arc<Node>],
    pending: &BTreeMap<String, Ipv4Cidr>,
) -> Option<Ipv4Cidr> {
    let taken: Vec<Ipv4Cidr> = nodes
        .iter()
        .filter_map(|n| assigned(n))
        .chain(pending.values().copied())
        .collect();
    let used: BTreeSet<u64> = taken
        .iter()
        .filter(|c| c.prefix() == mask)
        .filter_map(|c| cluster.subnet_index(c))
        .collect();
    (0..cluster.subnet_count(mask))
        .filter(|i| !used.contains(i))
        .filter_map(|i| cluster.subnet(mask, i))
        .find(|candidate| {
            // Ranges of another size (set by hand) must not overlap either.
            !taken
                .iter()
                .filter(|c| c.prefix() != mask)
                .any(|c| c.covers(candidate) || candidate.covers(c))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cidr: Option<&str>) -> Arc<Node> {
        let mut value = json!({"metadata": {"name": name}, "spec": {}});
        if let Some(c) = cidr {
            value["spec"] = json!({"podCIDR": c, "podCIDRs": [c]});
        }
        Arc::new(serde_json::from_value(value).expect("node"))
    }

    #[test]
    fn the_lowest_range_unused_by_nodes_and_pending_writes_should_be_chosen() {
        let cluster: Ipv4Cidr = "10.244.0.0/16".parse().expect("valid");
        let nodes = vec![
            node("a", Some("10.244.0.0/24")),
            node("b", Some("10.244.2.0/24")),
            node("c", None),
        ];
        let mut pending = BTreeMap::new();
        assert_eq!(
            lowest_free(cluster, 24, &nodes, &pending).map(|c| c.to_string()),
            Some("10.244.1.0/24".into())
        );
        pending.insert("c".to_owned(), "10.244.1.0/24".parse().expect("valid"));
        assert_eq!(
            lowest_free(cluster, 24, &nodes, &pending).map(|c| c.to_string()),
            Some("10.244.3.0/24".into())
        );
        let odd = vec![node("x", Some("10.244.0.0/23"))];
        assert_eq!(
            lowest_free(cluster, 24, &odd, &BTreeMap::new()).map(|c| c.to_string()),
            Some("10.244.2.0/24".into()),
            "a hand-set /23 covers two /24s"
        );
        let tiny: Ipv4Cidr = "10.0.0.0/31".parse().expect("valid");
        let full = vec![
            node("p", Some("10.0.0.0/32")),
            node("q", Some("10.0.0.1/32")),
        ];
        assert_eq!(lowest_free(tiny, 32, &full, &BTreeMap::new()), None);
    }

    #[test]
    fn pending_writes_should_be_forgotten_once_seen_or_when_the_node_is_gone() {
        let mut pending: BTreeMap<String, Ipv4Cidr> = BTreeMap::new();
        for (n, c) in [
            ("a", "10.244.0.0/24"),
            ("b", "10.244.1.0/24"),
            ("gone", "10.244.2.0/24"),
        ] {
            pending.insert(n.to_owned(), c.parse().expect("valid"));
        }
        let nodes = vec![node("a", Some("10.244.0.0/24")), node("b", None)];
        forget_settled(&mut pending, &nodes);
        assert_eq!(pending.keys().collect::<Vec<_>>(), vec!["b"]);
    }
}
