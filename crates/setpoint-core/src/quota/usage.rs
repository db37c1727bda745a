//! What one object uses, under the names a quota limits: a pod's count and compute resources
//! (requests and limits of its containers, the larger of the init containers, plus overhead),
//! a service's count, load balancers and node ports, a claim's storage (per storage class too),
//! and `count/<resource>.<group>` for everything. Also which objects a quota resource name is
//! counted from, and the requests or limits a compute quota requires every container to set.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Usage;
use crate::quantity::milli_value;

const ONE: i128 = 1000;

/// The compute resources a pod's containers must set when a quota limits them (kept by
/// Kubernetes for compatibility: only CPU and memory).
const REQUIRED: &[&str] = &[
    "cpu",
    "limits.cpu",
    "limits.memory",
    "memory",
    "requests.cpu",
    "requests.memory",
];

/// The object-count name of a resource: `count/pods`, `count/deployments.apps`.
fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// What `object` (of resource `plural` in `group`) uses.
pub fn object_usage(group: &str, plural: &str, object: &Value) -> Usage {
    let mut usage = Usage::new();
    usage.insert(count_name(group, plural), ONE);
    if !group.is_empty() {
        return usage;
    }
    match plural {
        "pods" => return pod_usage(object),
        "services" => {
            usage.insert("services".into(), ONE);
            let spec = &object["spec"];
            let kind = spec["type"].as_str().unwrap_or("ClusterIP");
            let ports = spec["ports"].as_array().map_or(0, Vec::len) as i128;
            let load_balancer = kind == "LoadBalancer";
            usage.insert(
                "services.loadbalancers".into(),
                if load_balancer { ONE } else { 0 },
            );
            let node_ports = if kind == "NodePort" || load_balancer {
                ports * ONE
            } else {
                0
            };
            usage.insert("services.nodeports".into(), node_ports);
        }
        "persistentvolumeclaims" => {
            usage.insert("persistentvolumeclaims".into(), ONE);
            let storage = object["spec"]["resources"]["requests"]["storage"]
                .as_str()
                .and_then(milli_value)
                .unwrap_or(0);
            usage.insert("requests.storage".into(), storage);
            if let Some(class) = object["spec"]["storageClassName"]
                .as_str()
                .filter(|c| !c.is_empty())
            {
                let prefix = format!("{class}.storageclass.storage.k8s.io/");
                usage.insert(format!("{prefix}persistentvolumeclaims"), ONE);
                usage.insert(format!("{prefix}requests.storage"), storage);
            }
        }
        "configmaps" | "secrets" | "replicationcontrollers" | "resourcequotas" => {
            usage.insert(plural.into(), ONE);
        }
        _ => {}
    }
    usage
}

/// Whether a pod still holds its resources: not `Succeeded` or `Failed`.
fn is_running(pod: &Value) -> bool {
    !matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// A container's requests and limits (a request not set but limited is the limit, as the API
/// server defaults it).
fn requirements(container: &Value) -> (BTreeMap<String, i128>, BTreeMap<String, i128>) {
    let list = |v: &Value| -> BTreeMap<String, i128> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, q)| Some((k.clone(), milli_value(q.as_str()?)?)))
            .collect()
    };
    let limits = list(&container["resources"]["limits"]);
    let mut requests = list(&container["resources"]["requests"]);
    for (k, v) in &limits {
        requests.entry(k.clone()).or_insert(*v);
    }
    (requests, limits)
}

/// The pod's requests and limits: the sum over its containers, at least the largest init
/// container's, plus its overhead.
fn pod_requirements(pod: &Value) -> (BTreeMap<String, i128>, BTreeMap<String, i128>) {
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let (r, l) = requirements(c);
        for (k, v) in r {
            *requests.entry(k).or_insert(0) += v;
        }
        for (k, v) in l {
            *limits.entry(k).or_insert(0) += v;
        }
    }
    for c in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (r, l) = requirements(c);
        for (k, v) in r {
            let e = requests.entry(k).or_insert(0);
            *e = (*e).max(v);
        }
        for (k, v) in l {
            let e = limits.entry(k).or_insert(0);
            *e = (*e).max(v);
        }
    }
    for (k, q) in pod["spec"]["overhead"].as_object().into_iter().flatten() {
        if let Some(v) = q.as_str().and_then(milli_value) {
            *requests.entry(k.clone()).or_insert(0) += v;
            if let Some(l) = limits.get_mut(k) {
                *l += v;
            }
        }
    }
    (requests, limits)
}

/// The quota names of requests and limits: `cpu` is also `requests.cpu`, a limit is
/// `limits.<name>`, extended resources and huge pages are counted as `requests.<name>`.
fn compute_usage(requests: &BTreeMap<String, i128>, limits: &BTreeMap<String, i128>) -> Usage {
    let mut usage = Usage::new();
    usage.insert("pods".into(), ONE);
    for (k, v) in requests {
        match k.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {
                usage.insert(k.clone(), *v);
                usage.insert(format!("requests.{k}"), *v);
            }
            name if name.starts_with("hugepages-") => {
                usage.insert(k.clone(), *v);
                usage.insert(format!("requests.{k}"), *v);
            }
            name if name.contains('/') && !name.starts_with("kubernetes.io/") => {
                usage.insert(format!("requests.{k}"), *v);
            }
            _ => {}
        }
    }
    for (k, v) in limits {
        if matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage") {
            usage.insert(format!("limits.{k}"), *v);
        }
    }
    usage
}

