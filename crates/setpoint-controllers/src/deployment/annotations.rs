//! The annotations Kubernetes' Deployment controller writes, and writes them the same way:
//!
//! - `deployment.kubernetes.io/revision` on each ReplicaSet (its rollout's number: one more
//!   than the highest old one when it becomes the new ReplicaSet) and on the Deployment (its
//!   new ReplicaSet's).
//! - `deployment.kubernetes.io/revision-history` on a ReplicaSet that became new again (a
//!   rollback): the revisions it had before, comma-separated, at most 2,000 characters.
//! - `deployment.kubernetes.io/desired-replicas` and `.../max-replicas` on each ReplicaSet:
//!   the Deployment's `spec.replicas` and `spec.replicas + maxSurge` when it was last sized —
//!   how a change of size is detected, and shared out proportionally.
//! - The Deployment's own annotations (e.g. `kubernetes.io/change-cause`, which
//!   `kubectl rollout history` shows) copied onto its new ReplicaSet, except those above and
//!   `kubectl.kubernetes.io/last-applied-configuration`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A ReplicaSet's (and its Deployment's) rollout number.
pub(super) const REVISION: &str = "deployment.kubernetes.io/revision";
/// The revisions a ReplicaSet had before it became new again.
pub(super) const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last sized.
pub(super) const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's `spec.replicas + maxSurge` when the ReplicaSet was last sized.
pub(super) const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// The rollback request of `extensions/v1beta1`; never copied.
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// kubectl's record of the last applied configuration; never copied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The most characters `revision-history` may hold (kube-controller-manager's default).
const MAX_HISTORY_CHARS: usize = 2000;

/// Whether a Deployment annotation stays off its ReplicaSets.
fn skipped(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// A revision number; 0 if absent or unparsable (as Kubernetes' `Revision` treats them for
/// ordering).
pub(super) fn revision_of(meta: &ObjectMeta) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The highest revision among `rses` (0 if none has one).
pub(super) fn max_revision(rses: &[&ReplicaSet]) -> i64 {
    rses.iter()
        .map(|rs| revision_of(&rs.metadata))
        .max()
        .unwrap_or(0)
}

/// An integer annotation of `rs`.
fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// The `desired-replicas` the ReplicaSet was last sized for.
pub(super) fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, DESIRED_REPLICAS)
}

/// The `max-replicas` the ReplicaSet was last sized for.
pub(super) fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, MAX_REPLICAS)
}

/// Sets `desired-replicas` and `max-replicas`; whether anything changed.
pub(super) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (key, value) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_owned(), value);
            changed = true;
        }
    }
    changed
}

/// Copies `d`'s annotations (but the [skipped] ones) onto `rs`; whether anything changed.
/// Annotations the Deployment no longer has are left on the ReplicaSet, as Kubernetes does.
fn copy_deployment_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let Some(from) = d.metadata.annotations.as_ref() else {
        return false;
    };
    let to = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (key, value) in from.iter().filter(|(k, _)| !skipped(k)) {
        if to.get(key) != Some(value) {
            to.insert(key.clone(), value.clone());
            changed = true;
        }
    }
    changed
}

/// Whether a ReplicaSet is being made or is already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NewReplicaSet {
    /// About to be created: also gets its replica annotations.
    ToCreate {
        /// `spec.replicas` of the Deployment.
        desired: i32,
        /// `spec.replicas + maxSurge`.
        max: i32,
    },
    /// Already stored.
    Existing,
}

