//! Certificate time arithmetic: Go duration strings (`2160h`, `1h30m`, `90s`) as cert-manager
//! writes them, the lifetime a Certificate asks for, and when an issued certificate is renewed
//! — cert-manager's rule: `renewBefore` when it is positive and shorter than the lifetime,
//! else `renewBeforePercentage` of the lifetime when it is in (0, 100), else a third of the
//! lifetime; the renewal time is `notAfter` minus that, truncated to the second.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::certificate::CertificateSpec;

/// The lifetime of a Certificate that names none: 90 days.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(2160 * 3600);

/// A duration string that is not a Go duration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a duration such as \"2160h\" or \"1h30m\"")]
pub struct BadDuration(pub String);

/// Parses a Go duration (`[0-9.]+(ns|us|µs|ms|s|m|h)` repeated; a sign is refused).
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    let bad = || BadDuration(text.to_owned());
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0_f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// The lifetime `spec` asks for (default [`DEFAULT_DURATION`]).
pub(crate) fn requested_duration(spec: &CertificateSpec) -> Result<Duration, BadDuration> {
    spec.duration
        .as_deref()
        .map_or(Ok(DEFAULT_DURATION), parse_duration)
}

/// When a certificate valid from `not_before` to `not_after` is renewed under `spec`.
pub(crate) fn renewal_time(
    spec: &CertificateSpec,
    not_before: DateTime<Utc>,
    not_after: DateTime<Utc>,
) -> Result<DateTime<Utc>, BadDuration> {
    let lifetime = (not_after - not_before).to_std().unwrap_or_default();
    let renew_before = spec
        .renew_before
        .as_deref()
        .map(parse_duration)
        .transpose()?;
    let before = match (renew_before, spec.renew_before_percentage) {
        (Some(before), _) if !before.is_zero() && before < lifetime => before,
        (_, Some(pct)) if pct > 0 && pct < 100 => lifetime.mul_f64(f64::from(pct) / 100.0),
        _ => lifetime / 3,
    };
    let at = not_after - chrono::Duration::from_std(before).unwrap_or_default();
    Ok(DateTime::from_timestamp(at.timestamp(), 0).unwrap_or(at))
}

/// `at` as the API's `Time` (whole seconds).
pub(crate) fn api_time(at: DateTime<Utc>) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(at.timestamp()).unwrap_or_default(),
    )
}

/// `at` as RFC 3339 text, whole seconds, `Z`.
pub(crate) fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    #[test]
    fn go_durations_parse_like_go() {
        assert_eq!(parse_duration("2160h").unwrap(), DEFAULT_DURATION);
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "h", "10", "10d", "-1h", "1h-", "abc"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn renewal_defaults_to_two_thirds_of_the_lifetime() {
        let spec = CertificateSpec::default();
        assert_eq!(renewal_time(&spec, at(0), at(90)).unwrap(), at(60));
    }

    #[test]
    fn renewal_honours_renew_before_shorter_than_the_lifetime() {
        let spec = CertificateSpec {
            renew_before: Some("10s".into()),
            ..CertificateSpec::default()
        };
        assert_eq!(renewal_time(&spec, at(0), at(90)).unwrap(), at(80));
        // Not shorter than the lifetime: the default third.
        let spec = CertificateSpec {
            renew_before: Some("90s".into()),
            ..CertificateSpec::default()
        };
        assert_eq!(renewal_time(&spec, at(0), at(90)).unwrap(), at(60));
    }

    #[test]
    fn renewal_honours_a_percentage_in_range_and_truncates_to_seconds() {
        let spec = CertificateSpec {
            renew_before_percentage: Some(25),
            ..CertificateSpec::default()
        };
        assert_eq!(renewal_time(&spec, at(0), at(100)).unwrap(), at(75));
        let spec = CertificateSpec {
            renew_before_percentage: Some(100),
            ..CertificateSpec::default()
        };
        assert_eq!(renewal_time(&spec, at(0), at(90)).unwrap(), at(60));
        // A third of 100 s is 33.3 s: 66.7 s truncates to 66 s.
        let spec = CertificateSpec::default();
        assert_eq!(renewal_time(&spec, at(0), at(100)).unwrap(), at(66));
    }
}
