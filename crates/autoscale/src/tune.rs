//! `inferscale tune`: the scaling policy searched in the rehearsal, so that what `generate`
//! writes is a configuration the rehearsal has shown to hold, at the least cost, and what
//! cannot be held is said with its numbers.
//!
//! 1. **The replica's capacity at the SLO** ([`capacity_at_slo`]): the highest steady rate
//!    one replica serves with the SLO met for the share asked (bisection, one replica in
//!    virtual time). Poisson arrivals split at random over `n` replicas are `n` Poisson
//!    streams, so `n` replicas hold `n` times it.
//! 2. **A traffic suite** relative to the measured capacity ([`builtin_suite`]): steady
//!    loads at several multiples, a step, a ramp, a compressed day and a short spike; and
//!    held-out traces ([`builtin_held_out`]) the search never sees, reported apart.
//! 3. **The perfect-foresight schedule** of each trace ([`foresight_gpu_hours`]): the fewest
//!    replicas that hold the SLO at each instant, each started exactly one start-up ahead;
//!    its GPU-hours are the floor a policy is held against.
//! 4. **The search** ([`tune`]): the seeds' configuration on the suite, for comparison; the
//!    proportional policy from its highest utilisation down until one holds (the SLO met
//!    outside the named transients on every trace, no flap at steady load), then the other
//!    primary signal and the cost trims (a shorter scale-down window, faster consolidation,
//!    no booster), each kept only if it still holds and costs less. A candidate stops at the
//!    first trace it fails. Every rehearsal uses the same seed, so candidates meet the same
//!    arrivals. Behind an inference gateway ([`TuneSetup::gateway`]), the gateway's requests
//!    in flight and token backlog are candidates beside the engine's signals, read from the
//!    rehearsal's modelled endpoint picker.
//! 5. **The transients**: a rise faster than a replica starts (a step, a spike, a ramp that
//!    passes what the ready replicas hold within a start-up) cannot be met by scaling out;
//!    what it queues builds and drains at what a backlogged replica serves
//!    ([`backlogged_rps`]);
//!    for each, what warm replicas it would take, what they cost a day, and what share of
//!    its requests miss without them.

use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::{Policy, Primary, Tuned};
use inferscale_engine::fleet::{Fleet, Routing, drive};
use inferscale_engine::{Prompt, PromptCycle};
use inferscale_manifests::{Options, karpenter, keda as generated};
use inferscale_rng::mix;
use serde::Serialize;

use crate::external::decide::TREND_WINDOW_S;
use crate::keda::KedaSpec;
use crate::rehearse::{
    Client, Exporters, Outcome, Outcomes, REACTION_S, Rates, RehearseError, Setup, Window,
    rehearse, start_up_transients,
};
use crate::traffic::{Piece, Traffic};
use inferscale_analysis::scaling::TREND_WINDOW_S as DEFAULT_TREND_WINDOW_S;

/// One trace of a suite.
#[derive(Debug, Clone)]
pub struct Trace {
    /// A short name (`steady-2.5x`).
    pub name: String,
    /// What it is, in words.
    pub about: String,
    /// The offered rate.
    pub traffic: Traffic,
    /// How long it is rehearsed, seconds.
    pub duration_s: f64,
    /// A steady load: a flap on it fails the policy.
    pub steady: bool,
    /// The prompts it sends, when they are its own (a request trace's); `None`: the
    /// setup's.
    pub prompts: Option<PromptCycle>,
}

impl Trace {
    fn new(name: &str, about: String, traffic: Traffic, duration_s: f64) -> Trace {
        let steady = traffic.is_steady();
        Trace {
            name: name.to_owned(),
            about,
            traffic,
            duration_s,
            steady,
            prompts: None,
        }
    }

    /// A trace from a file's traffic: rehearsed to its last change and a quarter hour more.
    pub fn from_traffic(name: &str, traffic: Traffic) -> Trace {
        let end = traffic.natural_end();
        let duration = if traffic.is_steady() {
            3600.0
        } else {
            end + 900.0
        };
        Trace::new(name, format!("{name} (a trace file)"), traffic, duration)
    }
}

/// The suite tuned on, in multiples of `capacity_rps` (one replica's measured capacity):
/// steady loads at 0.6×, 1.5× and 2.5× (45 min each), a step from 0.5× to 2.5× and back, a
/// ramp to 3× and down, a day's cosine from 0.3× to 3× compressed into 2 h, and a 2-minute
/// spike to 3× on 1×. Ordered so that the traces a policy most often fails come first (a
/// candidate stops at the first it fails): the step and the spike, then the steady loads
/// (where flapping shows) and the ramps.
pub fn builtin_suite(capacity_rps: f64) -> Vec<Trace> {
    let c = capacity_rps;
    let r = |k: f64| (k * c * 100.0).round() / 100.0;
    vec![
        Trace::new(
            "step-2.5x",
            format!(
                "{} req/s (0.5×) for 10 min, a step to {} (2.5×) for 20 min, back for 20 min",
                r(0.5),
                r(2.5)
            ),
            Traffic::of(&[
                Piece::hold(r(0.5), 600.0),
                Piece::hold(r(2.5), 1200.0),
                Piece::hold(r(0.5), 1200.0),
            ]),
            3000.0,
        ),
        Trace::new(
            "spike-3x",
            format!(
                "{} req/s (1×) with a 2-minute spike to {} (3×) at 15 min",
                r(1.0),
                r(3.0)
            ),
            Traffic::of(&[
                Piece::hold(r(1.0), 900.0),
                Piece::hold(r(3.0), 120.0),
                Piece::hold(r(1.0), 1380.0),
            ]),
            2400.0,
        ),
        Trace::new(
            "steady-2.5x",
            format!("{} req/s (2.5×) held for 45 min", r(2.5)),
            Traffic::of(&[Piece::hold(r(2.5), 2700.0)]),
            2700.0,
        ),
        Trace::new(
            "ramp-3x",
            format!(
                "{} → {} req/s (0.5× → 3×) over 30 min, held 10 min, down over 15 min",
                r(0.5),
                r(3.0)
            ),
            Traffic::of(&[
                Piece::ramp(r(0.5), r(3.0), 1800.0),
                Piece::hold(r(3.0), 600.0),
                Piece::ramp(r(3.0), r(0.5), 900.0),
                Piece::hold(r(0.5), 300.0),
            ]),
            3600.0,
        ),
        Trace::new(
            "diurnal",
            format!(
                "a day's cosine from {} to {} req/s (0.3× → 3× → 0.3×) compressed into 2 h",
                r(0.3),
                r(3.0)
            ),
            Traffic::of(&[Piece::Diurnal {
                low: r(0.3),
                high: r(3.0),
                seconds: 7200.0,
            }]),
            7200.0,
        ),
        Trace::new(
            "steady-1.5x",
            format!("{} req/s (1.5×) held for 45 min", r(1.5)),
            Traffic::of(&[Piece::hold(r(1.5), 2700.0)]),
            2700.0,
        ),
        Trace::new(
            "steady-0.6x",
            format!("{} req/s (0.6×) held for 45 min", r(0.6)),
            Traffic::of(&[Piece::hold(r(0.6), 2700.0)]),
            2700.0,
        ),
    ]
}

