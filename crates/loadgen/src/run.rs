//! The driver: sends the planned requests on time, collects their records, samples the
//! server, and builds the report.
//!
//! Three independent parts meet here: the [schedule](crate::schedule) says *when* (computed
//! ahead), the [transport](crate::transport) says *how*, and the stop condition (the plan's
//! end, or an interruption) says *until when*. Requests are sent by a dedicated thread with
//! its own single-threaded runtime, which owns the connections and times every send itself
//! ([`crate::pace`]: a spin for short gaps, a `timerfd` for longer ones), so timer
//! granularity never becomes schedule lag and no request costs a cross-thread wake-up;
//! sampling, progress and step reports run on the caller's runtime. When the in-flight cap is
//! reached the request is dropped, counted, and never sent (k6's `dropped_iterations`).

mod probes;
mod sender;
mod steps;

use inferscale_clock::Instant;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};

use crate::probe::Probe;
use crate::prompt::{Prepared, RequestSpec, prepare};
use crate::record::{Record, StepInput, step_report, timeline};
use crate::report::{PlanReport, RUN_VERSION, RunReport, SegmentReport, StepReport, TargetReport};
use crate::sampler::{Sample, Sampler};
use crate::schedule::{Arrival, Planned, Segment, Stage, StageWindow, plan};
use crate::target::Target;
use crate::transport::{Client, ClientConfig, Outcome};
use sender::{CUT_OFF, Records, Sender, Sending, Sent, Shared};
use steps::{Note, StepMarks, StepWatch};

/// How long before a step starts its lower-bound scrape is taken (a real server's `/metrics`
/// takes milliseconds to tens of milliseconds to answer).
const BOUND_LEAD: Duration = Duration::from_millis(100);

/// A step's report is built during the run only when the next step starts at least this
/// much later; otherwise it waits for the end of the run.
const REPORT_ROOM: Duration = Duration::from_secs(2);

/// Connections opened before a run starts (with reuse), at least and at most.
const PRECONNECT_MIN: usize = 4;
const PRECONNECT_MAX: usize = 4096;

/// Bodies prepared for closed-loop stages (cycled).
const CLOSED_POOL: usize = 4096;

/// Everything a load run needs.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Connections and deadlines.
    pub client: ClientConfig,
    /// What to send.
    pub requests: RequestSpec,
    /// The steps (server time).
    pub stages: Vec<Stage>,
    /// How arrivals are spaced.
    pub arrival: Arrival,
    /// Requests in flight at most; more are dropped.
    pub max_in_flight: usize,
    /// Server seconds per wall second: rates are multiplied and durations divided by it.
    pub speedup: f64,
    /// Seed of the random choices.
    pub seed: u64,
    /// Where to scrape the server's metrics (`None`: no server view).
    pub metrics: Option<Target>,
    /// Seconds (server time) between scrapes.
    pub sample_interval_s: f64,
    /// After an interruption, how long (wall) requests in flight may finish.
    pub grace: Duration,
    /// This worker's share of the schedule ([`Segment::WHOLE`]: all of it).
    pub segment: Segment,
    /// When the schedule starts (every worker of a split run waits for the same instant);
    /// `None`: at once.
    pub start_at: Option<SystemTime>,
    /// Single-token probe requests per second (server time) beside the plan, outside its
    /// in-flight cap (`None`: none); see `run/probes.rs`.
    pub probe_rate_rps: Option<f64>,
}

/// Live progress, for a terminal or a log.
#[derive(Debug, Clone)]
pub enum Progress {
    /// A step began.
    StepStarted {
        /// 0-based.
        index: usize,
        /// Offered rate.
        target_rps: f64,
        /// A closed-loop step's concurrency.
        concurrency: Option<u32>,
        /// Steps in the plan.
        of: usize,
    },
    /// Twice a second.
    Tick(Tick),
    /// A step's requests have all finished (or its rest ran out).
    StepEnded(Box<StepReport>),
}

