//! Resource amounts as the scheduler counts them: [`Resources`] (cpu in millicores, memory,
//! ephemeral storage and every extended resource in whole units), parsed from Kubernetes
//! quantities (`setpoint_core::quantity`), and a pod's request ([`PodRequest`]).
//!
//! A pod requests, per resource, the larger of the sum over its containers and the largest of
//! its init containers (they run one at a time, before the containers), plus its `overhead` —
//! kube-scheduler's rule. Amounts round up, as Kubernetes' `MilliValue`/`Value` do, so a pod is
//! never counted as asking for less than it does. Malformed quantities count as zero (the API
//! server validates them, so none should be stored).

use std::collections::BTreeMap;

use setpoint_core::quantity::ceil_div;
pub(crate) use setpoint_core::quantity::milli_value;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// cpu, in millicores.
pub(super) const CPU: &str = "cpu";
/// memory, in bytes.
pub(super) const MEMORY: &str = "memory";
/// Ephemeral storage, in bytes.
pub(super) const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The node's pod capacity (`allocatable.pods`); never requested by pods.
pub(super) const PODS: &str = "pods";

/// The cpu a container without a cpu request counts for when scoring (kube's 100m), so that
/// pods without requests still spread.
const NON_ZERO_CPU_MILLI: i64 = 100;
/// The memory a container without a memory request counts for when scoring (kube's 200 MiB).
const NON_ZERO_MEMORY: i64 = 200 * 1024 * 1024;

/// Amounts of resources. Invariant: no amount is negative.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Resources {
    /// cpu, in millicores.
    pub(super) cpu_milli: i64,
    /// memory, in bytes.
    pub(super) memory: i64,
    /// ephemeral storage, in bytes.
    pub(super) ephemeral_storage: i64,
    /// Every other resource (extended resources, hugepages), in whole units; zero amounts are
    /// not stored. Never holds `pods`.
    pub(super) scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// The amounts of a resource list (`requests`, `allocatable`, `overhead`); `pods` is
    /// left out (see [`pod_capacity`]).
    pub(super) fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Resources {
        let mut r = Resources::default();
        for (name, q) in list.into_iter().flatten() {
            let milli = milli_value(&q.0).unwrap_or(0).max(0);
            match name.as_str() {
                CPU => r.cpu_milli = saturate(milli),
                MEMORY => r.memory = saturate(ceil_div(milli, 1000)),
                EPHEMERAL_STORAGE => r.ephemeral_storage = saturate(ceil_div(milli, 1000)),
                PODS => {}
                other => {
                    let v = saturate(ceil_div(milli, 1000));
                    if v > 0 {
                        r.scalar.insert(other.to_owned(), v);
                    }
                }
            }
        }
        r
    }

    /// Adds `other` to these amounts.
    pub(super) fn add(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.saturating_add(other.cpu_milli);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let entry = self.scalar.entry(name.clone()).or_insert(0);
            *entry = entry.saturating_add(*v);
        }
    }

    /// Takes `other` (previously added) away from these amounts.
    pub(super) fn subtract(&mut self, other: &Resources) {
        self.cpu_milli = (self.cpu_milli - other.cpu_milli).max(0);
        self.memory = (self.memory - other.memory).max(0);
        self.ephemeral_storage = (self.ephemeral_storage - other.ephemeral_storage).max(0);
        for (name, v) in &other.scalar {
            if let Some(entry) = self.scalar.get_mut(name) {
                *entry = (*entry - v).max(0);
                if *entry == 0 {
                    self.scalar.remove(name);
                }
            }
        }
    }

    /// Each amount the larger of these and `other`'s.
    fn max_with(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.max(other.cpu_milli);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let entry = self.scalar.entry(name.clone()).or_insert(0);
            *entry = (*entry).max(*v);
        }
    }

    /// Whether nothing at all is requested.
    pub(super) fn is_zero(&self) -> bool {
        self.cpu_milli == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// cpu and memory as they count for scoring: a container that requests none counts for
/// kube's defaults (100m, 200 MiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct NonZero {
    /// cpu, in millicores.
    pub(super) cpu_milli: i64,
    /// memory, in bytes.
    pub(super) memory: i64,
}

impl NonZero {
    fn of_container(requests: &Resources, declared: Option<&BTreeMap<String, Quantity>>) -> Self {
        let has = |name: &str| declared.is_some_and(|d| d.contains_key(name));
        NonZero {
            cpu_milli: if has(CPU) {
                requests.cpu_milli
            } else {
                NON_ZERO_CPU_MILLI
            },
            memory: if has(MEMORY) {
                requests.memory
            } else {
                NON_ZERO_MEMORY
            },
        }
    }

    /// Adds `other`.
    pub(super) fn add(&mut self, other: NonZero) {
        self.cpu_milli = self.cpu_milli.saturating_add(other.cpu_milli);
        self.memory = self.memory.saturating_add(other.memory);
    }

    /// Takes `other` (previously added) away.
    pub(super) fn subtract(&mut self, other: NonZero) {
        self.cpu_milli = (self.cpu_milli - other.cpu_milli).max(0);
        self.memory = (self.memory - other.memory).max(0);
    }
}

/// What a pod asks of the node it runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PodRequest {
    /// Requested amounts (filtering).
    pub(super) resources: Resources,
    /// cpu and memory with defaults for containers requesting none (scoring).
    pub(super) non_zero: NonZero,
}

