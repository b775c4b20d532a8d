//! One replica under a workload, in virtual time: the engine `sim` and `rehearse` run, driven
//! by arrivals (open loop), by finishes (closed loop), or all at once (offline), with the
//! client's timeout aborting what takes too long.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use inferscale_engine::kv::MemoryError;
use inferscale_engine::stats::FinishReason;
use inferscale_engine::{
    Engine, EngineConfig, Event, EventKind, Prefix, Prompt, PromptBlocks, PromptCycle, RequestSpec,
    Rng, Warmup, mix,
};

use crate::workload::{Load, SharedPrefix, Workload};

/// One request, as the client saw it (seconds from the start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// When it was sent.
    pub sent: f64,
    /// When its first token came.
    pub first_token: Option<f64>,
    /// When it ended.
    pub end: f64,
    /// Prompt tokens.
    pub prompt: u32,
    /// Output tokens.
    pub output: u32,
    /// It finished (not timed out or aborted).
    pub ok: bool,
    /// Times it was preempted.
    pub preemptions: u32,
}

/// What happened in a run.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Every request sent, in the order they ended.
    pub records: Vec<Record>,
    /// The most requests waiting at once.
    pub queue_max: u32,
    /// Requests waiting, averaged over time.
    pub queue_mean: f64,
    /// The highest KV-cache usage (0–1).
    pub kv_max: f64,
    /// KV-cache blocks of the replica.
    pub kv_blocks: u32,
    /// Preemptions in all.
    pub preemptions: u64,
    /// Prompt tokens looked up in the prefix cache, and found (vLLM's counters).
    pub prefix_cache: (u64, u64),
    /// When the last request ended.
    pub end: f64,
}

/// Where a run stops sending, and when it stops waiting.
struct Plan {
    /// Open loop: every send time, in order.
    times: Vec<f64>,
    /// Closed loop: clients, and the send deadline or count.
    clients: u32,
    until: f64,
    limit: u64,
}

fn plan(w: &Workload) -> Plan {
    let mut rng = Rng::new(mix(&[w.seed, 0x6172_7269]));
    let count = |rps: f64| {
        w.requests
            .unwrap_or((rps * w.duration_s).round().max(1.0) as u64)
            .min(10_000_000)
    };
    match w.load {
        Load::Rate { rps, poisson } => {
            let n = count(rps);
            let mut t = 0.0;
            let mut times = Vec::with_capacity(n as usize);
            for k in 0..n {
                if poisson {
                    t += -(1.0 - rng.next_f64()).ln() / rps;
                    times.push(t);
                } else {
                    times.push(k as f64 / rps);
                }
            }
            Plan {
                times,
                clients: 0,
                until: 0.0,
                limit: 0,
            }
        }
        Load::Offline { requests } => Plan {
            times: vec![0.0; requests as usize],
            clients: 0,
            until: 0.0,
            limit: 0,
        },
        Load::Concurrency { clients } => Plan {
            times: Vec::new(),
            clients: clients.max(1),
            until: if w.requests.is_some() {
                f64::INFINITY
            } else {
                w.duration_s
            },
            limit: w.requests.unwrap_or(u64::MAX),
        },
        Load::Sequential => Plan {
            times: Vec::new(),
            clients: 1,
            until: if w.requests.is_some() {
                f64::INFINITY
            } else {
                w.duration_s
            },
            limit: w.requests.unwrap_or(u64::MAX),
        },
    }
}

/// The requests a workload sends, in order: lengths drawn, or a pool's prompts sent again,
/// each with its shared prefix.
struct Requests<'w> {
    w: &'w Workload,
    lengths: Rng,
    groups: Rng,
    /// A pool's prompts keep their length each time they are sent.
    pool: Vec<RequestSpec>,
    /// The workload's own prompts, when it has them.
    prompts: Option<PromptCycle>,
    sent: u64,
}

impl<'w> Requests<'w> {
    fn new(w: &'w Workload) -> Requests<'w> {
        let mut lengths = Rng::new(mix(&[w.seed, 0x6c65_6e73]));
        let groups = Rng::new(mix(&[w.seed, 0x6772_6f75]));
        let pool = match w.prefix {
            Some(SharedPrefix::Pool { prompts }) => (0..prompts.clamp(1, 1_000_000))
                .map(|_| RequestSpec {
                    prompt_tokens: w.input.draw(&mut lengths).max(1),
                    max_tokens: w.output.draw(&mut lengths).max(1),
                    ignore_eos: true,
                })
                .collect(),
            _ => Vec::new(),
        };
        Requests {
            w,
            lengths,
            groups,
            pool,
            prompts: w.prompts.clone(),
            sent: 0,
        }
    }

    fn next(&mut self) -> Prompt {
        if let Some(p) = &mut self.prompts {
            return p.next_prompt();
        }
        let (spec, prefix) = self.drawn();
        Prompt {
            spec,
            blocks: prefix.map_or(PromptBlocks::Own, PromptBlocks::Shared),
        }
    }

    fn drawn(&mut self) -> (RequestSpec, Option<Prefix>) {
        let n = self.sent;
        self.sent += 1;
        if !self.pool.is_empty() {
            let i = (n % self.pool.len() as u64) as usize;
            let spec = self.pool[i];
            let prefix = Prefix {
                key: i as u64,
                tokens: spec.prompt_tokens,
            };
            return (spec, Some(prefix));
        }
        let spec = RequestSpec {
            prompt_tokens: self.w.input.draw(&mut self.lengths).max(1),
            max_tokens: self.w.output.draw(&mut self.lengths).max(1),
            ignore_eos: true,
        };
        // Each prompt starts with one of the groups' system prompts, drawn evenly.
        let prefix = match self.w.prefix {
            Some(SharedPrefix::System { groups, tokens }) if groups > 0 && tokens > 0 => {
                Some(Prefix {
                    key: (self.groups.next_f64() * f64::from(groups)).floor() as u64,
                    tokens: tokens.min(spec.prompt_tokens),
                })
            }
            _ => None,
        };
        (spec, prefix)
    }
}

/// One replica and what is in flight on it: when each request was sent, and its deadline.
struct Replica<'w> {
    engine: Engine,
    requests: Requests<'w>,
    /// In flight: id → sent time.
    sent_at: HashMap<u64, f64>,
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
    timeout: Option<f64>,
}

