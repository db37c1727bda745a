//! [`Clock`]: where the time-driven loops (CronJob, certificates) read the time. The real clock by default;
//! a manual clock that tests set and advance, so schedules run in milliseconds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

/// How often a loop on a manual clock looks at the time again, whatever it waits for: the
/// manual clock moves without waking anyone.
const MANUAL_POLL: Duration = Duration::from_millis(25);

/// The time source of the time-driven loops. Cloning shares the clock.
///
/// ```
/// use setpoint_runtime::Clock;
///
/// let clock = Clock::manual("2026-01-01T00:00:00Z".parse().expect("a time"));
/// clock.advance(std::time::Duration::from_secs(90));
/// assert_eq!(clock.now().to_rfc3339(), "2026-01-01T00:01:30+00:00");
/// ```
#[derive(Clone, Default)]
pub struct Clock {
    /// The manual time, if this is a manual clock.
    manual: Option<Arc<Mutex<DateTime<Utc>>>>,
}

impl Clock {
    /// The system clock.
    pub fn real() -> Clock {
        Clock::default()
    }

    /// A clock that stands at `start` until [`advance`](Self::advance)d or [`set`](Self::set).
    pub fn manual(start: DateTime<Utc>) -> Clock {
        Clock {
            manual: Some(Arc::new(Mutex::new(start))),
        }
    }

    /// The time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.manual.as_ref().map_or_else(Utc::now, |t| *t.lock())
    }

    /// Moves a manual clock forward by `by` (the real clock ignores it).
    pub fn advance(&self, by: Duration) {
        if let Some(t) = &self.manual {
            let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
            let mut t = t.lock();
            *t = t.checked_add_signed(by).unwrap_or(*t);
        }
    }

    /// Sets a manual clock to `to` (the real clock ignores it).
    pub fn set(&self, to: DateTime<Utc>) {
        if let Some(t) = &self.manual {
            *t.lock() = to;
        }
    }

    /// How long a loop should really wait for `wait` of this clock's time to pass: `wait` on the
    /// real clock, a short poll on a manual one.
    pub fn sleep_for(&self, wait: Duration) -> Duration {
        if self.manual.is_some() {
            wait.min(MANUAL_POLL)
        } else {
            wait
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            None => f.write_str("Clock::real"),
            Some(t) => write!(f, "Clock::manual({})", *t.lock()),
        }
    }
}