impl PodRequest {
    /// The request of `pod`: per resource, the larger of the containers' sum and the largest
    /// init container, plus the pod's overhead.
    pub(super) fn of(pod: &Pod) -> PodRequest {
        let Some(spec) = pod.spec.as_ref() else {
            return PodRequest::default();
        };
        let mut resources = Resources::default();
        let mut non_zero = NonZero::default();
        for c in &spec.containers {
            let (r, n) = container_request(c);
            resources.add(&r);
            non_zero.add(n);
        }
        for c in spec.init_containers.iter().flatten() {
            let (r, n) = container_request(c);
            resources.max_with(&r);
            non_zero.cpu_milli = non_zero.cpu_milli.max(n.cpu_milli);
            non_zero.memory = non_zero.memory.max(n.memory);
        }
        let overhead = Resources::from_list(spec.overhead.as_ref());
        resources.add(&overhead);
        non_zero.add(NonZero {
            cpu_milli: overhead.cpu_milli,
            memory: overhead.memory,
        });
        PodRequest {
            resources,
            non_zero,
        }
    }
}

/// A container's requests (falling back to its limits, as the API server defaults them) and
/// their non-zero form.
fn container_request(c: &Container) -> (Resources, NonZero) {
    let declared = declared_requests(c.resources.as_ref());
    let r = Resources::from_list(declared.as_ref());
    let n = NonZero::of_container(&r, declared.as_ref());
    (r, n)
}

/// `requests`, with each resource that has a limit but no request requested at its limit
/// (Kubernetes defaults a missing request to the limit).
fn declared_requests(r: Option<&ResourceRequirements>) -> Option<BTreeMap<String, Quantity>> {
    let r = r?;
    let mut out = r.requests.clone().unwrap_or_default();
    for (name, q) in r.limits.iter().flatten() {
        out.entry(name.clone()).or_insert_with(|| q.clone());
    }
    (!out.is_empty()).then_some(out)
}

/// How many pods a node takes (`allocatable.pods`; 0 if absent, so such a node takes none).
pub(super) fn pod_capacity(allocatable: Option<&BTreeMap<String, Quantity>>) -> i64 {
    allocatable
        .and_then(|a| a.get(PODS))
        .and_then(|q| milli_value(&q.0))
        .map_or(0, |m| saturate(ceil_div(m, 1000)).max(0))
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
pub(super) mod testing {
    //! Building pods with requests, for tests of this module and its siblings.

    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A resource list from `(name, quantity)` pairs.
    pub(in crate::scheduler) fn list(items: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    /// A container named `name` requesting `requests`.
    pub(in crate::scheduler) fn container(name: &str, requests: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            image: Some("busybox".into()),
            resources: (!requests.is_empty()).then(|| ResourceRequirements {
                requests: Some(list(requests)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A pod `default/name` (uid `uid-name`) with one container requesting `requests`.
    pub(in crate::scheduler) fn pod(name: &str, requests: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![container("c", requests)],
                ..Default::default()
            }),
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{container, list, pod};
    use super::*;

    #[test]
    fn resources_should_round_bytes_up_and_keep_extended_resources() {
        let r = Resources::from_list(Some(&list(&[
            ("cpu", "250m"),
            ("memory", "1.5Ki"),
            ("ephemeral-storage", "1k"),
            ("example.com/gpu", "2"),
            ("pods", "110"),
        ])));
        assert_eq!(r.cpu_milli, 250);
        assert_eq!(r.memory, 1536);
        assert_eq!(r.ephemeral_storage, 1000);
        assert_eq!(r.scalar, [("example.com/gpu".to_owned(), 2)].into());
        assert_eq!(pod_capacity(Some(&list(&[("pods", "110")]))), 110);
        assert_eq!(pod_capacity(None), 0);
    }

    #[test]
    fn pod_request_should_take_the_larger_of_containers_and_init_containers_plus_overhead() {
        let mut p = pod("p", &[("cpu", "100m"), ("memory", "100Mi")]);
        let spec = p.spec.as_mut().expect("spec");
        spec.containers
            .push(container("d", &[("cpu", "200m"), ("memory", "100Mi")]));
        spec.init_containers = Some(vec![
            container("i1", &[("cpu", "500m")]),
            container("i2", &[("memory", "50Mi")]),
        ]);
        spec.overhead = Some(list(&[("cpu", "10m")]));
        let r = PodRequest::of(&p);
        assert_eq!(
            r.resources.cpu_milli, 510,
            "init container 500m beats 300m, plus 10m"
        );
        assert_eq!(
            r.resources.memory,
            200 * 1024 * 1024,
            "containers' 200Mi beats 50Mi"
        );
    }

    #[test]
    fn pod_request_should_count_defaults_for_scoring_only() {
        let r = PodRequest::of(&pod("p", &[]));
        assert!(r.resources.is_zero());
        assert_eq!(r.non_zero.cpu_milli, 100);
        assert_eq!(r.non_zero.memory, 200 * 1024 * 1024);
        let r = PodRequest::of(&pod("q", &[("cpu", "1")]));
        assert_eq!(r.non_zero.cpu_milli, 1_000);
        assert_eq!(r.non_zero.memory, 200 * 1024 * 1024);
    }

    #[test]
    fn pod_request_should_fall_back_to_limits() {
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").containers[0].resources = Some(ResourceRequirements {
            limits: Some(list(&[("cpu", "2")])),
            ..Default::default()
        });
        assert_eq!(PodRequest::of(&p).resources.cpu_milli, 2_000);
    }

    #[test]
    fn add_and_subtract_should_cancel_out() {
        let mut total = Resources::default();
        let a = Resources::from_list(Some(&list(&[("cpu", "1"), ("example.com/gpu", "1")])));
        total.add(&a);
        total.add(&a);
        total.subtract(&a);
        assert_eq!(total, a);
        total.subtract(&a);
        assert_eq!(total, Resources::default());
    }
}
