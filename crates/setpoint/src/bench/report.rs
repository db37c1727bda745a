//! Benchmark results as a table: aligned plain text for the terminal and GitHub markdown for
//! `docs/benchmarks.md`, both from the same rows, plus the number formats they use.

use std::fmt::Write as _;
use std::time::Duration;

use super::latency::Summary;
use super::machine::Machine;

/// Whether a result meets its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The row has no target.
    NoTarget,
    /// The target is met.
    Met,
    /// The target is missed.
    Missed,
}

impl Verdict {
    /// `Met` when `ok`, else `Missed`.
    pub(crate) fn of(ok: bool) -> Self {
        if ok {
            Verdict::Met
        } else {
            Verdict::Missed
        }
    }

    fn label(self) -> &'static str {
        match self {
            Verdict::NoTarget => "",
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
        }
    }
}

/// One line of results.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// What was measured, e.g. `create, 64 writers`.
    pub(crate) name: String,
    /// The headline result, e.g. `31,234 writes/s (20,000 in 0.64 s)`.
    pub(crate) result: String,
    /// Latency percentiles, when the row has them.
    pub(crate) latency: Option<Summary>,
    /// What the result should be, e.g. `≥ 30,000/s, p99 ≤ 5 ms` (empty: no target).
    pub(crate) target: String,
    /// Whether it is.
    pub(crate) verdict: Verdict,
}

impl Row {
    /// A row without latencies or target.
    pub(crate) fn new(name: impl Into<String>, result: impl Into<String>) -> Self {
        Row {
            name: name.into(),
            result: result.into(),
            latency: None,
            target: String::new(),
            verdict: Verdict::NoTarget,
        }
    }

    /// Adds latency percentiles.
    #[must_use]
    pub(crate) fn latency(mut self, summary: Summary) -> Self {
        self.latency = Some(summary);
        self
    }

    /// Adds a target and whether it is met.
    #[must_use]
    pub(crate) fn target(mut self, target: impl Into<String>, met: bool) -> Self {
        self.target = target.into();
        self.verdict = Verdict::of(met);
        self
    }

    /// The row's cells, in column order.
    fn cells(&self) -> [String; 7] {
        let latency = |pick: fn(&Summary) -> Duration| {
            self.latency
                .as_ref()
                .map(|s| millis(pick(s)))
                .unwrap_or_default()
        };
        [
            self.name.clone(),
            self.result.clone(),
            latency(|s| s.p50),
            latency(|s| s.p99),
            latency(|s| s.max),
            self.target.clone(),
            self.verdict.label().to_owned(),
        ]
    }
}

/// Column headers, matching [`Row::cells`].
const HEADERS: [&str; 7] = ["benchmark", "result", "p50", "p99", "max", "target", ""];

/// A titled table of results, with the machine they were measured on.
pub(crate) struct Report {
    /// What the table is, e.g. `setpoint bench store (quick)`.
    pub(crate) title: String,
    /// Where it ran.
    pub(crate) machine: Machine,
    /// The results, in the order measured.
    pub(crate) rows: Vec<Row>,
}

impl Report {
    /// The table as aligned plain text.
    pub(crate) fn to_text(&self) -> String {
        let rows: Vec<[String; 7]> = self.rows.iter().map(Row::cells).collect();
        let mut widths = HEADERS.map(|h| h.chars().count());
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(widths)
                .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
                .collect();
            padded.join("  ").trim_end().to_owned()
        };
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        for (label, value) in self.machine.facts() {
            let _ = writeln!(out, "  {label}: {value}");
        }
        out.push('\n');
        let _ = writeln!(out, "{}", line(&HEADERS.map(str::to_owned)));
        let _ = writeln!(out, "{}", line(&widths.map(|w| "-".repeat(w))));
        for row in &rows {
            let _ = writeln!(out, "{}", line(row));
        }
        out
    }

    /// The table as GitHub markdown, with the machine as a list above it.
    pub(crate) fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "### {}\n", self.title);
        for (label, value) in self.machine.facts() {
            let _ = writeln!(out, "- {label}: {value}");
        }
        out.push('\n');
        let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len()));
        for row in &self.rows {
            let cells = row.cells().map(|c| c.replace('|', "\\|"));
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }
}

/// A duration in milliseconds with a precision that suits its size: `0.042 ms`, `4.21 ms`,
/// `421 ms`.
pub(crate) fn millis(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else if ms < 100.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// A count with thousands separators: `1,234,567`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A rate per second with thousands separators, rounded to a whole number.
pub(crate) fn rate(events: u64, elapsed: Duration) -> String {
    count(per_second(events, elapsed))
}

/// Events per second, rounded (0 for an empty interval).
pub(crate) fn per_second(events: u64, elapsed: Duration) -> u64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        (events as f64 / secs).round() as u64
    } else {
        0
    }
}

/// A byte size in MiB: `12.3 MiB`.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_should_group_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }

    #[test]
    fn millis_should_scale_precision_with_size() {
        assert_eq!(millis(Duration::from_micros(42)), "0.042 ms");
        assert_eq!(millis(Duration::from_micros(4_210)), "4.21 ms");
        assert_eq!(millis(Duration::from_millis(421)), "421 ms");
    }

    #[test]
    fn markdown_should_have_one_cell_per_header_in_every_row() {
        let report = Report {
            title: "t".into(),
            machine: Machine::describe(std::path::Path::new("/")),
            rows: vec![
                Row::new("a | b", "1/s").target("≥ 1/s", true),
                Row::new("c", "2/s").latency(Summary {
                    count: 1,
                    p50: Duration::from_millis(1),
                    p99: Duration::from_millis(2),
                    max: Duration::from_millis(3),
                }),
            ],
        };
        let markdown = report.to_markdown();
        let table: Vec<&str> = markdown.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 4, "{markdown}");
        for line in table {
            let unescaped_pipes = line
                .char_indices()
                .filter(|&(i, c)| c == '|' && !line[..i].ends_with('\\'))
                .count();
            assert_eq!(unescaped_pipes, HEADERS.len() + 1, "{line}");
        }
        let text = report.to_text();
        assert!(
            text.contains("2.00 ms") && !text.contains("MISSED") && text.contains("met"),
            "{text}"
        );
    }
}
