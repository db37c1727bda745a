//! `spec.podFailurePolicy`: which rule, if any, a failed pod matches, and what it asks for.
//! Rules are tried in order; the first that matches decides. A rule `onExitCodes` matches when
//! a terminated container (of the named one, if given; init containers included) exited with a
//! non-zero code `In` (or `NotIn`) its values; a rule `onPodConditions` when the pod has one of
//! the listed conditions with the listed status.

use k8s_openapi::api::batch::v1::{PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// What a matched rule asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Fail the whole Job (`FailJob`), with the message of its `FailureTarget` condition.
    FailJob(String),
    /// Fail the pod's index at once (`FailIndex`; Indexed Jobs with `backoffLimitPerIndex`).
    FailIndex,
    /// Do not count the failure against any limit (`Ignore`).
    Ignore,
    /// Count it as usual (`Count`, or no rule matched).
    Count,
}

/// The verdict of `rules` on the failed `pod`.
pub(crate) fn judge(rules: &[PodFailurePolicyRule], pod: &Pod) -> Verdict {
    for (at, rule) in rules.iter().enumerate() {
        let matched = match (&rule.on_exit_codes, &rule.on_pod_conditions) {
            (Some(codes), _) => exit_code_match(codes, pod).map(Some),
            (None, Some(patterns)) => patterns
                .iter()
                .any(|p| has_condition(pod, &p.type_, &p.status))
                .then_some(None),
            (None, None) => None,
        };
        let Some(detail) = matched else { continue };
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        return match rule.action.as_str() {
            "FailJob" => Verdict::FailJob(match detail {
                None => format!("Pod {name} has condition matching FailJob rule at index {at}"),
                Some((container, code)) => format!(
                    "Container {container} for pod {name} failed with exit code {code} matching FailJob rule at index {at}"
                ),
            }),
            "FailIndex" => Verdict::FailIndex,
            "Ignore" => Verdict::Ignore,
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// The name and exit code of the first container the requirement matches.
fn exit_code_match(
    req: &PodFailurePolicyOnExitCodesRequirement,
    pod: &Pod,
) -> Option<(String, i32)> {
    let status = pod.status.as_ref()?;
    let all = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    all.filter(|c| req.container_name.as_ref().is_none_or(|n| *n == c.name))
        .find_map(|c| {
            let code = exit_code(c)?;
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            hit.then(|| (c.name.clone(), code))
        })
}

/// The non-zero exit code of a terminated container.
fn exit_code(c: &ContainerStatus) -> Option<i32> {
    let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
    (code != 0).then_some(code)
}

fn has_condition(pod: &Pod, type_: &str, status: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == type_ && c.status == status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::pods::testing::pod;
    use k8s_openapi::api::batch::v1::PodFailurePolicyOnPodConditionsPattern;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, PodCondition};

    fn exited(code: i32) -> Pod {
        let mut p = pod("p", "Failed");
        let status = p.status.get_or_insert_with(Default::default);
        status.container_statuses = Some(vec![ContainerStatus {
            name: "main".into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        p
    }

    fn on_codes(action: &str, operator: &str, values: Vec<i32>) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: None,
                operator: operator.into(),
                values,
            }),
            on_pod_conditions: None,
        }
    }

    #[test]
    fn the_first_matching_rule_should_decide() {
        let rules = [
            on_codes("Ignore", "In", vec![1]),
            on_codes("FailJob", "NotIn", vec![1, 2]),
        ];
        assert_eq!(judge(&rules, &exited(1)), Verdict::Ignore);
        assert_eq!(judge(&rules, &exited(2)), Verdict::Count);
        let Verdict::FailJob(message) = judge(&rules, &exited(42)) else {
            panic!("FailJob expected");
        };
        assert_eq!(
            message,
            "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
        );
    }

    #[test]
    fn pod_conditions_should_match_type_and_status() {
        let rules = [PodFailurePolicyRule {
            action: "Ignore".into(),
            on_exit_codes: None,
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
            }]),
        }];
        let mut p = pod("p", "Failed");
        assert_eq!(judge(&rules, &p), Verdict::Count);
        p.status.get_or_insert_with(Default::default).conditions = Some(vec![PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            ..Default::default()
        }]);
        assert_eq!(judge(&rules, &p), Verdict::Ignore);
    }
}
