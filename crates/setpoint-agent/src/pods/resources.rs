//! What a container run is limited to and who it runs as, from the pod's spec: its
//! `resources` (memory and CPU limits, CPU request), its `oom_score_adj` by the pod's QoS
//! class (as the kubelet scores them), and `securityContext.runAsUser`/`runAsGroup`
//! (container's over the pod's). The cgroups that enforce the limits are chosen by
//! `process/limits.rs`.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::process::limits::RunLimits;
use crate::process::RunAs;

/// `oom_score_adj` of Guaranteed containers (kubelet's value).
const GUARANTEED_SCORE: i32 = -997;
/// `oom_score_adj` of BestEffort containers.
const BEST_EFFORT_SCORE: i32 = 1000;

/// The pod's QoS class: `status.qosClass` (set by the API server at creation), else computed
/// from its containers' (init containers included) requests and limits.
pub(crate) fn qos_class(pod: &Pod) -> String {
    if let Some(class) = pod.status.as_ref().and_then(|s| s.qos_class.as_ref()) {
        return class.clone();
    }
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort".to_owned();
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let resources = c.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        for name in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(name));
            let request = requests.and_then(|r| r.get(name)).or(limit);
            any |= limit.is_some() || request.is_some();
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
    .to_owned()
}

/// The limits of `container` of `pod` on a machine with `memory_capacity` bytes (no cgroups
/// chosen yet).
pub(crate) fn run_limits(pod: &Pod, container: &Container, memory_capacity: u64) -> RunLimits {
    let resources = container.resources.as_ref();
    let limit = |name: &str, exp10: i32| {
        let q = resources?.limits.as_ref()?.get(name)?;
        u64::try_from(setpoint_core::quantity::scaled_value(&q.0, exp10)?).ok()
    };
    let request = |name: &str, exp10: i32| {
        let q = resources?.requests.as_ref()?.get(name)?;
        u64::try_from(setpoint_core::quantity::scaled_value(&q.0, exp10)?).ok()
    };
    let memory_bytes = limit("memory", 0).filter(|b| *b > 0);
    let cpu_limit_milli = limit("cpu", 3).filter(|m| *m > 0);
    let memory_request = request("memory", 0).or(memory_bytes).unwrap_or(0);
    RunLimits {
        memory_bytes,
        cpu_limit_milli,
        cpu_request_milli: request("cpu", 3).or(cpu_limit_milli),
        oom_score_adj: Some(oom_score_adj(
            &qos_class(pod),
            memory_request,
            memory_capacity,
        )),
        cgroups: Vec::new(),
    }
}

