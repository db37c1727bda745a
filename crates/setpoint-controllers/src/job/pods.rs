//! What the Job loop reads off its pods and how it makes them: the well-known labels,
//! annotations and the tracking finalizer, a pod's completion index, whether it is active,
//! terminating, succeeded or failed (as kube-controller-manager counts them), and a new pod
//! from a Job's template.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use setpoint_runtime::{owner, ObjectKey};

/// The finalizer on every pod of a Job until the Job's status has counted it.
pub(crate) const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation and label naming an Indexed Job pod's completion index.
pub(crate) const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Annotation counting the failures of an index before this pod (`backoffLimitPerIndex`).
pub(crate) const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// The environment variable an Indexed Job's containers read their index from.
pub(crate) const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The key of the Job controlling `pod`, if a Job controls it.
pub(crate) fn job_of(pod: &Pod) -> Option<ObjectKey> {
    let owner = owner::controller_ref_of_kind::<Job>(&pod.metadata)?;
    Some(ObjectKey {
        namespace: pod.metadata.namespace.clone(),
        name: owner.name.clone(),
    })
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// Whether the pod ran to success.
pub(crate) fn is_succeeded(pod: &Pod) -> bool {
    phase(pod) == Some("Succeeded")
}

/// Whether the pod is in phase `Failed`.
pub(crate) fn is_phase_failed(pod: &Pod) -> bool {
    phase(pod) == Some("Failed")
}

/// Whether the pod counts as failed for `job`: phase `Failed`, or — unless the Job has a pod
/// failure policy or replaces only `Failed` pods — deleted before it succeeded (an orphaned or
/// evicted pod may never reach a phase).
pub(crate) fn is_failed(pod: &Pod, job: &Job) -> bool {
    if is_phase_failed(pod) {
        return true;
    }
    let spec = job.spec.as_ref();
    let has_policy = spec.is_some_and(|s| s.pod_failure_policy.is_some());
    let failed_only = spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed");
    !has_policy && !failed_only && pod.metadata.deletion_timestamp.is_some() && !is_succeeded(pod)
}

/// Whether the pod runs or will: not finished and not being deleted.
pub(crate) fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), Some("Succeeded" | "Failed"))
}

/// Whether the pod is being deleted and not yet in a terminal phase (`status.terminating`).
pub(crate) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase(pod), Some("Succeeded" | "Failed"))
}

/// Whether the pod's `Ready` condition is `True`.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether the pod still carries the tracking finalizer.
pub(crate) fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == TRACKING_FINALIZER)
}

/// The pod's completion index (annotation, else label), if valid and below `completions`.
pub(crate) fn completion_index(pod: &Pod, completions: i32) -> Option<i32> {
    let from = |map: Option<&std::collections::BTreeMap<String, String>>| {
        map?.get(COMPLETION_INDEX)?.parse::<i32>().ok()
    };
    from(pod.metadata.annotations.as_ref())
        .or_else(|| from(pod.metadata.labels.as_ref()))
        .filter(|i| (0..completions).contains(i))
}

/// How many times the pod's index had failed before it was created (`0` if unsaid).
pub(crate) fn index_failure_count(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INDEX_FAILURE_COUNT))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// When the pod finished: the latest `finishedAt` of its terminated containers, else its
/// `Ready` condition's transition, else its creation.
pub(crate) fn finish_time(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref();
    let finished = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    finished
        .or_else(|| {
            status?
                .conditions
                .as_deref()?
                .iter()
                .find(|c| c.type_ == "Ready")?
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
        })
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// A new pod for `job`: the template's labels, annotations, finalizers (plus the tracking
/// finalizer) and spec, a generated name `<job>-` (`<job>-<index>-` for an index), `job` as its
/// controller; for an index, its annotation and label, hostname `<job>-<index>` and
/// `JOB_COMPLETION_INDEX` in every container, read from the annotation.
pub(crate) fn pod_for(job: &Job, index: Option<(i32, i32)>) -> Pod {
    let template = job.spec.as_ref().map(|s| &s.template);
    let template_meta = template.and_then(|t| t.metadata.as_ref());
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut finalizers = template_meta
        .and_then(|m| m.finalizers.clone())
        .unwrap_or_default();
    finalizers.push(TRACKING_FINALIZER.to_owned());
    let mut pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: job.metadata.namespace.clone(),
            labels: template_meta.and_then(|m| m.labels.clone()),
            annotations: template_meta.and_then(|m| m.annotations.clone()),
            finalizers: Some(finalizers),
            owner_references: Some(vec![owner::controller_ref_to(job)]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    };
    if let Some((index, failures)) = index {
        pod.metadata.generate_name = Some(format!("{name}-{index}-"));
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.to_owned(), index.to_string());
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.to_owned(), index.to_string());
        if failures > 0 {
            pod.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(INDEX_FAILURE_COUNT.to_owned(), failures.to_string());
        }
        if let Some(spec) = pod.spec.as_mut() {
            if spec.hostname.is_none() {
                spec.hostname = Some(format!("{name}-{index}"));
            }
            let env = EnvVar {
                name: INDEX_ENV.to_owned(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                    }),
                    ..Default::default()
                }),
            };
            let containers = spec
                .containers
                .iter_mut()
                .chain(spec.init_containers.iter_mut().flatten());
            for c in containers {
                let vars = c.env.get_or_insert_with(Vec::new);
                if !vars.iter().any(|v| v.name == INDEX_ENV) {
                    vars.push(env.clone());
                }
            }
        }
    }
    pod
}

#[cfg(test)]
pub(crate) mod testing {
    //! Jobs and pods in given states, for this module's siblings' tests.

    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus, PodTemplateSpec};

    use super::*;

    /// A Job `name` in namespace `ns` with one container `main`.
    pub(crate) fn job(name: &str) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(JobSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "main".into(),
                            image: Some("busybox".into()),
                            ..Default::default()
                        }],
                        restart_policy: Some("Never".into()),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    /// A pod named `name` in `phase`.
    pub(crate) fn pod(name: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn indexed_pods_should_carry_index_hostname_env_and_finalizer() {
        let p = pod_for(&job("work"), Some((4, 2)));
        assert_eq!(p.metadata.generate_name.as_deref(), Some("work-4-"));
        assert_eq!(completion_index(&p, 10), Some(4));
        assert_eq!(completion_index(&p, 4), None, "out of range");
        assert_eq!(index_failure_count(&p), 2);
        assert!(has_tracking_finalizer(&p));
        let spec = p.spec.expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("work-4"));
        let env = &spec.containers[0].env.as_ref().expect("env")[0];
        assert_eq!(env.name, INDEX_ENV);
        let field = env.value_from.as_ref().and_then(|v| v.field_ref.as_ref());
        assert_eq!(
            field.map(|f| f.field_path.as_str()),
            Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
        );
        let owner = &p.metadata.owner_references.expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    }

    #[test]
    fn deleted_pods_should_count_failed_unless_only_failed_pods_are_replaced() {
        let mut j = job("a");
        let mut p = pod("p", "Running");
        p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(is_failed(&p, &j));
        assert!(is_terminating(&p));
        assert!(!is_active(&p));
        j.spec.as_mut().expect("spec").pod_replacement_policy = Some("Failed".into());
        assert!(!is_failed(&p, &j));
        assert!(is_failed(&pod("q", "Failed"), &j));
        assert!(!is_failed(&pod("r", "Running"), &j));
    }
}
