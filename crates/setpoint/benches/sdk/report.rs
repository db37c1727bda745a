//! The results: one row per measured variant, with the median over the runs and its spread,
//! printed as a markdown table (the format of `docs/benchmarks.md`).

use std::fmt::Write as _;

/// Whether a figure meets its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The median meets the target.
    Met,
    /// The median misses the target.
    Missed,
}

impl Verdict {
    /// `Met` if `ok`, else `Missed`.
    pub(crate) fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Met
        } else {
            Verdict::Missed
        }
    }

    /// As the results tables show it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
        }
    }
}

/// One benchmark's results: a title saying what was measured and a markdown table.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    /// What was measured, on what.
    pub(crate) title: String,
    /// Column names.
    pub(crate) header: Vec<&'static str>,
    /// One row per variant, a cell per column.
    pub(crate) rows: Vec<Vec<String>>,
}

impl Table {
    /// The table as markdown, under its title.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}\n", self.title);
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out
    }
}

/// The median, lowest and highest of some runs' figures.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) runs: usize,
}

impl Spread {
    /// The spread of `values` (at least one).
    pub(crate) fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Spread {
            median,
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
            runs: n,
        }
    }

    /// `median (min–max)` with `unit` formatting each number; just the median for one run,
    /// or when all runs gave the same figure.
    pub(crate) fn show(&self, unit: impl Fn(f64) -> String) -> String {
        let (median, min, max) = (unit(self.median), unit(self.min), unit(self.max));
        if self.runs <= 1 || min == max {
            median
        } else {
            format!("{median} ({min}–{max})")
        }
    }
}

/// `12,345`.
pub(crate) fn int(n: f64) -> String {
    let n = n.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// `1,234 B`.
pub(crate) fn bytes(n: f64) -> String {
    format!("{} B", int(n))
}

/// `12.3 MiB`.
pub(crate) fn mib(n: f64) -> String {
    format!("{:.1} MiB", n / f64::from(1u32 << 20))
}

/// `1.23 s` or `456 ms`.
pub(crate) fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}

/// `850 ns` or `42.1 µs`.
pub(crate) fn nanos(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.1} µs", ns / 1000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

/// `12,345/s`.
pub(crate) fn rate(per_s: f64) -> String {
    format!("{}/s", int(per_s))
}
