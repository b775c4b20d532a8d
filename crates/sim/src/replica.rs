//! One simulated replica: the engine on its own thread (like vLLM's engine-core process),
//! driven by the wall clock scaled by the speed-up.
//!
//! The engine's virtual time advances exactly by its step durations; the wall clock only
//! decides when a finished step's tokens are *released* to the HTTP side. A late wake-up
//! therefore delays a release a little but never changes what the engine computed or what its
//! metrics say.

use inferscale_clock::Instant;
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use inferscale_engine::stats::{FinishReason, Stats};
use inferscale_engine::{Engine, Event, EventKind, PromptBlocks, RequestSpec};
use tokio::sync::{mpsc, oneshot};

use crate::lag::{Batch, LagMeter};

/// Maps the wall clock to the engine's simulated seconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    speedup: f64,
    /// Simulated seconds at `start` (0 for a fresh server).
    offset: f64,
}

impl Clock {
    /// A clock that starts now at simulated time 0 and runs `speedup` times faster than the
    /// wall clock.
    pub fn new(speedup: f64) -> Self {
        Clock {
            start: Instant::now(),
            speedup: speedup.max(1e-6),
            offset: 0.0,
        }
    }

    /// Simulated seconds now.
    pub fn now(&self) -> f64 {
        self.offset + self.start.elapsed().as_secs_f64() * self.speedup
    }

    /// The speed-up.
    pub fn speedup(&self) -> f64 {
        self.speedup
    }

    /// Wall time until simulated time `t` (zero if it has passed).
    pub fn wall_until(&self, t: f64) -> Duration {
        let secs = (t - self.now()) / self.speedup;
        if secs > 0.0 {
            Duration::from_secs_f64(secs.min(3600.0))
        } else {
            Duration::ZERO
        }
    }

    /// Wall duration of `secs` simulated seconds.
    pub fn wall(&self, secs: f64) -> Duration {
        Duration::from_secs_f64((secs / self.speedup).clamp(0.0, 86_400.0))
    }
}

/// What the HTTP side receives for a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Update {
    /// Output token number `n` (1-based) is ready.
    Token(u32),
    /// The request ended.
    Done {
        /// Why.
        reason: FinishReason,
        /// Prompt tokens.
        prompt: u32,
        /// Output tokens.
        output: u32,
    },
}

/// A request handed to the engine thread.
pub(crate) struct Submission {
    /// The HTTP side's key for the request (to cancel it).
    pub(crate) key: u64,
    /// What to run.
    pub(crate) spec: RequestSpec,
    /// Where its updates go.
    pub(crate) updates: mpsc::UnboundedSender<Update>,
    /// End it with this reason after this many tokens (a stop string, a tool call's end, or
    /// a cut or malformed fault).
    pub(crate) cut: Option<(u32, FinishReason)>,
    /// What its prompt's blocks hold (for the prefix cache).
    pub(crate) blocks: PromptBlocks,
}

/// What the engine thread was at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// The engine's statistics.
    pub(crate) stats: Stats,
    /// GPU clocks as a fraction of boost.
    pub(crate) clock_fraction: f64,
    /// Simulated time of the snapshot.
    pub(crate) now: f64,
}

/// Commands for the engine thread.
pub(crate) enum Command {
    /// Run a request.
    Submit(Submission),
    /// End a request early (the client left, or a fault ended it).
    Cancel {
        /// The key it was submitted with.
        key: u64,
        /// `abort` or `error`.
        reason: FinishReason,
    },
    /// Send back a snapshot of the statistics.
    Snapshot(oneshot::Sender<Snapshot>),
}

/// The engine and who is waiting for which of its requests.
pub(crate) struct Core {
    engine: Engine,
    sinks: HashMap<u64, (u64, mpsc::UnboundedSender<Update>)>,
    ids: HashMap<u64, u64>,
    events: Vec<Event>,
    /// Where release lateness goes, with the speed-up that turns it into wall time (`None`
    /// when run inline: nothing there waits for a clock).
    lag: Option<(LagMeter, f64)>,
    batch: Batch,
}

impl Core {
    fn new(engine: Engine, lag: Option<(LagMeter, f64)>) -> Self {
        Core {
            engine,
            sinks: HashMap::new(),
            ids: HashMap::new(),
            events: Vec::new(),
            lag,
            batch: Batch::default(),
        }
    }

    fn apply(&mut self, cmd: Command, now: f64, snapshots: &mut Vec<oneshot::Sender<Snapshot>>) {
        match cmd {
            Command::Submit(s) => {
                let id = self.engine.submit_with(s.spec, now, s.cut, s.blocks);
                self.ids.insert(s.key, id);
                self.sinks.insert(id, (s.key, s.updates));
            }
            Command::Cancel { key, reason } => {
                if let Some(id) = self.ids.remove(&key) {
                    self.engine.cancel(id, now, reason, &mut self.events);
                }
            }
            Command::Snapshot(reply) => snapshots.push(reply),
        }
    }

