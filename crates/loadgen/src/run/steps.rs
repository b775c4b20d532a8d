//! The steps' boundaries and the progress ticks, on the caller's runtime.
//!
//! The step watcher scrapes the server before each step and after its requests are done,
//! marks the process's CPU time and the hypervisor's steal at both ends, and builds the
//! step's report while the next step sends (or leaves it for the end of the run when the
//! next step is too close). The ticker reads the sending thread's counters twice a second.
//! Both tell the run what they found by [`Note`]s, owned messages on one channel: nothing
//! they measure is shared.

use inferscale_clock::Instant;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use inferscale_catalog::Signal;
use tokio::sync::mpsc;

use super::sender::Shared;
use super::{BOUND_LEAD, Progress, REPORT_ROOM, Tick};
use crate::probe::{Probe, steal_s};
use crate::record::{Record, StepInput, step_report};
use crate::sampler::{Sample, Sampler};
use crate::schedule::{Stage, StageWindow};

/// What a step's two ends measured: the scrapes (before the step, after its requests), the
/// process's CPU seconds and the hypervisor's steal counter (seconds, when known).
#[derive(Debug, Clone, Default)]
pub(super) struct StepMarks {
    pub(super) bounds: (Option<Sample>, Option<Sample>),
    pub(super) cpu: (f64, f64),
    pub(super) steal: (Option<f64>, Option<f64>),
}

impl StepMarks {
    /// Every step's marks as `n` steps start: the CPU and steal counters read now, with
    /// `cpu0` CPU seconds, and the first step's lower bound `first`.
    pub(super) fn at_start(n: usize, first: Option<Sample>, cpu0: f64) -> Vec<StepMarks> {
        let steal0 = steal_s();
        let mut marks = vec![
            StepMarks {
                bounds: (None, None),
                cpu: (cpu0, cpu0),
                steal: (steal0, steal0),
            };
            n
        ];
        if let Some(m) = marks.first_mut() {
            m.bounds.0 = first;
        }
        marks
    }

    /// CPU seconds the process spent in the step.
    pub(super) fn cpu_s(&self) -> f64 {
        self.cpu.1 - self.cpu.0
    }

    /// Seconds stolen by the hypervisor in the step, when known.
    pub(super) fn stolen_s(&self) -> Option<f64> {
        Some(self.steal.1? - self.steal.0?)
    }
}

/// What the step watcher and the ticker tell the run.
pub(super) enum Note {
    /// For the caller's progress display.
    Progress(Progress),
    /// Step `.0`'s marks so far.
    Marks(usize, Box<StepMarks>),
    /// Step `.0`'s report is left for the end of the run.
    Deferred(usize),
}

/// The step watcher: what it reads, and where it tells what it found.
pub(super) struct StepWatch {
    pub(super) shared: Arc<Shared>,
    pub(super) sampler: Option<Arc<Sampler>>,
    pub(super) probe: Arc<Probe>,
    /// The steps' windows, wall seconds from `t0`.
    pub(super) windows: Vec<StageWindow>,
    pub(super) stages: Vec<Stage>,
    pub(super) planned_per_stage: Vec<u64>,
    /// The requests' timeout (how long the last step's requests may take).
    pub(super) timeout: Duration,
    pub(super) speedup: f64,
    /// Each step's marks as the run starts (the first step's lower bound already taken).
    pub(super) marks: Vec<StepMarks>,
    pub(super) notes: mpsc::UnboundedSender<Note>,
}

impl StepWatch {
    /// Watches every step in turn, until the last one's requests are done or the run stops.
    pub(super) async fn run(mut self) {
        let t0 = self.shared.t0;
        let mut deferring = false;
        for i in 0..self.windows.len() {
            let w = self.windows[i];
            let start = t0 + Duration::from_secs_f64(w.start);
            tokio::time::sleep_until(start - BOUND_LEAD).await;
            if self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.begin(i).await;
            tokio::time::sleep_until(t0 + Duration::from_secs_f64(w.end)).await;
            self.wait_for_requests(i).await;
            self.end(i).await;
            let next_start = self
                .windows
                .get(i + 1)
                .map(|n| t0 + Duration::from_secs_f64(n.start));
            // Every step after one deferred waits too, so that the rows come in order.
            deferring |= next_start.is_some_and(|n| n < Instant::now() + REPORT_ROOM);
            if deferring {
                let _ = self.notes.send(Note::Deferred(i));
                continue;
            }
            self.report(i).await;
        }
    }

