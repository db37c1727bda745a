//! Cron schedules as CronJobs write them (the standard five fields, as Kubernetes' parser reads
//! them): `minute hour day-of-month month day-of-week`, each `*` (or `?`), a value, a range
//! `a-b`, any of those with a step `/n`, or a comma-separated list of them; month and weekday
//! names (`JAN`, `mon`); the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight` and `@hourly`. When both day fields are restricted a day matching
//! either runs; when either starts with `*` or `?`, a day must match both. A `TZ=` or
//! `CRON_TZ=` prefix is refused as the API server refuses it: the time zone goes in
//! `spec.timeZone`.
//!
//! [`Schedule::next_after`] walks local (wall-clock) time in the schedule's zone: a time that a
//! daylight-saving jump skips does not run, one that happens twice runs the first time.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike};

/// Why a schedule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScheduleError {
    /// The schedule names its time zone inline.
    #[error("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")]
    InlineTimeZone,
    /// Not five fields (nor a known descriptor).
    #[error("expected exactly 5 fields, found {0}: {1:?}")]
    FieldCount(usize, String),
    /// A field that is not a valid value, range, step or list.
    #[error("invalid {field} field {text:?}")]
    Field {
        /// Which field.
        field: &'static str,
        /// Its text.
        text: String,
    },
}

/// A parsed schedule: the allowed values of each field as bit sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Whether either day field starts with `*` or `?` (then a day must match both).
    day_star: bool,
}

/// One field's bounds and names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl Field {
    fn value(&self, text: &str) -> Option<u32> {
        if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
            return u32::try_from(i).ok().map(|i| i + self.min);
        }
        text.parse()
            .ok()
            .filter(|v| (self.min..=self.max).contains(v))
    }

    /// The bit set of `text`, and whether it starts with `*` or `?`.
    fn parse(&self, text: &str) -> Result<(u64, bool), ScheduleError> {
        let bad = || ScheduleError::Field {
            field: self.name,
            text: text.to_owned(),
        };
        let mut bits = 0u64;
        for part in text.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => (
                    r,
                    Some(s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(bad)?),
                ),
                None => (part, None),
            };
            let (lo, hi) = if range == "*" || range == "?" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (
                    self.value(a).ok_or_else(bad)?,
                    self.value(b).ok_or_else(bad)?,
                );
                if a > b {
                    return Err(bad());
                }
                (a, b)
            } else {
                let v = self.value(range).ok_or_else(bad)?;
                // `5/15` runs from 5 to the end, as Kubernetes' parser reads it.
                (v, if step.is_some() { self.max } else { v })
            };
            let step = step.unwrap_or(1);
            let mut v = lo;
            while v <= hi {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok((bits, text.starts_with('*') || text.starts_with('?')))
    }
}