/// What a pod uses: `count/pods` always; while it runs, `pods` and its compute resources.
pub fn pod_usage(pod: &Value) -> Usage {
    let mut usage = Usage::new();
    if is_running(pod) {
        let (requests, limits) = pod_requirements(pod);
        usage = compute_usage(&requests, &limits);
    }
    usage.insert("count/pods".into(), ONE);
    usage
}

/// `must specify limits.cpu for: c1,c2; requests.memory for: c1` when a quota limiting the
/// resources `hard` covers the pod and some container does not set them.
pub fn required_missing<'a>(
    hard: impl IntoIterator<Item = &'a str>,
    pod: &Value,
) -> Option<String> {
    let required: BTreeSet<&str> = hard.into_iter().filter(|h| REQUIRED.contains(h)).collect();
    if required.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let spec = &pod["spec"];
    let containers = spec["containers"].as_array().into_iter().flatten();
    let init = spec["initContainers"].as_array().into_iter().flatten();
    for c in containers.chain(init) {
        let list = |v: &Value| -> BTreeMap<String, i128> {
            v.as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, q)| Some((k.clone(), milli_value(q.as_str()?)?)))
                .collect()
        };
        let set = compute_usage(
            &list(&c["resources"]["requests"]),
            &list(&c["resources"]["limits"]),
        );
        for r in &required {
            if !set.contains_key(*r) {
                let name = c["name"].as_str().unwrap_or_default().to_owned();
                missing.entry(r).or_default().insert(name);
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// The resource (group, plural) whose objects a quota resource name is counted from; `None`
/// for a name no object is counted for.
pub fn resources_of(name: &str) -> Option<(String, String)> {
    let core = |p: &str| Some((String::new(), p.to_owned()));
    if let Some(rest) = name.strip_prefix("count/") {
        return Some(match rest.split_once('.') {
            Some((plural, group)) => (group.to_owned(), plural.to_owned()),
            None => (String::new(), rest.to_owned()),
        });
    }
    match name {
        "pods" | "cpu" | "memory" | "ephemeral-storage" => core("pods"),
        n if n.starts_with("requests.") && n != "requests.storage" => core("pods"),
        n if n.starts_with("limits.") || n.starts_with("hugepages-") => core("pods"),
        "services" | "services.loadbalancers" | "services.nodeports" => core("services"),
        "persistentvolumeclaims" | "requests.storage" => core("persistentvolumeclaims"),
        n if n.contains(".storageclass.storage.k8s.io/") => core("persistentvolumeclaims"),
        "configmaps" | "secrets" | "replicationcontrollers" | "resourcequotas" => core(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value, phase: &str) -> Value {
        json!({"spec": {"containers": containers}, "status": {"phase": phase}})
    }

    #[test]
    fn a_pod_should_use_the_sum_of_its_containers() {
        let p = pod(
            json!([
                {"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "400m"}}}
            ]),
            "Running",
        );
        let u = pod_usage(&p);
        assert_eq!(u["pods"], 1000);
        assert_eq!(u["requests.cpu"], 500);
        assert_eq!(u["cpu"], 500);
        assert_eq!(u["limits.cpu"], 200);
        assert_eq!(
            u["requests.memory"], 1_073_741_824_000,
            "a request defaults to its limit"
        );
        assert_eq!(u["limits.memory"], 1_073_741_824_000);
    }

    #[test]
    fn a_terminal_pod_should_count_only_as_an_object() {
        let u = pod_usage(&pod(json!([{"name": "a"}]), "Succeeded"));
        assert_eq!(u.keys().collect::<Vec<_>>(), ["count/pods"]);
    }

    #[test]
    fn a_compute_quota_should_require_its_resources_of_every_container() {
        let p = pod(
            json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]),
            "",
        );
        assert_eq!(
            required_missing(["limits.cpu", "requests.cpu", "pods"], &p).as_deref(),
            Some("must specify limits.cpu for: a,b; requests.cpu for: b")
        );
        assert_eq!(required_missing(["pods"], &p), None);
    }

    #[test]
    fn services_and_claims_should_count_their_kinds() {
        let s = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]}});
        let u = object_usage("", "services", &s);
        assert_eq!(
            (
                u["services"],
                u["services.nodeports"],
                u["services.loadbalancers"]
            ),
            (1000, 2000, 0)
        );
        let c = json!({"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}}});
        let u = object_usage("", "persistentvolumeclaims", &c);
        assert_eq!(
            u["gold.storageclass.storage.k8s.io/requests.storage"],
            1_073_741_824_000
        );
        assert_eq!(
            object_usage("apps", "deployments", &json!({}))["count/deployments.apps"],
            1000
        );
    }

    #[test]
    fn quota_names_should_map_to_the_objects_they_count() {
        assert_eq!(
            resources_of("requests.cpu"),
            Some((String::new(), "pods".into()))
        );
        assert_eq!(
            resources_of("requests.storage"),
            Some((String::new(), "persistentvolumeclaims".into()))
        );
        assert_eq!(
            resources_of("count/deployments.apps"),
            Some(("apps".into(), "deployments".into()))
        );
        assert_eq!(
            resources_of("services.nodeports"),
            Some((String::new(), "services".into()))
        );
    }
}
