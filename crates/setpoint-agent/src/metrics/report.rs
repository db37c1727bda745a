//! Samples and the report made of two of them: what the agent serves on `/metrics/resource`.
//!
//! A [`Sample`] holds cumulative figures at one instant (CPU time since boot or since a
//! container started, memory now); a [`ResourceReport`] turns the difference between two
//! samples into rates (CPU in nanocores: nanoseconds of CPU per second of the window) and
//! takes memory from the newer one. Pure computation: no I/O, unit tested.

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, SecondsFormat, SubsecRound as _, Utc};
use serde::Serialize;

use super::containers::PodKey;

/// The shortest window a rate is computed over: samples closer than this are too noisy.
pub(crate) const MIN_WINDOW: std::time::Duration = std::time::Duration::from_millis(500);

/// Cumulative figures at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// When (wall clock, for timestamps and container start times).
    pub(crate) at: DateTime<Utc>,
    /// When (monotonic, for windows).
    pub(crate) instant: Instant,
    /// The machine's busy CPU time in nanoseconds, if `/proc/stat` could be read.
    pub(crate) node_cpu_nanos: Option<u64>,
    /// The machine's memory working set in bytes, if `/proc/meminfo` could be read.
    pub(crate) node_memory_bytes: Option<u64>,
    /// Each running container, by pod, name and run number.
    pub(crate) containers: HashMap<ContainerKey, ContainerSample>,
}

/// Names one run of a container.
pub(crate) type ContainerKey = (PodKey, String, u32);

/// One container in a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContainerSample {
    /// The CPU time of its live processes (with what they have reaped), nanoseconds. May
    /// drop when a process exits without being reaped inside the container.
    pub(crate) raw_cpu_nanos: u64,
    /// CPU time that never decreases: the previous sample's plus any increase of
    /// `raw_cpu_nanos`.
    pub(crate) cpu_nanos: u64,
    /// The resident memory of its processes, bytes.
    pub(crate) memory_bytes: u64,
    /// When it started.
    pub(crate) started_at: DateTime<Utc>,
}

impl ContainerSample {
    /// The cumulative CPU time after `previous`, given the raw figure now.
    pub(crate) fn following(previous: Option<&ContainerSample>, raw_cpu_nanos: u64) -> u64 {
        match previous {
            Some(p) => p
                .cpu_nanos
                .saturating_add(raw_cpu_nanos.saturating_sub(p.raw_cpu_nanos)),
            None => raw_cpu_nanos,
        }
    }
}

/// What `/metrics/resource` answers (JSON, camelCase): the node's usage and each pod's
/// containers' usage, over the window between the agent's last two samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceReport {
    /// The node's usage, if the machine's figures could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<NodeUsage>,
    /// Pods with at least one running container, by namespace and name.
    pub(crate) pods: Vec<PodUsage>,
}

/// The node's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeUsage {
    /// The Node's name.
    pub(crate) name: String,
    /// The end of the window (RFC 3339, seconds).
    pub(crate) timestamp: String,
    /// The window's length in milliseconds.
    pub(crate) window_millis: u64,
    /// Busy CPU over the window, in nanocores (1e9 = one CPU busy all the time).
    pub(crate) cpu_nano_cores: u64,
    /// Memory working set at the end of the window, bytes.
    pub(crate) memory_working_set_bytes: u64,
}

/// One pod's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodUsage {
    /// Its namespace.
    pub(crate) namespace: String,
    /// Its name.
    pub(crate) name: String,
    /// Its UID.
    pub(crate) uid: String,
    /// The end of the window (RFC 3339, seconds).
    pub(crate) timestamp: String,
    /// The window's length in milliseconds.
    pub(crate) window_millis: u64,
    /// Its running containers, by name.
    pub(crate) containers: Vec<ContainerUsage>,
}

/// One container's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContainerUsage {
    /// Its name.
    pub(crate) name: String,
    /// CPU over the window (or since it started, if that is later), nanocores.
    pub(crate) cpu_nano_cores: u64,
    /// Resident memory of its processes at the end of the window, bytes.
    pub(crate) memory_working_set_bytes: u64,
}

/// `nanos` of CPU over `window_nanos` of time, in nanocores.
fn nano_cores(nanos: u64, window_nanos: u128) -> u64 {
    if window_nanos == 0 {
        return 0;
    }
    u64::try_from(u128::from(nanos) * 1_000_000_000 / window_nanos).unwrap_or(u64::MAX)
}