impl Schedule {
    /// Parses `text`.
    pub(crate) fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let text = text.trim();
        if text.starts_with("TZ=") || text.starts_with("CRON_TZ=") {
            return Err(ScheduleError::InlineTimeZone);
        }
        let spec = match text.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            _ => text,
        };
        let fields: Vec<&str> = spec.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(ScheduleError::FieldCount(fields.len(), text.to_owned()));
        };
        let (days, day_any) = DAY.parse(day)?;
        let (weekdays, weekday_any) = WEEKDAY.parse(weekday)?;
        Ok(Schedule {
            minutes: MINUTE.parse(minute)?.0,
            hours: HOUR.parse(hour)?.0,
            days,
            months: MONTH.parse(month)?.0,
            weekdays,
            day_star: day_any || weekday_any,
        })
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.day_star {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first time strictly after `after` that the schedule runs, in `after`'s zone; `None`
    /// if there is none within five years (`0 0 30 2 *`).
    pub(crate) fn next_after<Tz: TimeZone>(&self, after: &DateTime<Tz>) -> Option<DateTime<Tz>> {
        let zone = after.timezone();
        let local = after.naive_local();
        let mut t: NaiveDateTime = local.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        let limit = local + Duration::days(5 * 366);
        while t <= limit {
            if self.months & (1 << t.month()) == 0 {
                let (y, m) = if t.month() == 12 {
                    (t.year() + 1, 1)
                } else {
                    (t.year(), t.month() + 1)
                };
                t = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t.with_minute(0)? + Duration::hours(1);
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t += Duration::minutes(1);
                continue;
            }
            if let Some(at) = zone.from_local_datetime(&t).earliest() {
                if at > *after {
                    return Some(at);
                }
            }
            t += Duration::minutes(1);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("valid")
            .with_timezone(&Utc)
    }

    fn next(schedule: &str, after: &str) -> String {
        let s = Schedule::parse(schedule).expect("parses");
        s.next_after(&at(after)).expect("a next time").to_rfc3339()
    }

    #[test]
    fn fields_should_take_values_ranges_steps_lists_and_names() {
        assert_eq!(
            next("*/15 * * * *", "2026-01-01T10:07:30Z"),
            "2026-01-01T10:15:00+00:00"
        );
        assert_eq!(
            next("5,10-12 3 * * *", "2026-01-01T03:10:00Z"),
            "2026-01-01T03:11:00+00:00"
        );
        assert_eq!(
            next("0 9 * * MON-FRI", "2026-01-02T09:00:00Z"),
            "2026-01-05T09:00:00+00:00"
        );
        assert_eq!(
            next("0 0 1 jan,jul *", "2026-01-01T00:00:00Z"),
            "2026-07-01T00:00:00+00:00"
        );
        assert_eq!(
            next("30/10 * * * *", "2026-01-01T10:45:00Z"),
            "2026-01-01T10:50:00+00:00"
        );
    }

    #[test]
    fn descriptors_should_expand_to_their_schedules() {
        assert_eq!(
            next("@hourly", "2026-01-01T10:07:00Z"),
            "2026-01-01T11:00:00+00:00"
        );
        assert_eq!(
            next("@daily", "2026-01-01T10:07:00Z"),
            "2026-01-02T00:00:00+00:00"
        );
        assert_eq!(
            next("@weekly", "2026-01-01T10:07:00Z"),
            "2026-01-04T00:00:00+00:00"
        );
        assert_eq!(
            next("@monthly", "2026-01-01T10:07:00Z"),
            "2026-02-01T00:00:00+00:00"
        );
        assert_eq!(
            next("@yearly", "2026-01-01T10:07:00Z"),
            "2027-01-01T00:00:00+00:00"
        );
    }

    #[test]
    fn restricted_day_fields_should_match_either_and_starred_both() {
        // The 13th, or any Friday.
        assert_eq!(
            next("0 0 13 * 5", "2026-02-01T00:00:00Z"),
            "2026-02-06T00:00:00+00:00"
        );
        // Fridays only: day-of-month is `*`.
        assert_eq!(
            next("0 0 * * 5", "2026-02-07T00:00:00Z"),
            "2026-02-13T00:00:00+00:00"
        );
    }

    #[test]
    fn bad_schedules_should_be_refused() {
        assert_eq!(
            Schedule::parse("TZ=UTC 0 * * * *"),
            Err(ScheduleError::InlineTimeZone)
        );
        assert_eq!(
            Schedule::parse("CRON_TZ=UTC 0 * * * *"),
            Err(ScheduleError::InlineTimeZone)
        );
        assert!(matches!(
            Schedule::parse("* * * *"),
            Err(ScheduleError::FieldCount(4, _))
        ));
        assert!(Schedule::parse("60 * * * *").is_err());
        assert!(Schedule::parse("* * * * 7").is_err());
        assert!(Schedule::parse("5-1 * * * *").is_err());
        assert!(Schedule::parse("*/0 * * * *").is_err());
        assert!(Schedule::parse("0 0 30 2 *")
            .expect("parses")
            .next_after(&at("2026-01-01T00:00:00Z"))
            .is_none());
    }

    #[test]
    fn time_zones_should_follow_wall_clock_time() {
        let s = Schedule::parse("30 2 * * *").expect("parses");
        let tz: chrono_tz::Tz = "Europe/Berlin".parse().expect("zone");
        // 2026-03-29: 02:00 → 03:00 in Berlin; 02:30 does not happen that day.
        let after = tz
            .with_ymd_and_hms(2026, 3, 28, 12, 0, 0)
            .single()
            .expect("time");
        let n = s.next_after(&after).expect("next");
        assert_eq!(n.to_rfc3339(), "2026-03-30T02:30:00+02:00");
        let utc = Schedule::parse("0 9 * * *").expect("parses");
        let ny: chrono_tz::Tz = "America/New_York".parse().expect("zone");
        let after = at("2026-06-01T00:00:00Z").with_timezone(&ny);
        assert_eq!(
            utc.next_after(&after)
                .expect("next")
                .with_timezone(&Utc)
                .to_rfc3339(),
            "2026-06-01T13:00:00+00:00"
        );
    }
}
