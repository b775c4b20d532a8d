//! `run.json`: what a load run measured, per step and over time (documented in
//! `docs/formats.md`). Every time and rate is in the server's time: with `--speedup K` the
//! wall-clock measurements are multiplied (durations) or divided (rates) by K.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::{Arrival, RequestSpec, Stage};

/// The current `run.json` version.
pub const RUN_VERSION: u32 = 1;

/// Percentiles of one latency (seconds); `null` members when there was nothing to measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Percentiles {
    /// Observations.
    pub count: u64,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
}

/// Failed requests by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Failed {
    /// All failures.
    pub total: u64,
    /// HTTP errors by status code.
    pub http_error: BTreeMap<u16, u64>,
    /// Timeouts.
    pub timeout: u64,
    /// Connection failures.
    pub connect_error: u64,
    /// Malformed or cut responses.
    pub stream_error: u64,
}

/// What became of a step's requests: `scheduled = ok + failed.total + dropped`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Requests {
    /// Requests the plan scheduled (in an interrupted run: whose time had come).
    pub scheduled: u64,
    /// Complete, well-formed answers.
    pub ok: u64,
    /// Failures.
    pub failed: Failed,
    /// Never sent (the in-flight cap was reached).
    pub dropped: u64,
}

/// The latencies of a step's successful requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Latencies {
    /// Time to first token (streaming only).
    pub ttft: Percentiles,
    /// Time per output token, per request.
    pub tpot: Percentiles,
    /// Gaps between token-bearing events (streaming only).
    pub itl: Percentiles,
    /// End to end.
    pub e2e: Percentiles,
}

/// Tokens of a step's successful requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Tokens {
    /// Prompt tokens (from `usage`).
    pub prompt: u64,
    /// Output tokens.
    pub output: u64,
    /// `usage`, or `chunks` when any request's count had to come from counting stream events.
    pub source: String,
}

/// Mean, 95th percentile and maximum of a sampled gauge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct GaugeStats {
    /// Mean over the step's samples.
    pub mean: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
}

/// What the server's own metrics said during a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerStep {
    /// `num_requests_waiting`.
    pub queue_depth: GaugeStats,
    /// `num_requests_running`.
    pub running: GaugeStats,
    /// `kv_cache_usage_perc` (0–1).
    pub kv_cache_usage: GaugeStats,
    /// Preemptions during the step.
    pub preemptions: Option<f64>,
    /// p95 of the server's e2e histogram over the step (its requests included).
    pub e2e_p95_s: Option<f64>,
    /// p95 of the server's TTFT histogram over the step.
    pub ttft_p95_s: Option<f64>,
    /// p95 of the server's queue-time histogram over the step (time spent waiting).
    #[serde(default)]
    pub queue_time_p95_s: Option<f64>,
    /// Requests the server finished normally during the step and its drain.
    pub success_delta: Option<f64>,
    /// The share of prompt tokens the server found in its prefix cache over the step and
    /// its drain (`prefix_cache_hits` ÷ `prefix_cache_queries`); absent where the server
    /// does not count them, or looked nothing up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    /// Scrapes taken in the step.
    pub samples: u64,
}

/// The load generator's own health in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClientStep {
    /// Median of actual − intended send time.
    pub lag_p50_s: Option<f64>,
    /// 95th percentile: what decides whether the client kept the schedule (absent in files
    /// written before it was recorded).
    #[serde(default)]
    pub lag_p95_s: Option<f64>,
    /// 99th percentile.
    pub lag_p99_s: Option<f64>,
    /// Largest.
    pub lag_max_s: Option<f64>,
    /// CPU seconds the load generator used during the step (wall CPU time, not scaled).
    pub cpu_s: f64,
    /// The client, not the server, limited the measurement (lag p95 > 5 ms: more than one
    /// request in twenty sent over 5 ms late; or drops while the server's queue p95 stayed
    /// under 5); such a step cannot show a server saturation.
    pub client_limited: bool,
    /// Why, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Stalls of the whole machine or process seen during the step, beside the lag: so that
    /// a reader can tell a client that fell behind from a machine that stopped (absent in
    /// files written before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<Stalls>,
}

