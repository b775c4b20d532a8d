//! The sending thread: every planned request at its time (or dropped at the in-flight
//! cap), closed-loop successors as their predecessors end, a trace's later turns when the
//! turn before ends plus its think time (`--dispatch think-time`), a sweep for requests past their
//! deadline, and each request's record written once, when it ends or is dropped.
//!
//! The thread has its own single-threaded runtime, which owns the connections and times
//! every send itself ([`crate::pace`]). What it shares with the rest of the run is
//! [`Shared`]: the records (one lock per stage, so that a step's report locks only its
//! own) and counters that progress reads.

use inferscale_clock::Instant;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tokio::sync::Notify;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::LoadError;
use crate::pace::Pacer;
use crate::prompt::{Prepared, RequestSpec};
use crate::record::{Hdr, Record};
use crate::schedule::StageWindow;
use crate::transport::{Client, Exchange, Outcome};

/// Every request's record, per stage (a step's report locks only its own).
pub(super) type Records = Arc<Vec<Mutex<Vec<Record>>>>;

/// A stage's outcomes so far, kept incrementally so that progress never rescans records.
#[derive(Default)]
pub(super) struct Live {
    pub(super) ok: u64,
    pub(super) failed: u64,
    pub(super) dropped: u64,
    pub(super) e2e: Hdr,
}

/// What every request task shares.
pub(super) struct Shared {
    pub(super) client: Arc<Client>,
    pub(super) records: Records,
    pub(super) in_flight: AtomicUsize,
    /// Requests sent so far (progress reads it).
    pub(super) sent: AtomicU64,
    /// Told when the last request in flight ends (the sending loop waits on it once
    /// everything is sent).
    pub(super) idle: Notify,
    /// Requests ended (or dropped), per stage.
    pub(super) done: Vec<AtomicU64>,
    /// The planned requests' bodies, and the closed-loop successors' (cycled): a task
    /// borrows its body from here rather than holding a counted reference of its own.
    pub(super) bodies: Arc<Vec<Prepared>>,
    pub(super) extra: Arc<Vec<Prepared>>,
    /// Closed-loop requests in flight or about to be replaced, per stage.
    pub(super) open: Vec<AtomicU64>,
    /// Closed-loop successors asked for (by stage) and not yet handled.
    pub(super) pending: AtomicU64,
    pub(super) again: mpsc::UnboundedSender<usize>,
    /// Per planned request, the turn that follows it and the think time between (wall
    /// seconds): sent on `later` when it ends (empty: no request has one).
    pub(super) follow: Follow,
    pub(super) later: mpsc::UnboundedSender<(usize, Instant)>,
    /// Running counts per stage for the progress display (cheap to read while loading).
    pub(super) live: Vec<Mutex<Live>>,
    /// Set when the run is interrupted.
    pub(super) stop: AtomicBool,
    /// Ends of the stages' sending windows.
    pub(super) ends: Vec<Instant>,
    pub(super) t0: Instant,
    pub(super) path: &'static str,
    pub(super) stream: bool,
}

impl Shared {
    /// What the requests of stages planned `planned_per_stage` share, sending `bodies` (the
    /// planned requests', the closed-loop pool's) as `requests` says, in `windows` (wall
    /// seconds from `t0`); what comes next is asked for as `next` says.
    pub(super) fn new(
        client: Arc<Client>,
        planned_per_stage: &[u64],
        bodies: (Arc<Vec<Prepared>>, Arc<Vec<Prepared>>),
        next: Next,
        windows: &[StageWindow],
        t0: Instant,
        requests: &RequestSpec,
    ) -> Shared {
        let n = planned_per_stage.len();
        Shared {
            client,
            records: Arc::new(
                planned_per_stage
                    .iter()
                    .map(|n| Mutex::new(Vec::with_capacity(*n as usize)))
                    .collect(),
            ),
            in_flight: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            idle: Notify::new(),
            done: (0..n).map(|_| AtomicU64::new(0)).collect(),
            bodies: bodies.0,
            extra: bodies.1,
            open: (0..n).map(|_| AtomicU64::new(0)).collect(),
            pending: AtomicU64::new(0),
            again: next.again,
            follow: next.follow,
            later: next.later,
            live: (0..n).map(|_| Mutex::new(Live::default())).collect(),
            stop: AtomicBool::new(false),
            ends: windows
                .iter()
                .map(|w| t0 + Duration::from_secs_f64(w.end))
                .collect(),
            t0,
            path: requests.api.path(),
            stream: requests.stream,
        }
    }

