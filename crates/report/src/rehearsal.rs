//! The rehearsal page: for each ScaledObject rehearsed, replicas (desired, ready, nodes), the
//! queue, latency against the SLO, alert states and scale events, and the side-by-side
//! table when several were.

use std::fmt::Write as _;

use inferscale_autoscale::rehearse::Outcome;

use crate::html::{CSS, SCRIPT};
use crate::svg::{Band, Chart, Mark, Series, Style, esc};

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

fn minutes(t: f64) -> f64 {
    t / 60.0
}

fn charts(label: &str, o: &Outcome) -> Vec<Chart> {
    let id = |s: &str| {
        format!(
            "{s}-{}",
            label.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        )
    };
    let x = |f: &dyn Fn(&inferscale_autoscale::rehearse::Row) -> Option<f64>| -> Vec<(f64, f64)> {
        o.timeline
            .iter()
            .filter_map(|r| f(r).map(|v| (minutes(r.time_s), v)))
            .collect()
    };
    let events: Vec<Mark> = o
        .events
        .iter()
        .map(|e| Mark {
            at: minutes(e.time_s),
            label: format!("{}→{}", e.from, e.to),
            color: if e.to > e.from { "#2a7" } else { "#c62" },
        })
        .collect();
    let end = o.summary.duration_s;
    let alerts: Vec<Band> = o
        .alerts
        .iter()
        .map(|a| Band {
            x0: minutes(a.fired_s),
            x1: minutes(a.resolved_s.unwrap_or(end)),
            label: a.name.clone(),
        })
        .collect();
    let slo = o.summary.slo_e2e_s;
    vec![
        Chart {
            id: id("replicas"),
            title: "Replicas: asked for, ready, and GPU nodes".into(),
            x_label: "minutes".into(),
            y_label: "count".into(),
            series: vec![
                Series {
                    name: "desired".into(),
                    color: "#36c",
                    points: x(&|r| Some(f64::from(r.desired_replicas))),
                    style: Style::Line,
                },
                Series {
                    name: "ready".into(),
                    color: "#2a7",
                    points: x(&|r| Some(f64::from(r.ready_replicas))),
                    style: Style::Line,
                },
                Series {
                    name: "nodes".into(),
                    color: "#999",
                    points: x(&|r| Some(f64::from(r.nodes))),
                    style: Style::Dashed,
                },
            ],
            vlines: events.clone(),
            bands: alerts.clone(),
            ..Chart::default()
        },
        Chart {
            id: id("traffic"),
            title: "Traffic offered".into(),
            x_label: "minutes".into(),
            y_label: "req/s".into(),
            series: vec![
                Series {
                    name: "offered".into(),
                    color: "#36c",
                    points: x(&|r| Some(r.offered_rps)),
                    style: Style::Line,
                },
                Series {
                    name: "arrived".into(),
                    color: "#999",
                    points: x(&|r| Some(r.arrived_rps)),
                    style: Style::Dashed,
                },
            ],
            ..Chart::default()
        },
        Chart {
            id: id("queue"),
            title: "Requests waiting per ready replica".into(),
            x_label: "minutes".into(),
            y_label: "requests".into(),
            series: vec![Series {
                name: "queue / pod".into(),
                color: "#c62",
                points: x(&|r| Some(r.queue_per_pod)),
                style: Style::Line,
            }],
            vlines: events.clone(),
            ..Chart::default()
        },
        Chart {
            id: id("latency"),
            title: "p95 end-to-end latency (requests finished in each 15 s) against the SLO".into(),
            x_label: "minutes".into(),
            y_label: "seconds".into(),
            series: vec![Series {
                name: "p95 e2e".into(),
                color: "#63c",
                points: x(&|r| r.p95_e2e_s),
                style: Style::Line,
            }],
            hlines: vec![Mark {
                at: slo,
                label: format!("SLO {slo} s"),
                color: "#c22",
            }],
            bands: alerts,
            vlines: events,
            empty_note: "no request finished".into(),
        },
    ]
}

/// The whole page for the rehearsals `outcomes` (label, outcome) of `model`.
pub fn render(outcomes: &[(String, Outcome)], model: &str) -> String {
    let mut o = String::with_capacity(128 * 1024);
    let title = format!("inferscale rehearsal: {model}");
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style><script>{SCRIPT}</script></head><body><main><h1>{}</h1>",
        esc(&title),
        esc(&title)
    );
    o.push_str("<p class=\"sim\"><b>Simulated.</b> Virtual time: simulated replicas under the HPA, KEDA, Prometheus and Karpenter as modelled by inferscale; nothing was deployed.</p>");
    o.push_str("<table><thead><tr><th>ScaledObject</th><th>SLO met</th><th>p95 e2e</th><th>p99 e2e</th><th>max queue</th><th>max replicas</th><th>first scale-out</th><th>recovered</th><th>GPU-hours</th><th>events</th><th>flaps</th><th>alerts</th><th>cycle</th></tr></thead><tbody>");
    for (label, out) in outcomes {
        let s = &out.summary;
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{:.2} %</td><td>{} s</td><td>{} s</td><td>{}</td><td>{}</td><td>{} s</td><td>{} s</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(label),
            s.slo_attainment * 100.0,
            opt(s.p95_e2e_s, 2),
            opt(s.p99_e2e_s, 2),
            s.max_queue,
            s.max_replicas,
            opt(s.first_scale_out_s, 0),
            opt(s.recovered_s, 0),
            s.gpu_hours,
            s.scale_events,
            s.flaps,
            esc(&s.alerts_fired.join(", ")),
            s.cycle().word()
        );
    }
    o.push_str("</tbody></table>");
    for (label, out) in outcomes {
        let _ = write!(o, "<h2>{}</h2>", esc(label));
        for n in &out.summary.notes {
            let _ = write!(o, "<p class=\"warn\">{}</p>", esc(n));
        }
        for c in charts(label, out) {
            o.push_str(&c.render());
        }
    }
    o.push_str("</main></body></html>\n");
    o
}
