//! `kubectl logs` options (the query of `pods/log` and of the agent's `containerLogs`).

use chrono::{DateTime, Utc};
use setpoint_core::query_pairs;

use super::read::LogError;

/// Which run to read and how, as `PodLogOptions` says it. A missing option is the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogOptions {
    /// Keep streaming new output until the run ends.
    pub(crate) follow: bool,
    /// Which run.
    pub(crate) run: RunChoice,
    /// Only the last this many lines (before `since`).
    pub(crate) tail_lines: Option<u64>,
    /// Only lines stamped at or after this time (`sinceTime`, or now − `sinceSeconds`).
    pub(crate) since: Option<DateTime<Utc>>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub(crate) timestamps: Timestamps,
    /// Stop after this many bytes (possibly mid-line).
    pub(crate) limit_bytes: Option<u64>,
}

/// Which run of the container to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum RunChoice {
    /// The newest run.
    #[default]
    Current,
    /// The run before it (`previous=true`).
    Previous,
}

/// Whether output lines carry their timestamps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Timestamps {
    /// The text only.
    #[default]
    Hide,
    /// `<RFC3339Nano> <text>`.
    Show,
}

impl LogOptions {
    /// Parses a URL query (`follow=true&tailLines=10&…`); unknown parameters (`podUID`,
    /// `container`, `pretty`, …) are ignored. `now` resolves `sinceSeconds`.
    ///
    /// Values are checked as kube-apiserver's `PodLogOptions` validation checks them (a value
    /// that is not a number is [`LogError::BadOption`], a number out of range or `sinceSeconds`
    /// with `sinceTime` is [`LogError::InvalidOption`]); any `i64` is handled without
    /// overflow: a `sinceSeconds` reaching before the earliest representable time means the
    /// whole log.
    pub(crate) fn from_query(query: &str, now: DateTime<Utc>) -> Result<LogOptions, LogError> {
        let mut options = LogOptions::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for (key, value) in query_pairs(query) {
            match key.as_str() {
                "follow" => options.follow = parse_bool(&key, &value)?,
                "previous" => {
                    options.run = match parse_bool(&key, &value)? {
                        true => RunChoice::Previous,
                        false => RunChoice::Current,
                    };
                }
                "timestamps" => {
                    options.timestamps = match parse_bool(&key, &value)? {
                        true => Timestamps::Show,
                        false => Timestamps::Hide,
                    };
                }
                "tailLines" => {
                    let n = parse_int(&key, &value)?;
                    let n = u64::try_from(n)
                        .map_err(|_| invalid(&key, n, "must be greater than or equal to 0"))?;
                    options.tail_lines = Some(n);
                }
                "limitBytes" => {
                    let n = parse_int(&key, &value)?;
                    let n = u64::try_from(n)
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| invalid(&key, n, "must be greater than 0"))?;
                    options.limit_bytes = Some(n);
                }
                "sinceSeconds" => {
                    let n = parse_int(&key, &value)?;
                    if n < 1 {
                        return Err(invalid(&key, n, "must be greater than 0"));
                    }
                    since_seconds = Some(n);
                }
                "sinceTime" => {
                    let time = DateTime::parse_from_rfc3339(&value).map_err(|e| {
                        LogError::BadOption(format!(
                            "sinceTime {value:?} is not an RFC 3339 time: {e}"
                        ))
                    })?;
                    since_time = Some(time.with_timezone(&Utc));
                }
                _ => {}
            }
        }
        options.since = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(LogError::InvalidOption(
                    "at most one of `sinceTime` or `sinceSeconds` may be specified".to_owned(),
                ))
            }
            (Some(seconds), None) => {
                chrono::TimeDelta::try_seconds(seconds).and_then(|ago| now.checked_sub_signed(ago))
            }
            (None, time) => time,
        };
        Ok(options)
    }
}

/// `key: Invalid value: n: why`, as kube-apiserver words a field error.
fn invalid(key: &str, n: i64, why: &str) -> LogError {
    LogError::InvalidOption(format!("{key}: Invalid value: {n}: {why}"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, LogError> {
    match value {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(LogError::BadOption(format!(
            "{key}: {value:?} is not a boolean"
        ))),
    }
}

fn parse_int(key: &str, value: &str) -> Result<i64, LogError> {
    value
        .parse()
        .map_err(|_| LogError::BadOption(format!("{key}: {value:?} is not an integer")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_query_should_read_every_option() {
        let now = Utc::now();
        let o = LogOptions::from_query(
            "podUID=x&follow=true&previous=true&tailLines=5&timestamps=true&limitBytes=100&sinceTime=2026-01-02T03%3A04%3A05Z",
            now,
        )
        .expect("valid");
        assert!(o.follow);
        assert_eq!(o.run, RunChoice::Previous);
        assert_eq!(o.tail_lines, Some(5));
        assert_eq!(o.timestamps, Timestamps::Show);
        assert_eq!(o.limit_bytes, Some(100));
        assert_eq!(
            o.since.map(|t| t.to_rfc3339()),
            Some("2026-01-02T03:04:05+00:00".to_owned())
        );
        let o = LogOptions::from_query("sinceSeconds=60", now).expect("valid");
        assert_eq!(o.since, Some(now - chrono::Duration::seconds(60)));
        assert_eq!(o.tail_lines, None);
        assert_eq!(
            LogOptions::from_query("", now).expect("valid"),
            LogOptions::default()
        );
    }

    #[test]
    fn from_query_should_refuse_bad_values() {
        let now = Utc::now();
        for q in [
            "follow=maybe",
            "tailLines=x",
            "tailLines=9223372036854775808",
            "sinceTime=yesterday",
        ] {
            assert!(
                matches!(LogOptions::from_query(q, now), Err(LogError::BadOption(_))),
                "{q}"
            );
        }
        for q in [
            "limitBytes=0",
            "limitBytes=-9223372036854775808",
            "sinceSeconds=0",
            "sinceSeconds=-9223372036854775808",
            "tailLines=-1",
            "sinceSeconds=10&sinceTime=2026-01-02T03%3A04%3A05Z",
        ] {
            assert!(
                matches!(
                    LogOptions::from_query(q, now),
                    Err(LogError::InvalidOption(_))
                ),
                "{q}"
            );
        }
    }

    #[test]
    fn from_query_should_take_every_option_at_its_maximum_without_panicking() {
        // Regression (issue 14.4): sinceSeconds=9223372036854775807 panicked the agent's
        // handler (a chrono duration out of bounds).
        let now = Utc::now();
        let o = LogOptions::from_query(
            "sinceSeconds=9223372036854775807&tailLines=9223372036854775807&limitBytes=9223372036854775807",
            now,
        )
        .expect("valid");
        assert_eq!(o.since, None, "before the earliest time: the whole log");
        assert_eq!(o.tail_lines, Some(i64::MAX as u64));
        assert_eq!(o.limit_bytes, Some(i64::MAX as u64));
        let o =
            LogOptions::from_query("tailLines=0&limitBytes=1&sinceSeconds=1", now).expect("valid");
        assert_eq!(o.tail_lines, Some(0));
        assert_eq!(o.limit_bytes, Some(1));
        assert_eq!(o.since, Some(now - chrono::Duration::seconds(1)));
    }
}
