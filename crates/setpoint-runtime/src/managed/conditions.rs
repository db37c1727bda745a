//! What one reconcile says about a managed object in its `status`: the `Ready` and `Synced`
//! conditions (replaced by type, the others kept, `lastTransitionTime` moved only when a
//! condition's status flips, `observedGeneration` the object's generation) and the provider's
//! observed state, computed into one merge patch of the status — or none when it would change
//! nothing, so an unchanged reconcile writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value};

use crate::managed::condition::{READY, SYNCED};
use crate::managed::object::to_json;
use crate::managed::Managed;

/// One condition to set: status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Mark {
    status: bool,
    reason: &'static str,
    message: String,
}

impl Mark {
    /// `status=True` with `reason`.
    pub(super) fn yes(reason: &'static str) -> Mark {
        Mark {
            status: true,
            reason,
            message: String::new(),
        }
    }

    /// `status=False` with `reason` and `message`.
    pub(super) fn no(reason: &'static str, message: impl Into<String>) -> Mark {
        Mark {
            status: false,
            reason,
            message: message.into(),
        }
    }
}

/// The status one reconcile writes.
#[derive(Clone, Debug, Default)]
pub(super) struct Verdict {
    /// `Ready`, if this reconcile learnt it.
    pub(super) ready: Option<Mark>,
    /// `Synced`, if this reconcile decided it.
    pub(super) synced: Option<Mark>,
    /// The provider's observed state, a merge patch of `status`.
    pub(super) observed: Option<Value>,
    /// Remove `Ready` and `Synced` (the object no longer wants an external object).
    pub(super) forget: bool,
}

impl Verdict {
    /// Sets `Ready`.
    pub(super) fn ready(mut self, mark: Mark) -> Verdict {
        self.ready = Some(mark);
        self
    }

    /// Sets `Synced`.
    pub(super) fn synced(mut self, mark: Mark) -> Verdict {
        self.synced = Some(mark);
        self
    }

    /// Writes the provider's observed state too.
    pub(super) fn observed(mut self, status: Option<Value>) -> Verdict {
        self.observed = status;
        self
    }

    /// The merge patch of `status` that records this verdict on `object`, or `None` when the
    /// status already says all of it.
    pub(super) fn status_patch<M: Managed>(&self, object: &M) -> Option<Value> {
        let before = object.conditions();
        let mut after = before.clone();
        if self.forget {
            after.retain(|c| c.type_ != READY && c.type_ != SYNCED);
        }
        let generation = object.meta().generation;
        for (type_, mark) in [(READY, &self.ready), (SYNCED, &self.synced)] {
            if let Some(mark) = mark {
                set(&mut after, type_, mark, generation);
            }
        }
        let observed = match &self.observed {
            Some(Value::Object(fields)) if !fields.is_empty() => Some(fields.clone()),
            _ => None,
        };
        let status_moves = observed.as_ref().is_some_and(|fields| {
            let current = to_json(object)
                .get("status")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            setpoint_core::merge_patch(current.clone(), Value::Object(fields.clone()))
                .is_ok_and(|patched| patched != current)
        });
        if after == before && !status_moves {
            return None;
        }
        let mut patch = observed.unwrap_or_default();
        if after != before {
            patch.insert(
                "conditions".to_owned(),
                serde_json::to_value(&after).unwrap_or(Value::Null),
            );
        }
        Some(Value::Object(patch))
    }
}