/// Traces the search never sees: another steady multiple, a smaller step, and bursts.
pub fn builtin_held_out(capacity_rps: f64) -> Vec<Trace> {
    let c = capacity_rps;
    let r = |k: f64| (k * c * 100.0).round() / 100.0;
    vec![
        Trace::new(
            "steady-1.2x",
            format!("{} req/s (1.2×) held for 45 min", r(1.2)),
            Traffic::of(&[Piece::hold(r(1.2), 2700.0)]),
            2700.0,
        ),
        Trace::new(
            "step-1.8x",
            format!(
                "{} req/s (0.7×) for 10 min, a step to {} (1.8×) for 15 min, back for 15 min",
                r(0.7),
                r(1.8)
            ),
            Traffic::of(&[
                Piece::hold(r(0.7), 600.0),
                Piece::hold(r(1.8), 900.0),
                Piece::hold(r(0.7), 900.0),
            ]),
            2400.0,
        ),
        Trace::new(
            "bursts-2x",
            format!(
                "{} req/s (0.8×) with two 3-minute bursts to {} (2×)",
                r(0.8),
                r(2.0)
            ),
            Traffic::of(&[
                Piece::hold(r(0.8), 600.0),
                Piece::hold(r(2.0), 180.0),
                Piece::hold(r(0.8), 900.0),
                Piece::hold(r(2.0), 180.0),
                Piece::hold(r(0.8), 540.0),
            ]),
            2400.0,
        ),
    ]
}

/// Replicas that hold `rps` at `capacity_slo_rps` each (at least one).
pub fn replicas_for(rps: f64, capacity_slo_rps: f64) -> u32 {
    ((rps / capacity_slo_rps).ceil().max(1.0)) as u32
}

/// GPU-hours of the perfect-foresight schedule of `traffic` over `duration_s`: at each second
/// the fewest replicas that hold the SLO (`capacity_slo_rps` each), each added one started
/// `startup_s` ahead (its start-up is paid), each removed the moment it is not needed; the
/// replicas at 0 already running.
pub fn foresight_gpu_hours(
    traffic: &Traffic,
    duration_s: f64,
    capacity_slo_rps: f64,
    startup_s: f64,
    gpus_per_replica: u32,
) -> f64 {
    let mut replica_s = 0.0;
    let mut prev = replicas_for(traffic.rate_at(0.0), capacity_slo_rps);
    let steps = duration_s.ceil() as u64;
    for i in 0..steps {
        let t = i as f64;
        let dt = (duration_s - t).min(1.0);
        // The most the second needs (a step inside it counts from its start).
        let n = replicas_for(
            traffic.rate_at(t).max(traffic.rate_at(t + dt * 0.999)),
            capacity_slo_rps,
        );
        if n > prev {
            replica_s += f64::from(n - prev) * startup_s;
        }
        replica_s += f64::from(n) * dt;
        prev = n;
    }
    replica_s * f64::from(gpus_per_replica) / 3600.0
}

/// One replica of `base` under a steady `rps` (Poisson) until `end_s` in virtual time;
/// `finished` hears each request's arrival and end.
fn one_replica(
    base: &Setup,
    rps: f64,
    end_s: f64,
    mut finished: impl FnMut(f64, f64),
) -> Result<Fleet, RehearseError> {
    let mut fleet = Fleet::new(base.engine.clone(), 1, base.routing)?;
    fleet.set_token_events(false);
    fleet.record_histograms(&[]);
    let spec = base.request;
    let mut prompts = base.prompts.clone();
    let traffic = Traffic::constant(rps);
    let arrivals = traffic
        .arrivals(end_s, mix(&[base.seed, 0x636170]))
        .map(|t| {
            let p = prompts
                .as_mut()
                .map_or_else(|| Prompt::from(spec), PromptCycle::next_prompt);
            (t, p)
        });
    drive(&mut fleet, arrivals, end_s, &mut [], |n| {
        if let Some((_, _, t)) = n.finished()
            && let inferscale_engine::fleet::Notice::Engine(e) = n
        {
            finished(e.event.arrival, t);
        }
    });
    Ok(fleet)
}

/// What one replica of `base` serves per second while its queue never empties: the
/// requests it finishes over ten minutes under twice `capacity_rps`, after two minutes in
/// which the queue builds. A run's saturated steps are a minute each, so their throughput
/// is the replica's with a short queue; a step's backlog is hundreds of seconds deep, and
/// an engine whose KV cache is then full (preempting, recomputing) serves it slower.
pub fn backlogged_rps(base: &Setup, capacity_rps: f64) -> Result<f64, RehearseError> {
    let (warm, span) = (120.0, 600.0);
    let mut done = 0u64;
    one_replica(base, 2.0 * capacity_rps.max(0.01), warm + span, |_, t| {
        done += u64::from(t >= warm);
    })?;
    Ok((done as f64 / span).max(0.01 * capacity_rps))
}

/// How one replica fares at a steady `rps` (Poisson), after a minute of warm-up: the share
/// of requests within `slo_s` over ten minutes (those still running late at the end count
/// as missed).
fn steady_attainment(base: &Setup, rps: f64, slo_s: f64) -> Result<f64, RehearseError> {
    let (warm, span) = (60.0, 600.0);
    let end = warm + span;
    let (mut judged, mut within) = (0u64, 0u64);
    let fleet = one_replica(base, rps, end, |arrival, t| {
        if arrival >= warm {
            judged += 1;
            within += u64::from(t - arrival <= slo_s);
        }
    })?;
    let late = fleet
        .replicas()
        .iter()
        .flat_map(|r| r.engine.arrivals_in_progress())
        .filter(|a| *a >= warm && end - a > slo_s)
        .count() as u64;
    judged += late;
    Ok(if judged == 0 {
        1.0
    } else {
        within as f64 / judged as f64
    })
}

