//! [`Action`]: what a successful reconcile asks for next — one sum type, so a result cannot
//! both requeue and not requeue.
//!
//! A failed reconcile is the `Err` of `Result<Action, E>`: it is retried with the key's
//! exponential backoff (see [`Reconciler::on_error`](super::Reconciler::on_error) for errors
//! that must not be retried). Either success clears the key's backoff.

use std::time::Duration;

/// What the controller does with a key after a successful reconcile.
///
/// ```
/// use std::time::Duration;
/// use setpoint_runtime::Action;
///
/// // Nothing more to do until a watched object changes:
/// let idle = Action::await_change();
/// // Look again in a minute even if nothing changes (e.g. to poll something not watched):
/// let poll = Action::requeue(Duration::from_secs(60));
/// assert_ne!(idle, poll);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "an Action says whether and when the key is reconciled again"]
pub enum Action {
    /// Reconcile the key again after this long, whether or not anything changes. The key's
    /// backoff is reset; an event for the key meanwhile reconciles it sooner (and replaces the
    /// pending requeue).
    RequeueAfter(Duration),
    /// Reconcile the key again only when a watched object changes (or on resync).
    AwaitChange,
}

impl Action {
    /// [`Action::RequeueAfter`]: reconcile again after `after`.
    pub fn requeue(after: Duration) -> Action {
        Action::RequeueAfter(after)
    }

    /// [`Action::AwaitChange`]: reconcile again when something changes.
    pub fn await_change() -> Action {
        Action::AwaitChange
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_should_build_the_matching_variants() {
        assert_eq!(
            Action::requeue(Duration::from_secs(3)),
            Action::RequeueAfter(Duration::from_secs(3))
        );
        assert_eq!(Action::await_change(), Action::AwaitChange);
    }
}
