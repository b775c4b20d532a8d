//! The terminal summary: the same numbers as the HTML report, as plain text.

use std::fmt::Write as _;

use inferscale_analysis::{Analysis, Verdict};
use inferscale_results::run::{RunReport, StepReport};

/// Seconds for people: `850ms`, `2.41s`, `1m05s`.
pub fn fmt_s(s: f64) -> String {
    if !s.is_finite() {
        "–".into()
    } else if s < 1.0 {
        format!("{:.0}ms", s * 1e3)
    } else if s < 60.0 {
        format!("{s:.2}s")
    } else {
        format!("{}m{:02.0}s", (s / 60.0).floor(), s % 60.0)
    }
}

/// A rate: `50 req/s`, `12.5 req/s`.
pub fn rps(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{r:.0} req/s")
    } else {
        format!("{r:.1} req/s")
    }
}

/// One step of a run as the cells of a table, the same numbers in the terminal's step table
/// and the HTML report's; a cell with nothing measured is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCells {
    /// The rate offered (`50`), or the concurrency (`c=8`).
    pub offered: String,
    /// Requests sent per second.
    pub sent: String,
    /// Requests finished per second.
    pub achieved: String,
    /// Finished well.
    pub ok: String,
    /// Failed.
    pub failed: String,
    /// Dropped (not sent in time).
    pub dropped: String,
    /// End-to-end latency, p50.
    pub e2e_p50: Option<String>,
    /// …p95.
    pub e2e_p95: Option<String>,
    /// …p99.
    pub e2e_p99: Option<String>,
    /// Time to first token, p95.
    pub ttft_p95: Option<String>,
    /// Time per output token, p50.
    pub tpot_p50: Option<String>,
    /// The server's queue, p95 over the step's scrapes.
    pub queue_p95: Option<String>,
    /// …its largest.
    pub queue_max: Option<String>,
    /// The most requests running.
    pub running_max: Option<String>,
    /// The fullest KV cache, percent.
    pub kv_max: Option<String>,
    /// The server's own end-to-end p95.
    pub server_e2e_p95: Option<String>,
    /// How late the client sent, p99.
    pub lag_p99: Option<String>,
    /// The share of requests within the run's SLO and their rate (`97.2 % · 48.6/s`).
    pub goodput: Option<String>,
    /// The probe stream's time to first token, p95.
    pub probe_p95: Option<String>,
    /// The prefix-cache hit rate: the server's count, and what the prompts imply
    /// (`61 % / 63 %`).
    pub cache_hit: Option<String>,
}