/// A snapshot of the run in progress.
#[derive(Debug, Clone, Default)]
pub struct Tick {
    /// Server seconds since the start.
    pub elapsed_s: f64,
    /// The step sending now.
    pub step: Option<usize>,
    /// Requests sent in this step so far.
    pub sent: u64,
    /// Of those, finished well.
    pub ok: u64,
    /// Failed.
    pub failed: u64,
    /// Dropped.
    pub dropped: u64,
    /// In flight now.
    pub in_flight: u64,
    /// Sends per second over the last tick (server time).
    pub rate: f64,
    /// p95 e2e of the step so far.
    pub e2e_p95_s: Option<f64>,
    /// The server's queue at the last scrape.
    pub queue_depth: Option<f64>,
}

/// What a run produced.
pub struct LoadOutput {
    /// `run.json`.
    pub report: RunReport,
    /// Every request (for `requests.jsonl`).
    pub records: Vec<Record>,
    /// Scrape errors, if any.
    pub scrape_errors: Vec<String>,
}

/// Why a run could not start (or, for [`LoadError::TaskPanicked`], could not finish).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The speed-up is not a positive number.
    #[error("the speed-up must be positive, not {0}")]
    Speedup(f64),
    /// `max_in_flight` is 0.
    #[error("the in-flight cap must be at least 1")]
    InFlightCap,
    /// The stages do not make a schedule.
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    /// The request bodies cannot be prepared.
    #[error(transparent)]
    Dataset(#[from] crate::prompt::DatasetError),
    /// A trace's replays cannot be scheduled.
    #[error(transparent)]
    Replay(#[from] crate::trace::ReplayError),
    /// Think-time dispatch with the schedule split across workers.
    #[error(
        "--dispatch think-time cannot be split across workers (a turn waits for the one before, which another worker may send); use one worker or --dispatch timestamp"
    )]
    SplitThinkTime,
    /// The operating system refused a thread.
    #[error("cannot start the sending thread")]
    Thread(#[source] std::io::Error),
    /// A request task panicked (a bug): the records cannot be trusted.
    #[error("a request task panicked")]
    TaskPanicked,
}

/// Process CPU seconds (user + system) so far.
pub fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // Clock ticks; 100 per second on every Linux this runs on.
    (t(11) + t(12)) / 100.0
}

/// UTC now as RFC 3339.
pub fn now_rfc3339() -> String {
    rfc3339(inferscale_clock::wall())
}

/// `t` in UTC as RFC 3339, to the second.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Seconds since the Unix epoch of an RFC 3339 time (`2026-12-02T15:00:00Z`, with an
/// optional fraction, `Z` or an offset such as `+01:00`); `None` when it is not one.
pub fn parse_rfc3339(t: &str) -> Option<f64> {
    let b = t.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &t[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let v = o[1..3].parse::<i64>().ok()? * 3600 + o[4..6].parse::<i64>().ok()? * 60;
            if o.starts_with('-') { -v } else { v }
        }
        _ => return None,
    };
    // Days from the civil date (H. Hinnant's algorithm, the inverse of `rfc3339`'s).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset) as f64 + frac)
}

