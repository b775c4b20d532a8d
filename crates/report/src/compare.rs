//! One run beside a baseline (`inferscale analyze RUN --baseline OTHER`): how far the knee
//! and the capacity moved, and what each run's prefix cache found at its knee, so that a
//! change of setup (prefix caching off, another release, another workload) is said in
//! numbers.

use std::fmt::Write;

use inferscale_analysis::Analysis;
use inferscale_results::run::RunReport;

use crate::svg::esc;

/// What one run measured, for the comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    /// The highest step sustained, req/s.
    pub knee_rps: Option<f64>,
    /// The capacity estimate, req/s.
    pub capacity_rps: Option<f64>,
    /// The server's prefix-cache hit rate at the knee step.
    pub hit_rate: Option<f64>,
}

impl Side {
    /// The run's side.
    pub fn of(run: &RunReport, a: &Analysis) -> Side {
        let sat = &a.saturation;
        let knee_step = sat.healthy_step.and_then(|i| run.steps.get(i));
        Side {
            knee_rps: sat.saturation_rps,
            capacity_rps: sat.capacity_rps,
            hit_rate: knee_step
                .and_then(|s| s.server.as_ref())
                .and_then(|s| s.prefix_cache_hit_rate),
        }
    }
}

/// `a → b (+d, +p %)`, or what is missing.
fn moved(base: Option<f64>, this: Option<f64>, unit: &str) -> String {
    match (base, this) {
        (Some(b), Some(t)) => {
            let pct = if b > 0.0 {
                format!(", {:+.1} %", (t - b) / b * 100.0)
            } else {
                String::new()
            };
            format!("{b:.1} → {t:.1} {unit} ({:+.1}{pct})", t - b)
        }
        (None, Some(t)) => format!("none in the baseline → {t:.1} {unit}"),
        (Some(b), None) => format!("{b:.1} {unit} → none in this run"),
        (None, None) => "in neither run".into(),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("not counted".into(), |v| format!("{:.1} %", v * 100.0))
}

/// The comparison's lines: `name` is the baseline's file.
pub fn lines(base: Side, this: Side, name: &str) -> Vec<String> {
    vec![
        format!("against the baseline {name}:"),
        format!(
            "  knee      {}",
            moved(base.knee_rps, this.knee_rps, "req/s")
        ),
        format!(
            "  capacity  {}",
            moved(base.capacity_rps, this.capacity_rps, "req/s")
        ),
        format!(
            "  prefix-cache hit rate at the knee: {} in the baseline, {} here",
            pct(base.hit_rate),
            pct(this.hit_rate)
        ),
    ]
}

/// The comparison as text.
pub fn text(base: Side, this: Side, name: &str) -> String {
    let mut o = String::new();
    for l in lines(base, this, name) {
        let _ = writeln!(o, "{l}");
    }
    o
}

/// The comparison as a report section.
pub fn html(base: Side, this: Side, name: &str) -> String {
    let mut o = String::from("<h2>Against the baseline</h2><ul>");
    for l in lines(base, this, name).iter().skip(1) {
        let _ = write!(o, "<li>{}</li>", esc(l.trim()));
    }
    o.push_str("</ul>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shift_is_said_in_numbers() {
        let base = Side {
            knee_rps: Some(30.0),
            capacity_rps: Some(32.2),
            hit_rate: Some(0.0),
        };
        let this = Side {
            knee_rps: Some(40.0),
            capacity_rps: Some(41.0),
            hit_rate: Some(0.634),
        };
        let t = text(base, this, "b/run.json");
        assert!(t.contains("30.0 → 40.0 req/s (+10.0, +33.3 %)"), "{t}");
        assert!(t.contains("32.2 → 41.0 req/s"), "{t}");
        assert!(t.contains("0.0 % in the baseline, 63.4 % here"), "{t}");
        let none = Side {
            knee_rps: None,
            capacity_rps: None,
            hit_rate: None,
        };
        assert!(text(none, this, "b").contains("none in the baseline → 40.0"));
        assert!(html(base, this, "b").contains("<li>knee"));
    }
}
