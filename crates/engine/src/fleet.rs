//! Several replicas of the engine behind one Service, in pure virtual time.
//!
//! A [`Fleet`] holds N engines, routes each arrival to one of the replicas that are ready and
//! not draining (as a Kubernetes Service sends traffic only to ready endpoints), adds replicas
//! that become ready after the model's cold start, and drains removed ones. [`drive`] runs a
//! fleet through a stream of arrivals and any number of periodic [`Observer`]s (a scrape every
//! S seconds, an autoscaler's tick) as one discrete-event loop: nothing sleeps, and a day of
//! traffic on a dozen replicas takes as long as the engines' arithmetic.
//!
//! At one instant the order is fixed: engine steps that end at or before `t` first, then the
//! arrivals at `t`, then the observers due at `t` (so an observer sees what arrived with it).
//! The loop stops only at arrivals and observer ticks (engines are independent between
//! them), and reports the engine events of each interval in time order, replica order
//! within one instant: the same notices, in the same order, as stopping at every step.
//!
//! ```
//! use inferscale_engine::fleet::{drive, Every, Fleet, Routing};
//! use inferscale_engine::{profile, RequestSpec};
//!
//! // 60 req/s for a minute on the seeds' L40S deployment, which sustains about 56 req/s per
//! // replica: the peak of the summed queue, scraped every second.
//! let peak_queue = |replicas: usize| {
//!     let mut fleet = Fleet::new(profile("aws-eks-ministral-8b-l40s").unwrap(), replicas, Routing::RoundRobin).unwrap();
//!     fleet.set_token_events(false); // statistics only
//!     let spec = RequestSpec { prompt_tokens: 34, max_tokens: 100, ignore_eos: true };
//!     let arrivals = (0..3600).map(|i| (i as f64 / 60.0, spec));
//!     let mut peak = 0u32;
//!     let mut scrape = Every::new(1.0, |_t, f: &mut Fleet| peak = peak.max(f.waiting()));
//!     let mut finished = 0;
//!     drive(&mut fleet, arrivals, 600.0, &mut [&mut scrape], |n| {
//!         finished += u32::from(n.finished().is_some())
//!     });
//!     assert_eq!(finished, 3600);
//!     peak
//! };
//! let (one, two) = (peak_queue(1), peak_queue(2));
//! assert!(one > 100, "one replica falls behind: {one}");
//! // Two keep up: what little queue they have is the cold start of their first requests.
//! assert!(two * 10 < one, "two replicas: {two}, one: {one}");
//! ```

use crate::engine::{Engine, EngineConfig, Event, EventKind, PromptBlocks, RequestSpec};
use crate::kv::MemoryError;
use crate::prompts::Prompt;
use inferscale_catalog::vllm::EngineHistogram;
use inferscale_rng::{Rng, mix};

/// How arrivals are spread over the ready replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// In turn (kube-proxy in IPVS mode with `rr`).
    RoundRobin,
    /// Uniformly at random, seeded (kube-proxy in iptables mode, the default).
    Random,
    /// To the replica with the fewest requests queued or running (a load-aware gateway).
    LeastOutstanding,
    /// To the replica whose prefix cache holds the most of the prompt, among those within
    /// [`PREFIX_AWARE_SLACK`] requests of the least outstanding; ties to the least outstanding
    /// (an inference gateway weighing prefix-cache hits against load, as llm-d's router
    /// does).
    PrefixAware,
}

/// How many more outstanding requests than the least loaded replica a prefix-aware router
/// accepts for a cache hit: a conversation stays on its replica until that replica is this
/// far behind the others.
pub const PREFIX_AWARE_SLACK: u32 = 16;

/// One replica of the fleet.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Stable for the fleet's life; never reused.
    pub id: usize,
    /// Its engine.
    pub engine: Engine,
    /// When it was asked for (simulated seconds).
    pub created_at: f64,
    /// When it finished loading and started taking traffic.
    pub ready_at: f64,
    /// Set when the fleet scaled it in: it takes no new requests and leaves once idle.
    pub draining_since: Option<f64>,
    /// When it left (drained, or removed before it was ready).
    pub left_at: Option<f64>,
}

