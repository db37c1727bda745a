//! LimitRanger: a pod created in a namespace with LimitRanges gets the `default` limits and
//! `defaultRequest` requests of their `Container` entries for what its containers leave unset
//! (and the `kubernetes.io/limit-ranger` annotation saying so); then `min`, `max` and
//! `maxLimitRequestRatio` are checked per `Container`, per `Pod` (summed over its containers)
//! and per `PersistentVolumeClaim` (its storage request), refused with kube-apiserver's
//! messages (`maximum cpu usage per Container is 1, but limit is 2`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use setpoint_core::quantity::milli_value;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The entries of every LimitRange of type `kind`.
fn entries<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    ranges
        .iter()
        .flat_map(|r| r["spec"]["limits"].as_array().into_iter().flatten())
        .filter(move |l| l["type"].as_str() == Some(kind))
}

/// Applies each range's container defaults in turn; whether the pod changed.
pub(super) fn default_pod(ranges: &[Value], pod: &mut Value) -> bool {
    let mut changed = false;
    for range in ranges {
        let (mut requests, mut limits) = (Map::new(), Map::new());
        for entry in entries(std::slice::from_ref(range), "Container") {
            requests.extend(
                entry["defaultRequest"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            limits.extend(entry["default"].as_object().cloned().unwrap_or_default());
        }
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        let mut notes = Vec::new();
        for container in pod["spec"]["containers"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let name = container["name"].as_str().unwrap_or_default().to_owned();
            let resources = &mut container["resources"];
            if !resources.is_object() {
                *resources = json!({});
            }
            let set_limits = fill(&mut resources["limits"], &limits);
            let set_requests = fill(&mut resources["requests"], &requests);
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for container {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!(
                    "{} limit for container {name}",
                    set_limits.join(", ")
                ));
            }
        }
        if !notes.is_empty() {
            let meta = &mut pod["metadata"];
            if !meta["annotations"].is_object() {
                meta["annotations"] = json!({});
            }
            meta["annotations"][ANNOTATION] =
                json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
            changed = true;
        }
    }
    changed
}

/// Sets the defaults a resource list lacks; the names set, in order.
fn fill(list: &mut Value, defaults: &Map<String, Value>) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    if !list.is_object() {
        *list = json!({});
    }
    let mut set = Vec::new();
    for (k, v) in defaults {
        if list.get(k).is_none() {
            list[k] = v.clone();
            set.push(k.clone());
        }
    }
    set.sort();
    set
}

/// A resource list: name → (as written, thousandths).
type List = BTreeMap<String, (String, i128)>;

fn list(v: &Value) -> List {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let s = q.as_str()?;
            Some((k.clone(), (s.to_owned(), milli_value(s)?)))
        })
        .collect()
}

/// A container's requests (a limit stands for an unset request, as the API server defaults
/// it) and limits.
fn container_lists(c: &Value) -> (List, List) {
    let limits = list(&c["resources"]["limits"]);
    let mut requests = list(&c["resources"]["requests"]);
    for (k, v) in &limits {
        requests.entry(k.clone()).or_insert_with(|| v.clone());
    }
    (requests, limits)
}

/// The sum of each resource every list has.
fn sum(lists: &[List]) -> List {
    let mut out = List::new();
    let Some(first) = lists.first() else {
        return out;
    };
    for k in first.keys() {
        if lists.iter().all(|l| l.contains_key(k)) {
            let total: i128 = lists.iter().map(|l| l[k].1).sum();
            out.insert(k.clone(), (setpoint_core::quota::format(k, total), total));
        }
    }
    out
}

/// The problems of `requests`/`limits` against one entry of type `kind`.
fn check(
    entry: &Value,
    kind: &str,
    requests: &List,
    limits: &List,
    claim: bool,
    errors: &mut Vec<String>,
) {
    for (k, (bound, min)) in list(&entry["min"]) {
        match (requests.get(&k), limits.get(&k)) {
            (None, _) => errors.push(format!(
                "minimum {k} usage per {kind} is {bound}.  No request is specified"
            )),
            (Some((r, v)), _) if *v < min => errors.push(format!(
                "minimum {k} usage per {kind} is {bound}, but request is {r}"
            )),
            (_, Some((l, v))) if *v < min => errors.push(format!(
                "minimum {k} usage per {kind} is {bound}, but limit is {l}"
            )),
            _ => {}
        }
    }
    for (k, (bound, max)) in list(&entry["max"]) {
        if claim {
            match requests.get(&k) {
                None => errors.push(format!(
                    "maximum {k} usage per {kind} is {bound}.  No request is specified"
                )),
                Some((r, v)) if *v > max => errors.push(format!(
                    "maximum {k} usage per {kind} is {bound}, but request is {r}"
                )),
                _ => {}
            }
            continue;
        }
        match (limits.get(&k), requests.get(&k)) {
            (None, _) => errors.push(format!(
                "maximum {k} usage per {kind} is {bound}.  No limit is specified"
            )),
            (Some((l, v)), _) if *v > max => errors.push(format!(
                "maximum {k} usage per {kind} is {bound}, but limit is {l}"
            )),
            (_, Some((r, v))) if *v > max => errors.push(format!(
                "maximum {k} usage per {kind} is {bound}, but request is {r}"
            )),
            _ => {}
        }
    }
    for (k, (bound, ratio)) in list(&entry["maxLimitRequestRatio"]) {
        let request = requests.get(&k).map_or(0, |r| r.1);
        let limit = limits.get(&k).map_or(0, |l| l.1);
        if request == 0 {
            errors.push(format!(
                "{k} max limit to request ratio per {kind} is {bound}, but no request is specified or request is 0"
            ));
        } else if limit == 0 {
            errors.push(format!(
                "{k} max limit to request ratio per {kind} is {bound}, but no limit is specified or limit is 0"
            ));
        } else if limit * 1000 > ratio * request {
            #[allow(clippy::cast_precision_loss)] // a ratio shown to six decimals
            let shown = limit as f64 / request as f64;
            errors.push(format!(
                "{k} max limit to request ratio per {kind} is {bound}, but provided ratio is {shown:.6}"
            ));
        }
    }
}