/// Brings the new ReplicaSet's annotations up to date (Kubernetes'
/// `SetNewReplicaSetAnnotations`): the Deployment's annotations; `revision` raised to
/// `new_revision` if lower — keeping the old number in `revision-history` if it had one (it is
/// being rolled back to); for a ReplicaSet about to be created, its replica annotations.
/// Whether anything changed.
pub(super) fn set_new_replicaset_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    which: NewReplicaSet,
) -> bool {
    let mut changed = copy_deployment_annotations(d, rs);
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let old = annotations.get(REVISION).cloned();
    let old_number = match old.as_deref().map(str::parse::<i64>) {
        None => 0,
        Some(Ok(n)) => n,
        // Kubernetes leaves a ReplicaSet with a garbled revision alone.
        Some(Err(_)) => return changed,
    };
    if old_number < new_revision {
        annotations.insert(REVISION.to_owned(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = annotations
                .get(REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            annotations.insert(
                REVISION_HISTORY.to_owned(),
                appended_history(&history, &old),
            );
        }
    }
    if let NewReplicaSet::ToCreate { desired, max } = which {
        changed |= set_replicas_annotations(rs, desired, max);
    }
    changed
}

/// `history` with `revision` appended, dropping the oldest entries to stay within
/// [`MAX_HISTORY_CHARS`].
fn appended_history(history: &str, revision: &str) -> String {
    let mut entries: Vec<&str> = history.split(',').filter(|e| !e.is_empty()).collect();
    entries.push(revision);
    while entries.len() > 1 && entries.join(",").len() > MAX_HISTORY_CHARS {
        entries.remove(0);
    }
    entries.join(",")
}

/// Sets the Deployment's `revision` annotation; whether it changed.
pub(super) fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if annotations.get(REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION.to_owned(), revision.to_owned());
    true
}

/// The `revision` annotation of a ReplicaSet, as written.
pub(super) fn revision_string(rs: &ReplicaSet) -> Option<&str> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(REVISION)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::super::replicasets::testing::rs;
    use super::*;

    fn annotated(pairs: &[(&str, &str)]) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        d
    }

    fn annotation<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
        rs.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    #[test]
    fn a_created_replicaset_should_get_revision_replicas_and_change_cause() {
        let d = annotated(&[
            ("kubernetes.io/change-cause", "set image"),
            (LAST_APPLIED, "{}"),
            (REVISION, "7"),
        ]);
        let mut new = rs("web-abc", 0, 0, 0, 0);
        let which = NewReplicaSet::ToCreate { desired: 3, max: 4 };
        assert!(set_new_replicaset_annotations(&d, &mut new, 3, which));
        assert_eq!(annotation(&new, REVISION), Some("3"));
        assert_eq!(
            annotation(&new, "kubernetes.io/change-cause"),
            Some("set image")
        );
        assert_eq!(annotation(&new, LAST_APPLIED), None);
        assert_eq!(annotation(&new, DESIRED_REPLICAS), Some("3"));
        assert_eq!(annotation(&new, MAX_REPLICAS), Some("4"));
        assert_eq!(annotation(&new, REVISION_HISTORY), None);
        assert!(!set_new_replicaset_annotations(
            &d,
            &mut new,
            3,
            NewReplicaSet::Existing
        ));
    }

    #[test]
    fn a_replicaset_rolled_back_to_should_keep_its_old_revisions() {
        let d = Deployment::default();
        let mut old = rs("web-abc", 0, 0, 0, 0);
        old.metadata.annotations = Some([(REVISION.to_owned(), "1".to_owned())].into());
        assert!(set_new_replicaset_annotations(
            &d,
            &mut old,
            3,
            NewReplicaSet::Existing
        ));
        assert_eq!(annotation(&old, REVISION), Some("3"));
        assert_eq!(annotation(&old, REVISION_HISTORY), Some("1"));
        assert!(set_new_replicaset_annotations(
            &d,
            &mut old,
            5,
            NewReplicaSet::Existing
        ));
        assert_eq!(annotation(&old, REVISION_HISTORY), Some("1,3"));
    }

    #[test]
    fn history_should_drop_the_oldest_beyond_its_limit() {
        let long = vec!["1234567890"; 200].join(",");
        let out = appended_history(&long, "99");
        assert!(out.len() <= MAX_HISTORY_CHARS);
        assert!(out.ends_with(",99"));
    }

    #[test]
    fn max_revision_should_ignore_garbage() {
        let mut a = rs("a", 0, 0, 0, 0);
        a.metadata.annotations = Some([(REVISION.to_owned(), "4".to_owned())].into());
        let mut b = rs("b", 0, 0, 0, 0);
        b.metadata.annotations = Some([(REVISION.to_owned(), "x".to_owned())].into());
        assert_eq!(max_revision(&[&a, &b]), 4);
        assert_eq!(max_revision(&[]), 0);
    }
}