/// Sets condition `type_` in `conditions` to `mark`, keeping its transition time unless its
/// status flips.
fn set(conditions: &mut Vec<Condition>, type_: &str, mark: &Mark, generation: Option<i64>) {
    let status = if mark.status { "True" } else { "False" };
    let condition = Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: mark.reason.to_owned(),
        message: mark.message.clone(),
        observed_generation: generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let since = (existing.status == status).then(|| existing.last_transition_time.clone());
            *existing = Condition {
                last_transition_time: since.unwrap_or(condition.last_transition_time.clone()),
                ..condition
            };
        }
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed::condition::{AVAILABLE, RECONCILE_ERROR, RECONCILE_SUCCESS};
    use k8s_openapi::api::core::v1::{Service, ServiceStatus};
    use serde_json::json;

    fn service(conditions: Vec<Condition>) -> Service {
        let mut s = Service::default();
        s.metadata.generation = Some(3);
        s.status = Some(ServiceStatus {
            conditions: Some(conditions),
            ..ServiceStatus::default()
        });
        s
    }

    fn condition(type_: &str, status: &str, reason: &str, at: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: Some(3),
            last_transition_time: Time(at.parse().expect("time")),
        }
    }

    const THEN: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn an_unchanged_verdict_writes_nothing() {
        let s = service(vec![
            condition(READY, "True", AVAILABLE, THEN),
            condition(SYNCED, "True", RECONCILE_SUCCESS, THEN),
        ]);
        let verdict = Verdict::default()
            .ready(Mark::yes(AVAILABLE))
            .synced(Mark::yes(RECONCILE_SUCCESS));
        assert_eq!(verdict.status_patch(&s), None);
    }

    #[test]
    fn a_flip_moves_the_transition_time_and_keeps_other_conditions() {
        let other = condition("Custom", "True", "Because", THEN);
        let s = service(vec![
            other.clone(),
            condition(READY, "True", AVAILABLE, THEN),
            condition(SYNCED, "True", RECONCILE_SUCCESS, THEN),
        ]);
        let verdict = Verdict::default()
            .ready(Mark::yes(AVAILABLE))
            .synced(Mark::no(RECONCILE_ERROR, "observe: boom"));
        let patch = verdict.status_patch(&s).expect("a change");
        let conditions: Vec<Condition> =
            serde_json::from_value(patch["conditions"].clone()).expect("conditions");
        assert_eq!(conditions[0], other);
        assert_eq!(conditions[1].last_transition_time.0.to_string(), THEN);
        let synced = &conditions[2];
        assert_eq!(
            (synced.status.as_str(), synced.reason.as_str()),
            ("False", RECONCILE_ERROR)
        );
        assert_eq!(synced.message, "observe: boom");
        assert_ne!(synced.last_transition_time.0.to_string(), THEN);
        // Same status, new reason: the time stays.
        let s = service(conditions);
        let patch = Verdict::default()
            .synced(Mark::no(RECONCILE_ERROR, "observe: other"))
            .status_patch(&s)
            .expect("new message");
        let synced: Vec<Condition> =
            serde_json::from_value(patch["conditions"].clone()).expect("conditions");
        assert_eq!(
            synced[2].last_transition_time,
            s.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .expect("c")[2]
                .last_transition_time
        );
    }

    #[test]
    fn observed_state_is_written_only_when_it_changes_the_status() {
        let s = service(vec![condition(SYNCED, "True", RECONCILE_SUCCESS, THEN)]);
        let same = Verdict::default()
            .synced(Mark::yes(RECONCILE_SUCCESS))
            .observed(Some(json!({"conditions": [
                {"type": SYNCED, "status": "True", "reason": RECONCILE_SUCCESS, "message": "",
                 "observedGeneration": 3, "lastTransitionTime": THEN}
            ]})));
        assert_eq!(same.status_patch(&s), None);
        let moved = Verdict::default()
            .synced(Mark::yes(RECONCILE_SUCCESS))
            .observed(Some(
                json!({"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}),
            ));
        assert_eq!(
            moved.status_patch(&s),
            Some(json!({"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}})),
            "conditions unchanged are not sent"
        );
        let forget = Verdict {
            forget: true,
            ..Verdict::default()
        };
        assert_eq!(
            forget.status_patch(&s),
            Some(json!({"conditions": []})),
            "Ready and Synced removed"
        );
    }
}
