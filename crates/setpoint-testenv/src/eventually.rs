//! Waiting in tests for something that becomes true later: [`eventually`] (async, for tests on
//! a tokio runtime) and [`eventually_blocking`] (a plain thread, for tests that drive `kubectl`
//! and server processes). Both poll a check until it says it is done and return what it found;
//! past the deadline they panic with a message naming what was awaited (and the last state
//! the check described, if it describes one), so a failing test says what never happened.
//!
//! A check answers with any [`Check`]: `bool` (done or not), `Option<T>` (done with `T`), or
//! `Result<T, String>` (done with `T`, or not yet, in the state the `String` describes).

use std::future::Future;
use std::time::{Duration, Instant};

/// How long [`eventually`] and [`eventually_blocking`] wait before failing the test: long
/// enough for a loaded CI machine, short enough that a hung test fails on its own.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How often [`eventually`] polls (an in-process check is cheap).
const ASYNC_INTERVAL: Duration = Duration::from_millis(20);

/// How often [`eventually_blocking`] polls (its checks usually start a `kubectl`).
const BLOCKING_INTERVAL: Duration = Duration::from_millis(100);

/// What one poll of a check found: whether the wait is over, and with what.
pub trait Check {
    /// What the wait returns once it is over.
    type Value;

    /// `Ok` with the value once done; otherwise `Err` with the state the check saw, if it
    /// describes it.
    fn done(self) -> Result<Self::Value, Option<String>>;
}

impl Check for bool {
    type Value = ();

    fn done(self) -> Result<(), Option<String>> {
        if self {
            Ok(())
        } else {
            Err(None)
        }
    }
}

impl<T> Check for Option<T> {
    type Value = T;

    fn done(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Check for Result<T, String> {
    type Value = T;

    fn done(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// Polls `check` every 20 ms until it is done and returns its value; panics after
/// [`DEADLINE`] with `what` (say what is awaited: "the pod is Running"). Cancel-safe.
pub async fn eventually<C, F, Fut>(what: &str, check: F) -> C::Value
where
    C: Check,
    F: FnMut() -> Fut,
    Fut: Future<Output = C>,
{
    eventually_within(what, DEADLINE, check).await
}

/// [`eventually`] with a deadline of `limit` instead of [`DEADLINE`]. Cancel-safe.
pub async fn eventually_within<C, F, Fut>(what: &str, limit: Duration, mut check: F) -> C::Value
where
    C: Check,
    F: FnMut() -> Fut,
    Fut: Future<Output = C>,
{
    // tokio's clock, so that a test with paused time waits in its own (virtual) time.
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match check().await.done() {
            Ok(value) => return value,
            Err(state) => give_up(tokio::time::Instant::now() >= deadline, limit, what, state),
        }
        tokio::time::sleep(ASYNC_INTERVAL).await;
    }
}

/// Polls `check` every 100 ms on this thread until it is done and returns its value; panics
/// after [`DEADLINE`] with `what`.
pub fn eventually_blocking<C: Check>(what: &str, check: impl FnMut() -> C) -> C::Value {
    eventually_blocking_within(what, DEADLINE, check)
}

/// [`eventually_blocking`] with a deadline of `limit` instead of [`DEADLINE`].
pub fn eventually_blocking_within<C: Check>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> C,
) -> C::Value {
    let deadline = Instant::now() + limit;
    loop {
        match check().done() {
            Ok(value) => return value,
            Err(state) => give_up(Instant::now() >= deadline, limit, what, state),
        }
        std::thread::sleep(BLOCKING_INTERVAL);
    }
}

/// Panics if the deadline has `passed`, naming `what` and the last `state`.
fn give_up(passed: bool, limit: Duration, what: &str, state: Option<String>) {
    if !passed {
        return;
    }
    match state {
        Some(state) => panic!("timed out after {limit:?} waiting until {what}; last: {state}"),
        None => panic!("timed out after {limit:?} waiting until {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_should_return_the_value_once_the_check_is_done() {
        let mut polls = 0;
        let value = eventually("three polls", || {
            polls += 1;
            let n = polls;
            async move { (n >= 3).then_some(n) }
        })
        .await;
        assert_eq!(value, 3);
    }

    #[test]
    #[should_panic(expected = "waiting until never; last: still no")]
    fn eventually_blocking_should_name_what_and_the_last_state_when_it_gives_up() {
        eventually_blocking_within("never", Duration::from_millis(10), || {
            Err::<(), _>("still no".to_owned())
        });
    }
}
