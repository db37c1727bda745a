//! A pod's status as the kubelet reports it, computed from what the agent knows of its
//! containers: container states, phase, conditions, IPs. Pure: the worker builds the views and
//! decides whether the result differs from what the API holds.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::process::ExitRecord;

/// A container's state, as the status reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StateView {
    /// Not running: `reason` (`ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`,
    /// `CreateContainerConfigError`, …).
    Waiting {
        /// Why.
        reason: String,
        /// Details.
        message: Option<String>,
    },
    /// Running since `started_at`, as `container_pid`.
    Running {
        /// When it started.
        started_at: Time,
    },
    /// Ended, and will not be restarted (or not yet decided).
    Terminated(ExitRecord),
}

/// What the status says of one container.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContainerView {
    /// The container's name.
    pub(crate) name: String,
    /// Its image, as the spec names it (recorded, never pulled).
    pub(crate) image: String,
    /// Its current state.
    pub(crate) state: StateView,
    /// How its previous run ended.
    pub(crate) last: Option<ExitRecord>,
    /// Its restart count.
    pub(crate) restart_count: u32,
    /// `setpoint://<pid>` of its latest run's process, if it has run.
    pub(crate) container_id: Option<String>,
    /// Running and past its startup probe.
    pub(crate) started: bool,
    /// Running and passing its readiness probe.
    pub(crate) ready: bool,
}

impl ContainerView {
    fn succeeded(&self) -> bool {
        matches!(&self.state, StateView::Terminated(exit) if exit.exit_code == 0)
    }

    fn to_status(&self) -> ContainerStatus {
        ContainerStatus {
            name: self.name.clone(),
            image: self.image.clone(),
            image_id: String::new(),
            container_id: self.container_id.clone(),
            state: Some(state(&self.state, self.container_id.as_deref())),
            last_state: Some(match &self.last {
                Some(exit) => ContainerState {
                    terminated: Some(terminated(exit, None)),
                    ..ContainerState::default()
                },
                None => ContainerState::default(),
            }),
            ready: self.ready,
            restart_count: self.restart_count.try_into().unwrap_or(i32::MAX),
            started: Some(self.started),
            ..ContainerStatus::default()
        }
    }
}

fn state(view: &StateView, container_id: Option<&str>) -> ContainerState {
    match view {
        StateView::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..ContainerState::default()
        },
        StateView::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(started_at.clone()),
            }),
            ..ContainerState::default()
        },
        StateView::Terminated(exit) => ContainerState {
            terminated: Some(terminated(exit, container_id)),
            ..ContainerState::default()
        },
    }
}

fn terminated(exit: &ExitRecord, container_id: Option<&str>) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: exit.exit_code,
        signal: exit.signal,
        reason: Some(exit.reason.clone()),
        message: exit.message.clone(),
        started_at: exit.started_at.clone(),
        finished_at: Some(exit.finished_at.clone()),
        container_id: container_id.map(str::to_owned),
    }
}

/// The pod's phase from its containers' states, by the kubelet's rules.
pub(crate) fn phase(
    restart_policy: &str,
    init: &[ContainerView],
    containers: &[ContainerView],
    init_failed_for_good: bool,
) -> &'static str {
    if init_failed_for_good {
        return "Failed";
    }
    if !init.iter().all(ContainerView::succeeded) {
        return "Pending";
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in containers {
        match &c.state {
            StateView::Running { .. } => running += 1,
            StateView::Terminated(exit) => {
                stopped += 1;
                if exit.exit_code == 0 {
                    succeeded += 1;
                }
            }
            StateView::Waiting { .. } if c.last.is_some() => stopped += 1,
            StateView::Waiting { .. } => waiting += 1,
        }
    }
    match () {
        () if waiting > 0 => "Pending",
        () if running > 0 => "Running",
        () if stopped > 0 => match restart_policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        },
        () => "Pending",
    }
}

