//! Tuning the scaling policy from thresholds.json (`inferscale tune`, and `run` after its
//! analysis): the setup resolved from the flags and the measurement, the search run with
//! progress on standard error, and the result as tables, JSON and a page.

use std::fmt::Write as _;

use anyhow::{Result, anyhow};
use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::Policy;
use inferscale_autoscale::rehearse::{Client, Exporters, Setup};
use inferscale_autoscale::tune::{
    Evaluated, Trace, TraceResult, TuneReport, TuneSetup, builtin_held_out, builtin_suite,
    capacity_at_slo, tune,
};
use inferscale_manifests::Options;
use inferscale_sim::FleetExporters;

use crate::job::replica::{Replica, cluster, request};

/// What a tuning is asked for.
pub(crate) struct Ask<'a> {
    /// The measurement.
    pub(crate) thresholds: &'a Thresholds,
    /// The generated files' options (names, bounds, cold start).
    pub(crate) options: Options,
    /// Whether `--max-replicas` was given (else the tuning makes room for its suite).
    pub(crate) max_given: bool,
    /// The replica.
    pub(crate) replica: &'a Replica,
    /// The clients.
    pub(crate) client: Client,
    /// The SLO, seconds (default: the thresholds' guardrail).
    pub(crate) slo_e2e_s: Option<f64>,
    /// Share of requests within it, 0–1.
    pub(crate) attainment: f64,
    /// The traces tuned on (`None`: the built-in suite).
    pub(crate) suite: Option<Vec<Trace>>,
    /// The held-out traces (`None`: the built-in ones when the suite is built in).
    pub(crate) held_out: Option<Vec<Trace>>,
    /// The seed.
    pub(crate) seed: u64,
    /// The deployment sits behind an inference gateway: its signals are candidates too.
    pub(crate) gateway: bool,
    /// The prompts, when they share prefixes (`None`: unique); a request trace's own
    /// prompts go with it.
    pub(crate) prompts: Option<crate::job::prompts::Prompts>,
}

/// Runs the tuning, its progress on standard error.
pub(crate) fn run(ask: Ask<'_>) -> Result<(TuneReport, Option<Policy>)> {
    let t = ask.thresholds;
    let capacity = t
        .capacity_rps
        .or(t.saturation_rps)
        .ok_or_else(|| anyhow!("the thresholds have no capacity to tune on"))?;
    if !(ask.attainment > 0.0 && ask.attainment < 1.0) {
        return Err(anyhow!(
            "--attainment {}: expected a percentage above 0 and below 100",
            ask.attainment * 100.0
        ));
    }
    // The SLO asked for, else the run's own (`--slo e2e=`), else the measured guardrail.
    let slo = ask
        .slo_e2e_s
        .or(t.slo.and_then(|s| s.e2e_s))
        .unwrap_or(t.scale_out.p95_e2e_seconds);
    if !(slo.is_finite() && slo > 0.0) {
        return Err(anyhow!("--slo-e2e {slo} s: expected more than 0"));
    }
    let engine = ask.replica.engine.clone();
    let mut o = ask.options;
    o.policy = None;
    let mut base = Setup {
        request: request(None, None, Some(t)),
        prompts: ask.prompts.as_ref().map(|p| p.cycle.clone()),
        routing: crate::job::replica::routing(ask.gateway),
        initial_replicas: 1,
        duration_s: 3600.0,
        seed: ask.seed,
        slo_e2e_s: slo,
        scrape_interval_s: 15.0,
        hpa_sync_s: 15.0,
        rule_interval_s: 30.0,
        step_s: 15.0,
        cluster: cluster(t, &o, &engine, 1),
        rules: Vec::new(),
        client: ask.client,
        transients: Vec::new(),
        judge_from_s: 0.0,
        engine: engine.clone(),
    };
    if let Some(p) = &ask.prompts {
        eprintln!(
            "tune: the replicas are sent {} ({} a pass), {}",
            p.about,
            p.cycle.len(),
            if engine.prefix_caching {
                "their prefix caches finding what they share"
            } else {
                "which this replica has no cache for (a calibrated one has the measured server's caching in its step times)"
            }
        );
    }
    eprintln!(
        "tune: capacity at the SLO: the highest steady rate one replica serves with {:.1} % of requests within {slo} s…",
        ask.attainment * 100.0
    );
    let capacity_slo = capacity_at_slo(&base, capacity, slo, ask.attainment)?;
    // The suite's unit: the measured capacity; when the run did not saturate the server (it
    // never got there, or the client was the limit), that is an estimate, and the capacity
    // at the SLO is the better measure of what a replica holds.
    let unit = if t.status == inferscale_analysis::Status::Saturated {
        capacity
    } else {
        eprintln!(
            "tune: the run did not saturate the server ({}): the suite is in multiples of the capacity at the SLO ({capacity_slo:.1} req/s), not of the {capacity:.1} req/s estimated",
            t.rationale.get("saturation").map_or("", String::as_str)
        );
        capacity_slo
    };
    let builtin = ask.suite.is_none();
    let suite = ask.suite.unwrap_or_else(|| builtin_suite(unit));
    let held_out = ask.held_out.unwrap_or_else(|| {
        if builtin {
            builtin_held_out(unit)
        } else {
            Vec::new()
        }
    });
    if !ask.max_given {
        // Room for the suite's peak at 80 % of a replica's capacity, and one replica more:
        // what a policy that holds needs. More room would only let the HPA over-provision
        // after a step (the search tries twice as much where a step's backlog needs it).
        let peak = suite
            .iter()
            .chain(&held_out)
            .map(|tr| tr.traffic.peak(tr.duration_s))
            .fold(0.0, f64::max);
        let need = (peak / (0.8 * unit)).ceil() as u32 + 1;
        o.max_replicas = o
            .max_replicas
            .max(need)
            .min(inferscale_manifests::MAX_REPLICAS);
    }
    base.cluster = cluster(t, &o, &engine, 1);
    let gpus = base.cluster.gpus_per_pod;
    let startup_s = f64::from(o.cold_start_s);
    let ts = TuneSetup {
        base,
        thresholds: t.clone(),
        options: o.clone(),
        attainment: ask.attainment,
        capacity_rps: unit,
        capacity_slo_rps: Some(capacity_slo),
        startup_s,
        gpus_per_replica: gpus,
        suite,
        held_out,
        gateway: ask.gateway,
    };
    let model = o.model_name.clone();
    let speaks = inferscale_sim::Speaks::of(o.engine).ok_or_else(|| {
        anyhow!(
            "the rehearsal's simulator serves vLLM's and llama.cpp's metrics, not {}'s: tune cannot rehearse a ScaledObject that reads them",
            o.engine.title()
        )
    })?;
    let make = move || -> Box<dyn Exporters> {
        Box::new(FleetExporters::new(&engine, &model).speaking(speaks))
    };
    eprintln!(
        "tune: {} on {}; SLO {slo} s for {:.1} % of requests; a replica starts in {startup_s:.0} s on a new node",
        ask.replica.about,
        if builtin {
            "the built-in suite".to_owned()
        } else {
            format!("{} trace(s)", ts.suite.len())
        },
        ask.attainment * 100.0
    );
    let started = inferscale_clock::now();
    let (report, policy) = tune(&ts, &make, &mut |line| eprintln!("tune: {line}"))?;
    eprintln!(
        "tune: {} rehearsals in {:.1} s",
        report.rehearsals,
        started.elapsed().as_secs_f64()
    );
    Ok((report, policy))
}

