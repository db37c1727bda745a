//! `kubectl logs` options (the query of `pods/log` and of the agent's `containerLogs`).

use chrono::{DateTime, Utc};

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
    pub(crate) fn from_query(query: &str, now: DateTime<Utc>) -> Result<LogOptions, LogError> {
        let mut options = LogOptions::default();
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
                // A negative tail means "all", as kubectl's default -1 does.
                "tailLines" => options.tail_lines = u64::try_from(parse_int(&key, &value)?).ok(),
                "limitBytes" => {
                    let n = parse_int(&key, &value)?;
                    if n < 1 {
                        return Err(LogError::BadOption(
                            "limitBytes must be greater than zero".to_owned(),
                        ));
                    }
                    options.limit_bytes = Some(n as u64);
                }
                "sinceSeconds" => {
                    let n = parse_int(&key, &value)?;
                    if n < 1 {
                        return Err(LogError::BadOption(
                            "sinceSeconds must be greater than zero".to_owned(),
                        ));
                    }
                    options.since = Some(now - chrono::Duration::seconds(n));
                }
                "sinceTime" => {
                    let time = DateTime::parse_from_rfc3339(&value).map_err(|e| {
                        LogError::BadOption(format!(
                            "sinceTime {value:?} is not an RFC 3339 time: {e}"
                        ))
                    })?;
                    options.since = Some(time.with_timezone(&Utc));
                }
                _ => {}
            }
        }
        Ok(options)
    }
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

/// The decoded `key=value` pairs of a URL query.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` (as a space); invalid escapes stay as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
        let o = LogOptions::from_query("sinceSeconds=60&tailLines=-1", now).expect("valid");
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
            "limitBytes=0",
            "sinceSeconds=0",
            "sinceTime=yesterday",
        ] {
            assert!(
                matches!(LogOptions::from_query(q, now), Err(LogError::BadOption(_))),
                "{q}"
            );
        }
    }

    #[test]
    fn percent_decode_should_decode_escapes_and_keep_broken_ones() {
        assert_eq!(percent_decode("a%3Ab+c"), "a:b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