/// The highest steady rate one replica of `base` serves with at least `attainment` of its
/// requests within `slo_s`, to within 1 % (bisection between 0 and `1.5 × capacity_rps`).
pub fn capacity_at_slo(
    base: &Setup,
    capacity_rps: f64,
    slo_s: f64,
    attainment: f64,
) -> Result<f64, RehearseError> {
    let (mut lo, mut hi) = (0.0f64, (capacity_rps * 1.5).max(0.1));
    if steady_attainment(base, hi, slo_s)? >= attainment {
        return Ok(hi);
    }
    while hi - lo > 0.01 * hi {
        let mid = (lo + hi) / 2.0;
        if steady_attainment(base, mid, slo_s)? >= attainment {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo.max(0.01 * capacity_rps))
}

/// Everything a tuning needs besides the traffic.
#[derive(Debug, Clone)]
pub struct TuneSetup {
    /// The rehearsal's setup (engine, requests, cluster delays, client, SLO, seed); each
    /// trace sets its duration, initial replicas and transients.
    pub base: Setup,
    /// The measurement.
    pub thresholds: Thresholds,
    /// The generated files' names and assumptions; the policy is set per candidate.
    pub options: Options,
    /// The share of requests that must meet the SLO outside the transients (0.99).
    pub attainment: f64,
    /// One replica's capacity, req/s (the suite's unit; a step's backlog drains at
    /// [`backlogged_rps`], measured here): the measured saturation throughput, or the
    /// capacity at the SLO when the run never saturated.
    pub capacity_rps: f64,
    /// The replica's capacity at the SLO when the caller found it already
    /// ([`capacity_at_slo`]); `None`: found here.
    pub capacity_slo_rps: Option<f64>,
    /// A new replica's start-up on a new node, seconds.
    pub startup_s: f64,
    /// GPUs per replica (its tensor-parallel size).
    pub gpus_per_replica: u32,
    /// The traces tuned on.
    pub suite: Vec<Trace>,
    /// The traces reported apart.
    pub held_out: Vec<Trace>,
    /// The deployment sits behind an inference gateway (llm-d's router): its requests in
    /// flight and token backlog are candidates too (with the Prometheus scaler only: the
    /// external scaler reads the pods).
    pub gateway: bool,
}

/// A transient set apart on a trace, and what it would take to hold it.
#[derive(Debug, Clone, Serialize)]
pub struct TransientVerdict {
    /// The span and why.
    #[serde(flatten)]
    pub window: Window,
    /// Requests judged in it.
    pub requests: u64,
    /// The share of them within the SLO.
    pub attainment: f64,
    /// Replicas the step needs (perfect foresight at its rate).
    pub needed_replicas: u32,
    /// Replicas ready just before it.
    pub ready_before: u32,
    /// Warm replicas that would absorb it: the difference.
    pub warm_replicas: u32,
    /// What keeping them warm costs, GPU-hours a day.
    pub warm_gpu_hours_per_day: f64,
}

/// One policy on one trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceResult {
    /// The trace.
    pub trace: String,
    /// Share of requests within the SLO.
    pub attainment: f64,
    /// …of those that arrived outside the transients.
    pub attainment_outside: f64,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// The perfect-foresight schedule's.
    pub foresight_gpu_hours: f64,
    /// Direction reversals within 5 minutes.
    pub flaps: usize,
    /// Changes of `spec.replicas`.
    pub scale_events: usize,
    /// The most replicas asked for.
    pub max_replicas: u32,
    /// p99 end-to-end latency, seconds.
    pub p99_e2e_s: Option<f64>,
    /// Alerts that fired.
    pub alerts_fired: Vec<String>,
    /// How requests ended.
    pub outcomes: Outcomes,
    /// The transients.
    pub transients: Vec<TransientVerdict>,
    /// It held: the SLO met outside the transients, and no flap on a steady trace.
    pub held: bool,
    /// Why not, when it did not.
    pub why_not: Option<String>,
    /// Every minute: `[seconds, replicas asked for, replicas ready]`.
    pub replicas: Vec<[f64; 3]>,
}

/// One candidate policy, rehearsed.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluated {
    /// A short label (`in-flight u=0.80`).
    pub label: String,
    /// The policy (`None` for the seeds' configuration, which is not one).
    pub policy: Option<Policy>,
    /// Per trace, in the order rehearsed (fewer than the suite when it stopped early).
    pub results: Vec<TraceResult>,
    /// It was rehearsed on every trace of the suite.
    pub complete: bool,
    /// It held on every trace.
    pub held: bool,
    /// GPU-hours over the traces rehearsed.
    pub gpu_hours: f64,
    /// The perfect-foresight GPU-hours of the same traces.
    pub foresight_gpu_hours: f64,
    /// The lowest attainment outside the transients.
    pub worst_attainment: f64,
    /// Flaps on the steady traces.
    pub steady_flaps: usize,
}

/// GPU-hours as a multiple of the perfect-foresight schedule's.
fn over_foresight(gpu_hours: f64, foresight_gpu_hours: f64) -> f64 {
    gpu_hours / foresight_gpu_hours.max(1e-9)
}

impl TraceResult {
    /// Its GPU-hours as a multiple of the perfect-foresight schedule's.
    pub fn cost_ratio(&self) -> f64 {
        over_foresight(self.gpu_hours, self.foresight_gpu_hours)
    }
}

impl Evaluated {
    /// Its GPU-hours on the traces it ran as a multiple of the perfect-foresight schedule's.
    pub fn cost_ratio(&self) -> f64 {
        over_foresight(self.gpu_hours, self.foresight_gpu_hours)
    }

    /// Where and why its rehearsal stopped early (`stopped at step-2.5x: …`); empty when it
    /// was rehearsed on every trace.
    pub fn stopped(&self) -> String {
        match self.results.last() {
            Some(r) if !self.complete => format!(
                "stopped at {}: {}",
                r.trace,
                r.why_not.as_deref().unwrap_or_default()
            ),
            _ => String::new(),
        }
    }

    fn new(
        label: String,
        policy: Option<Policy>,
        results: Vec<TraceResult>,
        complete: bool,
        steady: &[bool],
    ) -> Evaluated {
        let held = complete && results.iter().all(|r| r.held);
        Evaluated {
            label,
            policy,
            complete,
            held,
            gpu_hours: results.iter().map(|r| r.gpu_hours).sum(),
            foresight_gpu_hours: results.iter().map(|r| r.foresight_gpu_hours).sum(),
            worst_attainment: results
                .iter()
                .map(|r| r.attainment_outside)
                .fold(1.0, f64::min),
            steady_flaps: results
                .iter()
                .zip(steady)
                .filter(|(_, s)| **s)
                .map(|(r, _)| r.flaps)
                .sum(),
            results,
        }
    }
}

/// The tuning's result.
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// One replica's measured capacity, req/s.
    pub capacity_rps: f64,
    /// One replica's capacity at the SLO, req/s.
    pub capacity_slo_rps: f64,
    /// A replica's start-up, seconds.
    pub startup_s: f64,
    /// The SLO, seconds.
    pub slo_e2e_s: f64,
    /// The share that must meet it.
    pub attainment: f64,
    /// The seed.
    pub seed: u64,
    /// The client the rehearsals modelled.
    pub client: Client,
    /// The traces: name, what, steady, held out, perfect-foresight GPU-hours.
    pub traces: Vec<TraceInfo>,
    /// The seeds' configuration (queue depth primary), on the suite.
    pub seeds: Evaluated,
    /// Every candidate, in the order tried.
    pub candidates: Vec<Evaluated>,
    /// The Pareto front (indices into `candidates`): complete candidates no other beats on
    /// attainment, GPU-hours and steady flaps at once.
    pub front: Vec<usize>,
    /// The cheapest candidate that held (index into `candidates`).
    pub chosen: Option<usize>,
    /// The chosen policy and the seeds' configuration on the held-out traces.
    pub held_out: Vec<(String, Vec<TraceResult>)>,
    /// What cannot be held, and what holding it would cost.
    pub statements: Vec<String>,
    /// Rehearsals run.
    pub rehearsals: usize,
}

