use super::*;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": spec,
    }))
    .expect("pod")
}

const NODE_RESOLV: &str =
    "# generated\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example. lab\noptions edns0 ndots:2\n";

#[test]
fn cluster_first_should_name_the_cluster_resolver_and_the_namespace_search_list() {
    let node = Resolv::parse(NODE_RESOLV);
    assert_eq!(node.searches, vec!["corp.example", "lab"]);
    let dns: IpAddr = "10.244.0.1".parse().expect("ip");
    let text = resolv(&pod(json!({"containers": []})), Some(dns), &node).render();
    assert_eq!(
        text,
        "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example lab\nnameserver 10.244.0.1\noptions ndots:5\n"
    );
    // Host network: ClusterFirst is Default; ClusterFirstWithHostNet is not.
    let host = pod(json!({"containers": [], "hostNetwork": true}));
    assert_eq!(resolv(&host, Some(dns), &node), node);
    let with =
        pod(json!({"containers": [], "hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}));
    assert_eq!(
        resolv(&with, Some(dns), &node).nameservers,
        vec!["10.244.0.1"]
    );
    // No cluster resolver (host-network mode): Default.
    assert_eq!(resolv(&pod(json!({"containers": []})), None, &node), node);
}

#[test]
fn dns_config_should_merge_as_the_kubelet_does() {
    let node = Resolv::parse(NODE_RESOLV);
    let none = pod(json!({"containers": [], "dnsPolicy": "None", "dnsConfig": {
        "nameservers": ["1.1.1.1"], "searches": ["a.example"],
        "options": [{"name": "ndots", "value": "1"}, {"name": "rotate"}]}}));
    assert_eq!(
        resolv(&none, None, &node).render(),
        "search a.example\nnameserver 1.1.1.1\noptions ndots:1 rotate\n"
    );
    let merged = pod(
        json!({"containers": [], "dnsPolicy": "Default", "dnsConfig": {
        "nameservers": ["192.0.2.53", "9.9.9.9", "8.8.8.8"], "searches": ["lab", "x"],
        "options": [{"name": "ndots", "value": "3"}]}}),
    );
    let r = resolv(&merged, None, &node);
    assert_eq!(
        r.nameservers,
        vec!["192.0.2.53", "192.0.2.54", "9.9.9.9"],
        "deduplicated, at most 3"
    );
    assert_eq!(r.searches, vec!["corp.example", "lab", "x"]);
    assert_eq!(r.options, vec!["edns0", "ndots:3"]);
}

#[test]
fn hosts_should_hold_the_pod_address_fqdn_and_aliases() {
    let ip: IpAddr = "10.244.0.7".parse().expect("ip");
    let p = pod(
        json!({"containers": [], "hostname": "db", "subdomain": "peers",
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}]}),
    );
    let text = hosts(&p, ip, "ignored");
    assert!(
        text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
        "{text}"
    );
    assert!(
        text.contains("\n10.244.0.7\tdb.peers.shop.svc.cluster.local\tdb\n"),
        "{text}"
    );
    assert!(
        text.ends_with("\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
        "{text}"
    );
    assert_eq!(uts_hostname(&p), "db");
    let plain = pod(json!({"containers": []}));
    assert!(hosts(&plain, ip, "").contains("\n10.244.0.7\tweb-0\n"));
    let host = pod(json!({"containers": [], "hostNetwork": true}));
    assert_eq!(
        hosts(&host, ip, "127.0.0.1 localhost\n"),
        "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
    );
    let as_fqdn = pod(json!({"containers": [], "subdomain": "s", "setHostnameAsFQDN": true}));
    assert_eq!(uts_hostname(&as_fqdn), "web-0.s.shop.svc.cluster.local");
}