fn pct(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

fn candidate_row(s: &mut String, e: &Evaluated, mark: &str, width: usize) {
    let stopped = e.stopped();
    let _ = writeln!(
        s,
        "{mark}{:<width$} {:>5} {:>9} {:>8.2} {:>7.2}× {:>6}  {stopped}",
        e.label,
        if e.held { "yes" } else { "no" },
        pct(e.worst_attainment),
        e.gpu_hours,
        e.cost_ratio(),
        e.steady_flaps,
    );
}

/// The policy column of the per-trace tables: the chosen candidate's label is in the table
/// above (marked `*`), long; here it is "tuned".
const TUNED: &str = "tuned (*)";

fn trace_rows(s: &mut String, label: &str, results: &[TraceResult]) {
    for r in results {
        let _ = writeln!(
            s,
            "  {:<14} {:<14} {:>9} {:>9} {:>7.2} {:>9.2} {:>6.2}× {:>5} {:>5}  {}",
            r.trace,
            label,
            pct(r.attainment),
            pct(r.attainment_outside),
            r.foresight_gpu_hours,
            r.gpu_hours,
            r.cost_ratio(),
            r.flaps,
            r.max_replicas,
            r.alerts_fired.join(",")
        );
    }
}

/// The tables: candidates, the front, the chosen and the seeds per trace, held out apart,
/// and what cannot be held.
pub(crate) fn text(r: &TuneReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "capacity: {:.2} req/s per replica measured, {:.2} req/s within the SLO ({} s for {:.1} % of requests); start-up {:.0} s; clients: {}",
        r.capacity_rps,
        r.capacity_slo_rps,
        r.slo_e2e_s,
        r.attainment * 100.0,
        r.startup_s,
        match r.client.timeout_s {
            Some(t) => format!(
                "give up after {t:.0} s, {} retries with backoff",
                r.client.max_retries
            ),
            None => "wait forever".into(),
        }
    );
    let width = std::iter::once(&r.seeds)
        .chain(&r.candidates)
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0)
        .max("candidate".len());
    let _ = writeln!(
        s,
        "\n  {:<width$} {:>5} {:>9} {:>8} {:>8} {:>6}",
        "candidate", "held", "worst", "GPU-h", "vs best", "flaps"
    );
    candidate_row(&mut s, &r.seeds, "  ", width);
    for (i, c) in r.candidates.iter().enumerate() {
        let mark = if r.chosen == Some(i) {
            "* "
        } else if r.front.contains(&i) {
            "o "
        } else {
            "  "
        };
        candidate_row(&mut s, c, mark, width);
    }
    let _ = writeln!(
        s,
        "  (* chosen, o on the Pareto front of worst attainment, GPU-hours and steady flaps; 'vs best' is against the perfect-foresight schedule)"
    );
    let header = |s: &mut String, title: &str| {
        let _ = writeln!(
            s,
            "\n{title}\n  {:<14} {:<14} {:>9} {:>9} {:>7} {:>9} {:>7} {:>5} {:>5}  alerts",
            "trace", "policy", "SLO met", "outside", "best", "GPU-h", "×best", "flaps", "max"
        );
    };
    header(&mut s, "per trace (tuned on):");
    let chosen = r.chosen.map(|i| &r.candidates[i]);
    if let Some(c) = chosen {
        trace_rows(&mut s, TUNED, &c.results);
    }
    trace_rows(&mut s, &r.seeds.label, &r.seeds.results);
    if !r.held_out.is_empty() {
        header(&mut s, "held out (never tuned on):");
        for (label, results) in &r.held_out {
            let label = if chosen.is_some_and(|c| &c.label == label) {
                TUNED
            } else {
                label
            };
            trace_rows(&mut s, label, results);
        }
    }
    s.push('\n');
    for st in &r.statements {
        let _ = writeln!(s, "- {st}");
    }
    s
}
