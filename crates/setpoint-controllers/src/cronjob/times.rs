//! The schedule arithmetic of one CronJob sync: its time zone, the most recent start time it
//! missed (and how many it missed), and the names and annotation its Jobs get.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use chrono_tz::Tz;

use super::schedule::Schedule;

/// Annotation on each Job: the time it was scheduled for, RFC 3339 in the CronJob's zone.
pub(crate) const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// More missed start times than this get a `TooManyMissedTimes` warning.
pub(crate) const MISSED_LIMIT: usize = 100;

/// Missed start times counted one by one before the count stops being exact.
const COUNT_LIMIT: usize = 100_000;

/// The zone named by `spec.timeZone` (UTC, as the controller's own zone, when absent).
pub(crate) fn zone(name: Option<&str>) -> Result<Tz, String> {
    match name {
        None => Ok(Tz::UTC),
        Some(n) => n.parse::<Tz>().map_err(|e| e.to_string()),
    }
}

/// What [`most_recent`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missed {
    /// The latest start time in `(earliest, now]`, if any.
    pub(crate) last: Option<DateTime<Utc>>,
    /// How many start times fell in `(earliest, now]` (at most [`COUNT_LIMIT`]).
    pub(crate) count: usize,
}

/// The start times of `schedule` in `zone` after `earliest` up to `now`.
pub(crate) fn most_recent(
    schedule: &Schedule,
    zone: Tz,
    earliest: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Missed {
    let mut t = earliest.with_timezone(&zone);
    let mut last = None;
    let mut count = 0;
    while count < COUNT_LIMIT {
        match schedule.next_after(&t) {
            Some(next) if next.with_timezone(&Utc) <= now => {
                last = Some(next.with_timezone(&Utc));
                count += 1;
                t = next;
            }
            _ => return Missed { last, count },
        }
    }
    // Too many to count: find the latest one by looking back from now in growing windows.
    let mut window = Duration::hours(1);
    loop {
        let from = (now - window).max(earliest);
        let mut t = from.with_timezone(&zone);
        let mut found = None;
        while let Some(next) = schedule
            .next_after(&t)
            .filter(|n| n.with_timezone(&Utc) <= now)
        {
            found = Some(next.with_timezone(&Utc));
            t = next;
        }
        if found.is_some() || from == earliest {
            return Missed {
                last: found.or(last),
                count,
            };
        }
        window = window * 2;
    }
}

/// The next start time of `schedule` in `zone` after `now`.
pub(crate) fn next_after(
    schedule: &Schedule,
    zone: Tz,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule
        .next_after(&now.with_timezone(&zone))
        .map(|t| t.with_timezone(&Utc))
}

/// The name of the Job for the start at `scheduled`: `<cronjob>-<minutes since the epoch>`.
pub(crate) fn job_name(cronjob: &str, scheduled: DateTime<Utc>) -> String {
    format!("{cronjob}-{}", scheduled.timestamp().div_euclid(60))
}

/// The value of [`SCHEDULED_TIMESTAMP`] for a start at `scheduled` in `zone`.
pub(crate) fn scheduled_timestamp(scheduled: DateTime<Utc>, zone: Tz) -> String {
    scheduled
        .with_timezone(&zone)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("valid")
            .with_timezone(&Utc)
    }

    #[test]
    fn most_recent_should_count_the_missed_times_and_return_the_last() {
        let every_minute = Schedule::parse("* * * * *").expect("parses");
        let m = most_recent(
            &every_minute,
            Tz::UTC,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:03:30Z"),
        );
        assert_eq!(
            m,
            Missed {
                last: Some(at("2026-01-01T00:03:00Z")),
                count: 3
            }
        );
        let none = most_recent(
            &every_minute,
            Tz::UTC,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:59Z"),
        );
        assert_eq!(none.last, None);
        let many = most_recent(
            &every_minute,
            Tz::UTC,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T05:00:00Z"),
        );
        assert_eq!(
            (many.last, many.count),
            (Some(at("2026-01-01T05:00:00Z")), 300)
        );
        assert!(many.count > MISSED_LIMIT);
    }

    #[test]
    fn names_and_annotations_should_follow_kubernetes() {
        let t = at("2026-01-01T00:03:00Z");
        assert_eq!(
            job_name("hello", t),
            format!("hello-{}", 1_767_225_780 / 60)
        );
        let berlin = zone(Some("Europe/Berlin")).expect("zone");
        assert_eq!(scheduled_timestamp(t, berlin), "2026-01-01T01:03:00+01:00");
        assert_eq!(scheduled_timestamp(t, Tz::UTC), "2026-01-01T00:03:00Z");
        assert!(zone(Some("Mars/Olympus")).is_err());
    }
}
