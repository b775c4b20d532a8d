//! The tuning page: the replica's capacity at the SLO, the candidates and the Pareto front,
//! for each trace the offered rate and the replicas of the chosen policy, the seeds'
//! configuration and the perfect-foresight schedule, the held-out traces, and what cannot be
//! held.

use std::fmt::Write as _;

use inferscale_autoscale::tune::{Evaluated, TraceResult, TuneReport};

use crate::html::{CSS, SCRIPT};
use crate::svg::{Chart, Series, Style, esc};

fn pct(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

fn candidate_row(o: &mut String, e: &Evaluated, mark: &str) {
    let stopped = e.stopped();
    let _ = write!(
        o,
        "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}×</td><td>{}</td><td>{}</td></tr>",
        mark,
        esc(&e.label),
        if e.held { "yes" } else { "no" },
        pct(e.worst_attainment),
        e.gpu_hours,
        e.cost_ratio(),
        e.steady_flaps,
        esc(&stopped)
    );
}

fn result_rows(o: &mut String, label: &str, rs: &[TraceResult]) {
    for r in rs {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}×</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.trace),
            esc(label),
            pct(r.attainment),
            pct(r.attainment_outside),
            r.foresight_gpu_hours,
            r.gpu_hours,
            r.cost_ratio(),
            r.flaps,
            r.max_replicas,
            r.outcomes.timeout + r.outcomes.refused,
            esc(&r.alerts_fired.join(", "))
        );
    }
}

const RESULT_HEAD: &str = "<table><thead><tr><th>trace</th><th>policy</th><th>SLO met</th><th>outside transients</th><th>foresight GPU-h</th><th>GPU-h</th><th>× foresight</th><th>flaps</th><th>max replicas</th><th>given up</th><th>alerts</th></tr></thead><tbody>";

/// The whole page for `r`, of `model`'s replicas (`replica`: what they are).
pub fn render(r: &TuneReport, model: &str, replica: &str) -> String {
    let mut o = String::with_capacity(128 * 1024);
    let title = format!("inferscale tune: {model}");
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style><script>{SCRIPT}</script></head><body><main><h1>{}</h1>",
        esc(&title),
        esc(&title)
    );
    let _ = write!(
        o,
        "<p class=\"sim\"><b>Simulated.</b> Every number is a rehearsal in virtual time: the HPA, KEDA, Prometheus and Karpenter over replicas of {}, as modelled by inferscale; nothing was deployed.</p>",
        esc(replica)
    );
    let _ = write!(
        o,
        "<p>One replica: <b>{:.2} req/s</b> measured, <b>{:.2} req/s</b> with {} of requests within {} s (the capacity at the SLO the utilisation is a share of). A new replica starts in {:.0} s. Seed {}; {} rehearsals.</p>",
        r.capacity_rps,
        r.capacity_slo_rps,
        pct(r.attainment),
        r.slo_e2e_s,
        r.startup_s,
        r.seed,
        r.rehearsals
    );
    o.push_str("<h2>Verdict</h2><ul>");
    for s in &r.statements {
        let _ = write!(o, "<li>{}</li>", esc(s));
    }
    o.push_str("</ul><h2>Candidates</h2><table><thead><tr><th>candidate</th><th>held</th><th>worst trace</th><th>GPU-h</th><th>× foresight</th><th>steady flaps</th><th>stopped</th></tr></thead><tbody>");
    candidate_row(&mut o, &r.seeds, "");
    for (i, c) in r.candidates.iter().enumerate() {
        let mark = if r.chosen == Some(i) {
            "★ "
        } else if r.front.contains(&i) {
            "◆ "
        } else {
            ""
        };
        candidate_row(&mut o, c, mark);
    }
    o.push_str("</tbody></table><p>★ chosen (the cheapest that held); ◆ on the Pareto front of worst attainment, GPU-hours and steady flaps. A candidate stops at the first trace it fails.</p>");
    let chosen = r.chosen.map(|i| &r.candidates[i]);
    o.push_str("<h2>Per trace</h2>");
    o.push_str(RESULT_HEAD);
    if let Some(c) = chosen {
        result_rows(&mut o, &c.label, &c.results);
    }
    result_rows(&mut o, &r.seeds.label, &r.seeds.results);
    o.push_str("</tbody></table>");
    if !r.held_out.is_empty() {
        o.push_str("<h2>Held out (never tuned on)</h2>");
        o.push_str(RESULT_HEAD);
        for (label, rs) in &r.held_out {
            result_rows(&mut o, label, rs);
        }
        o.push_str("</tbody></table>");
    }
    for t in &r.traces {
        let find = |rs: &[TraceResult]| rs.iter().find(|x| x.trace == t.name).cloned();
        let (mine, seeds) = if t.held_out {
            let mut it = r.held_out.iter();
            let first = it.next().and_then(|(_, rs)| find(rs));
            let second = it.next().and_then(|(_, rs)| find(rs));
            if chosen.is_some() {
                (first, second)
            } else {
                (None, first)
            }
        } else {
            (
                chosen.and_then(|c| find(&c.results)),
                find(&r.seeds.results),
            )
        };
        let _ = write!(
            o,
            "<h3>{}{}</h3><p>{}</p>",
            esc(&t.name),
            if t.held_out { " (held out)" } else { "" },
            esc(&t.about)
        );
        let minutes = |x: f64| x / 60.0;
        let mut series = vec![Series {
            name: "perfect foresight".into(),
            color: "#888",
            points: t.schedule.iter().map(|p| (minutes(p[0]), p[2])).collect(),
            style: Style::Dashed,
        }];
        if let Some(m) = &mine {
            series.push(Series {
                name: "chosen: ready".into(),
                color: "#2a7",
                points: m.replicas.iter().map(|p| (minutes(p[0]), p[2])).collect(),
                style: Style::Line,
            });
        }
        if let Some(s) = &seeds {
            series.push(Series {
                name: "seeds: ready".into(),
                color: "#c62",
                points: s.replicas.iter().map(|p| (minutes(p[0]), p[2])).collect(),
                style: Style::Line,
            });
        }
        let id = t.name.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
        o.push_str(
            &Chart {
                id: format!("replicas-{id}"),
                title: "Replicas ready, against the fewest that hold the SLO".into(),
                x_label: "minutes".into(),
                y_label: "replicas".into(),
                series,
                empty_note: "no rehearsal of this trace".into(),
                ..Chart::default()
            }
            .render(),
        );
        o.push_str(
            &Chart {
                id: format!("rate-{id}"),
                title: "Offered rate".into(),
                x_label: "minutes".into(),
                y_label: "req/s".into(),
                series: vec![Series {
                    name: "offered".into(),
                    color: "#36c",
                    points: t.schedule.iter().map(|p| (minutes(p[0]), p[1])).collect(),
                    style: Style::Line,
                }],
                ..Chart::default()
            }
            .render(),
        );
    }
    o.push_str("</main></body></html>\n");
    o
}
