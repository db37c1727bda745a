//! How long one request may take: the server's request timeout, or less if the client asks for
//! less with the `timeout` query parameter (a Go duration such as `32s`, which kubectl sends
//! on its requests), as kube-apiserver's `WithRequestDeadline` decides it. A watch's own
//! `timeoutSeconds` is the watch handler's business: `timeout` is ignored on watches. A
//! malformed `timeout` is a 400.

use std::time::Duration;

use http::Uri;

use setpoint_core::ApiError;

/// What kube-apiserver says of a malformed `timeout`, before the parser's own words.
const INVALID_TIMEOUT: &str = "invalid timeout specified in the request URL";

/// The time `uri` may take on a server whose request timeout is `server`: the client's
/// `timeout` when it is positive and shorter, else `server`.
pub(crate) fn request_timeout(uri: &Uri, server: Duration) -> Result<Duration, ApiError> {
    let query = setpoint_core::parse_query(uri.query());
    let watch = uri.path().contains("/watch/")
        || query.get("watch").is_some_and(|w| w == "1" || w == "true");
    let Some(value) = query.get("timeout").filter(|v| !v.is_empty() && !watch) else {
        return Ok(server);
    };
    let asked = parse_go_duration(value)
        .map_err(|e| ApiError::bad_request(format!("{INVALID_TIMEOUT} - {e}")))?;
    Ok(match asked {
        Some(asked) if !asked.is_zero() && asked < server => asked,
        _ => server,
    })
}

/// Parses a Go duration (`1h2m3.5s`, `300ms`, `-1s`, `0`): `None` for a negative one, an
/// error worded as Go's `time.ParseDuration` words it.
fn parse_go_duration(s: &str) -> Result<Option<Duration>, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Some(Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let seconds_per_unit = match unit {
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(format!("time: unknown unit {other:?} in duration {s:?}")),
        };
        let part = Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| invalid())?;
        total = total.checked_add(part).ok_or_else(invalid)?;
    }
    // Go's durations end at about 292 years.
    if total > Duration::from_nanos(i64::MAX.unsigned_abs()) {
        return Err(invalid());
    }
    Ok((!negative || total.is_zero()).then_some(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: Duration = Duration::from_secs(60);

    fn timeout(uri: &str) -> Result<Duration, ApiError> {
        request_timeout(&uri.parse().unwrap(), SERVER)
    }

    #[test]
    fn go_durations_should_parse_as_go_parses_them() {
        let ok = |s: &str| parse_go_duration(s).unwrap();
        assert_eq!(ok("32s"), Some(Duration::from_secs(32)));
        assert_eq!(ok("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(ok("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
        assert_eq!(ok("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(ok("1.5us"), Some(Duration::from_nanos(1500)));
        assert_eq!(ok("0"), Some(Duration::ZERO));
        assert_eq!(ok("-1s"), None);
        assert_eq!(
            parse_go_duration("abc").unwrap_err(),
            r#"time: invalid duration "abc""#
        );
        assert_eq!(
            parse_go_duration("5").unwrap_err(),
            r#"time: missing unit in duration "5""#
        );
        assert_eq!(
            parse_go_duration("5x").unwrap_err(),
            r#"time: unknown unit "x" in duration "5x""#
        );
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("-").is_err());
        assert!(parse_go_duration("9999999999h").is_err());
    }

    #[test]
    fn a_shorter_timeout_should_win_and_a_longer_one_be_clamped() {
        assert_eq!(timeout("/api").unwrap(), SERVER);
        assert_eq!(
            timeout("/api?timeout=32s").unwrap(),
            Duration::from_secs(32)
        );
        assert_eq!(timeout("/api?timeout=5m").unwrap(), SERVER);
        assert_eq!(timeout("/api?timeout=0s").unwrap(), SERVER);
        assert_eq!(timeout("/api?timeout=-3s").unwrap(), SERVER);
        assert_eq!(timeout("/api?timeout=").unwrap(), SERVER);
    }

    #[test]
    fn watches_should_ignore_timeout() {
        assert_eq!(
            timeout("/api/v1/pods?watch=true&timeout=1s").unwrap(),
            SERVER
        );
        assert_eq!(
            timeout("/api/v1/watch/pods?timeout=garbage").unwrap(),
            SERVER
        );
    }

    #[test]
    fn a_malformed_timeout_should_be_a_400() {
        assert_eq!(
            timeout("/api?timeout=soon").unwrap_err(),
            ApiError::bad_request(
                r#"invalid timeout specified in the request URL - time: invalid duration "soon""#
            )
        );
    }
}