/// A trace, described.
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    /// Its name.
    pub name: String,
    /// What it is.
    pub about: String,
    /// A steady load.
    pub steady: bool,
    /// Reported apart, never tuned on.
    pub held_out: bool,
    /// The perfect-foresight schedule's GPU-hours.
    pub foresight_gpu_hours: f64,
    /// Every minute: `[seconds, offered req/s, perfect-foresight replicas]`.
    pub schedule: Vec<[f64; 3]>,
}

/// Why a tuning could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A rehearsal refused its setting.
    #[error(transparent)]
    Rehearse(#[from] RehearseError),
    /// A generated ScaledObject did not load (a bug: generation validates what it writes).
    #[error("the generated ScaledObject for {label}: {message}")]
    Object {
        /// The candidate.
        label: String,
        /// What was wrong.
        message: String,
    },
    /// No trace to tune on.
    #[error("no trace to tune on")]
    NoTraces,
}

/// Every trace is rehearsed after a warm-in at its first rate, seconds: the verdict counts
/// from there, as for a deployment that had been running (the controllers' windows full,
/// the replicas the policy keeps at that rate ready). At least ten minutes, and long
/// enough that the line through the last five minutes has its samples, a scale-down
/// window of one start-up (five minutes at least) has passed after them, and two
/// reactions more: what a cold start's first minutes asked for is gone by then.
pub fn warm_s(startup_s: f64) -> f64 {
    let down = startup_s.max(300.0);
    (TREND_WINDOW_S + down + 2.0 * REACTION_S).max(600.0).ceil()
}

/// Something that makes the replicas' exporters for one rehearsal.
pub type MakeExporters<'a> = &'a dyn Fn() -> Box<dyn Exporters>;

struct Tuner<'a> {
    ts: &'a TuneSetup,
    capacity_slo: f64,
    /// [`backlogged_rps`].
    backlogged: f64,
    /// [`warm_s`] of the start-up.
    warm_s: f64,
    make: MakeExporters<'a>,
    progress: &'a mut dyn FnMut(&str),
    rehearsals: usize,
}

/// A candidate as the rehearsal runs it: its object, floor and node consolidation.
struct Runnable {
    label: String,
    policy: Option<Policy>,
    keda: KedaSpec,
    min_replicas: u32,
    consolidate_after_s: f64,
}

