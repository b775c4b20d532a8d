//! Small, dependency-free SVG charts: lines, points and bars on linear axes with readable
//! ticks, shaded bands (the load steps), and labelled reference lines (thresholds).

use std::fmt::Write as _;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A line through the points, with markers.
    Line,
    /// A dashed line without markers.
    Dashed,
    /// Bars from zero, one per point (stacked on the series drawn before with the same x).
    Bars,
}

/// One data series.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// `(x, y)` points; non-finite ones are skipped.
    pub points: Vec<(f64, f64)>,
    /// How to draw it.
    pub style: Style,
}

/// A shaded x range.
#[derive(Debug, Clone)]
pub struct Band {
    /// From.
    pub x0: f64,
    /// To.
    pub x1: f64,
    /// Text at its top.
    pub label: String,
}

/// A labelled reference line.
#[derive(Debug, Clone)]
pub struct Mark {
    /// Where.
    pub at: f64,
    /// Text beside it.
    pub label: String,
    /// CSS colour.
    pub color: &'static str,
}

/// A chart.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// `data-chart` id (tests find charts by it).
    pub id: String,
    /// Heading.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// The data.
    pub series: Vec<Series>,
    /// Shaded x ranges.
    pub bands: Vec<Band>,
    /// Horizontal reference lines.
    pub hlines: Vec<Mark>,
    /// Vertical reference lines.
    pub vlines: Vec<Mark>,
    /// Say this instead of drawing when there is no data.
    pub empty_note: String,
}

const W: f64 = 720.0;
const H: f64 = 300.0;
const ML: f64 = 64.0;
const MR: f64 = 150.0;
const MT: f64 = 16.0;
const MB: f64 = 44.0;

/// Escapes text for XML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Tick positions covering `[lo, hi]` at a 1-2-5 step, about `n` of them.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut t = start;
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// A number for an axis label: no trailing zeros, SI suffix above 10,000.
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{}k", fmt_tick(v / 1000.0))
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

impl Chart {
    fn bounds(&self) -> Option<(f64, f64, f64, f64)> {
        let pts = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        let mut any = false;
        for (x, y) in pts {
            any = true;
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y1 = y1.max(*y);
        }
        if !any {
            return None;
        }
        // Stacked bars reach the sum of their series.
        let mut stack: Vec<(f64, f64)> = Vec::new();
        for s in self.series.iter().filter(|s| s.style == Style::Bars) {
            for (x, y) in &s.points {
                match stack.iter_mut().find(|(sx, _)| sx == x) {
                    Some(e) => e.1 += y,
                    None => stack.push((*x, *y)),
                }
            }
        }
        y1 = stack.iter().fold(y1, |m, (_, y)| m.max(*y));
        for b in &self.bands {
            x0 = x0.min(b.x0);
            x1 = x1.max(b.x1);
        }
        for m in &self.vlines {
            x0 = x0.min(m.at);
            x1 = x1.max(m.at);
        }
        for m in &self.hlines {
            y1 = y1.max(m.at);
        }
        if self.series.iter().any(|s| s.style == Style::Bars) {
            // Room for half a bar on each side.
            let xs: Vec<f64> = stack.iter().map(|(x, _)| *x).collect();
            let gap = min_gap(&xs).unwrap_or(1.0);
            x0 -= gap / 2.0;
            x1 += gap / 2.0;
        }
        if x1 <= x0 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        if y1 <= 0.0 {
            y1 = 1.0;
        }
        Some((x0, x1, 0.0, y1 * 1.08))
    }

