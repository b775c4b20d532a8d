//! Where a replica saturates: each step judged on its own (did the server keep up, did its
//! queue grow), then the steps read together (a lone bad step below good ones is noise; a
//! client-limited step says nothing about the server).
//!
//! The method and its constants are documented in `docs/analysis.md`.

use inferscale_results::run::{RunReport, StepReport, TimelinePoint};
use serde::{Deserialize, Serialize};

/// Achieved throughput may fall this far below the offered rate (or 3/√n for n requests,
/// whichever is larger: Poisson arrivals vary that much on their own) and still keep up.
pub const KEEP_UP_TOLERANCE: f64 = 0.05;
/// A queue that rises by more than this many requests over a step (linear trend) grows.
pub const QUEUE_GROWTH_MIN: f64 = 5.0;
/// Above this fraction of failed requests, the server did not sustain the step.
pub const ERROR_RATE_MAX: f64 = 0.05;
/// Above this fraction of dropped requests (the in-flight cap filled), the server did not
/// keep up (unless the client was the limit).
pub const DROP_RATE_MAX: f64 = 0.001;
/// Without server metrics, a step whose e2e p95 is this many times the lowest step's has
/// queued (the only evidence left of a growing queue).
pub const LATENCY_BLOWUP: f64 = 2.0;

/// A probe stall shorter than this is not taken as queueing, however many times the
/// lowest step's it is (a few milliseconds of prefill doubling is noise), seconds.
pub const PROBE_STALL_MIN_S: f64 = 0.25;

/// What one step showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The server kept up and its queue stayed flat.
    Sustained,
    /// It did not.
    Saturated,
    /// Saturated on its own, but a higher rate was sustained afterwards: not counted.
    Noisy,
    /// The load generator was the bottleneck: the step says nothing about the server.
    ClientLimited,
    /// A closed-loop step (no offered rate) or one without a successful request.
    NotJudged,
}

/// One step, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepAssessment {
    /// The step's index in `run.json`.
    pub index: usize,
    /// Offered rate, req/s.
    pub target_rps: f64,
    /// Achieved throughput, req/s.
    pub achieved_rps: f64,
    /// `achieved / target`.
    pub keep_up_ratio: f64,
    /// The server's queue rise over the step (linear trend × duration), when scraped.
    pub queue_growth: Option<f64>,
    /// The server's queue p95 over the step.
    pub queue_p95: Option<f64>,
    /// Failed / sent.
    pub error_rate: f64,
    /// Dropped / scheduled.
    pub drop_rate: f64,
    /// Client e2e p95, seconds.
    pub e2e_p95_s: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in words.
    pub reasons: Vec<String>,
}

/// The run's overall finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Sustained up to one rate, not from the next on.
    Saturated,
    /// Every step was sustained: capacity is above the highest rate.
    NotSaturated,
    /// Not even the first step was sustained.
    SaturatedFromStart,
    /// The load generator limited the run before the server did.
    ClientLimited,
    /// No open-loop step could be judged.
    NoData,
}

/// Where the replica saturates, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// The finding.
    pub status: Status,
    /// The highest offered rate sustained (below the first saturated one).
    pub saturation_rps: Option<f64>,
    /// The first offered rate not sustained (from which no higher rate was).
    pub first_saturated_rps: Option<f64>,
    /// The estimate of capacity, req/s: between the two above when both are known.
    pub capacity_rps: Option<f64>,
    /// Capacity from the throughput achieved while saturated.
    pub capacity_from_throughput_rps: Option<f64>,
    /// Capacity from Little's law: concurrent requests at saturation over the healthy mean
    /// latency.
    pub capacity_from_littles_law_rps: Option<f64>,
    /// The step the thresholds are measured at: the last sustained one.
    pub healthy_step: Option<usize>,
    /// The first saturated step.
    pub saturated_step: Option<usize>,
    /// Every step judged.
    pub steps: Vec<StepAssessment>,
    /// The evidence, sentence by sentence.
    pub evidence: Vec<String>,
    /// One sentence for a summary.
    pub summary: String,
    /// What judged the steps.
    #[serde(default = "queue_knee")]
    pub knee: Knee,
    /// With a run that counted goodput: the highest offered rate at which goodput met
    /// [`DEFAULT_GOODPUT_SHARE`] (or the knee's share), whichever knee judged the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_knee_rps: Option<f64>,
}