impl Tuner<'_> {
    fn runnable(&self, label: String, policy: Option<Policy>) -> Result<Runnable, TuneError> {
        let mut o = self.ts.options.clone();
        o.policy = policy.clone();
        if let Some(p) = &policy {
            o.min_replicas = p.min_replicas;
            if let Some(m) = p.max_replicas {
                o.max_replicas = m.max(o.min_replicas);
            }
        }
        let t = &self.ts.thresholds;
        let so = generated::for_options(t, &o).object;
        let keda = KedaSpec::from_object(&so).map_err(|e| TuneError::Object {
            label: label.clone(),
            message: e.to_string(),
        })?;
        Ok(Runnable {
            consolidate_after_s: f64::from(karpenter::consolidate_after_s(t, &o)),
            min_replicas: o.min_replicas,
            label,
            policy,
            keda,
        })
    }

    fn transients(&self, trace: &Trace, out: &Outcome) -> Vec<(Window, u32)> {
        start_up_transients(
            &trace.traffic.warmed(self.warm_s),
            out,
            self.ts.startup_s,
            Rates {
                capacity_rps: self.ts.capacity_rps,
                backlogged_rps: self.backlogged,
                slo_rps: self.capacity_slo,
            },
            self.warm_s,
        )
    }

    fn run(&mut self, r: &Runnable, trace: &Trace) -> Result<TraceResult, TuneError> {
        self.run_routed(r, trace, self.ts.base.routing)
    }

    fn run_routed(
        &mut self,
        r: &Runnable,
        trace: &Trace,
        routing: Routing,
    ) -> Result<TraceResult, TuneError> {
        let ts = self.ts;
        let mut setup = ts.base.clone();
        setup.routing = routing;
        let n0 = replicas_for(trace.traffic.rate_at(0.0), self.capacity_slo)
            .max(r.min_replicas)
            .min(r.keda.hpa.max);
        setup.duration_s = trace.duration_s + self.warm_s;
        setup.judge_from_s = self.warm_s;
        setup.initial_replicas = n0;
        setup.cluster.initial_nodes = n0.div_ceil(setup.cluster.pods_per_node());
        setup.cluster.consolidate_after_s = r.consolidate_after_s;
        setup.transients = Vec::new();
        if let Some(p) = &trace.prompts {
            setup.prompts = Some(p.clone());
        }
        let traffic = trace.traffic.warmed(self.warm_s);
        let mut exporters = (self.make)();
        let out = rehearse(&setup, &r.keda, &traffic, exporters.as_mut(), &mut |_| {})?;
        self.rehearsals += 1;
        let foresight = foresight_gpu_hours(
            &trace.traffic,
            trace.duration_s,
            self.capacity_slo,
            ts.startup_s,
            ts.gpus_per_replica,
        );
        let result = self.judge(trace, &out, foresight);
        (self.progress)(&format!(
            "  {:<28} {:<12} {:>7.2} % ({:>7.2} % outside transients)  {:>6.2} GPU-h ({:.2}× foresight)  {} flaps{}",
            r.label,
            trace.name,
            result.attainment * 100.0,
            result.attainment_outside * 100.0,
            result.gpu_hours,
            result.cost_ratio(),
            result.flaps,
            result
                .why_not
                .as_ref()
                .map_or(String::new(), |w| format!("  — not held: {w}"))
        ));
        Ok(result)
    }

    fn judge(&self, trace: &Trace, out: &Outcome, foresight: f64) -> TraceResult {
        let m = &out.summary;
        let windows = self.transients(trace, out);
        let spans: Vec<Window> = windows.iter().map(|(w, _)| w.clone()).collect();
        let share = |(n, w): (u64, u64)| if n == 0 { 1.0 } else { w as f64 / n as f64 };
        let outside = share(out.judged_outside(&spans, self.warm_s));
        let mut why = Vec::new();
        if outside < self.ts.attainment {
            why.push(format!(
                "{:.2} % within the SLO{} (needs {:.0} %)",
                outside * 100.0,
                if windows.is_empty() {
                    ""
                } else {
                    " outside the transients"
                },
                self.ts.attainment * 100.0
            ));
        }
        if trace.steady && m.flaps > 0 {
            why.push(format!("{} flaps at a steady load", m.flaps));
        }
        let transients = windows
            .iter()
            .map(|(window, ready_before)| {
                let ready_before = *ready_before;
                let needed = replicas_for(
                    trace.traffic.rate_at(window.from_s - self.warm_s + 1.0),
                    self.capacity_slo,
                );
                let warm = needed.saturating_sub(ready_before);
                let (judged, within) = out.judged_inside(window);
                TransientVerdict {
                    window: Window {
                        from_s: window.from_s - self.warm_s,
                        to_s: window.to_s - self.warm_s,
                        why: window.why.clone(),
                    },
                    requests: judged,
                    attainment: share((judged, within)),
                    needed_replicas: needed,
                    ready_before,
                    warm_replicas: warm,
                    warm_gpu_hours_per_day: f64::from(warm * self.ts.gpus_per_replica) * 24.0,
                }
            })
            .collect();
        TraceResult {
            trace: trace.name.clone(),
            attainment: m.slo_attainment,
            attainment_outside: outside,
            gpu_hours: m.gpu_hours,
            foresight_gpu_hours: foresight,
            flaps: m.flaps,
            scale_events: m.scale_events,
            max_replicas: m.max_replicas,
            p99_e2e_s: m.p99_e2e_s,
            alerts_fired: m.alerts_fired.clone(),
            outcomes: m.outcomes,
            transients,
            held: why.is_empty(),
            why_not: (!why.is_empty()).then(|| why.join("; ")),
            replicas: out
                .timeline
                .iter()
                .filter(|r| (r.time_s % 60.0).abs() < 1e-6 && r.time_s >= self.warm_s)
                .map(|r| {
                    [
                        r.time_s - self.warm_s,
                        f64::from(r.desired_replicas),
                        f64::from(r.ready_replicas),
                    ]
                })
                .collect(),
        }
    }

    /// Rehearses `r` on `traces`, stopping at the first it fails when `prune`; the steady
    /// traces first when `steady_first` (what a candidate risks is a flap at a steady load:
    /// it stops sooner). A complete candidate's results are in the order of `traces`; an
    /// incomplete one's end with the trace it failed.
    fn evaluate(
        &mut self,
        r: &Runnable,
        traces: &[Trace],
        prune: bool,
        steady_first: bool,
    ) -> Result<Evaluated, TuneError> {
        let mut order: Vec<usize> = (0..traces.len()).collect();
        if steady_first {
            order.sort_by_key(|&i| !traces[i].steady);
        }
        let mut results = Vec::new();
        let mut complete = true;
        for &i in &order {
            let res = self.run(r, &traces[i])?;
            let failed = !res.held;
            results.push((i, res));
            if prune && failed {
                complete = results.len() == traces.len();
                break;
            }
        }
        if complete {
            results.sort_by_key(|(i, _)| *i);
        }
        let steady: Vec<bool> = results.iter().map(|(i, _)| traces[*i].steady).collect();
        Ok(Evaluated::new(
            r.label.clone(),
            r.policy.clone(),
            results.into_iter().map(|(_, res)| res).collect(),
            complete,
            &steady,
        ))
    }

    /// From the highest utilisation down, each of `primaries` anticipated a start-up ahead
    /// (with a shorter line where only a gradual rise failed, and with twice the `room`
    /// where only a step failed) until one holds: the index of the first that does.
    ///
    /// At each utilisation the requests in flight first, then the arrival rate: an engine
    /// whose latency grows with its batch holds more in flight per request at a higher load,
    /// so the in-flight count is not proportional to the load, and the HPA's proportional
    /// step over- or under-shoots on it (a scale-in at a light load per pod lands the rest
    /// past the target); the arrival rate is proportional to the load on any engine.
    fn search(
        &mut self,
        candidates: &mut Vec<Evaluated>,
        primaries: &[Primary],
        room: u32,
    ) -> Result<Option<usize>, TuneError> {
        let ts = self.ts;
        // Whether the trace a candidate failed at (the last it was rehearsed on, the suite's
        // last included) is of `kind`.
        let stopped_at = |e: &Evaluated, kind: &dyn Fn(&Trace) -> bool| {
            e.results.iter().find(|r| !r.held).is_some_and(|r| {
                ts.suite
                    .iter()
                    .find(|t| t.name == r.trace)
                    .is_some_and(kind)
            })
        };
        let steps = |t: &Trace| !t.traffic.jumps(1.2, 0.05 * ts.capacity_rps).is_empty();
        let rises = |t: &Trace| !t.steady && !steps(t);
        for u in UTILISATIONS {
            for &primary in primaries {
                for window in TREND_WINDOWS_S {
                    let mut rise_failed = false;
                    for max in [room, 2 * room] {
                        let mut p = self.policy(primary, u, Some(window));
                        p.max_replicas = Some(max);
                        let what = if max == room {
                            String::new()
                        } else {
                            format!(", up to {max} replicas")
                        };
                        let r = self.runnable(Tuner::label(&p, &what), Some(p))?;
                        // A shorter line's risk is a flap at a steady load.
                        let short = window != TREND_WINDOWS_S[0];
                        let e = self.evaluate(&r, &ts.suite, true, short)?;
                        // More room only helps drain a step's backlog faster (the old
                        // replicas then take a smaller share of new arrivals): worth a try
                        // only when a step failed.
                        let step_failed = stopped_at(&e, &steps);
                        rise_failed = stopped_at(&e, &rises);
                        candidates.push(e);
                        let i = candidates.len() - 1;
                        if better(candidates, None, i) {
                            return Ok(Some(i));
                        }
                        if !step_failed {
                            break;
                        }
                    }
                    // A shorter line sees a rise sooner: worth a try only when a ramp or a
                    // day failed.
                    if !rise_failed {
                        break;
                    }
                }
            }
        }
        Ok(None)
    }

    /// The policy on `primary` at utilisation `u`, anticipated a start-up ahead by a line
    /// through `window` seconds when given.
    fn policy(&self, primary: Primary, u: f64, window: Option<u32>) -> Policy {
        let mut p = Policy::derive(
            &self.ts.thresholds,
            primary,
            u,
            self.capacity_slo,
            self.ts.startup_s,
            self.ts.options.min_replicas,
        );
        if let Some(w) = window {
            let h = (self.ts.startup_s + REACTION_S).round() as u32;
            p.horizon_s = Some(h);
            p.trend_window_s = Some(w);
            p.reasons.insert(
                "horizon_s".into(),
                format!(
                    "the same target on the {} predicted {h} s ahead by a straight line through its last {w} s (predict_linear): a replica asked for now serves in a start-up ({:.0} s) plus the controllers' reaction ({REACTION_S:.0} s), so a rising load is met when it arrives instead of a start-up late; at a steady load the prediction is the load",
                    primary.about(),
                    self.ts.startup_s
                ),
            );
            p.reasons.insert(
                "trend_window_s".into(),
                if w == TREND_WINDOWS_S[0] {
                    format!("{w} s: the longest line tried, the least moved by a steady load's noise; it held")
                } else {
                    format!(
                        "{w} s: the line through {} s saw the suite's gradual rises too late at this utilisation; a shorter one sees a rise sooner, and the rehearsal showed it holds without flapping at a steady load",
                        TREND_WINDOWS_S[0]
                    )
                },
            );
        }
        p
    }

    fn label(p: &Policy, what: &str) -> String {
        let ahead = match (p.horizon_s, p.trend_window_s) {
            (None, _) => String::new(),
            (Some(_), Some(w)) if w != TREND_WINDOWS_S[0] => format!(" ahead ({w} s line)"),
            (Some(_), _) => " ahead".to_owned(),
        };
        format!(
            "{}{ahead} u={:.2}{what}",
            p.primary.key(),
            p.utilisation.unwrap_or(0.0)
        )
    }
}

