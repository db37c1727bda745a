//! [`Encoder`]: collects samples from every metrics source during one scrape and renders them
//! in Prometheus' text exposition format, version 0.0.4.
//!
//! Promises about the output, whatever the sources do:
//! - each metric family appears once, as `# HELP`, `# TYPE` and then all its samples, even
//!   when several sources (say, two work queues) contribute to it; families come in the order
//!   they were first written, samples in the order they were written;
//! - names, label names and label values are valid and escaped: a sample with an invalid name
//!   or label name, a family written again with another type, or a series (family and label
//!   set) written twice is dropped, with a warning, instead of spoiling the whole scrape;
//! - histograms carry cumulative `_bucket{le=…}` samples ending in `le="+Inf"`, then `_sum`
//!   and `_count`, durations in seconds.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::Timing;

/// The suffixes a histogram's samples add to its family name.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// The text format's content type, for the `Content-Type` header of a scrape response.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What kind of metric a family is (its `# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family being collected.
#[derive(Debug)]
struct Family {
    /// The family name: valid, and the sample name of counters and gauges.
    name: String,
    /// Its help text as first written, unescaped.
    help: String,
    kind: Kind,
    /// Rendered sample lines, each ending in a newline. Never empty once the family exists.
    samples: String,
    /// The rendered label sets written so far (without `le`): one sample (or one histogram)
    /// per label set.
    series: HashSet<String>,
}

/// Collects metric samples for one scrape; handed to each source registered with
/// [`Metrics::add_source`](crate::Metrics::add_source).
///
/// Labels are `(name, value)` pairs, written in the order given. Label values may hold any
/// text (it is escaped); names must match `[a-zA-Z_][a-zA-Z0-9_]*` and metric names
/// `[a-zA-Z_:][a-zA-Z0-9_:]*`. See the module docs for what happens to invalid samples.
///
/// ```
/// use setpoint_runtime::Metrics;
///
/// let metrics = Metrics::new();
/// metrics.add_source(|encoder| {
///     encoder.gauge("app_build_info", "Build of the app.", &[("version", "1.2.3")], 1.0);
/// });
/// assert!(metrics.render().contains("app_build_info{version=\"1.2.3\"} 1\n"));
/// ```
#[derive(Debug)]
pub struct Encoder {
    /// In order of first appearance.
    families: Vec<Family>,
    /// Index into `families` by name.
    by_name: HashMap<String, usize>,
}

impl Encoder {
    /// An empty encoder.
    pub(crate) fn new() -> Self {
        Self {
            families: Vec::new(),
            by_name: HashMap::new(),
        }
    }