impl Replica {
    /// Whether it takes new requests at `t`.
    pub fn serving(&self, t: f64) -> bool {
        self.draining_since.is_none() && t >= self.ready_at
    }

    fn outstanding(&self) -> u32 {
        let s = self.engine.stats();
        s.waiting + s.running
    }
}

/// An engine event and the replica it happened on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetEvent {
    /// [`Replica::id`].
    pub replica: usize,
    /// What happened.
    pub event: Event,
}

/// What [`drive`] reports, in time order.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// An arrival at `t`, and where it went (`None`: no replica was ready).
    Arrived {
        /// When.
        t: f64,
        /// The replica and the engine's id for the request.
        routed: Option<Routed>,
        /// What was sent (a client that retries sends it again).
        prompt: Prompt,
    },
    /// Something happened on an engine.
    Engine(FleetEvent),
}

impl Notice {
    /// The request's end, when this is one: `(replica, engine id, time)`.
    pub fn finished(&self) -> Option<(usize, u64, f64)> {
        match self {
            Notice::Engine(e) if matches!(e.event.kind, EventKind::Finished(_)) => {
                Some((e.replica, e.event.id, e.event.t))
            }
            _ => None,
        }
    }
}

/// Where a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    /// [`Replica::id`].
    pub replica: usize,
    /// The engine's id for the request.
    pub id: u64,
}

/// N engines behind one Service. See the module documentation.
#[derive(Debug, Clone)]
pub struct Fleet {
    cfg: EngineConfig,
    replicas: Vec<Replica>,
    /// Replicas that drained and left, kept for their statistics.
    gone: Vec<Replica>,
    routing: Routing,
    rng: Rng,
    turn: usize,
    next_id: usize,
    now: f64,
    token_events: bool,
    unrouted: u64,
    scratch: Vec<Event>,
    /// Positions in `replicas` of those taking traffic, for routing, and the span of time
    /// they hold for (until a loading replica becomes ready); `None` once replicas come,
    /// go or drain.
    serving: Vec<usize>,
    serving_span: Option<(f64, f64)>,
    /// Per replica, when its engine next has something to do without new input (infinity
    /// when idle): advancing skips the others without touching them.
    due: Vec<f64>,
    /// How many replicas are draining.
    draining: usize,
    /// The histograms recorded, when not all.
    histograms: Option<Vec<EngineHistogram>>,
}

impl Fleet {
    /// `replicas` engines, ready at time 0 (their model already loaded), or why the
    /// configuration cannot run.
    pub fn new(cfg: EngineConfig, replicas: usize, routing: Routing) -> Result<Fleet, MemoryError> {
        let mut f = Fleet {
            rng: Rng::new(mix(&[cfg.seed, 0x0066_6c65_6574])),
            cfg,
            replicas: Vec::new(),
            gone: Vec::new(),
            routing,
            turn: 0,
            next_id: 0,
            now: 0.0,
            token_events: true,
            unrouted: 0,
            scratch: Vec::new(),
            serving: Vec::new(),
            serving_span: None,
            due: Vec::new(),
            draining: 0,
            histograms: None,
        };
        for _ in 0..replicas {
            f.add(0.0, 0.0)?;
        }
        Ok(f)
    }

    /// Reports every output token (the default) or only finished requests, on every replica,
    /// present and future.
    pub fn set_token_events(&mut self, on: bool) {
        self.token_events = on;
        for r in &mut self.replicas {
            r.engine.set_token_events(on);
        }
    }

    /// Records only the histograms in `on` on every replica, present and future (see
    /// [`Engine::record_histograms`]).
    pub fn record_histograms(&mut self, on: &[EngineHistogram]) {
        self.histograms = Some(on.to_vec());
        for r in &mut self.replicas {
            r.engine.record_histograms(&|h| on.contains(&h));
        }
    }