/// The windows the anticipation's line is tried through, seconds, the longest first: five
/// minutes (the least moved by a steady load's noise), then two (a rise seen sooner).
pub const TREND_WINDOWS_S: [u32; 2] = [DEFAULT_TREND_WINDOW_S, 120];

/// The utilisations tried, from the cheapest down.
pub const UTILISATIONS: [f64; 9] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5];

/// The complete candidates no other complete one beats on every objective at once (higher
/// worst attainment, fewer GPU-hours, fewer steady flaps), cheapest first.
pub fn pareto(c: &[Evaluated]) -> Vec<usize> {
    let dominates = |a: &Evaluated, b: &Evaluated| {
        a.worst_attainment >= b.worst_attainment
            && a.gpu_hours <= b.gpu_hours
            && a.steady_flaps <= b.steady_flaps
            && (a.worst_attainment > b.worst_attainment
                || a.gpu_hours < b.gpu_hours
                || a.steady_flaps < b.steady_flaps)
    };
    let mut front: Vec<usize> = (0..c.len())
        .filter(|&i| c[i].complete)
        .filter(|&i| !(0..c.len()).any(|j| j != i && c[j].complete && dominates(&c[j], &c[i])))
        .collect();
    front.sort_by(|&a, &b| c[a].gpu_hours.total_cmp(&c[b].gpu_hours));
    front
}

/// Tunes the policy (see the module documentation). `make` builds each rehearsal's
/// exporters; `progress` hears a line per rehearsal.
pub fn tune(
    ts: &TuneSetup,
    make: MakeExporters<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<(TuneReport, Option<Policy>), TuneError> {
    if ts.suite.is_empty() {
        return Err(TuneError::NoTraces);
    }
    let slo = ts.base.slo_e2e_s;
    let capacity_slo = match ts.capacity_slo_rps {
        Some(c) => c,
        None => {
            progress(&format!(
                "capacity at the SLO: the highest steady rate one replica serves with {:.1} % of requests within {slo} s:",
                ts.attainment * 100.0
            ));
            capacity_at_slo(&ts.base, ts.capacity_rps, slo, ts.attainment)?
        }
    };
    progress(&format!(
        "  {capacity_slo:.2} req/s per replica ({:.0} % of {:.2} req/s)",
        capacity_slo / ts.capacity_rps * 100.0,
        ts.capacity_rps
    ));
    let backlogged = backlogged_rps(&ts.base, ts.capacity_rps)?;
    progress(&format!(
        "  a replica whose queue never empties serves {backlogged:.2} req/s (what a step's backlog builds and drains at)"
    ));
    let mut tuner = Tuner {
        ts,
        capacity_slo,
        backlogged,
        warm_s: warm_s(ts.startup_s),
        make,
        progress,
        rehearsals: 0,
    };
    (tuner.progress)("the seeds' configuration (queue depth primary) on the suite:");
    let seeds_run = tuner.runnable("seeds (queue)".into(), None)?;
    let seeds = tuner.evaluate(&seeds_run, &ts.suite, false, false)?;

    let mut candidates: Vec<Evaluated> = Vec::new();
    // The arrival rate where it can be counted (from the finished requests, or on an engine
    // that counts none from its generated tokens).
    let counts_requests = inferscale_manifests::keda::arrivals_counted(
        &ts.options,
        ts.thresholds.workload.output_tokens_mean,
    )
    .is_ok();
    let mut primaries = vec![Primary::InFlight];
    if counts_requests {
        primaries.push(Primary::ArrivalRate);
    }
    (tuner.progress)(
        "requests in flight, then arrivals, anticipated a start-up ahead, from the highest utilisation down:",
    );
    let room = ts.options.max_replicas;
    let mut best = tuner.search(&mut candidates, &primaries, room)?;
    // At the utilisation that held (or the lowest tried): the signals not tried there
    // (without anticipation, the other primary), and the cost trims of the best so far.
    let u_star = best
        .and_then(|b| candidates[b].policy.as_ref().and_then(|p| p.utilisation))
        .unwrap_or(UTILISATIONS[UTILISATIONS.len() - 1]);
    (tuner.progress)("the other signals at that utilisation, and the trims of the best so far:");
    let room_star = best
        .and_then(|b| candidates[b].policy.as_ref().and_then(|p| p.max_replicas))
        .unwrap_or(room);
    let w_star = best
        .and_then(|b| candidates[b].policy.as_ref().and_then(|p| p.trend_window_s))
        .unwrap_or(TREND_WINDOWS_S[0]);
    let mut others = vec![tuner.policy(Primary::InFlight, u_star, None)];
    others.extend(
        primaries
            .iter()
            .map(|&p| tuner.policy(p, u_star, Some(w_star))),
    );
    if ts.gateway && ts.options.scaler == inferscale_manifests::ScalerKind::Prometheus {
        others.push(tuner.policy(Primary::GatewayInFlight, u_star, Some(w_star)));
        if ts.thresholds.workload.prompt_tokens_mean.is_some() {
            others.push(tuner.policy(Primary::GatewayTokens, u_star, Some(w_star)));
        }
    }
    for p in &mut others {
        p.max_replicas = Some(room_star);
    }
    others.retain(|p| {
        !candidates
            .iter()
            .any(|c| c.policy.as_ref().is_some_and(|q| same(p, q)))
    });
    for p in others.drain(..) {
        let r = tuner.runnable(Tuner::label(&p, ""), Some(p))?;
        candidates.push(tuner.evaluate(&r, &ts.suite, true, false)?);
        let i = candidates.len() - 1;
        if better(&candidates, best, i) {
            best = Some(i);
        }
    }
    best = tuner.trim(&mut candidates, best, room)?;
    let front = pareto(&candidates);
    let mut held_out = Vec::new();
    if !ts.held_out.is_empty() {
        (tuner.progress)("held-out traces (never tuned on):");
        let mut runs = vec![seeds_run];
        if let Some(b) = best {
            runs.insert(
                0,
                tuner.runnable(candidates[b].label.clone(), candidates[b].policy.clone())?,
            );
        }
        for r in &runs {
            let e = tuner.evaluate(r, &ts.held_out, false, false)?;
            held_out.push((r.label.clone(), e.results));
        }
    }
    let traces = trace_infos(ts, capacity_slo);
    let statements = statements(ts, capacity_slo, &candidates, best, &seeds);
    let chosen_policy = best.and_then(|b| chosen(ts, capacity_slo, &candidates[b]));
    let report = TuneReport {
        capacity_rps: ts.capacity_rps,
        capacity_slo_rps: capacity_slo,
        startup_s: ts.startup_s,
        slo_e2e_s: slo,
        attainment: ts.attainment,
        seed: ts.base.seed,
        client: ts.base.client,
        traces,
        seeds,
        candidates,
        front,
        chosen: best,
        held_out,
        statements,
        rehearsals: tuner.rehearsals,
    };
    Ok((report, chosen_policy))
}
/// Whether candidate `i` holds and costs less than the best so far.
fn better(c: &[Evaluated], best: Option<usize>, i: usize) -> bool {
    c[i].held && best.is_none_or(|b| c[i].gpu_hours < c[b].gpu_hours)
}

/// Each trace of the suite and the held-out ones, with its perfect-foresight cost and the
/// replicas it needs minute by minute.
fn trace_infos(ts: &TuneSetup, capacity_slo: f64) -> Vec<TraceInfo> {
    ts.suite
        .iter()
        .map(|t| (t, false))
        .chain(ts.held_out.iter().map(|t| (t, true)))
        .map(|(t, held)| TraceInfo {
            name: t.name.clone(),
            about: t.about.clone(),
            steady: t.steady,
            held_out: held,
            foresight_gpu_hours: foresight_gpu_hours(
                &t.traffic,
                t.duration_s,
                capacity_slo,
                ts.startup_s,
                ts.gpus_per_replica,
            ),
            schedule: (0..=(t.duration_s / 60.0) as u32)
                .map(|m| {
                    let at = f64::from(m) * 60.0;
                    let rate = t.traffic.rate_at(at);
                    [at, rate, f64::from(replicas_for(rate, capacity_slo))]
                })
                .collect(),
        })
        .collect()
}

/// The policy of candidate `c` (the best), with what tuning found written into it.
fn chosen(ts: &TuneSetup, capacity_slo: f64, c: &Evaluated) -> Option<Policy> {
    let slo = ts.base.slo_e2e_s;
    c.policy.clone().map(|mut p| {
        p.tuned = Some(Tuned {
            slo_e2e_s: slo,
            attainment: ts.attainment,
            worst_attainment: c.worst_attainment,
            gpu_hours: c.gpu_hours,
            foresight_gpu_hours: c.foresight_gpu_hours,
            steady_flaps: c.steady_flaps,
            traces: ts.suite.iter().map(|t| t.name.clone()).collect(),
            capacity_slo_rps: capacity_slo,
            startup_s: ts.startup_s,
            seed: ts.base.seed,
        });
        p.reasons.insert(
            "utilisation".into(),
            format!(
                "{:.0} % of the {capacity_slo:.1} req/s a replica serves within the SLO: the highest utilisation at which the rehearsal held the SLO ({:.0} % within {slo} s outside the transients) on every trace of the suite with no flap at a steady load, at {:.2} GPU-hours against {:.2} for perfect foresight",
                p.utilisation.unwrap_or(0.0) * 100.0,
                ts.attainment * 100.0,
                c.gpu_hours,
                c.foresight_gpu_hours
            ),
        );
        p
    })
}

impl Tuner<'_> {
    /// Tries the trims of the best policy, then those that held again on the new best (so
    /// that two trims that each held and saved are tried together), skipping a policy
    /// already tried. Returns the best after them.
    fn trim(
        &mut self,
        candidates: &mut Vec<Evaluated>,
        mut best: Option<usize>,
        room: u32,
    ) -> Result<Option<usize>, TuneError> {
        let mut worth: Option<Vec<String>> = None;
        for _round in 0..2 {
            let Some(b) = best else { break };
            let Some(base) = candidates[b].policy.clone() else {
                break;
            };
            let mut held = Vec::new();
            for (what, p) in trims(&base, self.ts.startup_s, room) {
                if worth.as_ref().is_some_and(|w| !w.contains(&what))
                    || candidates
                        .iter()
                        .any(|c| c.policy.as_ref().is_some_and(|q| same(q, &p)))
                {
                    continue;
                }
                let label = format!("{}{what}", candidates[b].label);
                let r = self.runnable(label, Some(p))?;
                candidates.push(self.evaluate(&r, &self.ts.suite, true, false)?);
                let i = candidates.len() - 1;
                if candidates[i].held {
                    held.push(what);
                }
                if better(candidates, best, i) {
                    best = Some(i);
                }
            }
            if best == Some(b) || held.is_empty() {
                break;
            }
            worth = Some(held);
        }
        Ok(best)
    }
}

