//! Sets of completion indexes and their wire form, the interval string of
//! `status.completedIndexes`, `status.failedIndexes` and `successPolicy.rules[].succeededIndexes`:
//! ascending, comma-separated, each run of two or more consecutive
//! indexes written `first-last` (`"1,3-5,7"`).
//!
//! Parsing is lenient as kube-controller-manager's is: malformed parts and indexes outside
//! `0..completions` are dropped, so a hand-edited status never stops the loop.

use std::collections::BTreeSet;

/// A set of completion indexes.
pub(crate) type Indexes = BTreeSet<i32>;

/// The indexes `text` names below `limit` (`None`: any non-negative index).
pub(crate) fn parse(text: Option<&str>, limit: Option<i32>) -> Indexes {
    let mut set = Indexes::new();
    let in_range = |i: i32| i >= 0 && limit.is_none_or(|l| i < l);
    for part in text.unwrap_or_default().split(',').map(str::trim) {
        if part.is_empty() {
            continue;
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (Ok(a), Ok(b)) = (a.trim().parse::<i32>(), b.trim().parse::<i32>()) else {
                    continue;
                };
                let b = limit.map_or(b, |l| b.min(l.saturating_sub(1)));
                for i in a.max(0)..=b {
                    set.insert(i);
                }
            }
            None => {
                if let Ok(i) = part.parse::<i32>() {
                    if in_range(i) {
                        set.insert(i);
                    }
                }
            }
        }
    }
    set
}

/// The interval string of `set`; `None` for an empty set (the field is left out).
pub(crate) fn format(set: &Indexes) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(i32, i32)> = None;
    let flush = |run: (i32, i32), parts: &mut Vec<String>| {
        if run.0 == run.1 {
            parts.push(run.0.to_string());
        } else {
            parts.push(format!("{}-{}", run.0, run.1));
        }
    };
    for &i in set {
        run = match run {
            Some((first, last)) if last.checked_add(1) == Some(i) => Some((first, i)),
            Some(done) => {
                flush(done, &mut parts);
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some(done) = run {
        flush(done, &mut parts);
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_should_write_runs_as_intervals() {
        let set: Indexes = [0, 1, 2, 4, 6, 7].into();
        assert_eq!(format(&set).as_deref(), Some("0-2,4,6-7"));
        assert_eq!(format(&Indexes::new()), None);
    }

    #[test]
    fn parse_should_read_intervals_and_drop_what_is_out_of_range() {
        assert_eq!(parse(Some("0-2,4,6-7"), Some(7)), [0, 1, 2, 4, 6].into());
        assert_eq!(parse(Some("x,3,-1,2-1"), None), [3].into());
        assert_eq!(parse(None, Some(3)), Indexes::new());
        let set = parse(Some("1,3-5"), None);
        assert_eq!(format(&set).as_deref(), Some("1,3-5"));
    }
}