    fn add(&mut self, t: f64, cold_start_s: f64) -> Result<(), MemoryError> {
        let mut ec = self.cfg.clone();
        let id = self.next_id;
        ec.seed = mix(&[self.cfg.seed, id as u64]);
        let mut engine = Engine::new(ec)?;
        engine.set_token_events(self.token_events);
        if let Some(on) = &self.histograms {
            engine.record_histograms(&|h| on.contains(&h));
        }
        self.next_id += 1;
        self.due.push(f64::INFINITY);
        self.serving_span = None;
        self.replicas.push(Replica {
            id,
            engine,
            created_at: t,
            ready_at: t + cold_start_s.max(0.0),
            draining_since: None,
            left_at: None,
        });
        Ok(())
    }

    /// The fleet's clock: the latest time it was advanced or submitted to.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// The replicas present (loading, serving or draining), oldest first.
    pub fn replicas(&self) -> &[Replica] {
        &self.replicas
    }

    /// Replicas that drained and left, in the order they left.
    pub fn departed(&self) -> &[Replica] {
        &self.gone
    }

    /// Replicas that are not draining (loading or serving): what a Deployment's `replicas`
    /// would say.
    pub fn desired(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| r.draining_since.is_none())
            .count()
    }

    /// Replicas taking traffic at the fleet's clock (Ready endpoints).
    pub fn ready(&self) -> usize {
        self.replicas.iter().filter(|r| r.serving(self.now)).count()
    }

    /// Requests waiting, summed over the replicas (`sum(vllm:num_requests_waiting)`).
    pub fn waiting(&self) -> u32 {
        self.replicas.iter().map(|r| r.engine.stats().waiting).sum()
    }

    /// Requests running, summed over the replicas.
    pub fn running(&self) -> u32 {
        self.replicas.iter().map(|r| r.engine.stats().running).sum()
    }

    /// Arrivals that found no ready replica (a Service without endpoints refuses them).
    pub fn unrouted(&self) -> u64 {
        self.unrouted
    }

    /// Scales to `n` replicas at `t`: new ones take `cold_start_s` to become ready; removed
    /// ones (the newest first, as a ReplicaSet picks pods that are not ready, then the
    /// youngest) stop taking requests and leave when their last request ends. Asking for
    /// more while some drain takes the draining ones back first.
    pub fn scale_to(&mut self, n: usize, t: f64, cold_start_s: f64) -> Result<(), MemoryError> {
        self.scale_to_with(n, t, |_| cold_start_s)
    }

    /// [`Fleet::scale_to`] with each new replica's cold start chosen by `cold_start(id)`
    /// (where its pod lands, what it pulls and loads).
    pub fn scale_to_with(
        &mut self,
        n: usize,
        t: f64,
        mut cold_start: impl FnMut(usize) -> f64,
    ) -> Result<(), MemoryError> {
        self.now = self.now.max(t);
        self.serving_span = None;
        let mut have = self.desired();
        while have < n {
            // Un-drain the most recent draining replica before creating one.
            if let Some(r) = self
                .replicas
                .iter_mut()
                .rev()
                .find(|r| r.draining_since.is_some())
            {
                r.draining_since = None;
                self.draining -= 1;
            } else {
                let delay = cold_start(self.next_id);
                self.add(t, delay)?;
            }
            have += 1;
        }
        while have > n {
            let victim = self
                .replicas
                .iter()
                .enumerate()
                .filter(|(_, r)| r.draining_since.is_none())
                .max_by(|(_, a), (_, b)| {
                    // Not-ready before ready, then the youngest.
                    (a.ready_at > t)
                        .cmp(&(b.ready_at > t))
                        .then(a.created_at.total_cmp(&b.created_at))
                        .then(a.id.cmp(&b.id))
                })
                .map(|(i, _)| i);
            let Some(i) = victim else { break };
            self.replicas[i].draining_since = Some(t);
            self.draining += 1;
            have -= 1;
        }
        self.reap(t);
        Ok(())
    }

    /// Removes draining replicas that have nothing left to do, in the order they left.
    fn reap(&mut self, t: f64) {
        debug_assert_eq!(
            self.draining,
            self.replicas
                .iter()
                .filter(|r| r.draining_since.is_some())
                .count()
        );
        if self.draining == 0 {
            return;
        }
        let before = self.gone.len();
        let mut i = 0;
        while i < self.replicas.len() {
            let r = &self.replicas[i];
            if r.draining_since.is_some() && (r.engine.is_idle() || r.ready_at > t) {
                self.due.remove(i);
                self.serving_span = None;
                self.draining -= 1;
                let mut r = self.replicas.remove(i);
                // It went idle at its last step's end (a pod never ready leaves at once).
                let idle_at = r.engine.stats().now;
                r.left_at = Some(r.draining_since.map_or(t, |d| d.max(idle_at)).min(t));
                r.engine.shed();
                self.gone.push(r);
            } else {
                i += 1;
            }
        }
        self.gone[before..]
            .sort_by(|a, b| a.left_at.unwrap_or(t).total_cmp(&b.left_at.unwrap_or(t)));
    }

    /// Routes a request arriving at `t` to a ready replica, or counts it as unrouted and
    /// returns `None` when none is ready.
    pub fn submit(&mut self, spec: RequestSpec, t: f64) -> Option<Routed> {
        self.submit_with(spec, PromptBlocks::Own, t)
    }

    /// [`Fleet::submit`] with what the prompt's blocks hold (the replica's prefix cache
    /// finds what earlier requests to it left).
    pub fn submit_with(
        &mut self,
        spec: RequestSpec,
        blocks: PromptBlocks,
        t: f64,
    ) -> Option<Routed> {
        self.now = self.now.max(t);
        if !self
            .serving_span
            .is_some_and(|(from, until)| from <= t && t < until)
        {
            self.serving.clear();
            let mut until = f64::INFINITY;
            for (i, r) in self.replicas.iter().enumerate() {
                if r.serving(t) {
                    self.serving.push(i);
                } else if r.draining_since.is_none() {
                    until = until.min(r.ready_at);
                }
            }
            self.serving_span = Some((t, until));
        }
        let replicas = &self.replicas;
        let n = self.serving.len();
        if n == 0 {
            self.unrouted += 1;
            return None;
        }
        let pick = match self.routing {
            Routing::RoundRobin => {
                self.turn = self.turn.wrapping_add(1);
                self.serving[self.turn % n]
            }
            Routing::Random => self.serving[(self.rng.next_u64() % n as u64) as usize],
            Routing::LeastOutstanding => self
                .serving
                .iter()
                .copied()
                .min_by_key(|&i| (replicas[i].outstanding(), replicas[i].id))
                .unwrap_or(0),
            Routing::PrefixAware => {
                let least = self
                    .serving
                    .iter()
                    .map(|&i| replicas[i].outstanding())
                    .min()
                    .unwrap_or(0);
                self.serving
                    .iter()
                    .copied()
                    .filter(|&i| replicas[i].outstanding() <= least + PREFIX_AWARE_SLACK)
                    .max_by_key(|&i| {
                        (
                            replicas[i]
                                .engine
                                .cached_blocks(spec.prompt_tokens, &blocks),
                            std::cmp::Reverse(replicas[i].outstanding()),
                            std::cmp::Reverse(replicas[i].id),
                        )
                    })
                    .unwrap_or(0)
            }
        };
        let r = &mut self.replicas[pick];
        let id = r.engine.submit_with(spec, t, None, blocks);
        self.due[pick] = r.engine.next_event_time().unwrap_or(f64::INFINITY);
        Some(Routed { replica: r.id, id })
    }

    /// Cancels request `id` on replica `replica` at `t` (its client gave up: vLLM aborts a
    /// request whose connection closed, and its slot and blocks go to others). What the
    /// engine reports (the abort) is appended to `events`. False when the replica or the
    /// request is not there any more.
    pub fn cancel(
        &mut self,
        replica: usize,
        id: u64,
        t: f64,
        events: &mut Vec<FleetEvent>,
    ) -> bool {
        let Some(i) = self.replicas.iter().position(|r| r.id == replica) else {
            return false;
        };
        self.now = self.now.max(t);
        self.scratch.clear();
        let r = &mut self.replicas[i];
        let done = r
            .engine
            .cancel(id, t, crate::stats::FinishReason::Abort, &mut self.scratch);
        self.due[i] = r.engine.next_event_time().unwrap_or(f64::INFINITY);
        events.extend(self.scratch.iter().map(|&event| FleetEvent {
            replica: r.id,
            event,
        }));
        done
    }

    /// When the next engine step on any replica ends without new input; `None` when all are
    /// idle.
    pub fn next_event_time(&self) -> Option<f64> {
        self.due
            .iter()
            .copied()
            .filter(|t| t.is_finite())
            .min_by(f64::total_cmp)
    }

    /// Runs every replica up to `until`, appending what happened in time order (replica
    /// order within one instant).
    pub fn advance(&mut self, until: f64, events: &mut Vec<FleetEvent>) {
        let from = events.len();
        let mut sources = 0;
        for (r, due) in self.replicas.iter_mut().zip(&mut self.due) {
            if *due > until {
                continue;
            }
            self.scratch.clear();
            r.engine.advance(until, &mut self.scratch);
            *due = r.engine.next_event_time().unwrap_or(f64::INFINITY);
            if self.scratch.is_empty() {
                continue;
            }
            sources += 1;
            events.extend(self.scratch.iter().map(|&event| FleetEvent {
                replica: r.id,
                event,
            }));
        }
        if sources > 1 && !events[from..].is_sorted_by(|a, b| a.event.t <= b.event.t) {
            // Each replica's events are in time order; a stable sort merges them.
            events[from..].sort_by(|a, b| a.event.t.total_cmp(&b.event.t));
        }
        self.now = self.now.max(until);
        self.reap(until);
    }
}