/// Whether two policies scale alike (their reasons aside).
fn same(a: &Policy, b: &Policy) -> bool {
    a.primary == b.primary
        && a.utilisation == b.utilisation
        && a.target == b.target
        && a.horizon_s == b.horizon_s
        && a.trend_window() == b.trend_window()
        && a.queue_booster == b.queue_booster
        && a.guardrail_s == b.guardrail_s
        && a.min_replicas == b.min_replicas
        && a.max_replicas == b.max_replicas
        && a.scale_up == b.scale_up
        && a.scale_down == b.scale_down
        && a.consolidate_after_s == b.consolidate_after_s
}

/// Cheaper variants of `base`: a scale-down window of one start-up, nodes consolidated at
/// once, no queue booster — each alone, and the first two together.
fn trims(base: &Policy, startup_s: f64, room: u32) -> Vec<(String, Policy)> {
    let s = startup_s.round().max(0.0) as u32;
    let mut out = Vec::new();
    let mut faster = base.clone();
    faster.scale_down = inferscale_analysis::scaling::Step {
        pods: 0,
        percent: 50,
        ..base.scale_down
    };
    faster.reasons.insert(
        "scale_down.policies".into(),
        "up to half the pods a minute: once a step's backlog has drained, the replicas added for it go within minutes; the rehearsal showed it holds without flapping".into(),
    );
    out.push((", scale in by half a minute".into(), faster));
    if base.max_replicas.is_some_and(|m| m > room) {
        let mut less = base.clone();
        less.max_replicas = Some(room);
        out.push((format!(", up to {room} replicas"), less));
    }
    let mut fast_nodes = base.clone();
    fast_nodes.consolidate_after_s = 0;
    fast_nodes.reasons.insert(
        "consolidate_after_s".into(),
        "0 s: an empty GPU node goes at once; the rehearsal showed the provisioning a later scale-out then pays costs less than keeping the node".into(),
    );
    let mut shorter = base.clone();
    shorter.scale_down.window_s = s.clamp(60, 3600);
    if shorter.scale_down.window_s < base.scale_down.window_s {
        shorter.consolidate_after_s = shorter.consolidate_after_s.min(shorter.scale_down.window_s);
        shorter.reasons.insert(
            "scale_down.window_s".into(),
            format!(
                "{} s, one replica start-up: shorter than the seeds' five minutes, and the rehearsal showed it holds without flapping",
                shorter.scale_down.window_s
            ),
        );
        let mut both = shorter.clone();
        both.consolidate_after_s = 0;
        both.reasons.insert(
            "consolidate_after_s".into(),
            fast_nodes.reasons["consolidate_after_s"].clone(),
        );
        out.push((", down window = start-up".into(), shorter));
        out.push((", down window = start-up, nodes at once".into(), both));
    }
    out.push((", nodes consolidated at once".into(), fast_nodes));
    let mut warm = base.clone();
    warm.min_replicas += 1;
    warm.max_replicas = warm.max_replicas.map(|m| m.max(warm.min_replicas));
    warm.reasons.insert(
        "min_replicas".into(),
        format!(
            "{}: one replica more than the load needs at its lowest, kept warm: a step that would have queued on one replica is shared by two, and the rehearsal showed it costs less than the replicas a backlog would take to drain",
            warm.min_replicas
        ),
    );
    out.push((format!(", {} warm at least", warm.min_replicas), warm));
    if base.queue_booster.is_some() {
        let mut no_booster = base.clone();
        no_booster.queue_booster = None;
        no_booster.reasons.remove("queue_booster");
        out.push((", no queue booster".into(), no_booster));
    }
    out
}

