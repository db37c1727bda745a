//! The status a simulated node gives a pod it "starts": what the kubelet would post once every
//! container is running and ready — phase `Running`, host and pod IPs, start time, the five
//! pod conditions `True`, and a running, ready status per container (init containers
//! terminated with `Completed`). Image ids and container ids are `sim://…`.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The pod conditions a running, ready pod has, in the kubelet's order.
const CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// The status of `pod` running on a node at `host_ip` with address `pod_ip`, started at
/// `now`. `PodScheduled`'s transition time is kept from the pod's current status.
pub(super) fn running_status(
    pod: &Pod,
    host_ip: Ipv4Addr,
    pod_ip: Ipv4Addr,
    now: &Time,
) -> PodStatus {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let current = pod.status.clone().unwrap_or_default();
    let scheduled_at = current
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time);
    let conditions = CONDITIONS
        .iter()
        .map(|type_| PodCondition {
            type_: (*type_).to_owned(),
            status: "True".to_owned(),
            last_transition_time: Some(match *type_ {
                "PodScheduled" => scheduled_at.clone().unwrap_or_else(|| now.clone()),
                _ => now.clone(),
            }),
            ..PodCondition::default()
        })
        .collect();
    let pod_ip = if spec.host_network == Some(true) {
        host_ip
    } else {
        pod_ip
    };
    let init = spec.init_containers.as_deref().unwrap_or_default();
    PodStatus {
        phase: Some("Running".to_owned()),
        host_ip: Some(host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: host_ip.to_string(),
        }]),
        pod_ip: Some(pod_ip.to_string()),
        pod_ips: Some(vec![PodIP {
            ip: pod_ip.to_string(),
        }]),
        start_time: Some(current.start_time.unwrap_or_else(|| now.clone())),
        conditions: Some(conditions),
        container_statuses: Some(
            spec.containers
                .iter()
                .map(|c| running_container(uid, c, now))
                .collect(),
        ),
        init_container_statuses: (!init.is_empty())
            .then(|| init.iter().map(|c| completed_init(uid, c, now)).collect()),
        qos_class: current.qos_class,
        ..PodStatus::default()
    }
}

/// The parts every container status shares.
fn base(uid: &str, c: &Container) -> ContainerStatus {
    let image = c.image.clone().unwrap_or_default();
    ContainerStatus {
        name: c.name.clone(),
        image_id: format!("sim://{image}"),
        image,
        container_id: Some(format!("sim://{uid}/{}", c.name)),
        restart_count: 0,
        ..ContainerStatus::default()
    }
}

fn running_container(uid: &str, c: &Container, now: &Time) -> ContainerStatus {
    ContainerStatus {
        ready: true,
        started: Some(true),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(now.clone()),
            }),
            ..ContainerState::default()
        }),
        ..base(uid, c)
    }
}

fn completed_init(uid: &str, c: &Container, now: &Time) -> ContainerStatus {
    ContainerStatus {
        ready: true,
        started: Some(false),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 0,
                reason: Some("Completed".to_owned()),
                started_at: Some(now.clone()),
                finished_at: Some(now.clone()),
                container_id: Some(format!("sim://{uid}/{}", c.name)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..base(uid, c)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::node::time_now;

    fn pod(host_network: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u1".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".to_owned(),
                    image: Some("nginx:1".to_owned()),
                    ..Container::default()
                }],
                init_containers: Some(vec![Container {
                    name: "init".to_owned(),
                    image: Some("busybox".to_owned()),
                    ..Container::default()
                }]),
                host_network: Some(host_network),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn running_status_should_be_ready_with_sim_ids() {
        let now = time_now();
        let host = Ipv4Addr::new(172, 16, 0, 1);
        let s = running_status(&pod(false), host, Ipv4Addr::new(10, 244, 0, 5), &now);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.5"));
        assert_eq!(s.host_ip.as_deref(), Some("172.16.0.1"));
        let conditions = s.conditions.expect("conditions");
        assert_eq!(conditions.len(), 5);
        assert!(conditions.iter().all(|c| c.status == "True"));
        let c = &s.container_statuses.expect("statuses")[0];
        assert!(c.ready);
        assert_eq!(c.image_id, "sim://nginx:1");
        assert_eq!(c.container_id.as_deref(), Some("sim://u1/app"));
        assert!(c.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
        let i = &s.init_container_statuses.expect("init")[0];
        let reason = i
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.as_deref());
        assert_eq!(reason, Some("Completed"));
    }

    #[test]
    fn host_network_pods_should_get_the_host_ip() {
        let now = time_now();
        let host = Ipv4Addr::new(172, 16, 0, 1);
        let s = running_status(&pod(true), host, Ipv4Addr::new(10, 244, 0, 5), &now);
        assert_eq!(s.pod_ip.as_deref(), Some("172.16.0.1"));
    }
}