/// [`Knee::Queue`], for files written before the knee was recorded.
pub fn queue_knee() -> Knee {
    Knee::Queue
}

/// Least-squares slope of `(t, y)`, per unit of `t`.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The server's queue over a step's window, from the timeline.
fn queue_points(step: &StepReport, timeline: &[TimelinePoint]) -> Vec<(f64, f64)> {
    timeline
        .iter()
        .filter(|p| p.step == Some(step.index))
        .filter_map(|p| Some((p.t_s, p.queue_depth?)))
        .collect()
}

fn fmt_stall(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn fmt_rps(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{r:.0} req/s")
    } else {
        format!("{r:.1} req/s")
    }
}

/// Judges one step on its own.
pub fn assess_step(
    step: &StepReport,
    timeline: &[TimelinePoint],
    min_p95: Option<f64>,
    min_probe_p95: Option<f64>,
) -> StepAssessment {
    let q = &step.requests;
    let sent = q.scheduled.saturating_sub(q.dropped);
    let error_rate = if sent > 0 {
        q.failed.total as f64 / sent as f64
    } else {
        0.0
    };
    let drop_rate = if q.scheduled > 0 {
        q.dropped as f64 / q.scheduled as f64
    } else {
        0.0
    };
    let keep_up_ratio = if step.target_rps > 0.0 {
        step.achieved_rps / step.target_rps
    } else {
        0.0
    };
    let points = queue_points(step, timeline);
    let queue_growth = slope(&points).map(|s| s * step.duration_s);
    let queue_p95 = step.server.as_ref().and_then(|s| s.queue_depth.p95);
    let e2e_p95_s = step.latency_s.e2e.p95;
    let mut a = StepAssessment {
        index: step.index,
        target_rps: step.target_rps,
        achieved_rps: step.achieved_rps,
        keep_up_ratio,
        queue_growth,
        queue_p95,
        error_rate,
        drop_rate,
        e2e_p95_s,
        verdict: Verdict::Sustained,
        reasons: Vec::new(),
    };
    if step.concurrency.is_some() || step.target_rps <= 0.0 {
        a.verdict = Verdict::NotJudged;
        a.reasons
            .push("a closed-loop step has no offered rate to keep up with".into());
        return a;
    }
    if q.ok == 0 {
        a.verdict = Verdict::NotJudged;
        a.reasons.push("no request succeeded".into());
        // Nothing answered at all is the clearest saturation there is, unless the client failed.
        if !step.client.client_limited && q.failed.total > 0 {
            a.verdict = Verdict::Saturated;
        }
        return a;
    }
    if step.client.client_limited {
        a.verdict = Verdict::ClientLimited;
        a.reasons.push(format!(
            "the load generator was the bottleneck ({})",
            step.client
                .reason
                .as_deref()
                .unwrap_or("schedule lag or drops")
        ));
        return a;
    }
    let expected = step.target_rps * step.duration_s;
    let tolerance = KEEP_UP_TOLERANCE.max(3.0 / expected.max(1.0).sqrt());
    let mut bad = Vec::new();
    if keep_up_ratio < 1.0 - tolerance {
        bad.push(format!(
            "achieved {} of {} offered ({:.0} %)",
            fmt_rps(step.achieved_rps),
            fmt_rps(step.target_rps),
            keep_up_ratio * 100.0
        ));
    }
    match queue_growth {
        Some(g) if g > QUEUE_GROWTH_MIN => bad.push(format!(
            "the server's queue grew by {g:.0} requests over the step (p95 {})",
            queue_p95.map_or("-".into(), |p| format!("{p:.0}"))
        )),
        Some(_) => {}
        None => {
            // No queue to look at: a latency that doubled is the remaining sign of queueing.
            if let (Some(p), Some(m)) = (e2e_p95_s, min_p95)
                && p > LATENCY_BLOWUP * m
            {
                bad.push(format!(
                    "no server queue scraped; e2e p95 {p:.2} s is {:.1}× the lowest step's",
                    p / m
                ));
            }
            // The probe stream's stall is the same sign, measured apart from the workload.
            if let (Some(p), Some(m)) = (step.probe.and_then(|p| p.ttft.p95), min_probe_p95)
                && p > LATENCY_BLOWUP * m
                && p > PROBE_STALL_MIN_S
            {
                bad.push(format!(
                    "no server queue scraped; the probes' TTFT p95 {p:.2} s is {:.1}× the lowest step's",
                    p / m
                ));
            }
        }
    }
    if error_rate > ERROR_RATE_MAX {
        bad.push(format!("{:.1} % of requests failed", error_rate * 100.0));
    }
    if drop_rate > DROP_RATE_MAX {
        bad.push(format!(
            "{:.1} % dropped: the in-flight cap filled while the server was slow",
            drop_rate * 100.0
        ));
    }
    if bad.is_empty() {
        a.reasons.push(format!(
            "achieved {} ({:.0} %), queue {}",
            fmt_rps(step.achieved_rps),
            keep_up_ratio * 100.0,
            match (queue_growth, queue_p95) {
                (Some(g), Some(p)) => format!("flat (trend {g:+.1}, p95 {p:.0})"),
                _ => "not scraped".into(),
            }
        ));
    } else {
        a.verdict = Verdict::Saturated;
        a.reasons = bad;
    }
    a
}