/// kube's aggregate of errors: one as itself, several as `[a, b]`.
fn aggregate(errors: Vec<String>) -> Option<String> {
    match errors.len() {
        0 => None,
        1 => errors.into_iter().next(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

/// The bounds of `Container` and `Pod` entries on a pod being created.
pub(super) fn check_pod(ranges: &[Value], pod: &Value) -> Option<String> {
    let containers: Vec<(List, List)> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(container_lists)
        .collect();
    let mut errors = Vec::new();
    for range in ranges {
        for entry in range["spec"]["limits"].as_array().into_iter().flatten() {
            match entry["type"].as_str() {
                Some("Container") => {
                    for (requests, limits) in &containers {
                        check(entry, "Container", requests, limits, false, &mut errors);
                    }
                }
                Some("Pod") => {
                    let requests: Vec<List> = containers.iter().map(|c| c.0.clone()).collect();
                    let limits: Vec<List> = containers.iter().map(|c| c.1.clone()).collect();
                    check(
                        entry,
                        "Pod",
                        &sum(&requests),
                        &sum(&limits),
                        false,
                        &mut errors,
                    );
                }
                _ => {}
            }
        }
    }
    aggregate(errors)
}

/// The bounds of `PersistentVolumeClaim` entries on a claim's storage request.
pub(super) fn check_claim(ranges: &[Value], claim: &Value) -> Option<String> {
    let requests = list(&claim["spec"]["resources"]["requests"]);
    let mut errors = Vec::new();
    for entry in entries(ranges, "PersistentVolumeClaim") {
        check(
            entry,
            "PersistentVolumeClaim",
            &requests,
            &List::new(),
            true,
            &mut errors,
        );
    }
    aggregate(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(limits: Value) -> Vec<Value> {
        vec![json!({"spec": {"limits": limits}})]
    }

    #[test]
    fn defaults_should_fill_what_containers_leave_unset_and_say_so() {
        let ranges = range(
            json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "200m"}}}
        ]}});
        assert!(default_pod(&ranges, &mut pod));
        let c = &pod["spec"]["containers"];
        assert_eq!(
            c[0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m"}})
        );
        assert_eq!(c[1]["resources"]["requests"]["cpu"], "200m");
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container a; cpu limit for container a; cpu, memory limit for container b"
        );
        let mut again = pod.clone();
        assert!(!default_pod(&ranges, &mut again));
    }

    #[test]
    fn bounds_should_be_refused_with_kubernetes_messages() {
        let ranges = range(json!([
            {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"cpu": "2"}},
            {"type": "Pod", "max": {"cpu": "3"}}
        ]));
        let pod = |cpu_limit: &str, cpu_request: &str| {
            json!({"spec": {"containers": [{"name": "a", "resources": {
                "limits": {"cpu": cpu_limit, "memory": "128Mi"}, "requests": {"cpu": cpu_request, "memory": "128Mi"}}}]}})
        };
        assert_eq!(check_pod(&ranges, &pod("1", "500m")), None);
        assert_eq!(
            check_pod(&ranges, &pod("2", "1")).as_deref(),
            Some("maximum cpu usage per Container is 1, but limit is 2")
        );
        assert_eq!(
            check_pod(&ranges, &pod("1", "250m")).as_deref(),
            Some(
                "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000"
            )
        );
        let bare = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            check_pod(&ranges, &bare).as_deref(),
            Some("[minimum memory usage per Container is 64Mi.  No request is specified, maximum cpu usage per Container is 1.  No limit is specified, cpu max limit to request ratio per Container is 2, but no request is specified or request is 0, maximum cpu usage per Pod is 3.  No limit is specified]")
        );
    }

    #[test]
    fn claims_should_be_bounded_by_their_storage_request() {
        let ranges = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
        );
        let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(check_claim(&ranges, &claim("1Gi")), None);
        assert_eq!(
            check_claim(&ranges, &claim("5Gi")).as_deref(),
            Some("maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi")
        );
        assert_eq!(
            check_claim(&ranges, &claim("500Mi")).as_deref(),
            Some("minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi")
        );
    }
}