/// What cannot be held, said with the numbers.
fn statements(
    ts: &TuneSetup,
    capacity_slo: f64,
    c: &[Evaluated],
    best: Option<usize>,
    seeds: &Evaluated,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(b) = best else {
        let top = c
            .iter()
            .max_by(|x, y| x.worst_attainment.total_cmp(&y.worst_attainment));
        out.push(format!(
            "no policy tried held the SLO ({:.0} % within {} s) on every trace with no flap at a steady load{}",
            ts.attainment * 100.0,
            ts.base.slo_e2e_s,
            top.map_or(String::new(), |t| format!(
                "; the closest, {}, reached {:.2} % on its worst trace{}",
                t.label,
                t.worst_attainment * 100.0,
                t.results
                    .iter()
                    .find_map(|r| r.why_not.as_ref().map(|w| format!(" ({}: {w})", r.trace)))
                    .unwrap_or_default()
            ))
        ));
        return out;
    };
    let chosen = &c[b];
    for r in &chosen.results {
        for t in &r.transients {
            let share_missed = (1.0 - t.attainment) * 100.0;
            if t.warm_replicas == 0 {
                out.push(format!(
                    "{}: {} — absorbed by the replicas already warm ({} ready, {} needed): {:.2} % of its {} requests within the SLO",
                    r.trace,
                    t.window.why,
                    t.ready_before,
                    t.needed_replicas,
                    t.attainment * 100.0,
                    t.requests
                ));
            } else {
                out.push(format!(
                    "{}: {} — it needs {} warm replica{} more than the policy keeps at the lower rate ({} ready, {} needed; +{:.0} GPU-h/day); without them, {share_missed:.1} % of its {} requests miss the {} s SLO",
                    r.trace,
                    t.window.why,
                    t.warm_replicas,
                    if t.warm_replicas == 1 { "" } else { "s" },
                    t.ready_before,
                    t.needed_replicas,
                    t.warm_gpu_hours_per_day,
                    t.requests,
                    ts.base.slo_e2e_s
                ));
            }
        }
        let ratio = r.cost_ratio();
        if ratio > 1.3 {
            out.push(format!(
                "{}: {:.2} GPU-h, {ratio:.2}× the perfect-foresight schedule's {:.2} (a reactive policy pays for its start-ups and its scale-down window)",
                r.trace, r.gpu_hours, r.foresight_gpu_hours
            ));
        }
    }
    out.push(format!(
        "chosen: {} — {:.2} GPU-h on the suite ({:.2}× perfect foresight), worst trace {:.2} % within the SLO outside the transients, {} steady flaps; the seeds' configuration: {:.2} GPU-h, worst {:.2} %, {} steady flaps",
        chosen.label,
        chosen.gpu_hours,
        chosen.cost_ratio(),
        chosen.worst_attainment * 100.0,
        chosen.steady_flaps,
        seeds.gpu_hours,
        seeds.worst_attainment * 100.0,
        seeds.steady_flaps
    ));
    let _ = capacity_slo;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foresight_pays_each_start_up_once() {
        // 10 req/s per replica; 15 req/s for an hour, 35 for an hour: 2 then 4 replicas, the
        // two added at 1 h started 300 s ahead.
        let t = Traffic::steps(&[(0.0, 15.0), (3600.0, 35.0)]);
        let g = foresight_gpu_hours(&t, 7200.0, 10.0, 300.0, 1);
        assert!((g - (2.0 + 4.0 + 2.0 * 300.0 / 3600.0)).abs() < 1e-6, "{g}");
        // Two GPUs a replica: twice.
        assert!((foresight_gpu_hours(&t, 7200.0, 10.0, 300.0, 2) - 2.0 * g).abs() < 1e-6);
        assert_eq!(replicas_for(0.0, 10.0), 1);
        assert_eq!(replicas_for(10.0, 10.0), 1);
        assert_eq!(replicas_for(10.5, 10.0), 2);
    }

    #[test]
    fn the_suites_are_relative_to_capacity_and_name_their_steps() {
        let s = builtin_suite(50.0);
        let step = s
            .iter()
            .find(|t| t.name == "step-2.5x")
            .unwrap_or_else(|| unreachable!());
        assert_eq!(step.traffic.rate_at(10.0), 25.0);
        assert_eq!(step.traffic.rate_at(700.0), 125.0);
        assert_eq!(step.traffic.jumps(1.2, 1.0), vec![(600.0, 25.0, 125.0)]);
        assert!(s.iter().filter(|t| t.steady).count() == 3);
        let ramp = s
            .iter()
            .find(|t| t.name == "ramp-3x")
            .unwrap_or_else(|| unreachable!());
        assert!(
            ramp.traffic.jumps(1.2, 1.0).is_empty(),
            "a ramp is followable"
        );
        assert!(!ramp.steady);
        let held = builtin_held_out(50.0);
        assert!(held.iter().all(|h| s.iter().all(|t| t.name != h.name)));
    }

    #[test]
    fn the_front_keeps_what_nothing_beats() {
        let e = |label: &str, a: f64, g: f64, f: usize| Evaluated {
            label: label.into(),
            policy: None,
            results: Vec::new(),
            complete: true,
            held: true,
            gpu_hours: g,
            foresight_gpu_hours: 1.0,
            worst_attainment: a,
            steady_flaps: f,
        };
        let c = vec![
            e("cheap-bad", 0.95, 5.0, 0),
            e("good", 0.995, 6.0, 0),
            e("worse", 0.99, 7.0, 0),
            e("flappy", 0.999, 6.5, 3),
        ];
        assert_eq!(pareto(&c), vec![0, 1, 3]);
    }
}