/// What a probe thread of the load generator saw during a step. It asks to wake every
/// millisecond and does nothing else, so a wake-up more than a millisecond late was either a
/// stall that every thread of the process suffered (a VM pause, the host taking the CPU, a
/// page-fault storm), or a wait for a CPU that other threads of this machine held. The probe
/// tells the two apart by its own run-queue wait (Linux `schedstat`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Stalls {
    /// Wake-ups over a millisecond late beyond the probe's wait for a CPU: the machine
    /// stopped.
    pub count: u64,
    /// The longest, seconds late (less the wait for a CPU).
    pub longest_s: f64,
    /// All of them together, seconds.
    pub total_s: f64,
    /// CPU time the hypervisor stole from this machine during the step, all CPUs together
    /// (`steal` of /proc/stat), seconds; absent where the system does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_s: Option<f64>,
    /// Wake-ups over a millisecond late because the probe was runnable but waited that long
    /// for a CPU: busy with this machine's other threads, the load generator's own when it
    /// has fewer CPUs than busy threads. Not a machine stall, so not in `count`. Zero where
    /// the system does not say (and in files written before it was recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_waits: u64,
    /// The longest such wait, seconds.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_wait_longest_s: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// 0-based.
    pub index: usize,
    /// The offered rate, req/s.
    pub target_rps: f64,
    /// For a ramp, the offered rate at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_end_rps: Option<f64>,
    /// A closed-loop step's concurrency (its `target_rps` is then 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Start, seconds from the run start.
    pub start_s: f64,
    /// Length of the sending window.
    pub duration_s: f64,
    /// Requests actually sent per second.
    pub sent_rps: f64,
    /// Successful completions per second, counted over the step's window shifted by its median
    /// e2e latency: the throughput the server sustained.
    pub achieved_rps: f64,
    /// Output tokens per second over the same window.
    pub output_tokens_per_s: f64,
    /// What became of the requests.
    pub requests: Requests,
    /// Latencies of the successful requests.
    pub latency_s: Latencies,
    /// Tokens.
    pub tokens: Tokens,
    /// The server's view (with a metrics URL).
    pub server: Option<ServerStep>,
    /// The client's health.
    pub client: ClientStep,
    /// The step's histograms, exactly (a segment's worker writes them so that
    /// `inferscale merge` can add the parts; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<StepHistograms>,
    /// The requests that met the run's SLO ([`RunReport::slo`]); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<crate::slo::Goodput>,
    /// What the step's prompts could have found in a prefix cache, by their structure (a
    /// shape or a trace); absent for prompts without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheStep>,
    /// The probe stream's requests intended during the step (`--probe-rate`); absent
    /// without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeStep>,
}

/// The prefix-cache structure of a step's prompts (`--shape`, `--trace`): what an engine with
/// an unbounded prefix cache, sent the prompts in order, would find. The server's own count
/// is [`ServerStep::prefix_cache_hit_rate`]; a bounded cache, or a prompt sent before the one
/// it shares with was computed, makes that lower.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheStep {
    /// Prompt tokens of the step's requests that were sent.
    pub prompt_tokens: u64,
    /// Of them, those the structure says were cached (whole 16-token blocks).
    pub implied_hit_tokens: u64,
    /// Their ratio.
    pub implied_hit_rate: f64,
}

impl CacheStep {
    /// `hits` of `prompt` tokens.
    pub fn of(prompt: u64, hits: u64) -> CacheStep {
        CacheStep {
            prompt_tokens: prompt,
            implied_hit_tokens: hits,
            implied_hit_rate: if prompt == 0 {
                0.0
            } else {
                hits as f64 / prompt as f64
            },
        }
    }
}

