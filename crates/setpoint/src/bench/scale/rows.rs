//! The table rows of one step, with issue 23's goals as targets: creates (and updates and
//! deletes) at the top step ≥ 80 % of the first step's rate; steady RSS ≤ 2× the stored bytes
//! plus the empty server's; the peak while writing ≤ 1.2× steady; restart → `/readyz` and →
//! first full list ≤ 5 s with no 5xx; a paged list ≤ 2× a whole one.

use std::time::Duration;

use super::step::{Measured, Timed};
use crate::bench::report::{count, mib, millis, per_second, rate, Row};

/// The least share of the first step's write rates the top step must keep, in percent.
const KEEP_PERCENT: u64 = 80;
/// Steady RSS may be this many times the stored bytes, plus the base.
const RSS_PER_STORED: f64 = 2.0;
/// The peak while writing may be this many times the steady RSS.
const PEAK_PER_STEADY: f64 = 1.2;
/// The longest a restart may take to be ready and to serve the first full list.
const RESTART_TARGET: Duration = Duration::from_secs(5);
/// A paged list may take this many times a whole one.
const PAGED_PER_FULL: f64 = 2.0;

/// The write rates of the first step, which the top step is held to.
#[derive(Clone, Copy, Debug)]
pub(super) struct FirstRates {
    /// Creates per second.
    pub(super) creates: u64,
    /// Updates per second.
    pub(super) updates: u64,
    /// Deletes per second.
    pub(super) deletes: u64,
}

impl FirstRates {
    /// The rates `step` measured.
    pub(super) fn of(step: &Measured) -> Self {
        let per = |t: &Timed| per_second(t.ops, t.elapsed);
        FirstRates {
            creates: per(&step.creates),
            updates: per(&step.updates),
            deletes: per(&step.deletes),
        }
    }
}

