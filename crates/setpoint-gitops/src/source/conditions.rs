//! Status conditions of a GitRepository, as Flux's source-controller writes them:
//!
//! | outcome | `Ready` | `FetchFailed` | `Stalled` | `Reconciling` |
//! |---|---|---|---|---|
//! | artifact stored | True `Succeeded` | removed | removed | removed |
//! | building a new revision | unchanged | unchanged | removed | True `Progressing` |
//! | git failed | False `GitOperationFailed` | True `GitOperationFailed` | removed | removed |
//! | credentials missing | False `AuthenticationFailed` | True `AuthenticationFailed` | removed | removed |
//! | invalid spec | False (reason says what) | True (same) | True (same) | removed |
//!
//! A condition whose status does not change keeps its `lastTransitionTime`, so recomputing an
//! unchanged status writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::kinds::condition::{FETCH_FAILED, READY, RECONCILING, STALLED};
use crate::kinds::GitRepositoryStatus;

/// `Ready=True`: the artifact is stored.
pub(crate) const SUCCEEDED: &str = "Succeeded";
/// `Reconciling=True`: a new revision is being exported.
pub(crate) const PROGRESSING: &str = "Progressing";
/// A git command failed (the message holds git's error).
pub(crate) const GIT_OPERATION_FAILED: &str = "GitOperationFailed";
/// The Secret of `secretRef` is missing or lacks credentials.
pub(crate) const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
/// `spec.url` cannot be fetched by any git.
pub(crate) const URL_INVALID: &str = "URLInvalid";
/// `spec.ref` is invalid (both tag and semver, a malformed commit, a range that does not parse).
pub(crate) const INVALID_REF: &str = "InvalidRef";
/// `spec.interval` or `spec.timeout` is not a Go duration.
pub(crate) const INVALID_DURATION: &str = "InvalidDuration";
/// Writing the artifact failed.
pub(crate) const STORAGE_OPERATION_FAILED: &str = "StorageOperationFailed";

/// Sets condition `type_` to `status` with `reason` and `message`, keeping its transition time
/// when the status is unchanged.
pub(crate) fn set(
    status: &mut GitRepositoryStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let value = if value { "True" } else { "False" };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.status = value.to_owned();
                c.last_transition_time = now;
            }
            reason.clone_into(&mut c.reason);
            message.clone_into(&mut c.message);
            c.observed_generation = generation;
        }
        None => status.conditions.push(Condition {
            type_: type_.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation: generation,
            last_transition_time: now,
        }),
    }
}

/// Removes condition `type_`.
pub(crate) fn remove(status: &mut GitRepositoryStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

/// The artifact of `revision` is stored: `Ready=True`, nothing failing or in progress.
pub(crate) fn stored(status: &mut GitRepositoryStatus, revision: &str, generation: Option<i64>) {
    set(
        status,
        READY,
        true,
        SUCCEEDED,
        &format!("stored artifact for revision '{revision}'"),
        generation,
    );
    for t in [FETCH_FAILED, STALLED, RECONCILING] {
        remove(status, t);
    }
}

/// A new revision is being exported (`Ready` keeps saying what the served artifact is).
pub(crate) fn progressing(
    status: &mut GitRepositoryStatus,
    revision: &str,
    generation: Option<i64>,
) {
    set(
        status,
        RECONCILING,
        true,
        PROGRESSING,
        &format!("building artifact: new upstream revision '{revision}'"),
        generation,
    );
    remove(status, STALLED);
}

/// A failure that a retry may fix (the previous artifact stays).
pub(crate) fn failed(
    status: &mut GitRepositoryStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    set(status, FETCH_FAILED, true, reason, message, generation);
    set(status, READY, false, reason, message, generation);
    remove(status, STALLED);
    remove(status, RECONCILING);
}

/// A failure only a spec change fixes.
pub(crate) fn stalled(
    status: &mut GitRepositoryStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    failed(status, reason, message, generation);
    set(status, STALLED, true, reason, message, generation);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_status_should_keep_its_transition_time() {
        let mut s = GitRepositoryStatus::default();
        failed(&mut s, GIT_OPERATION_FAILED, "boom", Some(1));
        let first = s.conditions.clone();
        failed(&mut s, GIT_OPERATION_FAILED, "boom again", Some(1));
        assert_eq!(
            s.conditions[0].last_transition_time,
            first[0].last_transition_time
        );
        assert_eq!(s.conditions[0].message, "boom again");
        stored(&mut s, "main@sha1:abc", Some(1));
        assert_eq!(s.conditions.len(), 1);
        assert_eq!(
            (
                s.conditions[0].type_.as_str(),
                s.conditions[0].status.as_str()
            ),
            (READY, "True")
        );
        stalled(&mut s, URL_INVALID, "bad", Some(2));
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [READY, FETCH_FAILED, STALLED]);
    }
}
