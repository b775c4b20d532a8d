//! One simulated replica: the engine on its own thread (like vLLM's engine-core process),
//! driven by the wall clock scaled by the speed-up.
//!
//! The engine's virtual time advances exactly by its step durations; the wall clock only
//! decides when a finished step's tokens are *released* to the HTTP side. A late wake-up
//! therefore delays a release a little but never changes what the engine computed or what its
//! metrics say.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use inferscale_engine::stats::{FinishReason, Stats};
use inferscale_engine::{Engine, Event, EventKind, RequestSpec};
use tokio::sync::{mpsc, oneshot};

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
    /// End it with this reason after this many tokens (cut and malformed faults).
    pub(crate) cut: Option<(u32, FinishReason)>,
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

/// Runs the engine until every sender of `commands` is gone.
pub(crate) fn run(mut engine: Engine, commands: Receiver<Command>, clock: Clock) {
    let mut sinks: HashMap<u64, (u64, mpsc::UnboundedSender<Update>)> = HashMap::new();
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut events: Vec<Event> = Vec::new();
    let mut pending: Vec<Command> = Vec::new();
    loop {
        let now = clock.now();
        // Commands first, at the time they are handled; snapshots after the engine caught up.
        let mut snapshots = Vec::new();
        for cmd in pending.drain(..) {
            match cmd {
                Command::Submit(s) => {
                    let id = engine.submit_with_cut(s.spec, now, s.cut);
                    ids.insert(s.key, id);
                    sinks.insert(id, (s.key, s.updates));
                }
                Command::Cancel { key, reason } => {
                    if let Some(id) = ids.remove(&key) {
                        engine.cancel(id, now, reason, &mut events);
                    }
                }
                Command::Snapshot(reply) => snapshots.push(reply),
            }
        }
        engine.advance(now, &mut events);
        let mut gone = Vec::new();
        for e in events.drain(..) {
            let Some((key, tx)) = sinks.get(&e.id) else {
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
                ids.remove(key);
                sinks.remove(&e.id);
            } else if closed {
                gone.push(e.id);
            }
        }
        for id in gone {
            // The client went away without saying so: abort, as vLLM does on disconnect.
            engine.abort(id, now, &mut events);
            if let Some((key, _)) = sinks.remove(&id) {
                ids.remove(&key);
            }
        }
        events.clear();
        for reply in snapshots {
            let _ = reply.send(Snapshot {
                stats: engine.stats().clone(),
                clock_fraction: engine.clock_fraction(),
                now,
            });
        }
        let timeout = engine
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

/// The HTTP side's handle on an engine thread.
#[derive(Clone)]
pub(crate) struct EngineHandle {
    commands: Sender<Command>,
}

impl EngineHandle {
    /// Starts the engine thread.
    pub(crate) fn spawn(
        engine: Engine,
        clock: Clock,
        name: String,
    ) -> std::io::Result<EngineHandle> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(engine, rx, clock))?;
        Ok(EngineHandle { commands: tx })
    }

    /// Submits a request; its updates arrive on the returned receiver.
    pub(crate) fn submit(
        &self,
        key: u64,
        spec: RequestSpec,
        cut: Option<(u32, FinishReason)>,
    ) -> mpsc::UnboundedReceiver<Update> {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.commands.send(Command::Submit(Submission {
            key,
            spec,
            updates: tx,
            cut,
        }));
        rx
    }

    /// Ends a request early.
    pub(crate) fn cancel(&self, key: u64, reason: FinishReason) {
        let _ = self.commands.send(Command::Cancel { key, reason });
    }

    /// A snapshot of the engine's statistics, or `None` if the engine thread is gone.
    pub(crate) async fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(Command::Snapshot(tx)).ok()?;
        rx.await.ok()
    }
}
