//! A small SVG line-chart writer: a grid of panels, each with its own title, y-axis and
//! series. Enough for the simulation's plots, with no plotting dependency. Output is a
//! self-contained SVG document as a `String`; the caller writes it where it wants.

use std::fmt::Write as _;

/// One line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// CSS colour.
    pub color: &'static str,
    /// Dashed stroke.
    pub dashed: bool,
    /// `(x, y)` points in data units, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// One chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Title above the chart.
    pub title: String,
    /// Y-axis label.
    pub y_label: String,
    /// Top of the y-axis (the bottom is 0).
    pub y_max: f64,
    /// The lines.
    pub series: Vec<Series>,
}

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 190.0;
const MARGIN_L: f64 = 60.0;
const MARGIN_R: f64 = 20.0;
const MARGIN_T: f64 = 30.0;
const MARGIN_B: f64 = 40.0;
const HEADER: f64 = 36.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" tick step giving about `n` ticks up to `max`.
fn tick_step(max: f64, n: f64) -> f64 {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Renders `rows` of panels sharing the x-axis `[0, x_max]`.
pub fn grid(title: &str, x_label: &str, x_max: f64, rows: &[Vec<Panel>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let cell_w = MARGIN_L + PANEL_W + MARGIN_R;
    let cell_h = MARGIN_T + PANEL_H + MARGIN_B;
    let width = cell_w * cols as f64;
    let height = HEADER + cell_h * rows.len() as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    for (r, row) in rows.iter().enumerate() {
        for (c, panel) in row.iter().enumerate() {
            let x0 = c as f64 * cell_w + MARGIN_L;
            let y0 = HEADER + r as f64 * cell_h + MARGIN_T;
            draw_panel(&mut out, panel, x0, y0, x_max, x_label);
        }
    }
    out.push_str("</svg>\n");
    out
}

fn draw_panel(out: &mut String, panel: &Panel, x0: f64, y0: f64, x_max: f64, x_label: &str) {
    let y_max = if panel.y_max > 0.0 { panel.y_max } else { 1.0 };
    let x_max = if x_max > 0.0 { x_max } else { 1.0 };
    let sx = |x: f64| x0 + (x / x_max).clamp(0.0, 1.0) * PANEL_W;
    let sy = |y: f64| y0 + PANEL_H - (y / y_max).clamp(0.0, 1.05) * PANEL_H;
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" font-size="12" font-weight="bold">{}</text>"##,
        x0,
        y0 - 10.0,
        escape(&panel.title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/>"##
    );
    let step = tick_step(y_max, 4.0);
    let mut v = 0.0;
    while v <= y_max * 1.0001 {
        let y = sy(v);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + PANEL_W,
            x0 - 4.0,
            y + 4.0,
            trim(v)
        );
        v += step;
    }
    let step = tick_step(x_max, 6.0);
    let mut v = 0.0;
    while v <= x_max * 1.0001 {
        let x = sx(v);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#999"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y0 + PANEL_H,
            y0 + PANEL_H + 4.0,
            y0 + PANEL_H + 16.0,
            trim(v)
        );
        v += step;
    }
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##,
        x0 + PANEL_W / 2.0,
        y0 + PANEL_H + 32.0,
        escape(x_label)
    );
    let _ = writeln!(
        out,
        r##"<text transform="translate({},{}) rotate(-90)" text-anchor="middle">{}</text>"##,
        x0 - 44.0,
        y0 + PANEL_H / 2.0,
        escape(&panel.y_label)
    );
    for (i, s) in panel.series.iter().enumerate() {
        let mut pts = String::new();
        for &(x, y) in &s.points {
            if x.is_finite() && y.is_finite() {
                let _ = write!(pts, "{:.1},{:.1} ", sx(x), sy(y));
            }
        }
        let dash = if s.dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.4"{dash} points="{}"/>"#,
            s.color,
            pts.trim_end()
        );
        let lx = x0 + PANEL_W - 150.0;
        let ly = y0 + 14.0 + 14.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            ly - 4.0,
            lx + 18.0,
            ly - 4.0,
            s.color,
            lx + 22.0,
            ly,
            escape(&s.label)
        );
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_should_be_a_well_formed_svg_with_every_series() {
        let panel = Panel {
            title: "a < b & c".into(),
            y_label: "pods".into(),
            y_max: 10.0,
            series: vec![Series {
                label: "replicas".into(),
                color: "#1f77b4",
                dashed: false,
                points: vec![(0.0, 1.0), (5.0, 7.0), (10.0, f64::NAN)],
            }],
        };
        let svg = grid("t", "s", 10.0, &[vec![panel.clone(), panel]]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b &amp; c"));
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn ticks_should_be_round_numbers() {
        assert_eq!(tick_step(100.0, 4.0), 50.0);
        assert_eq!(tick_step(1800.0, 6.0), 500.0);
        assert_eq!(tick_step(0.0, 4.0), 1.0);
    }
}