/// Something that looks at (and may act on) the fleet at times of its choosing: a scraper,
/// an autoscaler.
pub trait Observer {
    /// When it next wants to run; `None` when it is done.
    fn next_tick(&self) -> Option<f64>;
    /// Runs at `t` (the fleet is advanced to `t`).
    fn tick(&mut self, t: f64, fleet: &mut Fleet);
}

/// An observer that calls a function every `period` seconds, from `period` on.
pub struct Every<F> {
    period: f64,
    next: f64,
    f: F,
}

impl<F: FnMut(f64, &mut Fleet)> Every<F> {
    /// Every `period` seconds (at least a millisecond), first at `period`.
    pub fn new(period: f64, f: F) -> Self {
        Self::starting(period, period, f)
    }

    /// Every `period` seconds, first at `first`.
    pub fn starting(first: f64, period: f64, f: F) -> Self {
        let period = if period.is_finite() {
            period.max(1e-3)
        } else {
            f64::MAX
        };
        Every {
            period,
            next: first,
            f,
        }
    }
}

impl<F: FnMut(f64, &mut Fleet)> Observer for Every<F> {
    fn next_tick(&self) -> Option<f64> {
        Some(self.next)
    }

    fn tick(&mut self, t: f64, fleet: &mut Fleet) {
        (self.f)(t, fleet);
        self.next = t + self.period;
    }
}

