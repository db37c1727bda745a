//! Cron schedules as CronJobs write them: five fields (minute, hour, day of month, month, day of
//! week) of `*`, `?`, numbers, names (`JAN`, `MON`), ranges, steps and lists, or a descriptor
//! (`@hourly`, `@every 1h30m`). Time zones belong in `spec.timeZone`, never in the schedule.

/// The descriptors a schedule may be.
const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Why `schedule` is not a valid cron schedule, if it is not.
pub(super) fn problem(schedule: &str) -> Option<String> {
    let schedule = schedule.trim();
    if schedule.contains("TZ") {
        return Some("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    if let Some(every) = schedule.strip_prefix("@every ") {
        return (!is_duration(every.trim()))
            .then(|| format!("failed to parse duration {every}"));
    }
    if schedule.starts_with('@') {
        return (!DESCRIPTORS.contains(&schedule))
            .then(|| format!("unrecognized descriptor: {schedule}"));
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let bounds: [(u32, u32, &[&str]); 5] = [
        (0, 59, &[]),
        (0, 23, &[]),
        (1, 31, &[]),
        (1, 12, MONTHS),
        (0, 6, DAYS),
    ];
    fields
        .iter()
        .zip(bounds)
        .find_map(|(field, (min, max, names))| field_problem(field, min, max, names))
}

/// Why one field is invalid, if it is.
fn field_problem(field: &str, min: u32, max: u32, names: &[&str]) -> Option<String> {
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        if let Some(step) = step {
            if !step.parse::<u32>().is_ok_and(|s| s > 0) {
                return Some(format!("failed to parse int from {step}"));
            }
        }
        if range == "*" || range == "?" {
            continue;
        }
        let (low, high) = match range.split_once('-') {
            Some((l, h)) => (l, Some(h)),
            None => (range, None),
        };
        let value = |text: &str| -> Option<u32> {
            text.parse::<u32>().ok().or_else(|| {
                names
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(text))
                    .and_then(|i| u32::try_from(i).ok())
                    .map(|i| i + min)
            })
        };
        let Some(low) = value(low) else {
            return Some(format!("failed to parse int from {low}"));
        };
        let high = match high {
            None => low,
            Some(h) => match value(h) {
                Some(h) => h,
                None => return Some(format!("failed to parse int from {h}")),
            },
        };
        if low < min {
            return Some(format!("beginning of range ({low}) below minimum ({min}): {part}"));
        }
        if high > max {
            return Some(format!("end of range ({high}) above maximum ({max}): {part}"));
        }
        if low > high {
            return Some(format!("beginning of range ({low}) beyond end of range ({high}): {part}"));
        }
    }
    None
}

/// Whether `text` is a Go duration (`1h30m`, `90s`, `1.5h`).
fn is_duration(text: &str) -> bool {
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len())
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_schedules_should_pass() {
        for s in ["*/1 * * * *", "0 0 1,15 * MON-FRI", "30 2 * JAN-MAR ?", "@hourly", "@every 1h30m", "5-10/2 * * * 0"] {
            assert_eq!(problem(s), None, "{s}");
        }
    }

    #[test]
    fn invalid_schedules_should_say_why() {
        for s in ["* * * *", "60 * * * *", "* * 0 * *", "@often", "@every soon", "CRON_TZ=UTC * * * * *", "5-1 * * * *", "*/0 * * * *"] {
            assert!(problem(s).is_some(), "{s}");
        }
    }
}