/// Everything the status is computed from.
#[derive(Debug)]
pub(crate) struct StatusInput<'a> {
    /// The pod as the API last showed it.
    pub(crate) pod: &'a Pod,
    /// Its init containers, in order.
    pub(crate) init: &'a [ContainerView],
    /// Its containers, in order.
    pub(crate) containers: &'a [ContainerView],
    /// The phase.
    pub(crate) phase: &'static str,
    /// The node's IP: the pod's host and pod IP.
    pub(crate) node_ip: IpAddr,
    /// The pod's address: its own (bridge mode) or the node's (host network); none yet
    /// while its network is being set up.
    pub(crate) pod_ip: Option<IpAddr>,
    /// When the agent first took the pod on, if the API has no `startTime` yet.
    pub(crate) now: Time,
}

/// The pod's status: the API's one with what the agent owns replaced.
pub(crate) fn pod_status(input: &StatusInput<'_>) -> PodStatus {
    let old = input.pod.status.clone().unwrap_or_default();
    let terminal = matches!(input.phase, "Succeeded" | "Failed");
    let ip = input.node_ip.to_string();
    let not = |pred: fn(&ContainerView) -> bool, views: &[ContainerView]| {
        views
            .iter()
            .filter(|c| !pred(c))
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    let uninitialized = not(ContainerView::succeeded, input.init);
    let unready = not(|c| c.ready, input.containers);
    let mut owned = vec![
        condition("PodReadyToStartContainers", true, None, None),
        if uninitialized.is_empty() {
            condition("Initialized", true, None, None)
        } else {
            condition(
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: [{}]",
                    uninitialized.join(" ")
                )),
            )
        },
    ];
    let gates_unready = readiness_gates_unready(input.pod);
    let ready = if terminal {
        condition("ContainersReady", false, Some("PodCompleted"), None)
    } else if unready.is_empty() {
        condition("ContainersReady", true, None, None)
    } else {
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let mut pod_ready = PodCondition {
        type_: "Ready".to_owned(),
        ..ready.clone()
    };
    if ready.status == "True" && !gates_unready.is_empty() {
        pod_ready = condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(format!("corresponding condition of pod readiness gate \"{}\" does not exist or is not True", gates_unready.join("\", \""))),
        );
    }
    owned.push(ready);
    owned.push(pod_ready);
    let mut conditions: Vec<PodCondition> = Vec::new();
    let old_conditions = old.conditions.clone().unwrap_or_default();
    if !old_conditions.iter().any(|c| c.type_ == "PodScheduled") {
        conditions.push(condition("PodScheduled", true, None, None));
    }
    for c in &old_conditions {
        if !owned.iter().any(|o| o.type_ == c.type_) {
            conditions.push(c.clone());
        }
    }
    for mut c in owned {
        // A condition keeps its transition time while its status stays.
        c.last_transition_time = old_conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            .and_then(|o| o.last_transition_time.clone())
            .or_else(|| Some(input.now.clone()));
        conditions.push(c);
    }
    PodStatus {
        phase: Some(input.phase.to_owned()),
        conditions: Some(conditions),
        host_ip: Some(ip.clone()),
        host_ips: Some(vec![HostIP { ip: ip.clone() }]),
        pod_ip: input.pod_ip.map(|p| p.to_string()).or(old.pod_ip.clone()),
        pod_ips: input
            .pod_ip
            .map(|p| vec![PodIP { ip: p.to_string() }])
            .or(old.pod_ips.clone()),
        start_time: old.start_time.clone().or_else(|| Some(input.now.clone())),
        init_container_statuses: (!input.init.is_empty())
            .then(|| input.init.iter().map(ContainerView::to_status).collect()),
        container_statuses: Some(
            input
                .containers
                .iter()
                .map(ContainerView::to_status)
                .collect(),
        ),
        ..old
    }
}

fn condition(
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..PodCondition::default()
    }
}

/// The readiness gates whose condition is not `True`.
fn readiness_gates_unready(pod: &Pod) -> Vec<String> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .into_iter()
        .flatten()
        .filter(|gate| {
            !conditions.is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == gate.condition_type && c.status == "True")
            })
        })
        .map(|gate| gate.condition_type.clone())
        .collect()
}