/// What decides whether a step was sustained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Knee {
    /// The method's: the server kept up and its queue stayed flat (the default).
    Queue,
    /// The share of the step's requests that met the run's SLO (its goodput attainment)
    /// is at least this (0–1): the knee is the highest rate at which it is.
    Goodput(f64),
}

/// The goodput share [`Knee::Goodput`] asks for when none is named: 95 %.
pub const DEFAULT_GOODPUT_SHARE: f64 = 0.95;

/// Why a knee cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--knee {text:?}: {why}")]
pub struct KneeError {
    /// What was given.
    pub text: String,
    /// What was wrong.
    pub why: String,
}

impl Knee {
    /// Reads `queue`, `goodput` or `goodput:PERCENT` (`goodput:95`).
    pub fn parse(text: &str) -> Result<Knee, KneeError> {
        let err = |why: &str| KneeError {
            text: text.to_owned(),
            why: why.to_owned(),
        };
        match text.trim() {
            "queue" => Ok(Knee::Queue),
            "goodput" => Ok(Knee::Goodput(DEFAULT_GOODPUT_SHARE)),
            t => {
                let pct = t.strip_prefix("goodput:").ok_or_else(|| {
                    err("expected queue, goodput or goodput:PERCENT (goodput:95)")
                })?;
                let v: f64 = pct
                    .trim()
                    .trim_end_matches('%')
                    .parse()
                    .map_err(|_| err("the share is not a number (goodput:95)"))?;
                if !(v > 0.0 && v <= 100.0) {
                    return Err(err("the share is a percentage above 0, at most 100"));
                }
                Ok(Knee::Goodput(v / 100.0))
            }
        }
    }

    /// In words: `the queue` or `goodput ≥ 95 %`.
    pub fn words(self) -> String {
        match self {
            Knee::Queue => "the queue".into(),
            Knee::Goodput(x) => format!("goodput ≥ {} %", x * 100.0),
        }
    }
}