    /// Planned request `index` ended (or was dropped): asks for each request that follows it
    /// and waited for nothing else, once its think time has passed from now (the sending
    /// loop sends it; `pending` counts it until then).
    fn follow_up(&self, index: u64) {
        let Some(next) = self.follow.next.get(index as usize) else {
            return;
        };
        for &(j, think) in next {
            // A join waits for the last of those it follows.
            let last = self
                .follow
                .waiting
                .get(j)
                .is_none_or(|w| w.fetch_sub(1, Ordering::AcqRel) == 1);
            if !last {
                continue;
            }
            let due = Instant::now() + Duration::from_secs_f64(think);
            self.pending.fetch_add(1, Ordering::AcqRel);
            if self.later.send((j, due)).is_err() {
                self.pending.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

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

/// Who follows whom in a trace replay (`--dispatch think-time`): per planned request, those
/// that follow it and the think time before each (wall seconds), and how many each still
/// waits for.
pub(super) struct Follow {
    pub(super) next: Vec<Vec<(usize, f64)>>,
    pub(super) waiting: Vec<std::sync::atomic::AtomicU32>,
}

impl From<crate::trace::Follow> for Follow {
    fn from(f: crate::trace::Follow) -> Follow {
        Follow {
            next: f.next,
            waiting: f
                .waits
                .into_iter()
                .map(std::sync::atomic::AtomicU32::new)
                .collect(),
        }
    }
}

/// Where the requests that depend on others are asked for: closed-loop successors (by
/// stage) on `again`, a trace's later turns (`follow`) on `later`.
pub(super) struct Next {
    pub(super) again: mpsc::UnboundedSender<usize>,
    pub(super) follow: Follow,
    pub(super) later: mpsc::UnboundedSender<(usize, Instant)>,
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
        // Before the request stops counting in flight, so that the sending loop cannot
        // see nothing in flight and nothing pending in between and end.
        sh.follow_up(self.index);
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
pub(super) const CUT_OFF: &str = "cut off when the run was interrupted";

/// A request that was sent: (index, stage, intended wall seconds from the start).
pub(super) type Sent = (u64, usize, f64);

/// What the sending thread is given besides [`Shared`].
pub(super) struct Sending {
    /// (wall seconds from the start, request index), in time order.
    pub(super) schedule: Vec<(f64, usize)>,
    /// Each planned request's stage, and whether the stage is closed-loop.
    pub(super) kinds: Vec<(usize, bool)>,
    /// How many bodies are prepared for closed-loop successors.
    pub(super) extra: usize,
    pub(super) max_in_flight: usize,
    pub(super) grace: Duration,
    /// Closed-loop successors asked for, by stage.
    pub(super) again: mpsc::UnboundedReceiver<usize>,
    /// Later turns asked for (`Shared::follow`), and those waiting for their time.
    pub(super) later: mpsc::UnboundedReceiver<(usize, Instant)>,
    pub(super) waiting: BinaryHeap<Reverse<(Instant, usize)>>,
    /// The requests in flight (and some just ended) with their deadlines, for the sweep.
    pub(super) deadlines: Vec<(Instant, JoinHandle<()>)>,
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
    Follower(usize, Instant),
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
        while let Ok((i, due)) = s.later.try_recv() {
            s.waiting.push(Reverse((due, i)));
        }
        send_followers(&sh, &mut s, &mut sent, stopped_at.is_some());
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
        let mut wake = match s.schedule.get(next) {
            Some(&(offset, _)) if !scheduled => due_of(offset).min(poll),
            _ => poll,
        };
        if let Some(Reverse((due, _))) = s.waiting.peek() {
            wake = wake.min(*due);
        }
        // A short gap is spun out without the other waits; a long one also wakes for a
        // successor, and (once everything is sent) for a request's end.
        if wake.saturating_duration_since(Instant::now()) <= crate::pace::SPIN {
            pacer.until(wake).await;
            continue;
        }
        let woke = tokio::select! {
            () = pacer.until(wake) => Woke::Timer,
            Some(stage) = s.again.recv() => Woke::Successor(stage),
            Some((i, due)) = s.later.recv() => Woke::Follower(i, due),
            () = sh.idle.notified(), if scheduled => Woke::Ended,
        };
        match woke {
            Woke::Successor(stage) => {
                send_successor(&sh, &mut s, &mut sent, &mut next_index, stage);
            }
            Woke::Follower(i, due) => s.waiting.push(Reverse((due, i))),
            Woke::Timer | Woke::Ended => {}
        }
    }
    sent
}

/// Sends the later turns whose time has come (or, once the run is stopping, forgets them
/// all).
fn send_followers(sh: &Arc<Shared>, s: &mut Sending, sent: &mut Vec<Sent>, stopping: bool) {
    let now = Instant::now();
    while let Some(&Reverse((due, i))) = s.waiting.peek() {
        if due > now && !stopping {
            break;
        }
        s.waiting.pop();
        sh.pending.fetch_sub(1, Ordering::AcqRel);
        if !stopping {
            send_planned(sh, s, sent, i, due);
        }
    }
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
        sh.follow_up(i as u64);
        return;
    }
    sh.in_flight.fetch_add(1, Ordering::AcqRel);
    sh.sent.fetch_add(1, Ordering::Relaxed);
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
    sh.sent.fetch_add(1, Ordering::Relaxed);
    sent.push((
        index,
        stage,
        due.saturating_duration_since(sh.t0).as_secs_f64(),
    ));
    let task = sh.spawn(index, stage, body, due, true);
    s.deadlines.push((due + sh.client.config().timeout, task));
}

/// The sending thread once its connections are open: given [`Shared`] at the start, it
/// answers with every request it sent when it is done.
pub(super) struct Sender {
    go: oneshot::Sender<Arc<Shared>>,
    done: oneshot::Receiver<Vec<Sent>>,
}

impl Sender {
    /// Starts the thread with `sending`; it opens `warm` connections through `client` (so
    /// that they are driven where the requests are sent) and returns when they are open.
    pub(super) async fn start(
        client: Arc<Client>,
        warm: usize,
        sending: Sending,
    ) -> Result<Sender, LoadError> {
        let (ready_tx, ready_rx) = oneshot::channel::<std::io::Result<()>>();
        let (go_tx, go_rx) = oneshot::channel::<Arc<Shared>>();
        let (done_tx, done_rx) = oneshot::channel::<Vec<Sent>>();
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
        ready_rx
            .await
            .map_err(|_| LoadError::TaskPanicked)?
            .map_err(LoadError::Thread)?;
        Ok(Sender {
            go: go_tx,
            done: done_rx,
        })
    }

    /// Starts sending, with `shared`; the receiver gets every request sent, once all ended.
    pub(super) fn go(self, shared: Arc<Shared>) -> Result<oneshot::Receiver<Vec<Sent>>, LoadError> {
        self.go.send(shared).map_err(|_| LoadError::TaskPanicked)?;
        Ok(self.done)
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
