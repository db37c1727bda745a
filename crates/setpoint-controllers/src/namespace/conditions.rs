//! The five status conditions a terminating namespace carries, as kube-controller-manager
//! sets them: what one deletion pass found ([`PassReport`]) becomes a full set of conditions
//! ([`PassReport::conditions`]), merged into the namespace's status by [`merge`].
//!
//! Promises: every pass reports all five types, each `True` (with the failure's reason and a
//! message naming what is wrong) or `False` (with the "all is well" reason); messages list
//! their items sorted, so an unchanged situation writes nothing; `lastTransitionTime` moves
//! only when a condition's status flips.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The condition types this loop owns, in the order they are written.
const TYPES: [ConditionType; 5] = [
    ConditionType::DiscoveryFailure,
    ConditionType::GroupVersionParsingFailure,
    ConditionType::ContentFailure,
    ConditionType::ContentRemaining,
    ConditionType::FinalizersRemaining,
];

/// One of the namespace deletion condition types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConditionType {
    DiscoveryFailure,
    GroupVersionParsingFailure,
    ContentFailure,
    ContentRemaining,
    FinalizersRemaining,
}

impl ConditionType {
    fn name(self) -> &'static str {
        match self {
            ConditionType::DiscoveryFailure => "NamespaceDeletionDiscoveryFailure",
            ConditionType::GroupVersionParsingFailure => {
                "NamespaceDeletionGroupVersionParsingFailure"
            }
            ConditionType::ContentFailure => "NamespaceDeletionContentFailure",
            ConditionType::ContentRemaining => "NamespaceContentRemaining",
            ConditionType::FinalizersRemaining => "NamespaceFinalizersRemaining",
        }
    }

    /// Reason and message when nothing is wrong (status `False`).
    fn ok(self) -> (&'static str, &'static str) {
        match self {
            ConditionType::DiscoveryFailure => (
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            ConditionType::GroupVersionParsingFailure => (
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            ConditionType::ContentFailure => (
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            ConditionType::ContentRemaining => {
                ("ContentRemoved", "All content successfully removed")
            }
            ConditionType::FinalizersRemaining => (
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished",
            ),
        }
    }
}

/// What one deletion pass over a namespace found. Failure lists hold one rendered error each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct PassReport {
    /// Group versions (or the whole discovery) that could not be discovered.
    pub(super) discovery_failures: Vec<String>,
    /// Resources whose content could not be deleted or checked.
    pub(super) content_failures: Vec<String>,
    /// Objects still present, by `resource.group` (core resources end in a bare `.`); only
    /// non-zero counts.
    pub(super) remaining: BTreeMap<String, usize>,
    /// Objects still present, by each finalizer they carry; only non-zero counts.
    pub(super) finalizers: BTreeMap<String, usize>,
}

impl PassReport {
    /// Whether every step of the pass worked (content may still be waiting to go).
    pub(super) fn succeeded(&self) -> bool {
        self.discovery_failures.is_empty() && self.content_failures.is_empty()
    }

    /// The five conditions this report amounts to (without transition times).
    pub(super) fn conditions(&self) -> Vec<NamespaceCondition> {
        TYPES
            .iter()
            .map(|&t| match self.failure(t) {
                Some((reason, message)) => condition(t, "True", reason, message),
                None => {
                    let (reason, message) = t.ok();
                    condition(t, "False", reason, message.to_owned())
                }
            })
            .collect()
    }

    fn failure(&self, t: ConditionType) -> Option<(&'static str, String)> {
        match t {
            ConditionType::DiscoveryFailure if !self.discovery_failures.is_empty() => Some((
                "DiscoveryFailed",
                format!(
                    "Discovery failed for some groups, {} failing: {}",
                    self.discovery_failures.len(),
                    self.discovery_failures.join(", ")
                ),
            )),
            ConditionType::ContentFailure if !self.content_failures.is_empty() => Some((
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    self.content_failures.len(),
                    self.content_failures.join(", ")
                ),
            )),
            ConditionType::ContentRemaining if !self.remaining.is_empty() => Some((
                "SomeResourcesRemain",
                format!(
                    "Some resources are remaining: {}",
                    counted(&self.remaining, "has")
                ),
            )),
            ConditionType::FinalizersRemaining if !self.finalizers.is_empty() => Some((
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    counted(&self.finalizers, "in")
                ),
            )),
            _ => None,
        }
    }
}

/// `"a has 2 resource instances, b has 1 resource instances"`, sorted as the strings sort.
fn counted(counts: &BTreeMap<String, usize>, verb: &str) -> String {
    let mut items: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(what, n)| format!("{what} {verb} {n} resource instances"))
        .collect();
    items.sort();
    items.join(", ")
}

fn condition(t: ConditionType, status: &str, reason: &str, message: String) -> NamespaceCondition {
    NamespaceCondition {
        type_: t.name().to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_transition_time: None,
    }
}