/// The highest offered rate below the first open-loop step whose goodput attainment fell
/// under `share`, in rate order, and that first step's rate; `None` when the steps carry no
/// goodput.
pub fn goodput_knee(run: &RunReport, share: f64) -> Option<(Option<f64>, Option<f64>)> {
    let mut steps: Vec<(f64, f64)> = run
        .steps
        .iter()
        .filter(|s| s.concurrency.is_none() && s.target_rps > 0.0)
        .filter_map(|s| Some((s.target_rps, s.goodput?.attainment)))
        .collect();
    if steps.is_empty() {
        return None;
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first_bad = steps.iter().position(|(_, a)| *a < share);
    let end = first_bad.unwrap_or(steps.len());
    Some((
        end.checked_sub(1).map(|i| steps[i].0),
        first_bad.map(|i| steps[i].0),
    ))
}

/// Judges each step by its goodput instead of its queue: sustained when its attainment is
/// at least `share` (a client-limited or unjudged step stays so).
fn judge_by_goodput(run: &RunReport, steps: &mut [StepAssessment], share: f64) {
    for (a, s) in steps.iter_mut().zip(&run.steps) {
        if matches!(a.verdict, Verdict::ClientLimited | Verdict::NotJudged) && s.requests.ok > 0 {
            continue;
        }
        let Some(g) = s.goodput else {
            continue;
        };
        if s.concurrency.is_some() || s.target_rps <= 0.0 {
            continue;
        }
        let queue = std::mem::take(&mut a.reasons).join("; ");
        let line = format!(
            "goodput {:.1} % ({} of {} requests within the SLO, {} good)",
            g.attainment * 100.0,
            g.good,
            g.scheduled,
            fmt_rps(g.rate_rps)
        );
        a.verdict = if g.attainment >= share {
            Verdict::Sustained
        } else {
            Verdict::Saturated
        };
        a.reasons = vec![format!(
            "{line} {} {} % (the queue said: {queue})",
            if g.attainment >= share { "≥" } else { "<" },
            share * 100.0
        )];
    }
}

/// Finds the saturation point of a run by the method's queue knee.
pub fn saturation(run: &RunReport) -> Saturation {
    saturation_by(run, Knee::Queue)
}

/// Finds the saturation point of a run, each step judged as `knee` says. With a run that
/// counted goodput, the evidence also says where goodput alone would put the knee.
// Long: one pass over the steps in rate order, each outcome (no data, client-limited, not
// saturated, saturated) a branch that writes its own evidence and summary.
pub fn saturation_by(run: &RunReport, knee: Knee) -> Saturation {
    let min_p95 = run
        .steps
        .iter()
        .filter(|s| s.concurrency.is_none())
        .filter_map(|s| s.latency_s.e2e.p95)
        .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.min(p))));
    let min_probe_p95 = run
        .steps
        .iter()
        .filter(|s| s.concurrency.is_none())
        .filter_map(|s| s.probe.and_then(|p| p.ttft.p95))
        .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.min(p))));
    let mut steps: Vec<StepAssessment> = run
        .steps
        .iter()
        .map(|s| assess_step(s, &run.timeline, min_p95, min_probe_p95))
        .collect();
    if let Knee::Goodput(share) = knee {
        judge_by_goodput(run, &mut steps, share);
    }
    // Read in order of offered rate.
    let mut order: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].verdict != Verdict::NotJudged || steps[i].target_rps > 0.0)
        .filter(|&i| run.steps[i].concurrency.is_none())
        .collect();
    order.sort_by(|&a, &b| steps[a].target_rps.total_cmp(&steps[b].target_rps));
    let mut evidence = Vec::new();
    let share = match knee {
        Knee::Goodput(x) => x,
        Knee::Queue => DEFAULT_GOODPUT_SHARE,
    };
    let by_goodput = goodput_knee(run, share);
    if let inferscale_results::plan::PromptSource::Trace {
        dispatch: inferscale_results::plan::Dispatch::ThinkTime,
        ..
    } = run.plan.requests.prompt
    {
        evidence.push(
            "the steps replay a trace with think-time dispatch: a later turn waits for the answer before it, so when answers slow, fewer requests come in a step's window than its rate says; a step that fell short may have been held back by its own clients, and the knee is surer with --dispatch timestamp".into(),
        );
    }
    if let Some(rate) = run.plan.probe_rate_rps {
        let per_step: Vec<String> = run
            .steps
            .iter()
            .filter_map(|s| {
                let p95 = s.probe?.ttft.p95?;
                Some(format!("{} {}", fmt_rps(s.target_rps), fmt_stall(p95)))
            })
            .collect();
        if !per_step.is_empty() {
            evidence.push(format!(
                "the probe stream ({}, one token each, beside the plan): time to first token p95 {}",
                fmt_rps(rate),
                per_step.join(", ")
            ));
        }
    }
    if let (Some((ok, bad)), Some(slo)) = (by_goodput, run.slo) {
        evidence.push(format!(
            "by goodput (≥ {} % of requests within {slo}): {}",
            share * 100.0,
            match (ok, bad) {
                (Some(o), Some(b)) => format!("met up to {}, not at {}", fmt_rps(o), fmt_rps(b)),
                (Some(o), None) => format!("met at every step, up to {}", fmt_rps(o)),
                (None, Some(b)) => format!("not met even at {}", fmt_rps(b)),
                (None, None) => "no step".into(),
            }
        ));
    }
    // A saturated step with a sustained step at a higher rate after it is noise.
    for (k, &i) in order.iter().enumerate() {
        if steps[i].verdict == Verdict::Saturated
            && order[k + 1..]
                .iter()
                .any(|&j| steps[j].verdict == Verdict::Sustained)
        {
            steps[i].verdict = Verdict::Noisy;
            evidence.push(format!(
                "the step at {} looked saturated ({}) but a higher rate was sustained afterwards: treated as noise",
                fmt_rps(steps[i].target_rps),
                steps[i].reasons.join("; ")
            ));
        }
    }
    let first_sat = order
        .iter()
        .copied()
        .find(|&i| steps[i].verdict == Verdict::Saturated);
    let first_client = order
        .iter()
        .copied()
        .find(|&i| steps[i].verdict == Verdict::ClientLimited);
    let last_ok_before = |limit: Option<usize>| -> Option<usize> {
        let bound = limit.map_or(f64::INFINITY, |l| steps[l].target_rps);
        order
            .iter()
            .copied()
            .rev()
            .find(|&i| steps[i].verdict == Verdict::Sustained && steps[i].target_rps < bound)
    };
    let judged = order
        .iter()
        .any(|&i| steps[i].verdict != Verdict::NotJudged);
    let mut s = Saturation {
        status: Status::NoData,
        saturation_rps: None,
        first_saturated_rps: None,
        capacity_rps: None,
        capacity_from_throughput_rps: None,
        capacity_from_littles_law_rps: None,
        healthy_step: None,
        saturated_step: None,
        steps: Vec::new(),
        evidence,
        summary: String::new(),
        knee,
        goodput_knee_rps: by_goodput.and_then(|k| k.0),
    };
    if !judged {
        s.summary =
            "no open-loop step could be judged (closed-loop steps or no successful request)".into();
        s.steps = steps;
        return s;
    }
    let client_first = match (first_client, first_sat) {
        (Some(c), Some(f)) => steps[c].target_rps <= steps[f].target_rps,
        (Some(_), None) => true,
        _ => false,
    };
    if client_first {
        let c = first_client.unwrap_or_default();
        let healthy = last_ok_before(Some(c));
        s.status = Status::ClientLimited;
        s.healthy_step = healthy;
        s.saturation_rps = healthy.map(|h| steps[h].target_rps);
        s.evidence.push(format!(
            "at {} the load generator, not the server, was the limit ({}); a saturation seen from there on cannot be attributed to the server",
            fmt_rps(steps[c].target_rps),
            steps[c].reasons.join("; ")
        ));
        s.summary = format!(
            "client-limited from {}: the server sustained {} at least; rerun with more client capacity",
            fmt_rps(steps[c].target_rps),
            s.saturation_rps.map_or("no step".into(), fmt_rps)
        );
        s.steps = steps;
        return s;
    }
    match first_sat {
        None => {
            let healthy = last_ok_before(None);
            s.status = Status::NotSaturated;
            s.healthy_step = healthy;
            s.saturation_rps = healthy.map(|h| steps[h].target_rps);
            let top = s.saturation_rps.unwrap_or(0.0);
            s.evidence.push(format!(
                "every step up to {} was sustained: the capacity is above it",
                fmt_rps(top)
            ));
            s.summary = format!("not saturated up to {}", fmt_rps(top));
        }
        Some(f) => {
            let healthy = last_ok_before(Some(f));
            s.saturated_step = Some(steps[f].index);
            s.first_saturated_rps = Some(steps[f].target_rps);
            s.healthy_step = healthy;
            s.saturation_rps = healthy.map(|h| steps[h].target_rps);
            s.status = if healthy.is_some() {
                Status::Saturated
            } else {
                Status::SaturatedFromStart
            };
            if let Some(h) = healthy {
                s.evidence.push(format!(
                    "sustained at {}: {}",
                    fmt_rps(steps[h].target_rps),
                    steps[h].reasons.join("; ")
                ));
            }
            s.evidence.push(format!(
                "not sustained at {}: {}",
                fmt_rps(steps[f].target_rps),
                steps[f].reasons.join("; ")
            ));
            s.summary = match healthy {
                Some(h) => format!(
                    "saturates between {} and {}",
                    fmt_rps(steps[h].target_rps),
                    fmt_rps(steps[f].target_rps)
                ),
                None => format!(
                    "saturated from the first step ({}): lower the rates",
                    fmt_rps(steps[f].target_rps)
                ),
            };
        }
    }
    capacity(run, &mut s, &steps);
    s.steps = steps;
    s
}