/// The kubelet's OOM score adjustment: Guaranteed −997, BestEffort 1000, Burstable
/// `1000 − 1000 × request / capacity` kept within [3, 999] (above Guaranteed, below
/// BestEffort).
pub(crate) fn oom_score_adj(qos: &str, memory_request: u64, memory_capacity: u64) -> i32 {
    match qos {
        "Guaranteed" => GUARANTEED_SCORE,
        "BestEffort" => BEST_EFFORT_SCORE,
        _ => {
            let share = if memory_capacity == 0 {
                0
            } else {
                u128::from(memory_request) * 1000 / u128::from(memory_capacity)
            };
            let score = 1000 - i32::try_from(share.min(1000)).unwrap_or(1000);
            score.clamp(1000 + GUARANTEED_SCORE, BEST_EFFORT_SCORE - 1)
        }
    }
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`) in bytes; 0 if unreadable.
pub(crate) fn memory_capacity() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// Who `container` of `pod` runs as: `runAsUser`/`runAsGroup` of its security context, else
/// the pod's (group 0 when only the user is given, as for an image without that user), with
/// the pod's `supplementalGroups` and `fsGroup` as supplementary groups. An
/// agent that is not root can only run containers as itself: asked for another user or group
/// it refuses (the kubelet fails a container it cannot set up:
/// `CreateContainerConfigError`).
pub(crate) fn run_as(pod: &Pod, container: &Container) -> Result<Option<RunAs>, String> {
    let own = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    run_as_from(pod, container, own)
}

/// [`run_as`] for an agent running as `(uid, gid)`.
fn run_as_from(
    pod: &Pod,
    container: &Container,
    (own_uid, own_gid): (u32, u32),
) -> Result<Option<RunAs>, String> {
    let pod_ctx = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let ctx = container.security_context.as_ref();
    let uid = ctx
        .and_then(|c| c.run_as_user)
        .or_else(|| pod_ctx.and_then(|c| c.run_as_user));
    let gid = ctx
        .and_then(|c| c.run_as_group)
        .or_else(|| pod_ctx.and_then(|c| c.run_as_group));
    let to_id = |id: i64, what: &str| {
        u32::try_from(id).map_err(|_| format!("{what} {id} is not a valid id"))
    };
    let mut groups = Vec::new();
    let supplemental = pod_ctx.and_then(|c| c.supplemental_groups.as_ref());
    let fs_group = pod_ctx.and_then(|c| c.fs_group);
    for g in supplemental.into_iter().flatten().chain(fs_group.as_ref()) {
        let g = to_id(*g, "supplementalGroups/fsGroup")?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    if uid.is_none() && gid.is_none() && groups.is_empty() {
        return Ok(None);
    }
    let uid = uid.map(|u| to_id(u, "runAsUser")).transpose()?;
    let gid = gid.map(|g| to_id(g, "runAsGroup")).transpose()?;
    if own_uid != 0 {
        let wants_other = uid.is_some_and(|u| u != own_uid)
            || gid.is_some_and(|g| g != own_gid)
            || !groups.is_empty();
        if wants_other {
            return Err(format!(
                "the node agent runs as uid {own_uid} gid {own_gid}, not root, and cannot run container {:?} as uid {} gid {}{}",
                container.name,
                uid.map_or_else(|| own_uid.to_string(), |u| u.to_string()),
                gid.map_or_else(|| own_gid.to_string(), |g| g.to_string()),
                if groups.is_empty() {
                    String::new()
                } else {
                    format!(" with supplementary groups {groups:?}")
                },
            ));
        }
        return Ok(None);
    }
    Ok(Some(RunAs {
        uid: uid.unwrap_or(0),
        gid: gid.unwrap_or(0),
        groups,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    #[test]
    fn qos_should_follow_requests_and_limits() {
        let limited = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        let p = pod(json!({"spec": {"containers": [{"name": "a", "resources": limited}]}}));
        assert_eq!(qos_class(&p), "Guaranteed");
        let p = pod(json!({"spec": {"containers": [
            {"name": "a", "resources": limited}, {"name": "b"}]}}));
        assert_eq!(qos_class(&p), "Burstable");
        let p = pod(json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(qos_class(&p), "BestEffort");
        let p = pod(json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"qosClass": "Burstable"}}));
        assert_eq!(qos_class(&p), "Burstable", "the API server's word");
    }

    #[test]
    fn oom_scores_should_rank_guaranteed_burstable_best_effort() {
        assert_eq!(oom_score_adj("Guaranteed", 0, 1 << 30), -997);
        assert_eq!(oom_score_adj("BestEffort", 0, 1 << 30), 1000);
        assert_eq!(oom_score_adj("Burstable", 1 << 28, 1 << 30), 750);
        assert_eq!(oom_score_adj("Burstable", 0, 1 << 30), 999);
        assert_eq!(oom_score_adj("Burstable", 2 << 30, 1 << 30), 3);
    }

    #[test]
    fn limits_should_be_read_from_the_container() {
        let p = pod(json!({"spec": {"containers": [{"name": "a", "resources": {
            "limits": {"cpu": "200m", "memory": "64Mi"}}}]}}));
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let limits = run_limits(&p, c, 1 << 30);
        assert_eq!(limits.memory_bytes, Some(64 << 20));
        assert_eq!(limits.cpu_limit_milli, Some(200));
        assert_eq!(limits.cpu_request_milli, Some(200));
        assert_eq!(limits.oom_score_adj, Some(-997));
    }

    #[test]
    fn run_as_should_prefer_the_container_and_refuse_others_without_root() {
        let p = pod(json!({"spec": {
            "securityContext": {"runAsUser": 1000, "runAsGroup": 3000},
            "containers": [{"name": "a", "securityContext": {"runAsUser": 2000}}, {"name": "b"}]}}));
        let spec = p.spec.as_ref().expect("spec");
        let (a, b) = (&spec.containers[0], &spec.containers[1]);
        assert_eq!(
            run_as_from(&p, a, (0, 0)),
            Ok(Some(RunAs {
                uid: 2000,
                gid: 3000,
                groups: vec![]
            }))
        );
        assert_eq!(
            run_as_from(&p, b, (0, 0)),
            Ok(Some(RunAs {
                uid: 1000,
                gid: 3000,
                groups: vec![]
            }))
        );
        let grouped = pod(json!({"spec": {
            "securityContext": {"supplementalGroups": [4000, 5000], "fsGroup": 5000},
            "containers": [{"name": "a"}]}}));
        let c = &grouped.spec.as_ref().expect("spec").containers[0];
        assert_eq!(
            run_as_from(&grouped, c, (0, 0)),
            Ok(Some(RunAs {
                uid: 0,
                gid: 0,
                groups: vec![4000, 5000]
            }))
        );
        assert!(run_as_from(&grouped, c, (1000, 1000)).is_err_and(|e| e.contains("groups")));
        // Not root: only its own identity.
        assert!(run_as_from(&p, a, (1000, 3000)).is_err_and(|e| e.contains("not root")));
        assert_eq!(run_as_from(&p, b, (1000, 3000)), Ok(None));
        let plain = pod(json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(
            run_as(&plain, &plain.spec.as_ref().expect("spec").containers[0]),
            Ok(None)
        );
    }
}
