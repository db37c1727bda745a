//! Go duration strings (`300ms`, `30s`, `5m`, `1h30m`, `1.5h`), as Flux's `interval`,
//! `timeout` and `retryInterval` are written.

use std::time::Duration;

/// A duration that is not a Go duration string.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {0:?}: want a Go duration such as 30s, 5m or 1h30m")]
pub struct DurationError(pub String);

/// Parses a Go duration string (units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; no sign: a
/// negative interval means nothing here).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(text.to_owned());
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| err())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_should_parse() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        for bad in ["", "5", "m", "5 m", "-5s", "5d", "1h30"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