    /// The chart as an `<svg>` element (with a `<figure>` around it).
    // Long: the chart's SVG elements in drawing order (frame, grid, axes, series, markers,
    // legend).
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = write!(
            o,
            "<figure class=\"chart\"><figcaption>{}</figcaption>",
            esc(&self.title)
        );
        let Some((x0, x1, y0, y1)) = self.bounds() else {
            let _ = write!(
                o,
                "<svg class=\"chart\" data-chart=\"{}\" data-empty=\"1\" viewBox=\"0 0 {W} 60\" role=\"img\"><text x=\"{ML}\" y=\"34\" class=\"note\">{}</text></svg></figure>",
                esc(&self.id),
                esc(if self.empty_note.is_empty() {
                    "no data"
                } else {
                    &self.empty_note
                })
            );
            return o;
        };
        let pw = W - ML - MR;
        let ph = H - MT - MB;
        let sx = |x: f64| ML + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| MT + ph - (y - y0) / (y1 - y0) * ph;
        let _ = write!(
            o,
            "<svg class=\"chart\" data-chart=\"{}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">",
            esc(&self.id),
            esc(&self.title)
        );
        // Bands.
        for (i, b) in self.bands.iter().enumerate() {
            let (a, z) = (sx(b.x0.max(x0)), sx(b.x1.min(x1)));
            let _ = write!(
                o,
                "<rect class=\"band{}\" x=\"{a:.1}\" y=\"{MT}\" width=\"{:.1}\" height=\"{ph:.1}\"><title>{}</title></rect>",
                i % 2,
                (z - a).max(0.0),
                esc(&b.label)
            );
            if z - a > 24.0 {
                let _ = write!(
                    o,
                    "<text class=\"bandlabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    (a + z) / 2.0,
                    MT + 11.0,
                    esc(&b.label)
                );
            }
        }
        // Axes and grid.
        for t in ticks(y0, y1, 5) {
            let y = sy(t);
            let _ = write!(
                o,
                "<line class=\"grid\" x1=\"{ML}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                ML + pw,
                ML - 6.0,
                y + 4.0,
                fmt_tick(t)
            );
        }
        for t in ticks(x0, x1, 8) {
            let x = sx(t);
            let _ = write!(
                o,
                "<line class=\"tickmark\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                MT + ph,
                MT + ph + 5.0,
                MT + ph + 18.0,
                fmt_tick(t)
            );
        }
        let _ = write!(
            o,
            "<line class=\"axis\" x1=\"{ML}\" x2=\"{ML}\" y1=\"{MT}\" y2=\"{:.1}\"/><line class=\"axis\" x1=\"{ML}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            MT + ph,
            ML + pw,
            MT + ph,
            MT + ph
        );
        let _ = write!(
            o,
            "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text class=\"label\" transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            ML + pw / 2.0,
            H - 6.0,
            esc(&self.x_label),
            MT + ph / 2.0,
            esc(&self.y_label)
        );
        // Bars, stacked in series order.
        let bar_xs: Vec<f64> = self
            .series
            .iter()
            .filter(|s| s.style == Style::Bars)
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        let bw = (min_gap(&bar_xs).unwrap_or(x1 - x0) / (x1 - x0) * pw * 0.6).clamp(2.0, 60.0);
        let mut base: Vec<(f64, f64)> = Vec::new();
        for s in self.series.iter().filter(|s| s.style == Style::Bars) {
            for &(x, y) in s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
            {
                let b = base.iter().find(|(bx, _)| *bx == x).map_or(0.0, |e| e.1);
                let (top, bottom) = (sy(b + y), sy(b));
                let _ = write!(
                    o,
                    "<rect class=\"bar\" fill=\"{}\" x=\"{:.1}\" y=\"{top:.1}\" width=\"{bw:.1}\" height=\"{:.1}\"><title>{}: {} at {}</title></rect>",
                    s.color,
                    sx(x) - bw / 2.0,
                    (bottom - top).max(0.0),
                    esc(&s.name),
                    fmt_tick(y),
                    fmt_tick(x)
                );
                match base.iter_mut().find(|(bx, _)| *bx == x) {
                    Some(e) => e.1 += y,
                    None => base.push((x, y)),
                }
            }
        }
        // Lines.
        for s in self.series.iter().filter(|s| s.style != Style::Bars) {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            if pts.is_empty() {
                continue;
            }
            let d: String = pts
                .iter()
                .enumerate()
                .map(|(i, (x, y))| {
                    format!(
                        "{}{:.1},{:.1}",
                        if i == 0 { "M" } else { " L" },
                        sx(*x),
                        sy(*y)
                    )
                })
                .collect();
            let dash = if s.style == Style::Dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = write!(
                o,
                "<path class=\"series\" d=\"{d}\" stroke=\"{}\"{dash}><title>{}</title></path>",
                s.color,
                esc(&s.name)
            );
            if s.style == Style::Line && pts.len() <= 60 {
                for (x, y) in &pts {
                    let _ = write!(
                        o,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"><title>{}: {} at {}</title></circle>",
                        sx(*x),
                        sy(*y),
                        s.color,
                        esc(&s.name),
                        fmt_tick(*y),
                        fmt_tick(*x)
                    );
                }
            }
        }
        // Reference lines.
        for m in &self.hlines {
            let y = sy(m.at);
            let _ = write!(
                o,
                "<line class=\"mark\" x1=\"{ML}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{}\"/><text class=\"marklabel\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\">{}</text>",
                ML + pw,
                m.color,
                ML + pw + 4.0,
                y + 4.0,
                m.color,
                esc(&m.label)
            );
        }
        for m in &self.vlines {
            let x = sx(m.at);
            let _ = write!(
                o,
                "<line class=\"mark\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{MT}\" y2=\"{:.1}\" stroke=\"{}\"/><text class=\"marklabel\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\" transform=\"rotate(-90 {:.1} {:.1})\" text-anchor=\"end\">{}</text>",
                MT + ph,
                m.color,
                x - 4.0,
                MT + 4.0,
                m.color,
                x - 4.0,
                MT + 4.0,
                esc(&m.label)
            );
        }
        // Legend.
        // Legend: the bottom of the right margin (reference-line labels sit at their height).
        let n = self.series.len();
        for (i, s) in self.series.iter().enumerate() {
            let y = MT + ph - (n - i) as f64 * 16.0 + 8.0;
            let lx = ML + pw + 12.0;
            let _ = write!(
                o,
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/><text class=\"legend\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                y - 4.0,
                s.color,
                lx + 16.0,
                y + 1.0,
                esc(&s.name)
            );
        }
        o.push_str("</svg></figure>");
        o
    }
}

fn min_gap(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v.windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.0)
        .reduce(f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 0.9, 4), vec![0.0, 0.25, 0.5, 0.75]);
        assert_eq!(fmt_tick(0.25), "0.25");
        assert_eq!(fmt_tick(2.5), "2.5");
        assert_eq!(fmt_tick(25_000.0), "25k");
    }

    #[test]
    fn a_chart_draws_its_series_and_marks() {
        let c = Chart {
            id: "t".into(),
            title: "a <test>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "s".into(),
                color: "#123",
                points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, f64::NAN)],
                style: Style::Line,
            }],
            hlines: vec![Mark {
                at: 3.0,
                label: "limit".into(),
                color: "#c00",
            }],
            ..Chart::default()
        };
        let s = c.render();
        assert!(s.contains("data-chart=\"t\""));
        assert!(s.contains("a &lt;test&gt;"));
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains(">limit<"));
        let empty = Chart {
            id: "e".into(),
            empty_note: "nothing".into(),
            ..Chart::default()
        }
        .render();
        assert!(empty.contains("data-empty=\"1\"") && empty.contains("nothing"));
    }
}