/// An offered rate as a table shows it: `10`, `1.01` (a trace replay's mean rate is rarely
/// whole).
pub fn offered(rps: f64) -> String {
    if rps.fract() == 0.0 {
        format!("{rps}")
    } else {
        let s = format!("{rps:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A step's prefix-cache hit rates, the server's / the prompts' implied (`-` for one not
/// known); `None` when neither is.
fn cache_cell(st: &StepReport) -> Option<String> {
    let server = st.server.as_ref().and_then(|s| s.prefix_cache_hit_rate);
    let implied = st.cache.map(|c| c.implied_hit_rate);
    if server.is_none() && implied.is_none() {
        return None;
    }
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.0} %", v * 100.0));
    Some(format!("{} / {}", pct(server), pct(implied)))
}

impl StepCells {
    /// The cells of `st`, latencies written by `seconds`.
    pub fn of(st: &StepReport, seconds: impl Fn(f64) -> String) -> StepCells {
        let l = &st.latency_s;
        let srv = st.server.as_ref();
        let count = |v: Option<f64>| v.map(|v| format!("{v:.0}"));
        let secs = |v: Option<f64>| v.map(&seconds);
        StepCells {
            offered: match st.concurrency {
                Some(c) => format!("c={c}"),
                None => offered(st.target_rps),
            },
            sent: format!("{:.2}", st.sent_rps),
            achieved: format!("{:.2}", st.achieved_rps),
            ok: st.requests.ok.to_string(),
            failed: st.requests.failed.total.to_string(),
            dropped: st.requests.dropped.to_string(),
            e2e_p50: secs(l.e2e.p50),
            e2e_p95: secs(l.e2e.p95),
            e2e_p99: secs(l.e2e.p99),
            ttft_p95: secs(l.ttft.p95),
            tpot_p50: secs(l.tpot.p50),
            queue_p95: count(srv.and_then(|s| s.queue_depth.p95)),
            queue_max: count(srv.and_then(|s| s.queue_depth.max)),
            running_max: count(srv.and_then(|s| s.running.max)),
            kv_max: srv
                .and_then(|s| s.kv_cache_usage.max)
                .map(|v| format!("{:.0} %", v * 100.0)),
            server_e2e_p95: secs(srv.and_then(|s| s.e2e_p95_s)),
            lag_p99: st.client.lag_p99_s.map(|v| format!("{:.2} ms", v * 1e3)),
            goodput: st
                .goodput
                .map(|g| format!("{:.1} % · {:.1}/s", g.attainment * 100.0, g.rate_rps)),
            probe_p95: secs(st.probe.and_then(|p| p.ttft.p95)),
            cache_hit: cache_cell(st),
        }
    }
}

/// The summary's goodput line, when the run had an SLO: what judged the steps, and where
/// goodput alone puts the knee.
fn goodput_line(o: &mut String, run: &RunReport, sat: &inferscale_analysis::Saturation) {
    if let Some(slo) = run.slo {
        let _ = writeln!(
            o,
            "  goodput: the requests within {slo}; the steps judged by {}{}",
            sat.knee.words(),
            sat.goodput_knee_rps
                .filter(|_| sat.knee == inferscale_analysis::Knee::Queue)
                .map_or(String::new(), |g| format!(
                    " (by goodput ≥ {} % alone: {})",
                    inferscale_analysis::saturation::DEFAULT_GOODPUT_SHARE * 100.0,
                    rps(g)
                ))
        );
    }
}

/// The summary printed after an analysis.
pub fn summary(run: &RunReport, a: &Analysis) -> String {
    let sat = &a.saturation;
    let mut o = String::new();
    let _ = writeln!(o, "saturation: {}", sat.summary);
    if let Some(c) = sat.capacity_rps {
        let _ = write!(o, "  capacity ≈ {c:.1} req/s per replica");
        let mut how = Vec::new();
        if let Some(t) = sat.capacity_from_throughput_rps {
            how.push(format!("throughput while saturated {t:.1}"));
        }
        if let Some(l) = sat.capacity_from_littles_law_rps {
            how.push(format!("Little's law {l:.1}"));
        }
        if !how.is_empty() {
            let _ = write!(o, " ({})", how.join("; "));
        }
        o.push('\n');
    }
    goodput_line(&mut o, run, sat);
    let goodput_col = run.slo.is_some();
    let probe_col = run.plan.probe_rate_rps.is_some();
    // Shown for prompts with a cache structure (a shape, a trace).
    let cache_col = run.steps.iter().any(|s| s.cache.is_some());
    if cache_col {
        let _ = writeln!(o, "  prompts: {}", run.plan.requests.prompt.describe());
        let _ = writeln!(
            o,
            "  prefix cache: each step's hit rate as the server counted it / as the prompts' structure implies (an unbounded cache, sent in order); the server's is lower where its cache evicted, or a prompt came before the one it shares with was computed"
        );
    }
    let _ = writeln!(
        o,
        "\n  {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7}{}  verdict",
        "offered",
        "achieved",
        "e2e p50",
        "e2e p95",
        "TTFT p95",
        "queue95",
        "queuemx",
        if goodput_col {
            format!(" {:>17}", "goodput")
        } else {
            String::new()
        } + &if probe_col {
            format!(" {:>9}", "probe p95")
        } else {
            String::new()
        } + &if cache_col {
            format!(" {:>13}", "cache hit")
        } else {
            String::new()
        }
    );
    for (s, j) in run.steps.iter().zip(&sat.steps) {
        let srv = s.server.as_ref();
        let o2 = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
        let good = if goodput_col {
            format!(
                " {:>17}",
                StepCells::of(s, fmt_s)
                    .goodput
                    .unwrap_or_else(|| "-".into())
            )
        } else {
            String::new()
        };
        let probe = if probe_col {
            format!(
                " {:>9}",
                s.probe.and_then(|p| p.ttft.p95).map_or("-".into(), fmt_s)
            )
        } else {
            String::new()
        };
        let cache = if cache_col {
            format!(" {:>13}", cache_cell(s).unwrap_or_else(|| "-".into()))
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  {:>9} {:>9.2} {:>8} {:>8} {:>8} {:>7} {:>7}{good}{probe}{cache}  {}",
            match s.concurrency {
                Some(c) => format!("c={c}"),
                None => offered(s.target_rps),
            },
            s.achieved_rps,
            o2(s.latency_s.e2e.p50, &fmt_s),
            o2(s.latency_s.e2e.p95, &fmt_s),
            o2(s.latency_s.ttft.p95, &fmt_s),
            o2(srv.and_then(|v| v.queue_depth.p95), &|v| format!("{v:.0}")),
            o2(srv.and_then(|v| v.queue_depth.max), &|v| format!("{v:.0}")),
            match j.verdict {
                Verdict::Sustained => "sustained",
                Verdict::Saturated => "SATURATED",
                Verdict::Noisy => "noise (ignored)",
                Verdict::ClientLimited => "CLIENT-LIMITED",
                Verdict::NotJudged => "-",
            }
        );
    }
    match &a.thresholds {
        Ok(t) => {
            let _ = writeln!(
                o,
                "\nthresholds (healthy step {}, p95 {}):",
                rps(t.healthy.step_rps),
                fmt_s(t.healthy.p95_e2e_seconds)
            );
            let _ = writeln!(
                o,
                "  scale out   queue > {} per pod for {} s (KEDA AverageValue), guardrail p95 e2e > {} s{}",
                t.scale_out.queue_depth_per_pod,
                t.scale_out.for_seconds,
                t.scale_out.p95_e2e_seconds,
                t.scale_out
                    .p95_ttft_seconds
                    .map_or(String::new(), |v| format!(", p95 TTFT > {v} s"))
            );
            let _ = writeln!(
                o,
                "  scale in    queue = 0 and p95 e2e < {} s for {} s",
                t.scale_in.p95_e2e_seconds, t.scale_in.for_seconds
            );
            let _ = writeln!(o, "  activation  queue > {}", t.activation.queue_depth);
            if let Some(p) = &t.peak {
                let _ = writeln!(
                    o,
                    "  peak        {} req/s needs {} replicas ({} req/s each)",
                    p.rps, p.replicas, p.per_replica_rps
                );
            }
            for w in &t.warnings {
                let _ = writeln!(o, "  warning: {w}");
            }
        }
        Err(e) => {
            let _ = writeln!(o, "\nno thresholds: {e}");
        }
    }
    if run.interrupted {
        o.push_str("\nPARTIAL: the run was interrupted; its last step is incomplete.\n");
    }
    o
}