/// What the probe stream's single-token requests met during a step: the head-of-line stall a
/// newcomer waits, apart from the workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct ProbeStep {
    /// Probes intended during the step's sending window.
    pub sent: u64,
    /// Of them, answered well.
    pub ok: u64,
    /// Their time to first token (intended send to first token, server time), seconds.
    pub ttft: Percentiles,
}

/// A step's latency histograms in HdrHistogram's V2 encoding (base64): microseconds, three
/// significant digits. Latencies are in the server's time, the lag in wall time, as the
/// step's percentiles are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepHistograms {
    /// Time to first token.
    pub ttft: String,
    /// Time per output token.
    pub tpot: String,
    /// Gaps between token-bearing events.
    pub itl: String,
    /// End to end.
    pub e2e: String,
    /// Actual − intended send time.
    pub lag: String,
}

/// Which share of a split run a `run.json` holds (`inferscale load --segment I/N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentReport {
    /// 0-based worker index.
    pub index: u32,
    /// Workers in all.
    pub count: u32,
    /// The shared start every worker waited for (RFC 3339), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// How late this worker's schedule began after `start_at`, seconds (0 when on time).
    #[serde(default)]
    pub late_s: f64,
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TimelinePoint {
    /// Seconds from the run start (start of the interval).
    pub t_s: f64,
    /// The step running then (`null` in rests).
    pub step: Option<usize>,
    /// Requests sent in the interval.
    pub sent: u64,
    /// Requests that ended well in it.
    pub ok: u64,
    /// Requests that failed in it.
    pub failed: u64,
    /// Requests dropped in it.
    pub dropped: u64,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// The server's queue at the nearest scrape.
    pub queue_depth: Option<f64>,
    /// The server's running requests.
    pub running: Option<f64>,
    /// The server's KV-cache usage.
    pub kv_cache_usage: Option<f64>,
}

/// The plan as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    /// The steps.
    pub stages: Vec<Stage>,
    /// The arrival process.
    pub arrival: Arrival,
    /// The in-flight cap (k6's `maxVUs`).
    pub max_in_flight: usize,
    /// The requests.
    pub requests: RequestSpec,
    /// Connection reuse.
    pub connection_reuse: bool,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// Simulated seconds per wall second the plan ran at.
    pub speedup: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// The probe stream's rate beside the plan, req/s (`--probe-rate`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_rate_rps: Option<f64>,
}

/// The server that was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// The base URL.
    pub url: String,
    /// The served model.
    pub model: String,
    /// Where its metrics were scraped (`null`: not scraped).
    pub metrics_url: Option<String>,
    /// Engines detected in its metrics.
    #[serde(default)]
    pub engines: Vec<String>,
    /// What it was, when inferscale started it (the simulator's profile and speed-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
    /// `max_num_seqs`, when known (from the simulator, or given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
}

/// The embedded simulator a run loaded: what it modelled, and whether it held its clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulated {
    /// Its profile (`aws-eks-ministral-8b-l40s`).
    pub profile: String,
    /// The GPU it modelled.
    pub gpu: String,
    /// The model it modelled.
    pub model: String,
    /// Its engine's `max_num_seqs`.
    pub max_num_seqs: u32,
    /// How many times faster than real time it ran.
    pub speedup: f64,
    /// How late it released what the engine computed (recorded at the end of the load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_lag: Option<ClockLag>,
    /// Whether it held its clock ([`ClockLag::held`]; absent when not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_held: Option<bool>,
    /// Whether its prefix cache was on (vLLM's default; absent: on).
    #[serde(default = "on", skip_serializing_if = "is_on")]
    pub prefix_caching: bool,
}

fn on() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_on(b: &bool) -> bool {
    *b
}

impl Simulated {
    /// Whether it recorded that it could not hold its speed-up (its latencies are then
    /// overstated by the machine, not computed by the model).
    pub fn fell_behind(&self) -> bool {
        self.clock_held == Some(false)
    }