/// Runs the plan. `interrupt` resolving stops the schedule (requests in flight get `grace` to
/// finish) and the partial result is returned, marked interrupted.
///
/// The parts, each with one job: the sending thread (`run/sender.rs`) sends and records every
/// request; the step watcher (`run/steps.rs`) marks each step's ends and builds its
/// report; the ticker reads progress; the [sampler](Sampler) scrapes the
/// server; the [probe](Probe) notices the machine's stalls. This function starts them, passes
/// their notes on, stops them, and assembles the report.
// Long: it starts six concurrent parts (sender, step watcher, ticker, sampler, stall probe,
// probe stream) and stops them in the one order that loses no record; split, the order
// would be spread over functions that each hold half the handles.
pub async fn run(
    mut cfg: LoadConfig,
    dataset: Option<String>,
    mut progress: impl FnMut(Progress) + Send,
    interrupt: impl Future<Output = ()>,
) -> Result<LoadOutput, LoadError> {
    if !(cfg.speedup.is_finite() && cfg.speedup > 0.0) {
        return Err(LoadError::Speedup(cfg.speedup));
    }
    if cfg.max_in_flight == 0 {
        return Err(LoadError::InFlightCap);
    }
    let k = cfg.speedup;
    let Work {
        planned,
        windows,
        bodies,
        extra,
        follow,
    } = work(&mut cfg, dataset.as_deref())?;
    let started_at = now_rfc3339();
    let client = Arc::new(Client::new(cfg.client.clone()));
    let sampler = sampler_for(&cfg);
    // The first step's lower bound is scraped before the clock starts, so that no request
    // can finish before it is taken (later steps' bounds are taken ahead of their start).
    let first_bound = match &sampler {
        Some(s) => s.scrape(Instant::now()).await.ok(),
        None => None,
    };
    let (again_tx, again_rx) = mpsc::unbounded_channel();
    let (later_tx, later_rx) = mpsc::unbounded_channel();
    let sending = Sending::new(&planned, &follow, extra.len(), &cfg, (again_rx, later_rx));
    let sender = Sender::start(Arc::clone(&client), preconnect(&cfg), sending).await?;
    let (t0, late_s) = start_time(&cfg);
    let cpu0 = process_cpu_s();
    let probe = Arc::new(Probe::start(t0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler_task = sampler.clone().map(|s| {
        let interval = Duration::from_secs_f64((cfg.sample_interval_s / k).max(0.01));
        let rx = stop_rx.clone();
        tokio::spawn(async move { s.run(t0, interval, rx).await })
    });

    let n_stages = cfg.stages.len();
    let mut planned_per_stage = vec![0u64; n_stages];
    planned.iter().for_each(|p| planned_per_stage[p.stage] += 1);
    let shared = Arc::new(Shared::new(
        Arc::clone(&client),
        &planned_per_stage,
        (bodies, extra),
        sender::Next {
            again: again_tx,
            follow: follow.into(),
            later: later_tx,
        },
        &windows,
        t0,
        &cfg.requests,
    ));
    let probe_task = probes::Probes::of(&cfg, &windows)?.map(|p| p.spawn(t0, &stop_rx));
    let mut done_rx = sender.go(Arc::clone(&shared))?;

    let mut marks = StepMarks::at_start(n_stages, first_bound, cpu0);
    let (notes_tx, mut notes_rx) = mpsc::unbounded_channel::<Note>();
    let stage_task = tokio::spawn(
        StepWatch {
            shared: Arc::clone(&shared),
            sampler: sampler.clone(),
            probe: Arc::clone(&probe),
            windows: windows.clone(),
            stages: cfg.stages.clone(),
            planned_per_stage,
            timeout: cfg.client.timeout,
            speedup: k,
            marks: marks.clone(),
            notes: notes_tx.clone(),
        }
        .run(),
    );
    let tick_task = tokio::spawn(steps::ticks(
        Arc::clone(&shared),
        sampler.clone(),
        windows.clone(),
        k,
        notes_tx,
    ));

    // The sending thread runs the plan; meanwhile notes are taken in, and an interruption
    // stops the schedule (the thread gives requests in flight `grace` to finish).
    let mut deferred = Vec::new();
    let mut take = |n: Note, marks: &mut Vec<StepMarks>| match n {
        Note::Progress(p) => progress(p),
        Note::Marks(i, m) => marks[i] = *m,
        Note::Deferred(i) => deferred.push(i),
    };
    let mut interrupted = false;
    tokio::pin!(interrupt);
    let sent = loop {
        tokio::select! {
            biased;
            _ = &mut interrupt, if !interrupted => {
                interrupted = true;
                shared.stop.store(true, Ordering::Relaxed);
            }
            Some(n) = notes_rx.recv() => take(n, &mut marks),
            r = &mut done_rx => break r.map_err(|_| LoadError::TaskPanicked)?,
        }
    };
    let end_wall = t0.elapsed().as_secs_f64();
    cut_off(&shared.records, &sent, end_wall)?;
    if !interrupted {
        let _ = stage_task.await;
    } else {
        stage_task.abort();
    }
    tick_task.abort();
    while let Ok(n) = notes_rx.try_recv() {
        take(n, &mut marks);
    }
    let _ = stop_tx.send(true);
    if let Some(t) = sampler_task {
        let _ = t.await;
    }
    let probe_results = probes::collect(probe_task, cfg.grace).await;
    let records = in_order(&shared.records);
    let samples = sampler.as_ref().map(|s| s.samples()).unwrap_or_default();
    let ran = Ran {
        cfg: &cfg,
        records: &records,
        samples: &samples,
        marks: &marks,
        windows: &windows,
        probe: &probe,
        bodies: &shared.bodies,
        probes: probe_results.as_deref(),
        interrupted,
    };
    let steps = ran.steps();
    // The rows of the steps whose reports waited.
    for i in deferred {
        if let Some(s) = steps.iter().find(|s| s.index == i) {
            progress(Progress::StepEnded(Box::new(s.clone())));
        }
    }
    let mut report = ran.report(steps, end_wall);
    report.started_at = started_at;
    report.client_cpu_s = process_cpu_s() - cpu0;
    report.segment = (cfg.segment.count > 1).then(|| SegmentReport {
        index: cfg.segment.index,
        count: cfg.segment.count,
        start_at: cfg.start_at.map(rfc3339),
        late_s,
    });
    Ok(LoadOutput {
        report,
        records,
        scrape_errors: sampler.map(|s| s.errors()).unwrap_or_default(),
    })
}

impl Sending {
    /// The sending loop's share of the run: `planned` at their times (wall seconds, the
    /// plan's divided by `speedup`), `extra` bodies for closed-loop successors, asked for on
    /// `again`.
    fn new(
        planned: &[Planned],
        follow: &crate::trace::Follow,
        extra: usize,
        cfg: &LoadConfig,
        (again, later): (
            mpsc::UnboundedReceiver<usize>,
            mpsc::UnboundedReceiver<(usize, Instant)>,
        ),
    ) -> Sending {
        // A trace's later turns are sent when those they follow end, not at their own time.
        Sending {
            schedule: planned
                .iter()
                .enumerate()
                .filter(|(i, _)| follow.waits.get(*i).is_none_or(|w| *w == 0))
                .map(|(i, p)| (p.at / cfg.speedup, i))
                .collect(),
            kinds: planned.iter().map(|p| (p.stage, p.closed)).collect(),
            extra,
            max_in_flight: cfg.max_in_flight,
            grace: cfg.grace,
            again,
            later,
            waiting: std::collections::BinaryHeap::new(),
            deadlines: Vec::with_capacity(cfg.max_in_flight.min(1 << 16)),
        }
    }
}

/// Every stage's records, in index order.
fn in_order(records: &Records) -> Vec<Record> {
    let mut all: Vec<Record> = records
        .iter()
        .flat_map(|r| r.lock().map(|r| r.clone()).unwrap_or_default())
        .collect();
    all.sort_by_key(|x| x.index);
    all
}

/// When the run starts, and by how much a worker came after a shared start (seconds): a
/// shared start is waited for; a worker that comes after it starts at once.
fn start_time(cfg: &LoadConfig) -> (Instant, f64) {
    match cfg
        .start_at
        .map(|at| at.duration_since(inferscale_clock::wall()))
    {
        Some(Ok(wait)) => (Instant::now() + wait, 0.0),
        Some(Err(late)) => (
            Instant::now() + Duration::from_millis(100),
            late.duration().as_secs_f64() + 0.1,
        ),
        None => (Instant::now() + Duration::from_millis(100), 0.0),
    }
}

/// How a run went: what its report is built from.
struct Ran<'a> {
    cfg: &'a LoadConfig,
    /// Every request's record, in index order.
    records: &'a [Record],
    samples: &'a [Sample],
    marks: &'a [StepMarks],
    windows: &'a [StageWindow],
    probe: &'a Probe,
    /// The planned requests' bodies (what their prompts imply for a prefix cache).
    bodies: &'a [Prepared],
    /// The probe stream's results, when it ran.
    probes: Option<&'a [probes::ProbeResult]>,
    interrupted: bool,
}

impl Ran<'_> {
    /// Every step's report (an interrupted run's up to the last step it reached).
    fn steps(&self) -> Vec<StepReport> {
        let (cfg, marks, windows) = (self.cfg, self.marks, self.windows);
        let last_step = self.records.iter().map(|r| r.step).max();
        (0..cfg.stages.len())
            .filter(|i| !self.interrupted || last_step.is_some_and(|l| *i <= l))
            .map(|i| {
                let mut report = step_report(StepInput {
                    index: i,
                    stage: &cfg.stages[i],
                    window: windows[i],
                    records: self.records.iter().filter(|r| r.step == i).collect(),
                    samples: self.samples,
                    bounds: (marks[i].bounds.0.as_ref(), marks[i].bounds.1.as_ref()),
                    cpu_s: marks[i].cpu_s().max(0.0),
                    speedup: cfg.speedup,
                    histograms: cfg.segment.count > 1,
                    stalls: Some(self.probe.between(
                        windows[i].start,
                        windows[i].end,
                        marks[i].stolen_s(),
                    )),
                });
                report.probe = self
                    .probes
                    .map(|p| probes::step(p, windows[i], cfg.speedup));
                report.cache = cache_step(self.bodies, self.records.iter().filter(|r| r.step == i));
                report
            })
            .collect()
    }

    /// `run.json` with `steps`, the run having ended `end_wall` seconds after its start (the
    /// start time, the client's CPU and the segment left for the caller).
    fn report(&self, steps: Vec<StepReport>, end_wall: f64) -> RunReport {
        let cfg = self.cfg;
        let engines = self
            .samples
            .last()
            .map(|s| {
                s.snapshot
                    .engines
                    .iter()
                    .map(|e| e.key().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        RunReport {
            version: RUN_VERSION,
            tool: concat!("inferscale ", env!("CARGO_PKG_VERSION")).to_owned(),
            started_at: String::new(),
            interrupted: self.interrupted,
            target: TargetReport {
                url: cfg.client.target.url.clone(),
                model: cfg.requests.model.clone(),
                metrics_url: cfg.metrics.as_ref().map(|m| m.url.clone()),
                engines,
                simulated: None,
                max_num_seqs: None,
            },
            plan: PlanReport {
                stages: cfg.stages.clone(),
                arrival: cfg.arrival,
                max_in_flight: cfg.max_in_flight,
                requests: cfg.requests.clone(),
                connection_reuse: cfg.client.reuse,
                timeout_s: cfg.client.timeout.as_secs_f64(),
                speedup: cfg.speedup,
                seed: cfg.seed,
                probe_rate_rps: cfg.probe_rate_rps,
            },
            warmup: None,
            timeline: timeline(
                self.records,
                self.windows,
                self.samples,
                cfg.speedup,
                end_wall,
            ),
            steps,
            thresholds: Vec::new(),
            client_cpu_s: 0.0,
            segment: None,
            slo: None,
        }
    }
}

/// What the prompts a step sent imply for a prefix cache, when they have a structure.
fn cache_step<'a>(
    bodies: &[Prepared],
    records: impl Iterator<Item = &'a Record>,
) -> Option<inferscale_results::run::CacheStep> {
    let (mut prompt, mut hits, mut any) = (0u64, 0u64, false);
    for r in records.filter(|r| r.sent_s.is_some()) {
        if let Some((p, h)) = bodies.get(r.index as usize).and_then(|b| b.implied) {
            prompt += u64::from(p);
            hits += u64::from(h);
            any = true;
        }
    }
    any.then(|| inferscale_results::run::CacheStep::of(prompt, hits))
}

/// What a run sends: its share of the planned requests, the steps' windows (wall seconds),
/// the planned requests' bodies and the closed-loop successors' pool.
struct Work {
    planned: Vec<Planned>,
    windows: Vec<StageWindow>,
    bodies: Arc<Vec<Prepared>>,
    extra: Arc<Vec<Prepared>>,
    /// A trace's think-time dispatch (wall seconds): see `Shared::follow`.
    follow: crate::trace::Follow,
}

/// A trace replay's schedule: its steps (which replace `cfg.stages`), requests, windows and
/// who follows whom (server seconds). `None` when the prompts are not a trace.
pub fn trace_replay(
    cfg: &mut LoadConfig,
    text: Option<&str>,
) -> Result<Option<crate::trace::Replay>, LoadError> {
    let crate::prompt::PromptSource::Trace {
        path,
        dispatch,
        speeds,
    } = &cfg.requests.prompt
    else {
        return Ok(None);
    };
    let text = text.ok_or_else(|| crate::prompt::DatasetError::NotRead { name: path.clone() })?;
    let turns = crate::trace::parse_mooncake(text, path)
        .map_err(|e| LoadError::Dataset(crate::prompt::DatasetError::Trace(e)))?;
    if *dispatch == crate::trace::Dispatch::ThinkTime && cfg.segment.count > 1 {
        return Err(LoadError::SplitThinkTime);
    }
    let rest = cfg.stages.first().map_or(0.0, |s| s.rest_s);
    let replay = crate::trace::replay(&turns, speeds, rest, *dispatch)?;
    cfg.stages.clone_from(&replay.stages);
    Ok(Some(replay))
}

/// The plan, resolved into requests and their bodies, this worker's share of them kept.
fn work(cfg: &mut LoadConfig, dataset: Option<&str>) -> Result<Work, LoadError> {
    let k = cfg.speedup;
    let (planned, windows_sim, follow) = match trace_replay(cfg, dataset)? {
        Some(r) => (r.planned, r.windows, r.follow),
        None => {
            let (p, w) = plan(&cfg.stages, cfg.arrival, cfg.seed)?;
            (p, w, crate::trace::Follow::default())
        }
    };
    let follow = crate::trace::Follow {
        next: follow
            .next
            .into_iter()
            .map(|f| f.into_iter().map(|(j, think)| (j, think / k)).collect())
            .collect(),
        waits: follow.waits,
    };
    // Bodies are prepared for the whole plan, so a worker sends the very bodies one client
    // would have sent for its share.
    let bodies = prepare(&cfg.requests, planned.len(), cfg.seed, dataset)?;
    let (planned, bodies) = if cfg.segment.count > 1 {
        let mut mine = vec![false; planned.len()];
        for i in cfg.segment.select(&planned) {
            mine[i] = true;
        }
        fn keep<T>(v: Vec<T>, mine: &[bool]) -> Vec<T> {
            v.into_iter()
                .zip(mine)
                .filter_map(|(x, &m)| m.then_some(x))
                .collect()
        }
        (keep(planned, &mine), keep(bodies, &mine))
    } else {
        (planned, bodies)
    };
    // Closed-loop stages send as many requests as the server answers; they cycle through a
    // pool of bodies prepared ahead.
    let extra = if cfg.stages.iter().any(|s| s.concurrency.is_some()) {
        prepare(&cfg.requests, CLOSED_POOL, cfg.seed ^ 0xC105_ED00, dataset)?
    } else {
        Vec::new()
    };
    let windows = windows_sim
        .iter()
        .map(|w| StageWindow {
            start: w.start / k,
            end: w.end / k,
            rest_end: w.rest_end / k,
        })
        .collect();
    Ok(Work {
        planned,
        windows,
        bodies: Arc::new(bodies),
        extra: Arc::new(extra),
        follow,
    })
}

/// The server's sampler, when a metrics URL is given. The API's credentials go to the
/// metrics endpoint only when it is the same server: a key must never be sent to another
/// host.
fn sampler_for(cfg: &LoadConfig) -> Option<Arc<Sampler>> {
    cfg.metrics.clone().map(|t| {
        let mut access = crate::transport::Get::like(&cfg.client);
        if t.authority() != cfg.client.target.authority() {
            access.auth = crate::auth::Auth::none();
        }
        Arc::new(Sampler::new(t, access))
    })
}

/// How many connections to open ahead: what the first step's requests would keep in flight
/// if each took 100 ms, a few at least, never past the in-flight cap.
///
/// Opening a connection costs the sending thread several requests' worth of time, and the
/// connections are needed exactly when the server slows: then every request in flight holds
/// one, and a pool sized for a fast server left the sender opening hundreds while it also had
/// to catch up. With nginx stopped for 12 ms in a 60,000 req/s step, the longest lag was
/// 5-11 ms (median 6.8) with this pool against 10-31 ms (median 14) with one of 10 ms of the
/// rate capped at 512, in each of 5 runs side by side. The idle pool is last-in first-out, so
/// the extra connections stay cold and cost the server only a socket.
fn preconnect(cfg: &LoadConfig) -> usize {
    let first_rate = cfg.stages.first().map_or(1.0, |s| match s.concurrency {
        Some(c) => f64::from(c) * 1000.0,
        None => s.rate / cfg.speedup,
    });
    ((first_rate / 10.0).ceil() as usize)
        .max(PRECONNECT_MIN)
        .min(cfg.max_in_flight)
        .min(PRECONNECT_MAX)
}

/// Records the requests that were sent and have no record yet (the interruption cut them
/// off) as timeouts ending at `end_wall`.
fn cut_off(records: &Records, sent: &[Sent], end_wall: f64) -> Result<(), LoadError> {
    let mut have = std::collections::HashSet::new();
    for r in records.iter() {
        let r = r.lock().map_err(|_| LoadError::TaskPanicked)?;
        have.extend(r.iter().map(|x| x.index));
    }
    for &(i, stage, intended_s) in sent {
        if !have.contains(&i)
            && let Ok(mut r) = records[stage].lock()
        {
            r.push(Record {
                index: i,
                step: stage,
                intended_s,
                sent_s: None,
                events_s: Vec::new(),
                end_s: Some(end_wall),
                outcome: Outcome::Timeout,
                output_tokens: None,
                prompt_tokens: None,
                token_source: None,
                error: Some(CUT_OFF.into()),
            });
        }
    }
    Ok(())
}

/// Runs a sequential warm-up: `n` requests, each sent when the previous ended.
pub async fn warmup(
    client: &Client,
    spec: &RequestSpec,
    n: usize,
    speedup: f64,
    seed: u64,
    mut each: impl FnMut(usize, Option<f64>),
) -> Result<crate::report::WarmupReport, LoadError> {
    let bodies = prepare(spec, n, seed, None)?;
    let mut lat = Vec::with_capacity(n);
    for (i, b) in bodies.iter().enumerate() {
        let now = Instant::now();
        let ex = client
            .send(spec.api.path(), &b.body, now, spec.stream)
            .await;
        let l = (ex.outcome == Outcome::Ok).then(|| (ex.end - now).as_secs_f64() * speedup);
        each(i, l);
        lat.push(l);
    }
    Ok(warmup_report(lat))
}

/// First, median and steady latency of a warm-up.
pub fn warmup_report(lat: Vec<Option<f64>>) -> crate::report::WarmupReport {
    let ok: Vec<f64> = lat.iter().flatten().copied().collect();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| {
            if v.len() % 2 == 1 {
                v[v.len() / 2]
            } else {
                (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
            }
        })
    };
    let second_half: Vec<f64> = lat[lat.len() / 2..].iter().flatten().copied().collect();
    let first = lat.first().copied().flatten();
    let steady = median(&second_half);
    crate::report::WarmupReport {
        requests: lat.len() as u64,
        ok: ok.len() as u64,
        first_s: first,
        median_s: median(&ok),
        steady_s: steady,
        cold_ratio: first
            .zip(steady)
            .filter(|(_, s)| *s > 0.0)
            .map(|(f, s)| f / s),
        latencies_s: lat,
    }
}