/// Whether a merge patch of `patch` onto `current` would change nothing.
pub(crate) fn merge_is_noop(current: &serde_json::Value, patch: &serde_json::Value) -> bool {
    match (current, patch) {
        (serde_json::Value::Object(current), serde_json::Value::Object(patch)) => {
            patch.iter().all(|(k, v)| match current.get(k) {
                Some(c) => merge_is_noop(c, v),
                None => v.is_null(),
            })
        }
        (current, patch) => current == patch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::now;

    fn view(name: &str, state: StateView, last: Option<ExitRecord>) -> ContainerView {
        ContainerView {
            name: name.to_owned(),
            image: String::new(),
            ready: matches!(state, StateView::Running { .. }),
            started: matches!(state, StateView::Running { .. }),
            state,
            last,
            restart_count: 0,
            container_id: None,
        }
    }
    fn one(view: &ContainerView) -> Vec<ContainerView> {
        vec![view.clone()]
    }
    fn running() -> StateView {
        StateView::Running { started_at: now() }
    }
    fn exited(code: i32) -> StateView {
        StateView::Terminated(ExitRecord::of_exit(Some(code), None, None))
    }
    fn waiting(reason: &str) -> StateView {
        StateView::Waiting {
            reason: reason.to_owned(),
            message: None,
        }
    }

    #[test]
    fn phase_should_follow_the_kubelet_rules() {
        let run = view("a", running(), None);
        let ok = view("b", exited(0), None);
        let bad = view("c", exited(1), None);
        let fresh = view("d", waiting("ContainerCreating"), None);
        let looping = view(
            "e",
            waiting("CrashLoopBackOff"),
            Some(ExitRecord::of_exit(Some(1), None, None)),
        );
        assert_eq!(
            phase("Always", &[], &[run.clone(), fresh.clone()], false),
            "Pending"
        );
        assert_eq!(
            phase("Always", &[], &[run.clone(), ok.clone()], false),
            "Running"
        );
        assert_eq!(phase("Always", &[], &one(&looping), false), "Running");
        assert_eq!(phase("Never", &[], &one(&ok), false), "Succeeded");
        assert_eq!(
            phase("Never", &[], &[ok.clone(), bad.clone()], false),
            "Failed"
        );
        assert_eq!(phase("OnFailure", &[], &one(&bad), false), "Running");
        assert_eq!(phase("OnFailure", &[], &one(&ok), false), "Succeeded");
        assert_eq!(
            phase("Always", &one(&fresh), &one(&fresh), false),
            "Pending"
        );
        assert_eq!(phase("Always", &one(&ok), &one(&run), false), "Running");
        assert_eq!(phase("Never", &one(&bad), &one(&fresh), true), "Failed");
    }

    #[test]
    fn status_should_keep_foreign_conditions_and_transition_times() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": []},
            "status": {"conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
            ]}
        }))
        .expect("a pod");
        let containers = [view("a", running(), None)];
        let status = pod_status(&StatusInput {
            pod: &pod,
            init: &[],
            containers: &containers,
            phase: "Running",
            node_ip: "127.0.0.1".parse().expect("an IP"),
            pod_ip: Some("127.0.0.1".parse().expect("an IP")),
            now: now(),
        });
        let conditions = status.conditions.expect("conditions");
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            [
                "PodScheduled",
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready"
            ]
        );
        let ready = conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready");
        assert_eq!(
            ready.last_transition_time.as_ref().map(|t| t.0.to_string()),
            Some("2020-01-01T00:00:00Z".to_owned())
        );
        assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    }

    #[test]
    fn merge_is_noop_should_compare_only_what_the_patch_sets() {
        let current = serde_json::json!({"a": 1, "b": {"c": [1, 2], "d": 3}});
        assert!(merge_is_noop(
            &current,
            &serde_json::json!({"b": {"c": [1, 2]}})
        ));
        assert!(!merge_is_noop(
            &current,
            &serde_json::json!({"b": {"c": [1]}})
        ));
        assert!(!merge_is_noop(&current, &serde_json::json!({"e": 1})));
    }
}