    /// One line for people: "profile p, gpu g, model m, max_num_seqs n, speedup s".
    pub fn describe(&self) -> String {
        format!(
            "profile {}, gpu {}, model {}, max_num_seqs {}, speedup {}",
            self.profile, self.gpu, self.model, self.max_num_seqs, self.speedup
        )
    }
}

/// Releases later than this (wall time) count as late.
pub const LATE_BAR_S: f64 = 0.005;

/// Above this share of late releases the simulator did not hold its speed-up: one release in
/// twenty. A single pause of the machine (tens of milliseconds, as virtual machines take now
/// and then) delays far fewer; a machine that cannot keep up delays most.
pub const LATE_SHARE_MAX: f64 = 0.05;

/// How far behind its scaled clock the simulator released what the engine computed (wall
/// time), as its lag meter read at the end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockLag {
    /// Events released.
    pub releases: u64,
    /// Median lateness, wall seconds (the upper bound of its power-of-two bucket).
    pub p50_s: f64,
    /// 95th percentile, likewise.
    pub p95_s: f64,
    /// 99th percentile, likewise.
    pub p99_s: f64,
    /// The latest release, wall seconds.
    pub max_s: f64,
    /// Share of releases later than [`LATE_BAR_S`].
    pub late_share: f64,
}

impl ClockLag {
    /// Whether the simulator kept its clock: at most [`LATE_SHARE_MAX`] of its releases were
    /// later than [`LATE_BAR_S`].
    pub fn held(&self) -> bool {
        self.late_share <= LATE_SHARE_MAX
    }

    /// One line for people: "p95 0.1 ms, p99 0.3 ms, max 12 ms; 0.0 % over 5 ms".
    pub fn describe(&self) -> String {
        format!(
            "release lag p95 {:.1} ms, p99 {:.1} ms, max {:.0} ms; {:.1} % of {} releases over {:.0} ms",
            self.p95_s * 1e3,
            self.p99_s * 1e3,
            self.max_s * 1e3,
            self.late_share * 100.0,
            self.releases,
            LATE_BAR_S * 1e3
        )
    }
}

/// A sequential warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WarmupReport {
    /// Requests sent.
    pub requests: u64,
    /// Of those, how many succeeded.
    pub ok: u64,
    /// Every request's latency in order (seconds; `null` for failures).
    pub latencies_s: Vec<Option<f64>>,
    /// The first request's latency.
    pub first_s: Option<f64>,
    /// The median.
    pub median_s: Option<f64>,
    /// The median of the second half (the steady state).
    pub steady_s: Option<f64>,
    /// `first / steady`.
    pub cold_ratio: Option<f64>,
}

/// A threshold and whether it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// As written (`p95(e2e)<5s`).
    pub expr: String,
    /// The measured value.
    pub value: Option<f64>,
    /// Whether it held.
    pub ok: bool,
}

/// The whole of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`RUN_VERSION`].
    pub version: u32,
    /// `inferscale <version>`.
    pub tool: String,
    /// When the plan started (UTC, RFC 3339).
    pub started_at: String,
    /// The run was stopped early (Ctrl-C); its last step is partial.
    pub interrupted: bool,
    /// The server.
    pub target: TargetReport,
    /// The plan.
    pub plan: PlanReport,
    /// The warm-up, when one ran.
    #[serde(default)]
    pub warmup: Option<WarmupReport>,
    /// One entry per step that started.
    pub steps: Vec<StepReport>,
    /// Per second.
    pub timeline: Vec<TimelinePoint>,
    /// The thresholds asked for.
    #[serde(default)]
    pub thresholds: Vec<ThresholdResult>,
    /// Load-generator CPU seconds for the whole run.
    pub client_cpu_s: f64,
    /// This file is one worker's share of a split run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentReport>,
    /// The SLO each step's goodput counts against (`--slo`), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<crate::slo::Slo>,
}
