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

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use inferscale_catalog::Signal;
use tokio::sync::Notify;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::pace::Pacer;
use crate::probe::{Probe, steal_s};
use crate::prompt::{Prepared, RequestSpec, prepare};
use crate::record::{Hdr, Record, StepInput, step_report, timeline};
use crate::report::{PlanReport, RUN_VERSION, RunReport, SegmentReport, StepReport, TargetReport};
use crate::sampler::{Sample, Sampler};
use crate::schedule::{Arrival, Planned, Segment, Stage, StageWindow, plan};
use crate::target::Target;
use crate::transport::{Client, ClientConfig, Exchange, Outcome};

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
    /// The operating system refused a thread.
    #[error("cannot start the sending thread")]
    Thread(#[source] std::io::Error),
    /// A request task panicked (a bug): the records cannot be trusted.
    #[error("a request task panicked")]
    TaskPanicked,
}

/// The scrapes before a step and after its requests finished.
type Bounds = (Option<Sample>, Option<Sample>);

/// The hypervisor's steal counter at a step's start and end (seconds, when known).
type StealMarks = (Option<f64>, Option<f64>);

/// Every request's record, per stage (a step's report locks only its own).
type Records = Arc<Vec<Mutex<Vec<Record>>>>;

/// A stage's outcomes so far, kept incrementally so that progress never rescans records.
#[derive(Default)]
struct Live {
    ok: u64,
    failed: u64,
    dropped: u64,
    e2e: Hdr,
}

/// What every request task shares.
struct Shared {
    client: Arc<Client>,
    records: Records,
    in_flight: Arc<AtomicUsize>,
    /// Told when the last request in flight ends (the sending loop waits on it once
    /// everything is sent).
    idle: Notify,
    done: Arc<Vec<AtomicU64>>,
    /// The planned requests' bodies, and the closed-loop successors' (cycled): a task
    /// borrows its body from here rather than holding a counted reference of its own.
    bodies: Arc<Vec<Prepared>>,
    extra: Arc<Vec<Prepared>>,
    /// Closed-loop requests in flight or about to be replaced, per stage.
    open: Vec<AtomicU64>,
    /// Closed-loop successors asked for (by stage) and not yet handled.
    pending: AtomicU64,
    again: mpsc::UnboundedSender<usize>,
    /// Running counts per stage for the progress display (cheap to read while loading).
    live: Vec<Mutex<Live>>,
    stop: Arc<AtomicBool>,
    /// Ends of the stages' sending windows.
    ends: Vec<Instant>,
    t0: Instant,
    path: &'static str,
    stream: bool,
}

impl Shared {
    /// Sends request `index` of `stage` (intended at `due`) with the body `body`; a
    /// closed-loop one asks for its successor when it ends inside its stage's window.
    /// Returns the handle the deadline sweep aborts it with.
    ///
    /// The task is not kept in a `JoinSet`: its end is known from `in_flight` (and `idle`),
    /// and a set's bookkeeping is an entry, a lock and a wake-up per request.
    fn spawn(
        self: &Arc<Self>,
        index: u64,
        stage: usize,
        body: Body,
        due: Instant,
        closed: bool,
    ) -> JoinHandle<()> {
        let mut req = InFlight {
            sh: Arc::clone(self),
            index,
            stage,
            due,
            closed,
            ex: Exchange::begun(due),
            ended: false,
        };
        tokio::spawn(async move {
            let sh = &req.sh;
            let body = match body {
                Body::Planned(i) => &sh.bodies[i].body,
                Body::Extra(i) => &sh.extra[i].body,
            };
            let result = sh
                .client
                .follow(sh.path, body, sh.stream, &mut req.ex)
                .await;
            req.ex.conclude(result);
            req.end();
        })
    }
}

/// Which prepared body a request sends.
#[derive(Clone, Copy)]
enum Body {
    Planned(usize),
    Extra(usize),
}

/// A request in flight: what its record needs, and the duty to write it. The record is
/// written when the exchange ends or, should the task be dropped first (the deadline sweep
/// aborted it, or the run was cut off), when it is dropped, with what was seen until then.
struct InFlight {
    sh: Arc<Shared>,
    index: u64,
    stage: usize,
    due: Instant,
    closed: bool,
    ex: Exchange,
    ended: bool,
}