/// Merges `wanted` (from [`PassReport::conditions`]) into `status`: adds missing types,
/// rewrites changed ones (a new `lastTransitionTime` only when the status flips), leaves
/// conditions of other types alone. Returns whether anything changed.
pub(super) fn merge(
    status: &mut NamespaceStatus,
    wanted: Vec<NamespaceCondition>,
    now: Time,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut changed = false;
    for mut new in wanted {
        match conditions.iter_mut().find(|c| c.type_ == new.type_) {
            None => {
                new.last_transition_time = Some(now.clone());
                conditions.push(new);
                changed = true;
            }
            Some(old)
                if old.status != new.status
                    || old.reason != new.reason
                    || old.message != new.message =>
            {
                if old.status != new.status || old.last_transition_time.is_none() {
                    old.last_transition_time = Some(now.clone());
                }
                old.status = new.status;
                old.reason = new.reason;
                old.message = new.message;
                changed = true;
            }
            Some(_) => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid time"))
    }

    fn find<'a>(conditions: &'a [NamespaceCondition], t: &str) -> &'a NamespaceCondition {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .expect("condition present")
    }

    #[test]
    fn a_clean_pass_should_report_all_five_conditions_false() {
        let conditions = PassReport::default().conditions();
        assert_eq!(conditions.len(), 5);
        assert!(conditions.iter().all(|c| c.status == "False"));
        assert_eq!(
            find(&conditions, "NamespaceDeletionContentFailure")
                .reason
                .as_deref(),
            Some("ContentDeleted")
        );
        assert_eq!(
            find(&conditions, "NamespaceDeletionGroupVersionParsingFailure")
                .reason
                .as_deref(),
            Some("ParsedGroupVersions")
        );
    }

    #[test]
    fn remaining_content_should_be_named_with_counts_sorted() {
        let report = PassReport {
            remaining: [("pods.".to_owned(), 2), ("configmaps.".to_owned(), 1)].into(),
            finalizers: [("example.com/hold".to_owned(), 3)].into(),
            ..PassReport::default()
        };
        let conditions = report.conditions();
        let content = find(&conditions, "NamespaceContentRemaining");
        assert_eq!(content.status, "True");
        assert_eq!(content.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            content.message.as_deref(),
            Some("Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances")
        );
        let finalizers = find(&conditions, "NamespaceFinalizersRemaining");
        assert_eq!(finalizers.reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            finalizers.message.as_deref(),
            Some("Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances")
        );
        assert!(report.succeeded());
    }

    #[test]
    fn failures_should_set_their_conditions_and_fail_the_pass() {
        let report = PassReport {
            discovery_failures: vec!["metrics.k8s.io/v1beta1: unavailable".to_owned()],
            content_failures: vec!["deleting pods.: boom".to_owned()],
            ..PassReport::default()
        };
        let conditions = report.conditions();
        let discovery = find(&conditions, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(discovery.status, "True");
        assert_eq!(discovery.reason.as_deref(), Some("DiscoveryFailed"));
        assert!(discovery
            .message
            .as_deref()
            .is_some_and(|m| m.contains("1 failing: metrics.k8s.io/v1beta1")));
        let content = find(&conditions, "NamespaceDeletionContentFailure");
        assert_eq!(content.reason.as_deref(), Some("ContentDeletionFailed"));
        assert!(!report.succeeded());
    }

    #[test]
    fn merge_should_move_transition_time_only_when_status_flips() {
        let mut status = NamespaceStatus::default();
        let remaining = PassReport {
            remaining: [("configmaps.".to_owned(), 2)].into(),
            ..PassReport::default()
        };
        assert!(merge(&mut status, remaining.conditions(), at(100)));
        // Same situation again: nothing to write.
        assert!(!merge(&mut status, remaining.conditions(), at(200)));
        // Fewer objects: the message changes, the status does not.
        let fewer = PassReport {
            remaining: [("configmaps.".to_owned(), 1)].into(),
            ..PassReport::default()
        };
        assert!(merge(&mut status, fewer.conditions(), at(300)));
        let conditions = status.conditions.clone().expect("conditions");
        let c = find(&conditions, "NamespaceContentRemaining");
        assert_eq!(c.last_transition_time, Some(at(100)));
        assert!(c.message.as_deref().is_some_and(|m| m.contains("has 1 ")));
        // All gone: the status flips.
        assert!(merge(
            &mut status,
            PassReport::default().conditions(),
            at(400)
        ));
        let conditions = status.conditions.expect("conditions");
        let c = find(&conditions, "NamespaceContentRemaining");
        assert_eq!(c.status, "False");
        assert_eq!(c.last_transition_time, Some(at(400)));
        assert_eq!(conditions.len(), 5);
    }

    #[test]
    fn merge_should_keep_conditions_of_other_types() {
        let mut status = NamespaceStatus {
            conditions: Some(vec![NamespaceCondition {
                type_: "SomethingElse".to_owned(),
                status: "True".to_owned(),
                ..NamespaceCondition::default()
            }]),
            ..NamespaceStatus::default()
        };
        merge(&mut status, PassReport::default().conditions(), at(1));
        let conditions = status.conditions.expect("conditions");
        assert_eq!(conditions.len(), 6);
        assert_eq!(conditions[0].type_, "SomethingElse");
    }
}