/// The rows of `step`; `first` is the first step's rates when `step` is the top one of
/// several (their targets apply then only); `base` the empty server's RSS.
pub(super) fn rows(step: &Measured, first: Option<FirstRates>, base: u64) -> Vec<Row> {
    let at = format!("{}:", count(step.size));
    let mut rows = Vec::new();
    let writes = [
        ("creates", &step.creates, first.map(|f| f.creates)),
        ("updates", &step.updates, first.map(|f| f.updates)),
        ("deletes", &step.deletes, first.map(|f| f.deletes)),
    ];
    for (what, timed, first) in writes {
        let mut row = Row::new(
            format!("{at} {what}"),
            format!(
                "{} {what}/s ({} in {:.2} s)",
                rate(timed.ops, timed.elapsed),
                count(timed.ops),
                timed.elapsed.as_secs_f64()
            ),
        )
        .latency(timed.latency);
        if let Some(first) = first {
            let now = per_second(timed.ops, timed.elapsed);
            row = row.target(
                format!("≥ {KEEP_PERCENT} % of the first step's {}/s", count(first)),
                now * 100 >= first * KEEP_PERCENT,
            );
        }
        rows.push(row);
    }

    let stored = step.stored_bytes;
    let steady_limit = (RSS_PER_STORED * stored as f64) as u64 + base;
    let peak = step.writing.peak;
    let peak_limit = (PEAK_PER_STEADY * step.steady_rss as f64) as u64;
    rows.push(Row::new(
        format!("{at} stored"),
        format!(
            "{} of JSON sent; store on disk {}",
            mib(stored),
            mib(step.disk_bytes)
        ),
    ));
    rows.push(
        Row::new(
            format!("{at} server RSS at rest after restart"),
            format!(
                "{} = {} bytes/object; {:.1}× stored",
                mib(step.steady_rss),
                count(step.steady_rss / step.size.max(1)),
                step.steady_rss as f64 / stored.max(1) as f64
            ),
        )
        .target(
            format!("≤ 2× stored + base = {}", mib(steady_limit)),
            step.steady_rss <= steady_limit,
        ),
    );
    let since = if step.peak_reset {
        "while writing"
    } else {
        "since start"
    };
    rows.push(
        Row::new(
            format!("{at} server peak RSS {since}"),
            format!(
                "{} (RSS after the writes {}); {:.2}× steady",
                mib(peak),
                mib(step.writing.rss),
                peak as f64 / step.steady_rss.max(1) as f64
            ),
        )
        .target(
            format!("≤ 1.2× steady = {}", mib(peak_limit)),
            peak <= peak_limit,
        ),
    );

    let (exit, killed) = step.exit;
    rows.push(
        Row::new(
            format!("{at} restart → /readyz ok"),
            format!(
                "{} (the old server {} in {})",
                millis(step.ready),
                if killed { "was killed" } else { "exited" },
                millis(exit)
            ),
        )
        .target("≤ 5 s", step.ready <= RESTART_TARGET),
    );
    let answers = &step.answers;
    let errors = answers.server_errors.len();
    rows.push(
        Row::new(
            format!("{at} restart → first full list"),
            format!(
                "{}; before it: {errors} × 5xx ({} after /readyz ok), {} × 429, {} short, {} other",
                millis(step.first_list),
                answers.server_errors_after(step.ready),
                answers.throttled,
                answers.short,
                answers.other
            ),
        )
        .target(
            "≤ 5 s, no 5xx",
            step.first_list <= RESTART_TARGET && errors == 0,
        ),
    );

    let (paged, pages) = step.paged_list;
    let ratio = paged.as_secs_f64() / step.full_list.as_secs_f64().max(f64::EPSILON);
    rows.push(
        Row::new(
            format!("{at} list, whole vs pages of 500"),
            format!(
                "whole {}, paged {} ({} pages): {ratio:.2}×",
                millis(step.full_list),
                millis(paged),
                count(pages)
            ),
        )
        .target("paged ≤ 2× whole", ratio <= PAGED_PER_FULL),
    );
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::latency::Summary;
    use crate::bench::report::Verdict;
    use crate::bench::scale::restart::Answers;
    use crate::bench::usage::Memory;

    fn timed(ops: u64, secs: u64) -> Timed {
        Timed {
            ops,
            elapsed: Duration::from_secs(secs),
            latency: Summary {
                count: ops,
                p50: Duration::from_millis(1),
                p99: Duration::from_millis(2),
                max: Duration::from_millis(3),
            },
        }
    }

    fn measured() -> Measured {
        Measured {
            size: 1_000,
            creates: timed(1_000, 1),
            updates: timed(100, 1),
            deletes: timed(100, 1),
            writing: Memory {
                rss: 10 << 20,
                peak: 12 << 20,
            },
            peak_reset: true,
            stored_bytes: 1 << 20,
            disk_bytes: 3 << 20,
            exit: (Duration::from_millis(50), false),
            ready: Duration::from_millis(900),
            first_list: Duration::from_secs(1),
            answers: Answers::default(),
            steady_rss: 11 << 20,
            full_list: Duration::from_millis(100),
            paged_list: (Duration::from_millis(150), 2),
        }
    }

    fn verdict(rows: &[Row], name_part: &str) -> Verdict {
        rows.iter()
            .find(|r| r.name.contains(name_part))
            .map(|r| r.verdict)
            .unwrap_or_else(|| panic!("no row {name_part}"))
    }

    #[test]
    fn rows_should_hold_the_step_to_the_issue_goals() {
        let base = 10 << 20;
        let rows = rows(&measured(), None, base);
        assert_eq!(verdict(&rows, "creates"), Verdict::NoTarget);
        assert_eq!(verdict(&rows, "at rest"), Verdict::Met);
        assert_eq!(verdict(&rows, "peak RSS while writing"), Verdict::Met);
        assert_eq!(verdict(&rows, "/readyz"), Verdict::Met);
        assert_eq!(verdict(&rows, "first full list"), Verdict::Met);
        assert_eq!(verdict(&rows, "pages of 500"), Verdict::Met);

        let mut bad = measured();
        bad.writing.peak = 20 << 20;
        bad.steady_rss = 13 << 20;
        bad.answers.server_errors.push(Duration::from_millis(950));
        bad.ready = Duration::from_secs(6);
        bad.paged_list.0 = Duration::from_millis(201);
        let rows = super::rows(&bad, None, 10 << 20);
        assert_eq!(verdict(&rows, "at rest"), Verdict::Missed);
        assert_eq!(verdict(&rows, "peak RSS"), Verdict::Missed);
        assert_eq!(verdict(&rows, "/readyz"), Verdict::Missed);
        assert_eq!(verdict(&rows, "first full list"), Verdict::Missed);
        assert_eq!(verdict(&rows, "pages of 500"), Verdict::Missed);
    }

    #[test]
    fn the_top_step_should_keep_eighty_percent_of_the_first_rates() {
        let first = FirstRates {
            creates: 1_250,
            updates: 100,
            deletes: 200,
        };
        let rows = rows(&measured(), Some(first), 0);
        assert_eq!(verdict(&rows, "creates"), Verdict::Met);
        assert_eq!(verdict(&rows, "updates"), Verdict::Met);
        assert_eq!(verdict(&rows, "deletes"), Verdict::Missed);
    }
}