/// The capacity estimates.
fn capacity(run: &RunReport, s: &mut Saturation, steps: &[StepAssessment]) {
    // Throughput while saturated: the median achieved rate over the saturated steps.
    let mut sat: Vec<f64> = steps
        .iter()
        .filter(|a| a.verdict == Verdict::Saturated && a.achieved_rps > 0.0)
        .map(|a| a.achieved_rps)
        .collect();
    sat.sort_by(f64::total_cmp);
    let thr = sat.get(sat.len() / 2).copied();
    s.capacity_from_throughput_rps = thr;
    if let Some(t) = thr {
        s.evidence.push(format!(
            "while saturated the server completed {} (median over {} saturated step{})",
            fmt_rps(t),
            sat.len(),
            if sat.len() == 1 { "" } else { "s" }
        ));
    }
    // Little's law: concurrency at saturation / healthy mean latency.
    let healthy = s.healthy_step.and_then(|h| run.steps.get(h));
    let concurrency = run.target.max_num_seqs.map(f64::from).or_else(|| {
        s.saturated_step
            .and_then(|i| run.steps.get(i))
            .and_then(|st| st.server.as_ref())
            .and_then(|sv| sv.running.max)
    });
    let mean = healthy.and_then(|h| h.latency_s.e2e.mean);
    if let (Some(n), Some(w)) = (concurrency, mean)
        && w > 0.0
    {
        let c = n / w;
        s.capacity_from_littles_law_rps = Some(c);
        s.evidence.push(format!(
            "Little's law: {n:.0} concurrent requests / {w:.2} s mean latency at the healthy step = {}",
            fmt_rps(c)
        ));
    }
    let raw = thr.or(s.capacity_from_littles_law_rps);
    s.capacity_rps = match (raw, s.saturation_rps, s.first_saturated_rps) {
        (Some(c), Some(lo), Some(hi)) => Some(c.clamp(lo, hi)),
        (Some(c), Some(lo), None) => Some(c.max(lo)),
        (Some(c), None, Some(hi)) => Some(c.min(hi)),
        (c, _, _) => c,
    };
    if s.status == Status::NotSaturated {
        // Only a projection: nothing saturated, so throughput says nothing about the ceiling.
        s.capacity_rps = s
            .capacity_from_littles_law_rps
            .zip(s.saturation_rps)
            .map(|(c, lo)| c.max(lo));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 2.0 * f64::from(i) + 1.0))
            .collect();
        assert!((slope(&pts).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(slope(&pts[..2]), None);
    }

    #[test]
    fn a_knee_reads_queue_or_a_goodput_share_and_names_what_is_wrong() {
        assert_eq!(Knee::parse("queue"), Ok(Knee::Queue));
        assert_eq!(Knee::parse("goodput"), Ok(Knee::Goodput(0.95)));
        assert_eq!(Knee::parse("goodput:99%"), Ok(Knee::Goodput(0.99)));
        for (bad, says) in [
            ("latency", "expected queue, goodput or goodput:PERCENT"),
            ("goodput:most", "not a number"),
            ("goodput:0", "above 0, at most 100"),
            ("goodput:120", "above 0, at most 100"),
        ] {
            let e = Knee::parse(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
    }
}
