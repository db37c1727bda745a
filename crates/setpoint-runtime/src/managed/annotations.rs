//! The annotations the loop reads and keeps on a managed object: the pause switch and the
//! create guard (`external-create-pending` / `-succeeded` / `-failed`), whose times say whether
//! a create was sent without its result being recorded — in which case the loop must not
//! create again, since the first one may have made the external object.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::managed::{
    Managed, EXTERNAL_CREATE_FAILED, EXTERNAL_CREATE_PENDING, EXTERNAL_CREATE_SUCCEEDED, PAUSED,
};

/// The `Synced` message while a create's result is unknown.
pub(super) const CREATE_INCOMPLETE: &str = "cannot determine creation result - remove the crossplane.io/external-create-pending annotation if it is safe to proceed";

/// The value of annotation `key` on `object`.
pub(super) fn get<'a, M: Managed>(object: &'a M, key: &str) -> Option<&'a str> {
    object
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether `object` is paused (`crossplane.io/paused: "true"`).
pub(super) fn paused<M: Managed>(object: &M) -> bool {
    get(object, PAUSED) == Some("true")
}

/// A time as the create annotations hold it (RFC 3339, to the nanosecond so a retry sent
/// within the same second as a failure still orders after it).
pub(super) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The time in annotation `key`, if it is set and parses.
fn time<M: Managed>(object: &M, key: &str) -> Option<DateTime<Utc>> {
    get(object, key)
        .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Whether a create was sent and neither its success nor its failure was recorded after it.
pub(super) fn create_incomplete<M: Managed>(object: &M) -> bool {
    let Some(pending) = time(object, EXTERNAL_CREATE_PENDING) else {
        return false;
    };
    let settled = [
        time(object, EXTERNAL_CREATE_SUCCEEDED),
        time(object, EXTERNAL_CREATE_FAILED),
    ]
    .into_iter()
    .flatten()
    .max();
    settled.is_none_or(|settled| pending > settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    /// A Service (a managed kind in the SDK) with these annotations.
    fn thing(annotations: &[(&str, &str)]) -> Service {
        let mut service = Service::default();
        service.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        service
    }

    const T1: &str = "2026-01-01T00:00:01Z";
    const T2: &str = "2026-01-01T00:00:01.5Z";
    const T3: &str = "2026-01-01T00:00:02Z";

    #[test]
    fn create_is_incomplete_only_while_pending_is_the_newest() {
        assert!(!create_incomplete(&thing(&[])), "never started");
        assert!(create_incomplete(&thing(&[(EXTERNAL_CREATE_PENDING, T1)])));
        assert!(!create_incomplete(&thing(&[
            (EXTERNAL_CREATE_PENDING, T1),
            (EXTERNAL_CREATE_SUCCEEDED, T2)
        ])));
        assert!(!create_incomplete(&thing(&[
            (EXTERNAL_CREATE_PENDING, T1),
            (EXTERNAL_CREATE_FAILED, T2)
        ])));
        // Failed, then retried and pending again: incomplete.
        assert!(create_incomplete(&thing(&[
            (EXTERNAL_CREATE_PENDING, T3),
            (EXTERNAL_CREATE_FAILED, T2),
            (EXTERNAL_CREATE_SUCCEEDED, T1)
        ])));
        // Equal times are settled (Crossplane's: pending must be strictly after).
        assert!(!create_incomplete(&thing(&[
            (EXTERNAL_CREATE_PENDING, T1),
            (EXTERNAL_CREATE_FAILED, T1)
        ])));
        assert!(
            !create_incomplete(&thing(&[(EXTERNAL_CREATE_PENDING, "yesterday")])),
            "an unreadable time is no create"
        );
    }

    #[test]
    fn timestamps_round_trip_and_order_within_a_second() {
        let a = timestamp("2026-01-01T00:00:01.100Z".parse().expect("time"));
        let b = timestamp("2026-01-01T00:00:01.200Z".parse().expect("time"));
        let t = thing(&[(EXTERNAL_CREATE_FAILED, &a), (EXTERNAL_CREATE_PENDING, &b)]);
        assert!(create_incomplete(&t));
        assert!(paused(&thing(&[(PAUSED, "true")])));
        assert!(!paused(&thing(&[(PAUSED, "false")])));
    }
}