impl InFlight {
    /// Records the exchange, counts it, and (closed loop, inside the window) asks for the
    /// successor.
    fn end(&mut self) {
        self.ended = true;
        let sh = &self.sh;
        let stage = self.stage;
        let rel = |t: Instant| t.saturating_duration_since(sh.t0).as_secs_f64();
        let ex = &mut self.ex;
        let rec = Record {
            index: self.index,
            step: stage,
            intended_s: rel(self.due),
            sent_s: ex.sent.map(rel),
            events_s: ex.token_events.iter().map(|t| rel(*t)).collect(),
            end_s: Some(rel(ex.end)),
            outcome: ex.outcome,
            output_tokens: ex.output_tokens,
            prompt_tokens: ex.prompt_tokens,
            token_source: ex.token_source,
            error: ex.error.take(),
        };
        if let Ok(mut l) = sh.live[stage].lock() {
            match (rec.outcome, rec.e2e()) {
                (Outcome::Ok, Some(e2e)) => {
                    l.ok += 1;
                    l.e2e.record(e2e);
                }
                (Outcome::Ok, None) => l.ok += 1,
                _ => l.failed += 1,
            }
        }
        if let Ok(mut r) = sh.records[stage].lock() {
            r.push(rec);
        }
        if sh.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            sh.idle.notify_one();
        }
        sh.done[stage].fetch_add(1, Ordering::AcqRel);
        if self.closed {
            let again = Instant::now() < sh.ends[stage] && !sh.stop.load(Ordering::Relaxed);
            if again {
                sh.pending.fetch_add(1, Ordering::AcqRel);
                if sh.again.send(stage).is_err() {
                    sh.pending.fetch_sub(1, Ordering::AcqRel);
                    sh.open[stage].fetch_sub(1, Ordering::AcqRel);
                }
            } else {
                sh.open[stage].fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let timeout = self.sh.client.config().timeout;
        if Instant::now() >= self.due + timeout {
            self.ex.expire(timeout);
        } else {
            self.ex.end = Instant::now();
            self.ex.outcome = Outcome::Timeout;
            self.ex.error = Some(CUT_OFF.into());
        }
        self.end();
    }
}

/// Why a request that was still going when the run was interrupted ended.
const CUT_OFF: &str = "cut off when the run was interrupted";

/// A request that was sent: (index, stage, intended wall seconds from the start).
type Sent = (u64, usize, f64);

/// What the sending thread is given besides [`Shared`].
struct Sending {
    /// (wall seconds from the start, request index), in time order.
    schedule: Vec<(f64, usize)>,
    /// Each planned request's stage, and whether the stage is closed-loop.
    kinds: Vec<(usize, bool)>,
    /// How many bodies are prepared for closed-loop successors.
    extra: usize,
    max_in_flight: usize,
    grace: Duration,
    sent_count: Arc<AtomicU64>,
    /// Closed-loop successors asked for, by stage.
    again: mpsc::UnboundedReceiver<usize>,
    /// The requests in flight (and some just ended) with their deadlines, for the sweep.
    deadlines: Vec<(Instant, JoinHandle<()>)>,
}

/// The longest the sending loop waits before it looks at the stop flag again.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How often requests past their deadline are looked for (and so how late, at most, a
/// timeout is noticed). One sweep over the requests in flight replaces a timer per request,
/// whose registration and removal cost the sending thread more than the rest of the request.
const SWEEP: Duration = Duration::from_millis(10);

/// What woke the sending loop.
enum Woke {
    Timer,
    Successor(usize),
    Ended,
}

/// The sending loop, on the sending thread's runtime: every planned request at its time (or
/// dropped at the in-flight cap), closed-loop successors as they are asked for, until the plan
/// is done and nothing is in flight, or until a stop and its grace. Returns every request sent.
async fn send_all(sh: Arc<Shared>, mut s: Sending) -> Vec<Sent> {
    let mut pacer = Pacer::new();
    // Sized from the plan: growing it while sending would copy it (megabytes at tens of
    // thousands of requests a second) between two sends.
    let mut sent: Vec<Sent> = Vec::with_capacity(s.schedule.len());
    let mut next_index = s.kinds.len() as u64;
    let mut next = 0;
    let mut stopped_at: Option<Instant> = None;
    let mut yielded = false;
    let mut next_sweep = Instant::now() + SWEEP;
    let due_of = |offset: f64| sh.t0 + Duration::from_secs_f64(offset.max(0.0));
    loop {
        if stopped_at.is_none() && sh.stop.load(Ordering::Relaxed) {
            stopped_at = Some(Instant::now());
        }
        let now = Instant::now();
        if now >= next_sweep {
            sweep(&mut s.deadlines, now);
            next_sweep = now + SWEEP;
        }
        while stopped_at.is_none()
            && let Some(&(offset, i)) = s.schedule.get(next)
        {
            let due = due_of(offset);
            if due > now {
                break;
            }
            if !yielded && sh.in_flight.load(Ordering::Acquire) >= s.max_in_flight {
                // At the cap, requests counted in flight may have ended already, their
                // responses unread only because this loop has not let their tasks run
                // (after a stall, it sends a burst). Let them run once, then decide: a
                // request is dropped only if the cap is still full, as k6 drops an
                // iteration only when every VU is busy.
                yielded = true;
                tokio::task::yield_now().await;
                continue;
            }
            yielded = false;
            next += 1;
            send_planned(&sh, &mut s, &mut sent, i, due);
        }
        while let Ok(stage) = s.again.try_recv() {
            send_successor(&sh, &mut s, &mut sent, &mut next_index, stage);
        }
        let scheduled = stopped_at.is_some() || next == s.schedule.len();
        let ended = || sh.in_flight.load(Ordering::Acquire) == 0;
        if scheduled && ended() && sh.pending.load(Ordering::Acquire) == 0 {
            break;
        }
        if stopped_at.is_some_and(|at| at.elapsed() >= s.grace) {
            // Every task still going has its handle here (the sweep forgets only those that
            // finished or that it aborted); each writes its record when it is dropped.
            for (_, task) in s.deadlines.drain(..) {
                task.abort();
            }
            while !ended() {
                let told = sh.idle.notified();
                if ended() {
                    break;
                }
                told.await;
            }
            break;
        }
        let mut poll = Instant::now() + STOP_POLL;
        if !s.deadlines.is_empty() {
            poll = poll.min(next_sweep);
        }
        let wake = match s.schedule.get(next) {
            Some(&(offset, _)) if !scheduled => due_of(offset).min(poll),
            _ => poll,
        };
        // A short gap is spun out without the other waits; a long one also wakes for a
        // successor, and (once everything is sent) for a request's end.
        if wake.saturating_duration_since(Instant::now()) <= crate::pace::SPIN {
            pacer.until(wake).await;
            continue;
        }
        let woke = tokio::select! {
            () = pacer.until(wake) => Woke::Timer,
            Some(stage) = s.again.recv() => Woke::Successor(stage),
            () = sh.idle.notified(), if scheduled => Woke::Ended,
        };
        if let Woke::Successor(stage) = woke {
            send_successor(&sh, &mut s, &mut sent, &mut next_index, stage);
        }
    }
    sent
}

/// Forgets the requests that ended, and aborts those past their deadline (each writes its
/// record as a timeout when its task is dropped).
fn sweep(deadlines: &mut Vec<(Instant, JoinHandle<()>)>, now: Instant) {
    deadlines.retain(|(deadline, task)| {
        if task.is_finished() {
            false
        } else if *deadline <= now {
            task.abort();
            false
        } else {
            true
        }
    });
}

/// Sends planned request `i` (due at `due`), or drops it at the in-flight cap.
fn send_planned(sh: &Arc<Shared>, s: &mut Sending, sent: &mut Vec<Sent>, i: usize, due: Instant) {
    let (stage, closed) = s.kinds[i];
    if sh.in_flight.load(Ordering::Acquire) >= s.max_in_flight {
        if let Ok(mut r) = sh.records[stage].lock() {
            r.push(Record {
                index: i as u64,
                step: stage,
                intended_s: due.saturating_duration_since(sh.t0).as_secs_f64(),
                sent_s: None,
                events_s: Vec::new(),
                end_s: None,
                outcome: Outcome::Dropped,
                output_tokens: None,
                prompt_tokens: None,
                token_source: None,
                error: Some(format!(
                    "{} requests were already in flight",
                    s.max_in_flight
                )),
            });
        }
        if let Ok(mut l) = sh.live[stage].lock() {
            l.dropped += 1;
        }
        sh.done[stage].fetch_add(1, Ordering::AcqRel);
        return;
    }
    sh.in_flight.fetch_add(1, Ordering::AcqRel);
    s.sent_count.fetch_add(1, Ordering::Relaxed);
    sent.push((
        i as u64,
        stage,
        due.saturating_duration_since(sh.t0).as_secs_f64(),
    ));
    if closed {
        sh.open[stage].fetch_add(1, Ordering::AcqRel);
    }
    let task = sh.spawn(i as u64, stage, Body::Planned(i), due, closed);
    s.deadlines.push((due + sh.client.config().timeout, task));
}

/// Sends the successor of a closed-loop request of `stage` that ended, unless the run is
/// stopping (or there is nothing to send).
fn send_successor(
    sh: &Arc<Shared>,
    s: &mut Sending,
    sent: &mut Vec<Sent>,
    next_index: &mut u64,
    stage: usize,
) {
    sh.pending.fetch_sub(1, Ordering::AcqRel);
    if sh.stop.load(Ordering::Relaxed) || s.extra == 0 {
        sh.open[stage].fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let index = *next_index;
    *next_index += 1;
    let body = Body::Extra((index as usize - s.kinds.len()) % s.extra);
    let due = Instant::now();
    sh.in_flight.fetch_add(1, Ordering::AcqRel);
    s.sent_count.fetch_add(1, Ordering::Relaxed);
    sent.push((
        index,
        stage,
        due.saturating_duration_since(sh.t0).as_secs_f64(),
    ));
    let task = sh.spawn(index, stage, body, due, true);
    s.deadlines.push((due + sh.client.config().timeout, task));
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
    rfc3339(SystemTime::now())
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
pub async fn run(
    cfg: LoadConfig,
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
    let (planned, windows_sim): (Vec<Planned>, Vec<StageWindow>) =
        plan(&cfg.stages, cfg.arrival, cfg.seed)?;
    // Bodies are prepared for the whole plan, so a worker sends the very bodies one client
    // would have sent for its share.
    let bodies = prepare(&cfg.requests, planned.len(), cfg.seed, dataset.as_deref())?;
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
    let bodies: Arc<Vec<Prepared>> = Arc::new(bodies);
    // Closed-loop stages send as many requests as the server answers; they cycle through a
    // pool of bodies prepared ahead.
    let extra: Arc<Vec<Prepared>> =
        Arc::new(if cfg.stages.iter().any(|s| s.concurrency.is_some()) {
            prepare(
                &cfg.requests,
                CLOSED_POOL,
                cfg.seed ^ 0xC105_ED00,
                dataset.as_deref(),
            )?
        } else {
            Vec::new()
        });
    let windows: Vec<StageWindow> = windows_sim
        .iter()
        .map(|w| StageWindow {
            start: w.start / k,
            end: w.end / k,
            rest_end: w.rest_end / k,
        })
        .collect();
    let started_at = now_rfc3339();
    let client = Arc::new(Client::new(cfg.client.clone()));
    // The API's credentials go to the metrics endpoint only when it is the same server: a
    // key must never be sent to another host.
    let sampler = cfg.metrics.clone().map(|t| {
        let mut access = crate::transport::Get::like(&cfg.client);
        if t.authority() != cfg.client.target.authority() {
            access.auth = crate::auth::Auth::none();
        }
        Arc::new(Sampler::new(t, access))
    });
    // The first step's lower bound is scraped before the clock starts, so that no request
    // can finish before it is taken (later steps' bounds are taken ahead of their start).
    let first_bound = match &sampler {
        Some(s) => s.scrape(Instant::now()).await.ok(),
        None => None,
    };
    // Open connections ahead: what the first step's requests would keep in flight if each
    // took 100 ms, a few at least, never past the in-flight cap. Opening a connection costs
    // the sending thread several requests' worth of time, and the connections are needed
    // exactly when the server slows: then every request in flight holds one, and a pool
    // sized for a fast server left the sender opening hundreds while it also had to catch
    // up. With nginx stopped for 12 ms in a 60,000 req/s step, the longest lag was 5-11 ms
    // (median 6.8) with this pool against 10-31 ms (median 14) with one of 10 ms of the
    // rate capped at 512, in each of 5 runs side by side. The idle pool is last-in
    // first-out, so the extra connections stay cold and cost the server only a socket.
    let first_rate = cfg.stages.first().map_or(1.0, |s| match s.concurrency {
        Some(c) => f64::from(c) * 1000.0,
        None => s.rate / k,
    });
    let warm = ((first_rate / 10.0).ceil() as usize)
        .max(PRECONNECT_MIN)
        .min(cfg.max_in_flight)
        .min(PRECONNECT_MAX);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sent_count = Arc::new(AtomicU64::new(0));
    let (again_tx, again_rx) = mpsc::unbounded_channel();
    // The sending thread: its runtime opens the connections (so that they are driven where
    // the requests are sent), says when they are ready, and waits for the start.
    let (ready_tx, ready_rx) = oneshot::channel::<std::io::Result<()>>();
    let (go_tx, go_rx) = oneshot::channel::<Arc<Shared>>();
    let (done_tx, mut done_rx) = oneshot::channel::<Vec<Sent>>();
    {
        let sending = Sending {
            schedule: planned
                .iter()
                .enumerate()
                .map(|(i, p)| (p.at / k, i))
                .collect(),
            kinds: planned.iter().map(|p| (p.stage, p.closed)).collect(),
            extra: extra.len(),
            max_in_flight: cfg.max_in_flight,
            grace: cfg.grace,
            sent_count: Arc::clone(&sent_count),
            again: again_rx,
            deadlines: Vec::with_capacity(cfg.max_in_flight.min(1 << 16)),
        };
        let client = Arc::clone(&client);
        std::thread::Builder::new()
            .name("sender".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    client.preconnect(warm).await;
                    let _ = ready_tx.send(Ok(()));
                    if let Ok(shared) = go_rx.await {
                        let _ = done_tx.send(send_all(shared, sending).await);
                    }
                });
            })
            .map_err(LoadError::Thread)?;
    }
    ready_rx
        .await
        .map_err(|_| LoadError::TaskPanicked)?
        .map_err(LoadError::Thread)?;
    // A shared start: wait for it; a worker that comes after it starts at once and records
    // by how much it was late.
    let (t0, late_s) = match cfg.start_at.map(|at| at.duration_since(SystemTime::now())) {
        Some(Ok(wait)) => (Instant::now() + wait, 0.0),
        Some(Err(late)) => (
            Instant::now() + Duration::from_millis(100),
            late.duration().as_secs_f64() + 0.1,
        ),
        None => (Instant::now() + Duration::from_millis(100), 0.0),
    };
    let cpu0 = process_cpu_s();
    let probe = Arc::new(Probe::start(t0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler_task = sampler.clone().map(|s| {
        let interval = Duration::from_secs_f64((cfg.sample_interval_s / k).max(0.01));
        let rx = stop_rx.clone();
        tokio::spawn(async move { s.run(t0, interval, rx).await })
    });

    // Per-step counters for progress and for knowing when a step's requests are all done.
    let n_stages = cfg.stages.len();
    let done_per_stage: Arc<Vec<AtomicU64>> =
        Arc::new((0..n_stages).map(|_| AtomicU64::new(0)).collect());
    let mut planned_per_stage = vec![0u64; n_stages];
    for p in &planned {
        planned_per_stage[p.stage] += 1;
    }
    let records: Records = Arc::new(
        planned_per_stage
            .iter()
            .map(|n| Mutex::new(Vec::with_capacity(*n as usize)))
            .collect(),
    );
    let shared = Arc::new(Shared {
        client: Arc::clone(&client),
        records: Arc::clone(&records),
        in_flight: Arc::clone(&in_flight),
        idle: Notify::new(),
        done: Arc::clone(&done_per_stage),
        bodies: Arc::clone(&bodies),
        extra: Arc::clone(&extra),
        open: (0..n_stages).map(|_| AtomicU64::new(0)).collect(),
        pending: AtomicU64::new(0),
        again: again_tx,
        live: (0..n_stages).map(|_| Mutex::new(Live::default())).collect(),
        stop: Arc::clone(&stop),
        ends: windows
            .iter()
            .map(|w| t0 + Duration::from_secs_f64(w.end))
            .collect(),
        t0,
        path: cfg.requests.api.path(),
        stream: cfg.requests.stream,
    });
    if go_tx.send(Arc::clone(&shared)).is_err() {
        return Err(LoadError::TaskPanicked);
    }

    // Step boundaries: scrape before each step and after its requests are done.
    let mut initial_bounds: Vec<Bounds> = vec![(None, None); n_stages];
    if let Some(b) = initial_bounds.first_mut() {
        b.0 = first_bound;
    }
    let bounds: Arc<Mutex<Vec<Bounds>>> = Arc::new(Mutex::new(initial_bounds));
    let cpu_marks: Arc<Mutex<Vec<(f64, f64)>>> = Arc::new(Mutex::new(vec![(cpu0, cpu0); n_stages]));
    let steal0 = steal_s();
    let steal_marks: Arc<Mutex<Vec<StealMarks>>> =
        Arc::new(Mutex::new(vec![(steal0, steal0); n_stages]));
    // Steps whose report waits for the end of the run: one that would be built while the
    // next step sends would take CPU from it (and every step after one deferred waits too,
    // so that the rows come in order).
    let deferred: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let (prog_tx, mut prog_rx) = mpsc::unbounded_channel::<Progress>();
    let stage_task = {
        let shared = Arc::clone(&shared);
        let (sampler, bounds, done, windows, records, cpu_marks, prog_tx, stop) = (
            sampler.clone(),
            Arc::clone(&bounds),
            Arc::clone(&done_per_stage),
            windows.clone(),
            Arc::clone(&records),
            Arc::clone(&cpu_marks),
            prog_tx.clone(),
            Arc::clone(&stop),
        );
        let (steal_marks, deferred, probe) = (
            Arc::clone(&steal_marks),
            Arc::clone(&deferred),
            Arc::clone(&probe),
        );
        let planned_per_stage = planned_per_stage.clone();
        let stages = cfg.stages.clone();
        let timeout = cfg.client.timeout;
        tokio::spawn(async move {
            for (i, w) in windows.iter().enumerate() {
                let start = t0 + Duration::from_secs_f64(w.start);
                tokio::time::sleep_until((start - BOUND_LEAD).into()).await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let have = bounds.lock().map(|v| v[i].0.is_some()).unwrap_or(false);
                if let (Some(s), false) = (&sampler, have) {
                    let b = s.scrape(t0).await.ok();
                    if let Ok(mut v) = bounds.lock() {
                        v[i].0 = b;
                    }
                }
                if let Ok(mut c) = cpu_marks.lock() {
                    c[i].0 = process_cpu_s();
                }
                if let Ok(mut c) = steal_marks.lock() {
                    c[i].0 = steal_s();
                }
                let _ = prog_tx.send(Progress::StepStarted {
                    index: i,
                    target_rps: stages[i].rate,
                    concurrency: stages[i].concurrency,
                    of: stages.len(),
                });
                tokio::time::sleep_until((t0 + Duration::from_secs_f64(w.end)).into()).await;
                // Wait for the step's requests (the rest is theirs), but not into the next
                // step; the last step waits as long as its requests may take.
                let last = i + 1 == windows.len();
                let rest_end = if last {
                    t0 + Duration::from_secs_f64(w.end) + timeout + Duration::from_secs(1)
                } else {
                    t0 + Duration::from_secs_f64(w.rest_end.max(w.end))
                };
                while (done[i].load(Ordering::Acquire) < planned_per_stage[i]
                    || shared.open[i].load(Ordering::Acquire) > 0)
                    && Instant::now() < rest_end
                    && !stop.load(Ordering::Relaxed)
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if let Some(s) = &sampler {
                    let a = s.scrape(t0).await.ok();
                    if let Ok(mut v) = bounds.lock() {
                        v[i].1 = a;
                    }
                }
                if let Ok(mut c) = cpu_marks.lock() {
                    c[i].1 = process_cpu_s();
                }
                if let Ok(mut c) = steal_marks.lock() {
                    c[i].1 = steal_s();
                }
                let next_start = windows
                    .get(i + 1)
                    .map(|n| t0 + Duration::from_secs_f64(n.start));
                let busy = next_start.is_some_and(|n| n < Instant::now() + REPORT_ROOM);
                if let Ok(mut d) = deferred.lock()
                    && (busy || !d.is_empty())
                {
                    d.push(i);
                    continue;
                }
                let stalls = probe.between(
                    w.start,
                    w.end,
                    steal_marks
                        .lock()
                        .ok()
                        .and_then(|c| Some(c[i].1? - c[i].0?)),
                );
                let recs: Vec<Record> = records[i].lock().map(|r| r.clone()).unwrap_or_default();
                let samples = sampler.as_ref().map(|s| s.samples()).unwrap_or_default();
                let (b, cpu) = (
                    bounds.lock().map(|v| v[i].clone()).unwrap_or((None, None)),
                    cpu_marks.lock().map(|c| c[i].1 - c[i].0).unwrap_or(0.0),
                );
                let (stage, w) = (stages[i], *w);
                // Off the runtime: a big step's report takes a while, and requests of the
                // next step are being sent meanwhile.
                let report = tokio::task::spawn_blocking(move || {
                    step_report(StepInput {
                        index: i,
                        stage: &stage,
                        window: w,
                        records: recs.iter().collect(),
                        samples: &samples,
                        bounds: (b.0.as_ref(), b.1.as_ref()),
                        cpu_s: cpu,
                        speedup: k,
                        histograms: false,
                        stalls: Some(stalls),
                    })
                })
                .await;
                if let Ok(report) = report {
                    let _ = prog_tx.send(Progress::StepEnded(Box::new(report)));
                }
            }
        })
    };

    // Progress ticks.
    let tick_task = {
        let shared = Arc::clone(&shared);
        let (in_flight, sampler, prog_tx, windows, sent_count) = (
            Arc::clone(&in_flight),
            sampler.clone(),
            prog_tx.clone(),
            windows.clone(),
            Arc::clone(&sent_count),
        );
        tokio::spawn(async move {
            let mut last_sent = 0u64;
            let mut iv = tokio::time::interval(Duration::from_millis(500));
            loop {
                iv.tick().await;
                let el = t0.elapsed().as_secs_f64();
                let step = windows.iter().position(|w| el >= w.start && el < w.end);
                let sent_now = sent_count.load(Ordering::Relaxed);
                let mut t = Tick {
                    elapsed_s: el * k,
                    step,
                    in_flight: in_flight.load(Ordering::Relaxed) as u64,
                    rate: (sent_now - last_sent) as f64 / 0.5 / k,
                    queue_depth: sampler
                        .as_ref()
                        .and_then(|s| s.latest())
                        .and_then(|s| s.snapshot.value(Signal::QueueDepth)),
                    ..Tick::default()
                };
                last_sent = sent_now;
                if let Some(l) = step.and_then(|i| shared.live[i].lock().ok()) {
                    t.ok = l.ok;
                    t.failed = l.failed;
                    t.dropped = l.dropped;
                    t.sent = l.ok + l.failed + t.in_flight;
                    t.e2e_p95_s = l.e2e.quantile(0.95).map(|x| x * k);
                }
                if prog_tx.send(Progress::Tick(t)).is_err() {
                    break;
                }
            }
        })
    };
    drop(prog_tx);

    // The sending thread runs the plan; meanwhile progress is passed on, and an interruption
    // stops the schedule (the thread gives requests in flight `grace` to finish).
    let mut interrupted = false;
    tokio::pin!(interrupt);
    let sent = loop {
        tokio::select! {
            biased;
            _ = &mut interrupt, if !interrupted => {
                interrupted = true;
                stop.store(true, Ordering::Relaxed);
            }
            Some(p) = prog_rx.recv() => progress(p),
            r = &mut done_rx => break r.map_err(|_| LoadError::TaskPanicked)?,
        }
    };
    // Requests cut off by the interruption end as timeouts.
    let end_wall = t0.elapsed().as_secs_f64();
    {
        let mut have = std::collections::HashSet::new();
        for r in records.iter() {
            let r = r.lock().map_err(|_| LoadError::TaskPanicked)?;
            have.extend(r.iter().map(|x| x.index));
        }
        for &(i, stage, intended_s) in &sent {
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
    }
    if !interrupted {
        let _ = stage_task.await;
    } else {
        stage_task.abort();
    }
    tick_task.abort();
    while let Ok(p) = prog_rx.try_recv() {
        progress(p);
    }
    let _ = stop_tx.send(true);
    if let Some(t) = sampler_task {
        let _ = t.await;
    }
    let mut records: Vec<Record> = records
        .iter()
        .flat_map(|r| r.lock().map(|r| r.clone()).unwrap_or_default())
        .collect();
    records.sort_by_key(|x| x.index);
    let samples = sampler.as_ref().map(|s| s.samples()).unwrap_or_default();
    let bounds = bounds.lock().map(|b| b.clone()).unwrap_or_default();
    let cpu_marks = cpu_marks.lock().map(|c| c.clone()).unwrap_or_default();
    let steal_marks = steal_marks.lock().map(|c| c.clone()).unwrap_or_default();
    let last_step = records.iter().map(|r| r.step).max();
    let steps: Vec<StepReport> = (0..n_stages)
        .filter(|i| !interrupted || last_step.is_some_and(|l| *i <= l))
        .map(|i| {
            step_report(StepInput {
                index: i,
                stage: &cfg.stages[i],
                window: windows[i],
                records: records.iter().filter(|r| r.step == i).collect(),
                samples: &samples,
                bounds: (bounds[i].0.as_ref(), bounds[i].1.as_ref()),
                cpu_s: (cpu_marks[i].1 - cpu_marks[i].0).max(0.0),
                speedup: k,
                histograms: cfg.segment.count > 1,
                stalls: Some(probe.between(
                    windows[i].start,
                    windows[i].end,
                    steal_marks.get(i).and_then(|c| Some(c.1? - c.0?)),
                )),
            })
        })
        .collect();
    // The rows of the steps whose reports waited.
    for i in deferred.lock().map(|d| d.clone()).unwrap_or_default() {
        if let Some(s) = steps.iter().find(|s| s.index == i) {
            progress(Progress::StepEnded(Box::new(s.clone())));
        }
    }
    let engines = samples
        .last()
        .map(|s| {
            s.snapshot
                .engines
                .iter()
                .map(|e| e.key().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let report = RunReport {
        version: RUN_VERSION,
        tool: concat!("inferscale ", env!("CARGO_PKG_VERSION")).to_owned(),
        started_at,
        interrupted,
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
            speedup: k,
            seed: cfg.seed,
        },
        warmup: None,
        timeline: timeline(&records, &windows, &samples, k, end_wall),
        steps,
        thresholds: Vec::new(),
        client_cpu_s: process_cpu_s() - cpu0,
        segment: (cfg.segment.count > 1).then(|| SegmentReport {
            index: cfg.segment.index,
            count: cfg.segment.count,
            start_at: cfg.start_at.map(rfc3339),
            late_s,
        }),
    };
    Ok(LoadOutput {
        report,
        records,
        scrape_errors: sampler.map(|s| s.errors()).unwrap_or_default(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn the_sweep_aborts_only_what_is_past_its_deadline_and_forgets_what_ended() {
        let now = Instant::now();
        let hung_late = tokio::spawn(std::future::pending::<()>());
        let hung_early = tokio::spawn(std::future::pending::<()>());
        let ended = tokio::spawn(async {});
        tokio::task::yield_now().await;
        assert!(ended.is_finished());
        let late = hung_late.abort_handle();
        let early = hung_early.abort_handle();
        let mut deadlines = vec![
            (now - Duration::from_millis(1), hung_late),
            (now + Duration::from_secs(60), hung_early),
            (now + Duration::from_secs(60), ended),
        ];
        sweep(&mut deadlines, now);
        assert_eq!(
            deadlines.len(),
            1,
            "only the request still within its deadline stays"
        );
        // The aborted task ends once the runtime has run it; the early one still runs.
        tokio::task::yield_now().await;
        assert!(late.is_finished(), "the late one was aborted");
        assert!(!early.is_finished(), "the early one still runs");
        let (_, kept) = deadlines.pop().unwrap();
        kept.abort();
        assert!(kept.await.unwrap_err().is_cancelled());
    }
}