    /// Runs the engine up to `now` and hands every event to its request.
    fn advance(&mut self, now: f64) {
        self.engine.advance(now, &mut self.events);
        if let Some((meter, speedup)) = &self.lag {
            for e in &self.events {
                self.batch.record((now - e.t) / speedup);
            }
            meter.publish(&mut self.batch);
        }
        let mut gone = Vec::new();
        for e in self.events.drain(..) {
            let Some((key, tx)) = self.sinks.get(&e.id) else {
                continue;
            };
            let update = match e.kind {
                EventKind::Token => Update::Token(e.output_tokens),
                EventKind::Finished(reason) => Update::Done {
                    reason,
                    prompt: e.prompt_tokens,
                    output: e.output_tokens,
                },
            };
            let closed = tx.send(update).is_err();
            if let EventKind::Finished(_) = e.kind {
                self.ids.remove(key);
                self.sinks.remove(&e.id);
            } else if closed {
                gone.push(e.id);
            }
        }
        for id in gone {
            // The client went away without saying so: abort, as vLLM does on disconnect.
            self.engine.abort(id, now, &mut self.events);
            if let Some((key, _)) = self.sinks.remove(&id) {
                self.ids.remove(&key);
            }
        }
        self.events.clear();
    }

    fn snapshot(&self, now: f64) -> Snapshot {
        Snapshot {
            stats: self.engine.stats().clone(),
            clock_fraction: self.engine.clock_fraction(),
            now,
        }
    }
}

/// Runs the engine until every sender of `commands` is gone.
pub(crate) fn run(engine: Engine, commands: Receiver<Command>, clock: Clock, lag: LagMeter) {
    let mut core = Core::new(engine, Some((lag, clock.speedup())));
    let mut pending: Vec<Command> = Vec::new();
    loop {
        let now = clock.now();
        // Commands first, at the time they are handled; snapshots after the engine caught up.
        let mut snapshots = Vec::new();
        for cmd in pending.drain(..) {
            core.apply(cmd, now, &mut snapshots);
        }
        core.advance(now);
        for reply in snapshots {
            let _ = reply.send(core.snapshot(now));
        }
        let timeout = core
            .engine
            .next_event_time()
            .map_or(Duration::from_secs(3600), |t| clock.wall_until(t));
        match commands.recv_timeout(timeout) {
            Ok(c) => pending.push(c),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(c) = commands.try_recv() {
            pending.push(c);
        }
    }
}

/// The HTTP side's handle on an engine: its own thread (as vLLM's engine core), or, for the
/// zero-cost `instant` profile, run inline under a lock (no step ever waits, so a thread hop
/// would be pure overhead).
#[derive(Clone)]
pub(crate) enum EngineHandle {
    /// On its own thread.
    Thread(Sender<Command>),
    /// Inline.
    Inline(Arc<Mutex<Core>>, Clock),
}

impl EngineHandle {
    /// Starts the engine: inline for an instant engine, on a thread otherwise.
    pub(crate) fn spawn(
        engine: Engine,
        clock: Clock,
        name: String,
        lag: LagMeter,
    ) -> std::io::Result<EngineHandle> {
        if engine.cost_model().is_instant() {
            return Ok(EngineHandle::Inline(
                Arc::new(Mutex::new(Core::new(engine, None))),
                clock,
            ));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(engine, rx, clock, lag))?;
        Ok(EngineHandle::Thread(tx))
    }

    fn command(&self, cmd: Command) {
        match self {
            EngineHandle::Thread(tx) => {
                let _ = tx.send(cmd);
            }
            EngineHandle::Inline(core, clock) => {
                if let Ok(mut c) = core.lock() {
                    let now = clock.now();
                    let mut snapshots = Vec::new();
                    c.apply(cmd, now, &mut snapshots);
                    c.advance(now);
                    for reply in snapshots {
                        let _ = reply.send(c.snapshot(now));
                    }
                }
            }
        }
    }

    /// Submits a request; its updates arrive on the returned receiver.
    pub(crate) fn submit(
        &self,
        key: u64,
        spec: RequestSpec,
        cut: Option<(u32, FinishReason)>,
        blocks: PromptBlocks,
    ) -> mpsc::UnboundedReceiver<Update> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.command(Command::Submit(Submission {
            key,
            spec,
            updates: tx,
            cut,
            blocks,
        }));
        rx
    }

    /// Ends a request early.
    pub(crate) fn cancel(&self, key: u64, reason: FinishReason) {
        self.command(Command::Cancel { key, reason });
    }

    /// A snapshot of the engine's statistics, or `None` if the engine thread is gone.
    pub(crate) async fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = oneshot::channel();
        self.command(Command::Snapshot(tx));
        rx.await.ok()
    }
}