/// The report of the window from `previous` to `now` for node `node_name`.
///
/// A container in both samples is measured over the window; one that started after
/// `previous` (or in the same second: start times are whole seconds) over its life so far (all its CPU time is in `now`); one that started before
/// `previous` but is missing from it (an agent that just started) is left out until the next
/// sample.
pub(crate) fn report(node_name: &str, previous: &Sample, now: &Sample) -> ResourceReport {
    let window = now.instant.saturating_duration_since(previous.instant);
    let window_nanos = window.as_nanos();
    let window_millis = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    let timestamp = now.at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let node = match (
        previous.node_cpu_nanos,
        now.node_cpu_nanos,
        now.node_memory_bytes,
    ) {
        (Some(before), Some(after), Some(memory)) => Some(NodeUsage {
            name: node_name.to_owned(),
            timestamp: timestamp.clone(),
            window_millis,
            cpu_nano_cores: nano_cores(after.saturating_sub(before), window_nanos),
            memory_working_set_bytes: memory,
        }),
        _ => None,
    };
    let mut pods: Vec<PodUsage> = Vec::new();
    let mut keys: Vec<&ContainerKey> = now.containers.keys().collect();
    keys.sort();
    for key in keys {
        let sample = &now.containers[key];
        let cpu_nano_cores = match previous.containers.get(key) {
            Some(before) => nano_cores(
                sample.cpu_nanos.saturating_sub(before.cpu_nanos),
                window_nanos,
            ),
            // Start times are recorded in whole seconds (API timestamps): one in the same
            // second as `previous` counts as after it.
            None if sample.started_at >= previous.at.trunc_subsecs(0) => {
                let life = (now.at - sample.started_at)
                    .to_std()
                    .unwrap_or_default()
                    .max(MIN_WINDOW);
                nano_cores(sample.cpu_nanos, life.as_nanos())
            }
            None => continue,
        };
        let (pod, name, _) = key;
        let usage = ContainerUsage {
            name: name.clone(),
            cpu_nano_cores,
            memory_working_set_bytes: sample.memory_bytes,
        };
        match pods.last_mut() {
            Some(last) if last.uid == pod.uid => last.containers.push(usage),
            _ => pods.push(PodUsage {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                timestamp: timestamp.clone(),
                window_millis,
                containers: vec![usage],
            }),
        }
    }
    ResourceReport { node, pods }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pod(name: &str) -> PodKey {
        PodKey {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn sample(at: DateTime<Utc>, instant: Instant, node_cpu: u64) -> Sample {
        Sample {
            at,
            instant,
            node_cpu_nanos: Some(node_cpu),
            node_memory_bytes: Some(1 << 30),
            containers: HashMap::new(),
        }
    }

    fn container(raw: u64, cpu: u64, started_at: DateTime<Utc>) -> ContainerSample {
        ContainerSample {
            raw_cpu_nanos: raw,
            cpu_nanos: cpu,
            memory_bytes: 4096,
            started_at,
        }
    }

    #[test]
    fn report_should_turn_cpu_time_over_the_window_into_nanocores() {
        let t0 = Utc::now();
        let i0 = Instant::now();
        let t1 = t0 + chrono::Duration::seconds(10);
        let i1 = i0 + Duration::from_secs(10);
        let started_long_ago = t0 - chrono::Duration::seconds(100);
        let mut before = sample(t0, i0, 1_000_000_000);
        let mut after = sample(t1, i1, 16_000_000_000);
        let key = (pod("a"), "app".to_owned(), 0);
        before
            .containers
            .insert(key.clone(), container(7, 2_000_000_000, started_long_ago));
        // Half a CPU for 10 s.
        after
            .containers
            .insert(key, container(8, 7_000_000_000, started_long_ago));
        // Started 2 s before the end of the window, with 1 s of CPU: half a CPU.
        after.containers.insert(
            (pod("b"), "new".to_owned(), 0),
            container(
                1_000_000_000,
                1_000_000_000,
                t1 - chrono::Duration::seconds(2),
            ),
        );
        // Running before the window but not seen then: left out.
        after.containers.insert(
            (pod("c"), "unseen".to_owned(), 0),
            container(5, 5, started_long_ago),
        );
        let r = report("n1", &before, &after);
        let node = r.node.expect("node usage");
        assert_eq!(node.cpu_nano_cores, 1_500_000_000);
        assert_eq!(node.window_millis, 10_000);
        assert_eq!(node.memory_working_set_bytes, 1 << 30);
        let got: Vec<(&str, &str, u64)> = r
            .pods
            .iter()
            .flat_map(|p| {
                p.containers
                    .iter()
                    .map(move |c| (p.name.as_str(), c.name.as_str(), c.cpu_nano_cores))
            })
            .collect();
        assert_eq!(
            got,
            vec![("a", "app", 500_000_000), ("b", "new", 500_000_000)]
        );
    }

    #[test]
    fn container_started_in_the_same_second_as_the_previous_sample_should_be_reported() {
        // Regression (issue 14.11): start times are whole seconds, so a container started
        // just after a sample, in the same second, looked older than it and was left out.
        let t0 = DateTime::from_timestamp(1_000, 700_000_000).expect("a time");
        let i0 = Instant::now();
        let before = sample(t0, i0, 0);
        let mut after = sample(
            t0 + chrono::Duration::seconds(1),
            i0 + Duration::from_secs(1),
            0,
        );
        let started = DateTime::from_timestamp(1_000, 0).expect("a time");
        after
            .containers
            .insert((pod("new"), "app".to_owned(), 0), container(1, 1, started));
        let r = report("n1", &before, &after);
        assert_eq!(r.pods.len(), 1, "{r:?}");
    }

    #[test]
    fn cumulative_cpu_should_never_decrease_when_a_process_exits() {
        let started = Utc::now();
        let first = container(5_000, 5_000, started);
        // A process exited unreaped: the raw figure drops; the cumulative one stays.
        assert_eq!(ContainerSample::following(Some(&first), 3_000), 5_000);
        let second = container(3_000, 5_000, started);
        assert_eq!(ContainerSample::following(Some(&second), 4_500), 6_500);
        assert_eq!(ContainerSample::following(None, 42), 42);
    }

    #[test]
    fn report_should_have_no_node_usage_without_machine_figures() {
        let now = Instant::now();
        let mut before = sample(Utc::now(), now, 0);
        before.node_cpu_nanos = None;
        let after = sample(Utc::now(), now + Duration::from_secs(1), 10);
        assert_eq!(report("n", &before, &after).node, None);
    }
}