    /// Writes one sample of the counter `name` (which should end in `_total`).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        if let Some((family, labels)) = self.series(name, help, Kind::Counter, labels) {
            sample(&mut family.samples, name, "", &labels, None);
            let _ = writeln!(family.samples, "{value}");
        }
    }

    /// Writes one sample of the gauge `name`.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        if let Some((family, labels)) = self.series(name, help, Kind::Gauge, labels) {
            sample(&mut family.samples, name, "", &labels, None);
            write_float(&mut family.samples, value);
            family.samples.push('\n');
        }
    }

    /// Writes the histogram `name` (which should end in `_seconds`) for one label set: its
    /// buckets, sum and count, in seconds.
    pub fn histogram(&mut self, name: &str, help: &str, labels: &[(&str, &str)], timing: &Timing) {
        if labels.iter().any(|&(label, _)| label == "le") {
            tracing::warn!(
                metric = name,
                "metrics: dropped a histogram with an `le` label"
            );
            return;
        }
        let Some((family, labels)) = self.series(name, help, Kind::Histogram, labels) else {
            return;
        };
        let out = &mut family.samples;
        for (le, n) in timing.buckets_le().chain([("+Inf", timing.count)]) {
            sample(out, name, "_bucket", &labels, Some(le));
            let _ = writeln!(out, "{n}");
        }
        sample(out, name, "_sum", &labels, None);
        write_float(out, timing.sum.as_secs_f64());
        out.push('\n');
        sample(out, name, "_count", &labels, None);
        let _ = writeln!(out, "{}", timing.count);
    }

    /// Writes the histogram `name` for one label set from `(upper bound in seconds,
    /// observations at or below it)` pairs, the observation count and their sum in seconds:
    /// for histograms other components keep in their own buckets.
    pub fn histogram_buckets(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        cumulative: &[(f64, u64)],
        count: u64,
        sum_seconds: f64,
    ) {
        if labels.iter().any(|&(label, _)| label == "le") {
            tracing::warn!(
                metric = name,
                "metrics: dropped a histogram with an `le` label"
            );
            return;
        }
        let Some((family, labels)) = self.series(name, help, Kind::Histogram, labels) else {
            return;
        };
        let out = &mut family.samples;
        for &(bound, n) in cumulative {
            let mut le = String::new();
            write_float(&mut le, bound);
            sample(out, name, "_bucket", &labels, Some(&le));
            let _ = writeln!(out, "{n}");
        }
        sample(out, name, "_bucket", &labels, Some("+Inf"));
        let _ = writeln!(out, "{count}");
        sample(out, name, "_sum", &labels, None);
        write_float(out, sum_seconds);
        out.push('\n');
        sample(out, name, "_count", &labels, None);
        let _ = writeln!(out, "{count}");
    }

    /// The family a new series of `name` goes to, and the series' rendered labels; `None`
    /// (after a warning) if the sample must be dropped.
    fn series(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        labels: &[(&str, &str)],
    ) -> Option<(&mut Family, String)> {
        if !is_metric_name(name) {
            tracing::warn!(
                metric = name,
                "metrics: dropped a sample with an invalid name"
            );
            return None;
        }
        let Some(rendered) = render_labels(labels) else {
            tracing::warn!(
                metric = name,
                "metrics: dropped a sample with an invalid label name"
            );
            return None;
        };
        let index = match self.by_name.get(name) {
            Some(&i) => i,
            None => {
                if self.clashes(name, kind) {
                    tracing::warn!(
                        metric = name,
                        "metrics: dropped a sample whose name clashes with a histogram's"
                    );
                    return None;
                }
                self.families.push(Family {
                    name: name.to_owned(),
                    help: help.to_owned(),
                    kind,
                    samples: String::new(),
                    series: HashSet::new(),
                });
                self.by_name
                    .insert(name.to_owned(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let family = self.families.get_mut(index)?;
        if family.kind != kind {
            tracing::warn!(
                metric = name,
                written = kind.as_str(),
                declared = family.kind.as_str(),
                "metrics: dropped a sample of another type than its family"
            );
            return None;
        }
        if !family.series.insert(rendered.clone()) {
            tracing::warn!(
                metric = name,
                labels = rendered,
                "metrics: dropped a duplicate series (are two components registered under one name?)"
            );
            return None;
        }
        Some((family, rendered))
    }

    /// Whether a new family `name` of `kind` would write sample names another family writes:
    /// a histogram `x` writes `x_bucket`, `x_sum` and `x_count`.
    fn clashes(&self, name: &str, kind: Kind) -> bool {
        let is_histogram = |n: &str| {
            self.by_name
                .get(n)
                .and_then(|&i| self.families.get(i))
                .is_some_and(|f| f.kind == Kind::Histogram)
        };
        let shadowed = HISTOGRAM_SUFFIXES
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .any(is_histogram);
        let shadows = kind == Kind::Histogram
            && HISTOGRAM_SUFFIXES
                .iter()
                .any(|suffix| self.by_name.contains_key(&format!("{name}{suffix}")));
        shadowed || shadows
    }

    /// The exposition: every family with its help, type and samples.
    pub(crate) fn finish(self) -> String {
        let mut out = String::new();
        for family in self.families {
            out.push_str("# HELP ");
            out.push_str(&family.name);
            out.push(' ');
            escape_help(&mut out, &family.help);
            out.push_str("\n# TYPE ");
            out.push_str(&family.name);
            out.push(' ');
            out.push_str(family.kind.as_str());
            out.push('\n');
            out.push_str(&family.samples);
        }
        out
    }
}

/// Writes `name{suffix}{labels[,le="…"]} ` (a sample up to its value).
fn sample(out: &mut String, name: &str, suffix: &str, labels: &str, le: Option<&str>) {
    out.push_str(name);
    out.push_str(suffix);
    match (labels.is_empty(), le) {
        (true, None) => {}
        (true, Some(le)) => {
            let _ = write!(out, "{{le=\"{le}\"}}");
        }
        (false, None) => {
            let _ = write!(out, "{{{labels}}}");
        }
        (false, Some(le)) => {
            let _ = write!(out, "{{{labels},le=\"{le}\"}}");
        }
    }
    out.push(' ');
}

/// `a="x",b="y"` with values escaped, or `None` if a label name is invalid.
fn render_labels(labels: &[(&str, &str)]) -> Option<String> {
    let mut out = String::new();
    for (i, &(name, value)) in labels.iter().enumerate() {
        if !is_label_name(name) {
            return None;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    Some(out)
}

/// Help text escaped for a `# HELP` line: backslash and newline.
fn escape_help(out: &mut String, help: &str) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A float as Prometheus parses it: integers without a fraction, `NaN`, `+Inf`, `-Inf`,
/// otherwise the shortest text that reads back as the same value.
fn write_float(out: &mut String, value: f64) {
    /// Integers up to here are exact in an `f64`.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() <= EXACT {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value:?}");
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with the reserved `__`.
fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    !name.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn render(f: impl FnOnce(&mut Encoder)) -> String {
        let mut encoder = Encoder::new();
        f(&mut encoder);
        encoder.finish()
    }

    #[test]
    fn encoder_should_group_samples_by_family_under_one_help_and_type() {
        let text = render(|e| {
            e.counter("a_total", "As.", &[("name", "x")], 1);
            e.gauge("b", "B.", &[], 0.5);
            e.counter("a_total", "As.", &[("name", "y")], 2);
        });
        assert_eq!(
            text,
            "# HELP a_total As.\n# TYPE a_total counter\n\
             a_total{name=\"x\"} 1\na_total{name=\"y\"} 2\n\
             # HELP b B.\n# TYPE b gauge\nb 0.5\n"
        );
    }

    #[test]
    fn encoder_should_escape_label_values_and_help() {
        let text = render(|e| {
            e.gauge(
                "g",
                "Back\\slash and\nnewline \"kept\".",
                &[("path", "C:\\dir"), ("quote", "say \"hi\"\nbye")],
                1.0,
            );
        });
        assert_eq!(
            text,
            "# HELP g Back\\\\slash and\\nnewline \"kept\".\n# TYPE g gauge\n\
             g{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\\nbye\"} 1\n"
        );
    }

    #[test]
    fn encoder_should_render_histograms_with_cumulative_buckets_sum_and_count() {
        let mut timing = Timing::default();
        timing.record(Duration::from_micros(2)); // le 2.5e-06
        timing.record(Duration::from_millis(3)); // le 0.005
        timing.record(Duration::from_millis(5)); // le 0.005 (bounds are inclusive)
        timing.record(Duration::from_secs(2_000)); // +Inf only
        let text = render(|e| e.histogram("h_seconds", "H.", &[("c", "x")], &timing));
        let expected_buckets = [
            ("1e-06", 0),
            ("2.5e-06", 1),
            ("5e-06", 1),
            ("1e-05", 1),
            ("2.5e-05", 1),
            ("5e-05", 1),
            ("0.0001", 1),
            ("0.00025", 1),
            ("0.0005", 1),
            ("0.001", 1),
            ("0.0025", 1),
            ("0.005", 3),
            ("0.01", 3),
            ("0.025", 3),
            ("0.05", 3),
            ("0.1", 3),
            ("0.25", 3),
            ("0.5", 3),
            ("1", 3),
            ("2.5", 3),
            ("5", 3),
            ("10", 3),
            ("25", 3),
            ("50", 3),
            ("100", 3),
            ("250", 3),
            ("500", 3),
            ("1000", 3),
            ("+Inf", 4),
        ];
        let mut expected = String::from("# HELP h_seconds H.\n# TYPE h_seconds histogram\n");
        for (le, n) in expected_buckets {
            expected.push_str(&format!("h_seconds_bucket{{c=\"x\",le=\"{le}\"}} {n}\n"));
        }
        expected.push_str("h_seconds_sum{c=\"x\"} 2000.008002\nh_seconds_count{c=\"x\"} 4\n");
        assert_eq!(text, expected);
    }

    #[test]
    fn encoder_should_render_an_unlabelled_histogram_with_only_le() {
        let text = render(|e| e.histogram("h_seconds", "H.", &[], &Timing::default()));
        assert!(
            text.contains("\nh_seconds_bucket{le=\"1e-06\"} 0\n"),
            "{text}"
        );
        assert!(text
            .contains("\nh_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n"));
    }

    #[test]
    fn encoder_should_write_floats_as_prometheus_reads_them() {
        let cases = [
            (3.0, "3"),
            (-2.0, "-2"),
            (0.25, "0.25"),
            (1e-7, "1e-7"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (1e300, "1e300"),
        ];
        for (value, text) in cases {
            let mut out = String::new();
            write_float(&mut out, value);
            assert_eq!(out, text);
            if !value.is_nan() {
                let back: f64 = out.replace("Inf", "inf").parse().expect("a float");
                assert_eq!(back, value);
            }
        }
    }

    #[test]
    fn encoder_should_drop_invalid_names_labels_and_duplicate_series() {
        let text = render(|e| {
            e.gauge("ok", "Ok.", &[("a", "1")], 1.0);
            e.gauge("ok", "Ok.", &[("a", "1")], 2.0); // same series again
            e.counter("ok", "Ok.", &[("a", "2")], 3); // another type
            e.gauge("0bad", "Bad.", &[], 1.0); // name starts with a digit
            e.gauge("bad-name", "Bad.", &[], 1.0);
            e.gauge("bad_label", "Bad.", &[("x-y", "1")], 1.0);
            e.gauge("reserved_label", "Bad.", &[("__name__", "1")], 1.0);
            e.histogram("h", "H.", &[("le", "1")], &Timing::default());
        });
        assert_eq!(text, "# HELP ok Ok.\n# TYPE ok gauge\nok{a=\"1\"} 1\n");
    }

    #[test]
    fn encoder_should_drop_families_clashing_with_a_histograms_samples() {
        let text = render(|e| {
            e.histogram("h", "H.", &[], &Timing::default());
            e.counter("h_count", "Clash.", &[], 1);
            e.gauge("g_sum", "G.", &[], 1.0);
            e.histogram("g", "Clash.", &[], &Timing::default());
        });
        assert!(!text.contains("Clash."), "{text}");
        assert!(text.contains("# TYPE h histogram\n"));
        assert!(text.contains("# TYPE g_sum gauge\n"));
    }
}