/// Runs `fleet` until `until`: `arrivals` (in time order; later ones than `until` are left
/// unread; a [`RequestSpec`] or a [`Prompt`] each) are routed as they come, observers run when due, and every arrival and engine
/// event goes to `notice`. Requests still running at `until` stay in the fleet; call again
/// with a later `until` (and no arrivals) to let them finish. Returns how many arrivals were
/// routed.
pub fn drive<P: Into<Prompt>>(
    fleet: &mut Fleet,
    arrivals: impl IntoIterator<Item = (f64, P)>,
    until: f64,
    observers: &mut [&mut dyn Observer],
    mut notice: impl FnMut(Notice),
) -> u64 {
    let mut arrivals = arrivals.into_iter().peekable();
    let mut events = Vec::new();
    let mut routed = 0;
    loop {
        let next_arrival = arrivals.peek().map(|a| a.0).filter(|t| *t <= until);
        let next_tick = observers
            .iter()
            .filter_map(|o| o.next_tick())
            .filter(|t| *t <= until)
            .min_by(f64::total_cmp);
        // Engine steps between two arrivals or ticks need no stop: the fleet runs them when
        // it advances to the next one.
        let Some(t) = [next_arrival, next_tick]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
        else {
            break;
        };
        let t = t.max(fleet.now());
        // Steps first.
        fleet.advance(t, &mut events);
        for e in events.drain(..) {
            notice(Notice::Engine(e));
        }
        // Then the arrivals at this instant.
        while let Some((_, p)) = arrivals.next_if(|a| a.0 <= t) {
            let prompt: Prompt = p.into();
            let to = fleet.submit_with(prompt.spec, prompt.blocks.clone(), t);
            routed += u64::from(to.is_some());
            notice(Notice::Arrived {
                t,
                routed: to,
                prompt,
            });
        }
        // Then the observers due.
        for o in observers.iter_mut() {
            while o.next_tick().is_some_and(|n| n <= t) {
                o.tick(t, fleet);
            }
        }
    }
    fleet.advance(until, &mut events);
    for e in events.drain(..) {
        notice(Notice::Engine(e));
    }
    routed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile;

    fn spec() -> RequestSpec {
        RequestSpec {
            prompt_tokens: 34,
            max_tokens: 100,
            ignore_eos: true,
        }
    }

    fn eks() -> EngineConfig {
        profile("aws-eks-ministral-8b-l40s").unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn prefix_aware_routing_follows_the_cache_within_its_slack() {
        let prompt = |tokens: u32, hashes: Vec<u64>| Prompt {
            spec: RequestSpec {
                prompt_tokens: tokens,
                max_tokens: 4,
                ignore_eos: true,
            },
            blocks: PromptBlocks::Hashes(hashes.into()),
        };
        let mut f = Fleet::new(eks(), 3, Routing::PrefixAware).unwrap_or_else(|_| unreachable!());
        f.set_token_events(false);
        // Thirty conversations' first turns (four blocks each), then their second turns,
        // which repeat the first and add four blocks.
        let first = |c: u64| prompt(64, (1..=4).map(|b| c * 100 + b).collect());
        let second = |c: u64| prompt(128, (1..=8).map(|b| c * 100 + b).collect());
        let arrivals: Vec<(f64, Prompt)> = (0..30)
            .map(|c| (c as f64 * 0.5, first(c)))
            .chain((0..30).map(|c| (30.0 + c as f64 * 0.5, second(c))))
            .collect();
        let mut went = Vec::new();
        drive(&mut f, arrivals, 120.0, &mut [], |n| {
            if let Notice::Arrived { routed, .. } = n {
                went.push(routed.map(|r| r.replica));
            }
        });
        let (firsts, seconds) = went.split_at(30);
        assert_eq!(
            firsts, seconds,
            "each second turn goes where its first is cached"
        );
        let used: std::collections::HashSet<_> = firsts.iter().collect();
        assert_eq!(
            used.len(),
            3,
            "first turns spread (no cache: least outstanding)"
        );
        // Sixty requests with one prefix at once: the cache draws them to one replica only
        // until it is the slack behind the others.
        let mut f = Fleet::new(eks(), 3, Routing::PrefixAware).unwrap_or_else(|_| unreachable!());
        f.set_token_events(false);
        drive(&mut f, [(0.0, first(7))], 10.0, &mut [], |_| {});
        let burst: Vec<(f64, Prompt)> = (0..60).map(|_| (10.0, second(7))).collect();
        drive(&mut f, burst, 10.0, &mut [], |_| {});
        let load: Vec<u32> = f.replicas().iter().map(Replica::outstanding).collect();
        let (lo, hi) = (load.iter().min().copied(), load.iter().max().copied());
        assert!(
            hi.zip(lo)
                .is_some_and(|(h, l)| h - l <= PREFIX_AWARE_SLACK + 1),
            "{load:?}"
        );
    }

    #[test]
    fn round_robin_spreads_evenly_and_every_request_finishes() {
        let mut f = Fleet::new(eks(), 3, Routing::RoundRobin).unwrap_or_else(|_| unreachable!());
        f.set_token_events(false);
        let arrivals = (0..300).map(|i| (f64::from(i) * 0.1, spec()));
        let mut per = [0u32; 3];
        let routed = drive(&mut f, arrivals, 200.0, &mut [], |n| {
            if let Notice::Engine(e) = n {
                assert!(
                    n.finished().is_some(),
                    "no token events in statistics-only mode"
                );
                per[e.replica] += 1;
            }
        });
        assert_eq!(routed, 300);
        assert_eq!(per, [100, 100, 100]);
    }

    #[test]
    fn token_events_change_nothing_the_engines_count() {
        let run = |tokens: bool| {
            let mut f = Fleet::new(eks(), 2, Routing::Random).unwrap_or_else(|_| unreachable!());
            f.set_token_events(tokens);
            let arrivals = (0..400).map(|i| (f64::from(i) / 30.0, spec()));
            let mut n = 0u64;
            drive(&mut f, arrivals, 120.0, &mut [], |x| {
                n += u64::from(matches!(x, Notice::Engine(_)));
            });
            let stats: Vec<_> = f
                .replicas()
                .iter()
                .map(|r| r.engine.stats().clone())
                .collect();
            (stats, n)
        };
        let (a, na) = run(true);
        let (b, nb) = run(false);
        assert_eq!(a, b);
        assert!(na > 50 * nb, "{na} events vs {nb}");
    }

    #[test]
    fn new_replicas_take_traffic_only_after_their_cold_start_and_removed_ones_drain() {
        let mut f = Fleet::new(eks(), 1, Routing::RoundRobin).unwrap_or_else(|_| unreachable!());
        f.set_token_events(false);
        let mut scaled = false;
        let mut ready_seen = Vec::new();
        let mut ctl = Every::new(1.0, |t, fleet: &mut Fleet| {
            if t >= 10.0 && !scaled {
                fleet
                    .scale_to(2, t, 30.0)
                    .unwrap_or_else(|_| unreachable!());
                scaled = true;
            }
            ready_seen.push((t, fleet.ready(), fleet.desired()));
        });
        let arrivals = (0..600).map(|i| (f64::from(i) * 0.1, spec()));
        drive(&mut f, arrivals, 60.0, &mut [&mut ctl], |_| {});
        let at = |t: f64| ready_seen.iter().find(|s| s.0 >= t).copied();
        assert_eq!(at(20.0).map(|s| (s.1, s.2)), Some((1, 2)), "loading");
        assert_eq!(
            at(41.0).map(|s| (s.1, s.2)),
            Some((2, 2)),
            "ready after 30 s"
        );
        // The new replica got requests only from t = 40.
        let newer = &f.replicas()[1];
        assert_eq!(newer.ready_at, 40.0);
        assert!(newer.engine.stats().success.iter().sum::<u64>() > 0);
        // Scale in: the newest drains, then leaves.
        f.scale_to(1, 60.0, 30.0).unwrap_or_else(|_| unreachable!());
        assert_eq!(f.desired(), 1);
        drive(
            &mut f,
            std::iter::empty::<(f64, RequestSpec)>(),
            120.0,
            &mut [],
            |_| {},
        );
        assert_eq!(f.replicas().len(), 1);
        assert_eq!(f.departed().len(), 1);
        assert_eq!(f.departed()[0].id, 1);
    }

    #[test]
    fn with_no_ready_replica_arrivals_are_unrouted() {
        let mut f = Fleet::new(eks(), 0, Routing::RoundRobin).unwrap_or_else(|_| unreachable!());
        f.scale_to(1, 0.0, 5.0).unwrap_or_else(|_| unreachable!());
        let arrivals = (0..10).map(|i| (f64::from(i), spec()));
        let routed = drive(&mut f, arrivals, 30.0, &mut [], |_| {});
        assert_eq!(routed, 5);
        assert_eq!(f.unrouted(), 5);
    }
}