impl Replica<'_> {
    /// Sends the next request at `t`.
    fn submit(&mut self, t: f64) {
        let p = self.requests.next();
        let id = self.engine.submit_with(p.spec, t, None, p.blocks);
        self.sent_at.insert(id, t);
        if let Some(to) = self.timeout {
            self.deadlines.push(Reverse(((t + to).to_bits(), id)));
        }
    }

    /// The earliest deadline still pending.
    fn next_deadline(&self) -> Option<f64> {
        self.deadlines
            .peek()
            .map(|Reverse((t, _))| f64::from_bits(*t))
    }

    /// Aborts what is in flight past its deadline at `t`.
    fn expire(&mut self, t: f64, events: &mut Vec<Event>) {
        while let Some(&Reverse((d, id))) = self.deadlines.peek() {
            if f64::from_bits(d) > t {
                break;
            }
            self.deadlines.pop();
            if self.sent_at.contains_key(&id) {
                self.engine.cancel(id, t, FinishReason::Abort, events);
            }
        }
    }

    /// The record of a request that just finished (`None` for other events, or one not
    /// sent by this run).
    fn finished(&mut self, e: &Event) -> Option<Record> {
        let EventKind::Finished(reason) = e.kind else {
            return None;
        };
        let sent = self.sent_at.remove(&e.id)?;
        Some(Record {
            sent,
            first_token: e.first_token,
            end: e.t,
            prompt: e.prompt_tokens,
            output: e.output_tokens,
            ok: matches!(reason, FinishReason::Stop | FinishReason::Length),
            preemptions: e.preemptions,
        })
    }
}

/// Runs `w` against one replica configured as `cfg`.
///
/// # Errors
///
/// When the configuration does not fit its GPU (as vLLM refuses to start).
pub fn simulate(cfg: &EngineConfig, w: &Workload) -> Result<Trace, MemoryError> {
    let mut cfg = cfg.clone();
    if w.warm {
        // A warmed-up server: no first-use costs, clocks at boost.
        cfg.warmup = Warmup {
            first_pass_s: 0.0,
            idle_clock_fraction: 1.0,
            ..cfg.warmup
        };
    }
    let mut engine = Engine::new(cfg)?;
    engine.set_token_events(false);
    let p = plan(w);
    let mut trace = Trace {
        kv_blocks: engine.memory().num_blocks,
        ..Trace::default()
    };
    let mut r = Replica {
        engine,
        requests: Requests::new(w),
        sent_at: HashMap::new(),
        deadlines: BinaryHeap::new(),
        timeout: w.timeout_s.filter(|t| *t > 0.0),
    };
    let mut closed_sent = 0u64;
    for _ in 0..p.clients {
        if closed_sent < p.limit {
            r.submit(0.0);
            closed_sent += 1;
        }
    }
    let mut next_open = 0usize;
    let mut events: Vec<Event> = Vec::new();
    let (mut last_t, mut queue_area) = (0.0, 0.0);
    loop {
        let arrival = p.times.get(next_open).copied();
        let step = r.engine.next_event_time();
        let Some(t) = [arrival, r.next_deadline(), step]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
        else {
            break;
        };
        let t = t.max(r.engine.now());
        queue_area += f64::from(r.engine.stats().waiting) * (t - last_t).max(0.0);
        last_t = t;
        r.engine.advance(t, &mut events);
        while next_open < p.times.len() && p.times[next_open] <= t {
            r.submit(p.times[next_open]);
            next_open += 1;
        }
        r.expire(t, &mut events);
        let st = r.engine.stats();
        trace.queue_max = trace.queue_max.max(st.waiting);
        trace.kv_max = trace.kv_max.max(st.kv_usage);
        for e in events.drain(..) {
            let Some(record) = r.finished(&e) else {
                continue;
            };
            trace.records.push(record);
            trace.end = trace.end.max(e.t);
            // A closed-loop client sends its next request as soon as one ends.
            if p.clients > 0 && closed_sent < p.limit && e.t < p.until {
                r.submit(e.t);
                closed_sent += 1;
            }
        }
    }
    trace.queue_mean = if last_t > 0.0 {
        queue_area / last_t
    } else {
        0.0
    };
    let st = r.engine.stats();
    trace.preemptions = st.preemptions;
    trace.prefix_cache = (st.prefix_cache_queries, st.prefix_cache_hits);
    Ok(trace)
}
