//! The self-contained HTML report: inline CSS and SVG, one small inline script that checks the
//! charts rendered (for tests and for a reader's console), no network.

use std::fmt::Write as _;

use inferscale_analysis::{Analysis, Status, Verdict};
use inferscale_results::run::{RunReport, StepReport};

use crate::svg::{Band, Chart, Mark, Series, Style, esc};
use crate::text::{StepCells, fmt_s};

const BLUE: &str = "#2563eb";
const ORANGE: &str = "#ea580c";
const RED: &str = "#dc2626";
const GREEN: &str = "#16a34a";
const PURPLE: &str = "#7c3aed";
const GREY: &str = "#6b7280";
const TEAL: &str = "#0d9488";

pub(crate) const CSS: &str = "
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#111827;background:#f9fafb}
main{max-width:1120px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.sub{color:#4b5563;margin:0 0 16px}.sim{background:#fef3c7;border:1px solid #f59e0b;padding:8px 12px;border-radius:6px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;margin:16px 0}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px}
.card b{display:block;font-size:22px}.card span{color:#4b5563;font-size:13px}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:12px}
figure.chart{background:#fff;border:1px solid #e5e7eb;border-radius:8px;margin:0;padding:8px}
figcaption{font-weight:600;margin:0 0 4px 8px}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e5e7eb}svg .axis{stroke:#9ca3af}svg .tickmark{stroke:#9ca3af}
svg .tick,svg .legend,svg .marklabel,svg .bandlabel{font-size:11px;fill:#374151}
svg .label{font-size:12px;fill:#374151}svg .note{font-size:13px;fill:#6b7280}
svg .series{fill:none;stroke-width:2}svg .mark{stroke-width:1.5;stroke-dasharray:4 3}
svg .band0{fill:#eef2ff}svg .band1{fill:#e0e7ff}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #e5e7eb;padding:4px 6px;text-align:right}th{background:#f3f4f6}
td.l,th.l{text-align:left}tr.sat td{background:#fef2f2}tr.ok td{background:#f0fdf4}tr.noise td{background:#fffbeb}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-size:13px;color:#fff}
.warn{background:#fff7ed;border:1px solid #fdba74;padding:8px 12px;border-radius:6px}
code{background:#f3f4f6;padding:0 3px;border-radius:3px}
";

/// After load: every chart must hold drawn elements; the result goes into `data-*` attributes
/// of `<body>` (a headless browser's DOM dump shows it) and errors into `data-errors`.
pub(crate) const SCRIPT: &str = "
window.addEventListener('error',function(e){var b=document.body;b.dataset.errors=(b.dataset.errors||'')+e.message+';';});
window.addEventListener('load',function(){var c=document.querySelectorAll('svg.chart');var drawn=0,empty=0;
c.forEach(function(s){if(s.dataset.empty){empty++;return;}var n=s.querySelectorAll('path,rect.bar,circle').length;var bb=s.getBBox();if(n>0&&bb.width>0&&bb.height>0){drawn++;}});
document.body.dataset.charts=String(c.length);document.body.dataset.drawn=String(drawn);document.body.dataset.empty=String(empty);
if(drawn+empty!==c.length){console.error('inferscale report: '+(c.length-drawn-empty)+' chart(s) not drawn');}});
";

fn status_badge(s: Status) -> (&'static str, &'static str) {
    match s {
        Status::Saturated => ("saturation found", GREEN),
        Status::NotSaturated => ("not saturated", BLUE),
        Status::SaturatedFromStart => ("saturated from the start", ORANGE),
        Status::ClientLimited => ("client-limited", RED),
        Status::NoData => ("no data", GREY),
    }
}

/// Reads one count out of a step.
type Count = fn(&StepReport) -> u64;

fn open_steps(run: &RunReport) -> Vec<&StepReport> {
    let mut v: Vec<&StepReport> = run
        .steps
        .iter()
        .filter(|s| s.concurrency.is_none())
        .collect();
    v.sort_by(|a, b| a.target_rps.total_cmp(&b.target_rps));
    v
}

fn per_step(steps: &[&StepReport], f: impl Fn(&StepReport) -> Option<f64>) -> Vec<(f64, f64)> {
    steps
        .iter()
        .filter_map(|s| Some((s.target_rps, f(s)?)))
        .collect()
}

fn line(name: &str, color: &'static str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        color,
        points,
        style: Style::Line,
    }
}

fn step_bands(run: &RunReport) -> Vec<Band> {
    run.steps
        .iter()
        .map(|s| Band {
            x0: s.start_s,
            x1: s.start_s + s.duration_s,
            label: match s.concurrency {
                Some(c) => format!("c={c}"),
                None => format!("{}", s.target_rps),
            },
        })
        .collect()
}

/// The charts, in page order.
// Long: the page's charts one after another, in page order, each a few series of the run;
// split, the order the reader sees would be spread over a dozen functions.
pub fn charts(run: &RunReport, a: &Analysis) -> Vec<Chart> {
    let steps = open_steps(run);
    let t = a.thresholds.as_ref().ok();
    let sat = &a.saturation;
    let mut sat_marks = Vec::new();
    if let Some(r) = sat.saturation_rps {
        sat_marks.push(Mark {
            at: r,
            label: format!("sustained {r}"),
            color: GREEN,
        });
    }
    if let Some(r) = sat.first_saturated_rps {
        sat_marks.push(Mark {
            at: r,
            label: format!("saturated {r}"),
            color: RED,
        });
    }
    let mut out = Vec::new();

    // 1. Offered vs achieved.
    let offered: Vec<(f64, f64)> = steps.iter().map(|s| (s.target_rps, s.target_rps)).collect();
    let mut hl = Vec::new();
    if let Some(c) = sat.capacity_rps {
        hl.push(Mark {
            at: c,
            label: format!("capacity ≈ {c:.1}"),
            color: PURPLE,
        });
    }
    out.push(Chart {
        id: "throughput".into(),
        title: "Offered vs achieved rate per step".into(),
        x_label: "offered rate (req/s)".into(),
        y_label: "req/s".into(),
        series: vec![
            Series {
                name: "offered".into(),
                color: GREY,
                points: offered,
                style: Style::Dashed,
            },
            line("achieved", BLUE, per_step(&steps, |s| Some(s.achieved_rps))),
        ],
        hlines: hl,
        vlines: sat_marks.clone(),
        empty_note: "no open-loop steps".into(),
        ..Chart::default()
    });

    // 2. Queue over time.
    let queue: Vec<(f64, f64)> = run
        .timeline
        .iter()
        .filter_map(|p| Some((p.t_s, p.queue_depth?)))
        .collect();
    let mut hl = Vec::new();
    if let Some(t) = t {
        hl.push(Mark {
            at: f64::from(t.scale_out.queue_depth_per_pod),
            label: format!("scale out > {}", t.scale_out.queue_depth_per_pod),
            color: RED,
        });
    }
    out.push(Chart {
        id: "queue".into(),
        title: "Server queue depth over time (steps shaded, labelled in req/s)".into(),
        x_label: "time (s)".into(),
        y_label: "waiting requests".into(),
        series: vec![Series {
            name: "num_requests_waiting".into(),
            color: ORANGE,
            points: queue,
            style: Style::Line,
        }],
        bands: step_bands(run),
        hlines: hl,
        empty_note: "the server's /metrics was not scraped".into(),
        ..Chart::default()
    });

    // 3. E2E per step.
    let mut hl = Vec::new();
    if let Some(t) = t {
        hl.push(Mark {
            at: t.scale_out.p95_e2e_seconds,
            label: format!("guardrail {} s", t.scale_out.p95_e2e_seconds),
            color: RED,
        });
        hl.push(Mark {
            at: t.scale_in.p95_e2e_seconds,
            label: format!("scale in < {} s", t.scale_in.p95_e2e_seconds),
            color: GREEN,
        });
    }
    out.push(Chart {
        id: "e2e".into(),
        title: "End-to-end latency per step (from the intended send time)".into(),
        x_label: "offered rate (req/s)".into(),
        y_label: "seconds".into(),
        series: vec![
            line("p50", BLUE, per_step(&steps, |s| s.latency_s.e2e.p50)),
            line("p95", ORANGE, per_step(&steps, |s| s.latency_s.e2e.p95)),
            line("p99", RED, per_step(&steps, |s| s.latency_s.e2e.p99)),
            Series {
                name: "server p95".into(),
                color: GREY,
                points: per_step(&steps, |s| s.server.as_ref()?.e2e_p95_s),
                style: Style::Dashed,
            },
        ],
        hlines: hl,
        vlines: sat_marks.clone(),
        ..Chart::default()
    });

    // 4. TTFT per step (and the server's TTFT and queue time, which a non-streaming run has).
    let mut hl = Vec::new();
    if let Some(g) = t.and_then(|t| t.scale_out.p95_ttft_seconds) {
        hl.push(Mark {
            at: g,
            label: format!("TTFT guardrail {g} s"),
            color: RED,
        });
    }
    out.push(Chart {
        id: "ttft".into(),
        title: "Time to first token and queue time per step".into(),
        x_label: "offered rate (req/s)".into(),
        y_label: "seconds".into(),
        series: vec![
            line("TTFT p50", BLUE, per_step(&steps, |s| s.latency_s.ttft.p50)),
            line(
                "TTFT p95",
                ORANGE,
                per_step(&steps, |s| s.latency_s.ttft.p95),
            ),
            line("TTFT p99", RED, per_step(&steps, |s| s.latency_s.ttft.p99)),
            Series {
                name: "server TTFT p95".into(),
                color: GREY,
                points: per_step(&steps, |s| s.server.as_ref()?.ttft_p95_s),
                style: Style::Dashed,
            },
            Series {
                name: "server queue p95".into(),
                color: TEAL,
                points: per_step(&steps, |s| s.server.as_ref()?.queue_time_p95_s),
                style: Style::Dashed,
            },
        ],
        hlines: hl,
        vlines: sat_marks.clone(),
        empty_note: "not measured: the run did not stream and the server was not scraped".into(),
        ..Chart::default()
    });

    // 5. TPOT / ITL per step, in milliseconds.
    let ms = |v: Option<f64>| v.map(|x| x * 1e3);
    out.push(Chart {
        id: "tpot".into(),
        title: "Time per output token and inter-token latency per step".into(),
        x_label: "offered rate (req/s)".into(),
        y_label: "milliseconds".into(),
        series: vec![
            line(
                "TPOT p50",
                BLUE,
                per_step(&steps, |s| ms(s.latency_s.tpot.p50)),
            ),
            line(
                "TPOT p95",
                ORANGE,
                per_step(&steps, |s| ms(s.latency_s.tpot.p95)),
            ),
            line(
                "ITL p50",
                TEAL,
                per_step(&steps, |s| ms(s.latency_s.itl.p50)),
            ),
            line(
                "ITL p99",
                PURPLE,
                per_step(&steps, |s| ms(s.latency_s.itl.p99)),
            ),
        ],
        vlines: sat_marks.clone(),
        empty_note: "not measured: the run did not stream".into(),
        ..Chart::default()
    });

    // 6. Running requests and KV-cache usage over time.
    let running: Vec<(f64, f64)> = run
        .timeline
        .iter()
        .filter_map(|p| Some((p.t_s, p.running?)))
        .collect();
    let mut hl = Vec::new();
    if let Some(n) = run.target.max_num_seqs {
        hl.push(Mark {
            at: f64::from(n),
            label: format!("max_num_seqs {n}"),
            color: GREY,
        });
    }
    out.push(Chart {
        id: "running".into(),
        title: "Requests running on the server".into(),
        x_label: "time (s)".into(),
        y_label: "running".into(),
        series: vec![line("num_requests_running", BLUE, running)],
        bands: step_bands(run),
        hlines: hl,
        empty_note: "the server's /metrics was not scraped".into(),
        ..Chart::default()
    });
    let kv: Vec<(f64, f64)> = run
        .timeline
        .iter()
        .filter_map(|p| Some((p.t_s, p.kv_cache_usage? * 100.0)))
        .collect();
    out.push(Chart {
        id: "kv".into(),
        title: "KV-cache usage".into(),
        x_label: "time (s)".into(),
        y_label: "percent".into(),
        series: vec![line("kv_cache_usage_perc", PURPLE, kv)],
        bands: step_bands(run),
        hlines: vec![
            Mark {
                at: 80.0,
                label: "warn 80 %".into(),
                color: ORANGE,
            },
            Mark {
                at: 95.0,
                label: "critical 95 %".into(),
                color: RED,
            },
        ],
        empty_note: "the server's /metrics was not scraped".into(),
        ..Chart::default()
    });

    // 7. Errors and drops per step.
    let kinds: [(&str, &'static str, Count); 5] = [
        ("HTTP errors", RED, |s| {
            s.requests.failed.http_error.values().sum()
        }),
        ("timeouts", ORANGE, |s| s.requests.failed.timeout),
        ("stream errors", PURPLE, |s| s.requests.failed.stream_error),
        ("connect errors", GREY, |s| s.requests.failed.connect_error),
        ("dropped", TEAL, |s| s.requests.dropped),
    ];
    let mut series: Vec<Series> = kinds
        .iter()
        .map(|(name, color, f)| Series {
            name: (*name).into(),
            color,
            points: steps.iter().map(|s| (s.target_rps, f(s) as f64)).collect(),
            style: Style::Bars,
        })
        .collect();
    series.push(line(
        "ok",
        GREEN,
        steps
            .iter()
            .map(|s| (s.target_rps, s.requests.ok as f64))
            .collect(),
    ));
    out.push(Chart {
        id: "errors".into(),
        title: "Outcomes per step: ok (line), failures and drops (bars)".into(),
        x_label: "offered rate (req/s)".into(),
        y_label: "requests".into(),
        series,
        empty_note: "no open-loop steps".into(),
        ..Chart::default()
    });

    // 8. Warm-up.
    let warm: Vec<(f64, f64)> = run
        .warmup
        .as_ref()
        .map(|w| {
            w.latencies_s
                .iter()
                .enumerate()
                .filter_map(|(i, l)| Some(((i + 1) as f64, (*l)?)))
                .collect()
        })
        .unwrap_or_default();
    let mut hl = Vec::new();
    if let Some(s) = run.warmup.as_ref().and_then(|w| w.steady_s) {
        hl.push(Mark {
            at: s,
            label: format!("steady {}", fmt_s(s)),
            color: GREEN,
        });
    }
    out.push(Chart {
        id: "warmup".into(),
        title: "Warm-up: latency of each sequential request".into(),
        x_label: "request".into(),
        y_label: "seconds".into(),
        series: vec![line("latency", BLUE, warm)],
        hlines: hl,
        empty_note: "no warm-up in this run".into(),
        ..Chart::default()
    });
    out
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".into(), f)
}

/// The whole page.
pub fn render(run: &RunReport, a: &Analysis) -> String {
    render_with(run, a, "")
}

/// The whole page with `extra` (an HTML fragment, e.g. the rehearsal's verdict) at its end.
// Long: the page's HTML in document order, each section a few lines of the run's facts.
pub fn render_with(run: &RunReport, a: &Analysis, extra: &str) -> String {
    let sat = &a.saturation;
    let t = a.thresholds.as_ref().ok();
    let mut o = String::with_capacity(256 * 1024);
    let title = format!("inferscale report: {}", run.target.model);
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style><script>{SCRIPT}</script></head><body><main>",
        esc(&title)
    );
    let (label, color) = status_badge(sat.status);
    let _ = write!(
        o,
        "<h1>{}</h1><p class=\"sub\">{} · started {} · {} · <span class=\"badge\" style=\"background:{color}\">{label}</span></p>",
        esc(&run.target.model),
        esc(&run.target.url),
        esc(&run.started_at),
        esc(&run.tool)
    );
    if let Some(sim) = &run.target.simulated {
        let _ = write!(
            o,
            "<p class=\"sim\"><b>Simulated.</b> This run loaded inferscale's embedded simulator ({}), not real hardware, at a speed-up of {}×: every time and rate below is in simulated time.</p>",
            esc(&sim.describe()),
            run.plan.speedup
        );
    } else if run.plan.speedup != 1.0 {
        let _ = write!(
            o,
            "<p class=\"sim\">Run at a speed-up of {}× (a simulator running faster than real time); times and rates are in the server's time.</p>",
            run.plan.speedup
        );
    }
    if run.interrupted {
        o.push_str("<p class=\"warn\"><b>Partial run.</b> It was interrupted: the last step is incomplete and higher rates were not tried.</p>");
    }
    for w in t.map(|t| t.warnings.as_slice()).unwrap_or_default() {
        let _ = write!(o, "<p class=\"warn\">{}</p>", esc(w));
    }
    if let Err(e) = &a.thresholds {
        let _ = write!(
            o,
            "<p class=\"warn\"><b>No thresholds:</b> {}</p>",
            esc(&e.to_string())
        );
    }
    // Headline cards.
    o.push_str("<div class=\"cards\">");
    let card = |o: &mut String, big: String, small: &str| {
        let _ = write!(
            o,
            "<div class=\"card\"><b>{}</b><span>{}</span></div>",
            esc(&big),
            esc(small)
        );
    };
    card(&mut o, sat.summary.clone(), "saturation");
    card(
        &mut o,
        opt(sat.capacity_rps, |c| format!("{c:.1} req/s")),
        "estimated capacity per replica",
    );
    if let Some(t) = t {
        card(
            &mut o,
            format!("queue > {} per pod", t.scale_out.queue_depth_per_pod),
            &format!("scale out, held {} s", t.scale_out.for_seconds),
        );
        card(
            &mut o,
            format!("p95 e2e > {} s", t.scale_out.p95_e2e_seconds),
            "latency guardrail",
        );
        card(
            &mut o,
            format!("queue 0, p95 < {} s", t.scale_in.p95_e2e_seconds),
            &format!("scale in after {} s", t.scale_in.for_seconds),
        );
        if let Some(p) = &t.peak {
            card(
                &mut o,
                format!("{} replicas", p.replicas),
                &format!("for a peak of {} req/s", p.rps),
            );
        }
    }
    if let Some(w) = &run.warmup {
        card(
            &mut o,
            format!("{} → {}", opt(w.first_s, fmt_s), opt(w.steady_s, fmt_s)),
            &format!(
                "warm-up: first vs steady ({})",
                opt(w.cold_ratio, |r| format!("{r:.2}×"))
            ),
        );
    }
    o.push_str("</div>");

    // Charts.
    o.push_str("<h2>Charts</h2><div class=\"grid2\">");
    for c in charts(run, a) {
        o.push_str(&c.render());
    }
    o.push_str("</div>");

    // Thresholds with their reasons.
    if let Some(t) = t {
        o.push_str("<h2>Thresholds and why</h2><table><tr><th class=\"l\">threshold</th><th>value</th><th class=\"l\">rationale</th></tr>");
        let rows: Vec<(&str, String)> = vec![
            (
                "scale_out.queue_depth_per_pod",
                t.scale_out.queue_depth_per_pod.to_string(),
            ),
            (
                "scale_out.for_seconds",
                format!("{} s", t.scale_out.for_seconds),
            ),
            (
                "scale_out.p95_e2e_seconds",
                format!("{} s", t.scale_out.p95_e2e_seconds),
            ),
            (
                "scale_out.p95_ttft_seconds",
                opt(t.scale_out.p95_ttft_seconds, |v| format!("{v} s")),
            ),
            (
                "scale_out.p95_queue_time_seconds",
                format!("{} s", t.scale_out.p95_queue_time_seconds),
            ),
            ("scale_in.queue_depth", t.scale_in.queue_depth.to_string()),
            (
                "scale_in.p95_e2e_seconds",
                format!("{} s", t.scale_in.p95_e2e_seconds),
            ),
            (
                "scale_in.for_seconds",
                format!("{} s", t.scale_in.for_seconds),
            ),
            (
                "activation.queue_depth",
                t.activation.queue_depth.to_string(),
            ),
            (
                "peak.replicas",
                opt(t.peak.as_ref().map(|p| f64::from(p.replicas)), |v| {
                    format!("{v:.0}")
                }),
            ),
        ];
        for (k, v) in rows {
            let why = t.rationale.get(k).cloned().unwrap_or_default();
            let _ = write!(
                o,
                "<tr><td class=\"l\"><code>{k}</code></td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&v),
                esc(&why)
            );
        }
        o.push_str("</table>");
    }

    // Evidence.
    o.push_str("<h2>How the saturation point was found</h2><ul>");
    for e in &sat.evidence {
        let _ = write!(o, "<li>{}</li>", esc(e));
    }
    o.push_str("</ul>");

    // Every step.
    o.push_str("<h2>Every step</h2><table><tr><th>offered (req/s)</th><th>achieved</th><th>ok</th><th>failed</th><th>dropped</th><th>e2e p50</th><th>e2e p95</th><th>e2e p99</th><th>TTFT p95</th><th>TPOT p50</th><th>queue p95</th><th>queue max</th><th>running max</th><th>KV max</th><th>srv e2e p95</th><th>lag p99</th><th>goodput</th><th>probe TTFT p95</th><th title=\"the server's count / what the prompts' structure implies\">prefix-cache hit</th><th class=\"l\">verdict</th></tr>");
    for (s, j) in run.steps.iter().zip(&sat.steps) {
        let class = match j.verdict {
            Verdict::Sustained => "ok",
            Verdict::Saturated => "sat",
            Verdict::Noisy | Verdict::ClientLimited => "noise",
            Verdict::NotJudged => "",
        };
        let c = StepCells::of(s, fmt_s);
        let _ = write!(o, "<tr class=\"{class}\">");
        for cell in [c.offered, c.achieved, c.ok, c.failed, c.dropped] {
            let _ = write!(o, "<td>{cell}</td>");
        }
        for cell in [
            c.e2e_p50,
            c.e2e_p95,
            c.e2e_p99,
            c.ttft_p95,
            c.tpot_p50,
            c.queue_p95,
            c.queue_max,
            c.running_max,
            c.kv_max,
            c.server_e2e_p95,
            c.lag_p99,
            c.goodput,
            c.probe_p95,
            c.cache_hit,
        ] {
            let _ = write!(o, "<td>{}</td>", cell.unwrap_or_else(|| "–".into()));
        }
        let _ = write!(
            o,
            "<td class=\"l\">{}: {}</td></tr>",
            verdict_word(j.verdict),
            esc(&j.reasons.join("; "))
        );
    }
    o.push_str("</table>");
    let _ = write!(
        o,
        "<p class=\"sub\">Plan: {} step(s), {} arrivals, {}, {} requests ({}), in-flight cap {}, connection reuse {}. Latencies are measured from each request's intended send time. Written by {}.</p>",
        run.plan.stages.len(),
        match run.plan.arrival {
            _ if matches!(
                run.plan.requests.prompt,
                inferscale_results::plan::PromptSource::Trace { .. }
            ) =>
            {
                "the trace's".to_owned()
            }
            inferscale_results::plan::Arrival::Constant => "constant".to_owned(),
            inferscale_results::plan::Arrival::Poisson => "Poisson".to_owned(),
            inferscale_results::plan::Arrival::Gamma { shape } => format!("gamma (shape {shape})"),
        },
        esc(&run.plan.requests.prompt.describe()),
        if run.plan.requests.stream {
            "streaming"
        } else {
            "non-streaming"
        },
        esc(&run.plan.requests.model),
        run.plan.max_in_flight,
        if run.plan.connection_reuse {
            "on"
        } else {
            "off"
        },
        esc(&run.tool)
    );
    o.push_str(extra);
    o.push_str("</main></body></html>\n");
    o
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Sustained => "sustained",
        Verdict::Saturated => "saturated",
        Verdict::Noisy => "noise",
        Verdict::ClientLimited => "client-limited",
        Verdict::NotJudged => "not judged",
    }
}