    /// Step `i`'s start: its lower bound (unless taken already), the CPU and steal marks.
    async fn begin(&mut self, i: usize) {
        if let (Some(s), None) = (&self.sampler, &self.marks[i].bounds.0) {
            self.marks[i].bounds.0 = s.scrape(self.shared.t0).await.ok();
        }
        self.marks[i].cpu.0 = super::process_cpu_s();
        self.marks[i].steal.0 = steal_s();
        let _ = self
            .notes
            .send(Note::Marks(i, Box::new(self.marks[i].clone())));
        let _ = self.notes.send(Note::Progress(Progress::StepStarted {
            index: i,
            target_rps: self.stages[i].rate,
            concurrency: self.stages[i].concurrency,
            of: self.stages.len(),
        }));
    }

    /// Waits for step `i`'s requests (the rest is theirs), but not into the next step; the
    /// last step waits as long as its requests may take.
    async fn wait_for_requests(&self, i: usize) {
        let (t0, w, sh) = (self.shared.t0, self.windows[i], &self.shared);
        let rest_end = if i + 1 == self.windows.len() {
            t0 + Duration::from_secs_f64(w.end) + self.timeout + Duration::from_secs(1)
        } else {
            t0 + Duration::from_secs_f64(w.rest_end.max(w.end))
        };
        while (sh.done[i].load(Ordering::Acquire) < self.planned_per_stage[i]
            || sh.open[i].load(Ordering::Acquire) > 0)
            && Instant::now() < rest_end
            && !sh.stop.load(Ordering::Relaxed)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Step `i`'s end: its upper bound, the CPU and steal marks.
    async fn end(&mut self, i: usize) {
        if let Some(s) = &self.sampler {
            self.marks[i].bounds.1 = s.scrape(self.shared.t0).await.ok();
        }
        self.marks[i].cpu.1 = super::process_cpu_s();
        self.marks[i].steal.1 = steal_s();
        let _ = self
            .notes
            .send(Note::Marks(i, Box::new(self.marks[i].clone())));
    }

    /// Builds step `i`'s report off the runtime (a big step's report takes a while, and the
    /// next step's requests are being sent meanwhile) and passes it on.
    async fn report(&self, i: usize) {
        let w = self.windows[i];
        let stalls = self.probe.between(w.start, w.end, self.marks[i].stolen_s());
        let recs: Vec<Record> = self.shared.records[i]
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let samples = self
            .sampler
            .as_ref()
            .map(|s| s.samples())
            .unwrap_or_default();
        let (marks, stage, k) = (self.marks[i].clone(), self.stages[i], self.speedup);
        let report = tokio::task::spawn_blocking(move || {
            step_report(StepInput {
                index: i,
                stage: &stage,
                window: w,
                records: recs.iter().collect(),
                samples: &samples,
                bounds: (marks.bounds.0.as_ref(), marks.bounds.1.as_ref()),
                cpu_s: marks.cpu_s(),
                speedup: k,
                histograms: false,
                stalls: Some(stalls),
            })
        })
        .await;
        if let Ok(report) = report {
            let _ = self
                .notes
                .send(Note::Progress(Progress::StepEnded(Box::new(report))));
        }
    }
}

/// Sends a [`Tick`] every 500 ms until the run stops listening.
pub(super) async fn ticks(
    shared: Arc<Shared>,
    sampler: Option<Arc<Sampler>>,
    windows: Vec<StageWindow>,
    speedup: f64,
    notes: mpsc::UnboundedSender<Note>,
) {
    let k = speedup;
    let mut last_sent = 0u64;
    let mut iv = tokio::time::interval(Duration::from_millis(500));
    loop {
        iv.tick().await;
        let el = shared.t0.elapsed().as_secs_f64();
        let step = windows.iter().position(|w| el >= w.start && el < w.end);
        let sent_now = shared.sent.load(Ordering::Relaxed);
        let mut t = Tick {
            elapsed_s: el * k,
            step,
            in_flight: shared.in_flight.load(Ordering::Relaxed) as u64,
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
        if notes.send(Note::Progress(Progress::Tick(t))).is_err() {
            break;
        }
    }
}
