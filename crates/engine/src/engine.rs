//! One engine replica in virtual time: vLLM V1's scheduler over a paged KV cache, with step
//! durations from the [cost model](crate::cost).
//!
//! The engine is a state machine driven from outside: [`Engine::submit`] adds a request at a
//! given time, [`Engine::advance`] runs every step that ends before a given time and reports
//! what happened as [`Event`]s. It never reads a clock, so the simulator can drive it in real
//! (or accelerated) time and the rehearsal in pure virtual time, with the same results.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cost::{CostModel, MeasuredStep, Overheads, StepShape};
use crate::hardware::GpuSpec;
use crate::kv::{
    BLOCK_SIZE, BlockKey, BlockPool, MemoryError, MemoryPlan, blocks_for, plan_memory,
};
use crate::model::{ModelSpec, WeightDtype};
use crate::stats::{FinishReason, Stats};
use inferscale_catalog::vllm::EngineHistogram;
use inferscale_rng::Rng;

/// How long outputs run when end-of-sequence is allowed (`ignore_eos` false).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputLength {
    /// Never stop early: every request runs to `max_tokens`.
    MaxTokens,
    /// The natural length is log-normal with this median (tokens) and log standard deviation.
    LogNormal {
        /// Median natural length, tokens.
        median: f64,
        /// Standard deviation of the log.
        sigma: f64,
    },
}

/// What the first requests after start-up pay (the seeds' "warm-up").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    /// One-time cost of the first forward pass of each kind (prefill, decode): lazy CUDA and
    /// cuBLAS initialisation, Triton JIT, kernel autotuning. Seconds.
    pub first_pass_s: f64,
    /// SM/memory clocks of an idle GPU as a fraction of boost.
    pub idle_clock_fraction: f64,
    /// Time constant of the ramp to boost clocks while busy, seconds.
    pub clock_ramp_s: f64,
    /// Time constant of the fall back to idle clocks, seconds.
    pub clock_decay_s: f64,
}

impl Default for Warmup {
    fn default() -> Self {
        Warmup {
            first_pass_s: 0.6,
            idle_clock_fraction: 0.5,
            clock_ramp_s: 0.3,
            clock_decay_s: 5.0,
        }
    }
}

/// Start-up time before the server reports ready.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ColdStart {
    /// Process start and imports, seconds.
    pub process_s: f64,
    /// Weight loading bandwidth per rank, GB/s (the EKS run's streamer: 9.81 GiB in 5.02 s).
    pub load_gbps: f64,
    /// Memory profiling and KV-cache allocation, seconds.
    pub profile_s: f64,
    /// `torch.compile` with a cold cache, seconds (not with `enforce_eager`).
    pub compile_s: f64,
    /// CUDA-graph capture per captured batch size, seconds (not with `enforce_eager`).
    pub capture_per_size_s: f64,
}

impl Default for ColdStart {
    fn default() -> Self {
        ColdStart {
            process_s: 12.0,
            load_gbps: 2.1,
            profile_s: 3.0,
            compile_s: 35.0,
            capture_per_size_s: 0.15,
        }
    }
}

/// Everything that defines an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// The GPU of every rank.
    pub gpu: GpuSpec,
    /// The model.
    pub model: ModelSpec,
    /// How the weights are stored.
    pub dtype: WeightDtype,
    /// Bytes per KV element (2 for `auto` with 16-bit weights, 1 for `fp8`).
    pub kv_dtype_bytes: f64,
    /// `--tensor-parallel-size`.
    pub tensor_parallel_size: u32,
    /// `--max-num-seqs`.
    pub max_num_seqs: u32,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: u32,
    /// `--max-model-len`.
    pub max_model_len: u32,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: f64,
    /// `--enforce-eager`.
    pub enforce_eager: bool,
    /// Chunked prefill (on by default in V1).
    pub chunked_prefill: bool,
    /// Prefix caching (on by default in V1): a prompt's full blocks stay cached after use and
    /// a later request that starts with the same tokens skips their prefill.
    pub prefix_caching: bool,
    /// Steps take no time (the `instant` profile).
    pub instant: bool,
    /// Steps take what a fit to a measured server says, not what the GPU and model would
    /// ([`EngineConfig::measured`]).
    pub measured: Option<MeasuredStep>,
    /// Output length when end-of-sequence is allowed.
    pub output_length: OutputLength,
    /// Warm-up behaviour.
    pub warmup: Warmup,
    /// Start-up time.
    pub cold_start: ColdStart,
    /// CPU-side constants of the cost model.
    pub overheads: Overheads,
    /// Fault injection: from simulated time `.1` on, steps take `.0` times longer.
    pub slowdown: Option<(f64, f64)>,
    /// Seed for everything random.
    pub seed: u64,
}

impl EngineConfig {
    /// A configuration with vLLM's defaults for `gpu` and `model` (batch limits by GPU size,
    /// `gpu_memory_utilization` 0.9, context the smaller of the model's and 8192... as vLLM
    /// would pick the model's own; here it is capped at 32768 to keep default caches sane).
    pub fn new(gpu: GpuSpec, model: ModelSpec) -> Self {
        let (max_num_seqs, max_num_batched_tokens) = gpu.batch_defaults();
        let dtype = model.native_dtype;
        EngineConfig {
            max_model_len: model.max_context.min(32768),
            gpu,
            model,
            dtype,
            kv_dtype_bytes: 2.0,
            tensor_parallel_size: 1,
            max_num_seqs,
            max_num_batched_tokens,
            gpu_memory_utilization: 0.9,
            enforce_eager: false,
            chunked_prefill: true,
            prefix_caching: true,
            instant: false,
            measured: None,
            output_length: OutputLength::MaxTokens,
            warmup: Warmup::default(),
            cold_start: ColdStart::default(),
            overheads: Overheads::default(),
            slowdown: None,
            seed: 0,
        }
    }

    /// The step-time model of this configuration.
    pub fn cost_model(&self) -> CostModel {
        let mut c = CostModel::new(
            self.gpu.clone(),
            self.model.clone(),
            self.dtype,
            self.kv_dtype_bytes,
            self.tensor_parallel_size,
            self.enforce_eager,
            self.max_num_seqs,
            self.max_num_batched_tokens,
        );
        c.overheads = self.overheads.clone();
        if self.instant {
            c.instant()
        } else if let Some(m) = self.measured {
            c.measured(m)
        } else {
            c
        }
    }

    /// A replica of a server known only by its measurement: steps timed by `step`, at most
    /// `max_num_seqs` requests running, the rest queued. Its memory is not modelled (the KV
    /// cache never limits it: what limited the measured server is in the fit), nor its
    /// warm-up or start-up (a rehearsal's cluster gives the start-up), nor a frontend apart
    /// from the steps (the fit includes it).
    ///
    /// `model` names what it serves (its `model_name` label); the GPU is not known (the
    /// placeholder's numbers are never read: nothing here is derived from the hardware).
    pub fn measured(step: MeasuredStep, max_num_seqs: u32, model: &str) -> EngineConfig {
        let (Some(mut gpu), Some(mut spec)) = (
            crate::hardware::find_gpu("H100"),
            crate::model::find_model("Qwen3-0.6B"),
        ) else {
            unreachable!("the built-in tables hold H100 and Qwen3-0.6B")
        };
        gpu.name = "unknown".into();
        gpu.product_name = "unknown (a measured server)".into();
        spec.name = model.to_owned();
        spec.hf_id = model.to_owned();
        let mut c = EngineConfig::new(gpu, spec);
        c.measured = Some(step);
        c.max_num_seqs = max_num_seqs.max(1);
        c.max_num_batched_tokens = u32::MAX / 4;
        c.max_model_len = 1 << 20;
        c.prefix_caching = false;
        c.overheads.frontend_s = 0.0;
        c.warmup = Warmup {
            first_pass_s: 0.0,
            idle_clock_fraction: 1.0,
            clock_ramp_s: 1.0,
            clock_decay_s: 1.0,
        };
        c
    }

    /// How the memory of one rank is laid out (the KV-cache size), or why it cannot be.
    pub fn memory_plan(&self) -> Result<MemoryPlan, MemoryError> {
        if self.instant || self.measured.is_some() {
            // No GPU to fill: a cache large enough never to be the limit.
            return Ok(MemoryPlan {
                requested: 0.0,
                weights: 0.0,
                activations: 0.0,
                other: 0.0,
                kv_cache: 0.0,
                block_bytes: 0.0,
                num_blocks: u32::MAX / 2,
            });
        }
        plan_memory(
            &self.gpu,
            &self.model,
            self.dtype,
            self.model
                .kv_bytes_per_token(self.tensor_parallel_size, self.kv_dtype_bytes),
            self.tensor_parallel_size,
            self.gpu_memory_utilization,
            self.max_num_seqs,
            self.max_num_batched_tokens,
            self.max_model_len,
            self.enforce_eager,
        )
    }

    /// Seconds from process start until the server is ready.
    pub fn load_time_s(&self) -> f64 {
        if self.instant || self.measured.is_some() {
            return 0.0;
        }
        let c = &self.cold_start;
        let per_rank =
            self.model.loaded_bytes(self.dtype) / f64::from(self.tensor_parallel_size.max(1));
        let mut t = c.process_s + per_rank / (c.load_gbps * 1e9) + c.profile_s;
        if !self.enforce_eager {
            t += c.compile_s
                + c.capture_per_size_s * capture_sizes(self.cost_model().max_capture_size()) as f64;
        }
        t
    }
}

/// vLLM's CUDA-graph capture sizes: 1, 2, 4, then multiples of 8 below 256, then of 16.
pub fn capture_sizes(max: u32) -> usize {
    let mut n = [1u32, 2, 4].iter().filter(|s| **s <= max).count();
    n += (8..256).step_by(8).filter(|s| *s <= max).count();
    n += (256..=max).step_by(16).count();
    n
}

/// A request as the engine receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestSpec {
    /// Prompt length, tokens.
    pub prompt_tokens: u32,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// vLLM's `ignore_eos`: generate exactly `max_tokens`.
    pub ignore_eos: bool,
}

/// A prompt prefix requests share (a system prompt, a conversation so far): the first
/// `tokens` tokens of every prompt submitted with the same `key` are the same tokens, so
/// vLLM's prefix cache can reuse their KV blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// What the shared tokens are (any value; equal keys mean equal tokens).
    pub key: u64,
    /// How many tokens of the prompt it covers.
    pub tokens: u32,
}

/// What a prompt's full blocks hold, for the prefix cache: vLLM hashes each full block with
/// its parent's hash, so equal keys mean equal tokens up to and including that block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PromptBlocks {
    /// Nothing shared: only the request itself finds its blocks again (after a preemption).
    #[default]
    Own,
    /// The first `tokens` tokens are a prefix shared by every prompt of the same `key`.
    Shared(Prefix),
    /// Each full block's chained hash, in order (a server that sees the tokens).
    Hashes(std::sync::Arc<[u64]>),
}

/// A request's own tokens' blocks are keyed apart from every shared prefix's.
const OWN: u64 = 1 << 63;

/// What happened to a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventKind {
    /// A new output token (its 1-based number is `Event::output_tokens`).
    Token,
    /// The request ended (after its last token, if any).
    Finished(FinishReason),
}

/// One thing that happened, at simulated time `t`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// The request (as returned by [`Engine::submit`]).
    pub id: u64,
    /// When, in simulated seconds.
    pub t: f64,
    /// What.
    pub kind: EventKind,
    /// Output tokens so far.
    pub output_tokens: u32,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// When the request arrived (as submitted).
    pub arrival: f64,
    /// On `Finished`: when its first token came (`None`: it produced none). A driver that
    /// needs only request-level latencies reads it here instead of asking for every token.
    pub first_token: Option<f64>,
    /// On `Finished`: how often it was preempted.
    pub preemptions: u32,
}

#[derive(Debug, Clone)]
struct Req {
    id: u64,
    /// Its place in the running batch: set when it is scheduled from the queue, increasing
    /// (the batch's order is the order of these numbers).
    seq: u64,
    /// For a member of [`Decoders`]: the shared decode step count when `computed` and
    /// `output` were last written.
    g0: u64,
    prompt: u32,
    max_tokens: u32,
    stop_at: u32,
    /// Ends the request with this reason once it has this many output tokens (a stop string
    /// or a tool call's end, known in advance; or fault injection: a response cut or broken
    /// at a known point).
    cut: Option<(u32, FinishReason)>,
    arrival: f64,
    ready: f64,
    output: u32,
    computed: u64,
    blocks: u32,
    first_scheduled: Option<f64>,
    first_token: Option<f64>,
    last_token: f64,
    preemptions: u32,
    cancelled: Option<FinishReason>,
    /// What its prompt's blocks hold.
    blocks_of: PromptBlocks,
    /// Full prompt blocks held as prefix-cache entries (0 without caching).
    pb: u32,
}

/// The cache key of full block `i` of a `prompt`-token prompt whose blocks hold `blocks`,
/// when another prompt can share it (`None`: the request's own).
fn shared_key(blocks: &PromptBlocks, prompt: u32, i: u32) -> Option<BlockKey> {
    match blocks {
        PromptBlocks::Shared(p) if (i + 1) * BLOCK_SIZE <= p.tokens.min(prompt) => {
            Some((p.key & !OWN, i))
        }
        PromptBlocks::Hashes(h) if (i as usize) < h.len() => Some((h[i as usize] & !OWN, i)),
        _ => None,
    }
}

impl Req {
    /// The cache key of full prompt block `i`.
    fn block_key(&self, i: u32) -> BlockKey {
        shared_key(&self.blocks_of, self.prompt, i).unwrap_or((self.id | OWN, i))
    }

    fn block_keys(&self, n: u32) -> Vec<BlockKey> {
        (0..n).map(|i| self.block_key(i)).collect()
    }

    fn total(&self) -> u64 {
        u64::from(self.prompt) + u64::from(self.output)
    }

    /// The output count it ends at: its natural length, or a cut.
    fn end(&self) -> u32 {
        self.cut.map_or(self.stop_at, |(n, _)| n.min(self.stop_at))
    }
}

/// One step being executed: what each running request computes in it.
#[derive(Debug, Clone)]
struct InFlight {
    end: f64,
    /// `(seq, new tokens)` of the requests in `Engine::running` that it computes, in running
    /// order. Every member of `Engine::decoders` computes one token in it as well.
    scheduled: Vec<(u64, u32)>,
}

/// A slot of [`Decoders`] that holds nobody.
const VACANT: u64 = u64::MAX;

/// Buckets on the ring of [`Decoders`]' ends.
const END_RING: u64 = 64;

/// The running requests in steady decode, advanced together: each computes one token per
/// step, so a step costs O(1) for all of them instead of O(batch). A member's `computed`
/// and `output` are as of shared step `g0`; the truth is those plus `g − g0`. It holds
/// `blocks_for(computed)` blocks between steps, so the members that need a new block in a
/// step are those whose `computed` is a multiple of [`BLOCK_SIZE`]: counted per phase,
/// `(computed − g) mod BLOCK_SIZE`, which does not change as they advance. Their ends
/// (`stop_at`, or a cut) are known, and wait on a ring of buckets by the step they end at
/// (one further turn of the ring for each [`END_RING`] steps still to go).
///
/// This is bookkeeping, not a model: every decision (budget, blocks, preemption, order) is
/// the one the request-by-request scheduler makes, and whenever the shortcut cannot prove
/// that (the cache is short, the budget is smaller than the batch, the order is not plain),
/// the members return to the plain list first.
#[derive(Debug, Clone, Default)]
struct Decoders {
    slots: Vec<Req>,
    vacant: Vec<u32>,
    len: u32,
    /// Steps the members took together.
    g: u64,
    /// `Σ computed` over the members.
    computed_sum: u64,
    /// Members per phase.
    phase: [u32; BLOCK_SIZE as usize],
    /// `(seq, slot)` of the members ending at a step, at the step modulo [`END_RING`].
    /// An entry is checked when its bucket comes round: it is stale when its slot changed
    /// hands or its member left and came back (it has another entry then).
    ends: Vec<Vec<(u64, u32)>>,
    /// At least the largest member seq (so `Engine::running` is after them when its first
    /// seq is larger).
    max_seq: u64,
    /// When the members last produced a token (they all did, at the last step's end).
    last_t: f64,
    /// Members marked cancelled while a step was in flight.
    cancelled: u32,
}

impl Decoders {
    fn phase_of(&self, computed: u64) -> usize {
        (computed.wrapping_sub(self.g) % u64::from(BLOCK_SIZE)) as usize
    }

    /// Members that need a block to compute their next token.
    fn blocks_needed(&self) -> u32 {
        self.phase[self.phase_of(0)]
    }

    /// Adds `r`, which produced a token at `last_t` and ends `left` tokens later.
    fn insert(&mut self, mut r: Req, left: u32) {
        debug_assert_eq!(r.blocks, blocks_for(r.computed).saturating_sub(r.pb));
        r.g0 = self.g;
        self.computed_sum += r.computed;
        self.phase[self.phase_of(r.computed)] += 1;
        self.max_seq = self.max_seq.max(r.seq);
        let end = self.g + u64::from(left);
        let seq = r.seq;
        let slot = match self.vacant.pop() {
            Some(i) => {
                self.slots[i as usize] = r;
                i
            }
            None => {
                self.slots.push(r);
                (self.slots.len() - 1) as u32
            }
        };
        if self.ends.is_empty() {
            self.ends = vec![Vec::new(); END_RING as usize];
        }
        self.ends[(end % END_RING) as usize].push((seq, slot));
        self.len += 1;
    }

    /// Removes the member in `slot`, written up to date (between steps: it holds the blocks
    /// of what it computed).
    fn take(&mut self, slot: u32) -> Req {
        let (g, last_t) = (self.g, self.last_t);
        let r = &mut self.slots[slot as usize];
        let d = g - r.g0;
        r.computed += d;
        r.output += d as u32;
        if d > 0 {
            r.last_token = last_t;
        }
        r.g0 = g;
        r.blocks = blocks_for(r.computed).saturating_sub(r.pb);
        let out = r.clone();
        r.seq = VACANT;
        self.vacant.push(slot);
        self.len -= 1;
        self.computed_sum -= out.computed;
        let k = self.phase_of(out.computed);
        self.phase[k] -= 1;
        if self.len == 0 {
            self.reset();
        }
        out
    }

    fn reset(&mut self) {
        self.slots.clear();
        self.vacant.clear();
        self.len = 0;
        self.computed_sum = 0;
        self.phase = [0; BLOCK_SIZE as usize];
        self.max_seq = 0;
        self.cancelled = 0;
    }

    fn live_slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.slots.len() as u32).filter(|&i| self.slots[i as usize].seq != VACANT)
    }
}

/// The engine. See the module documentation.
#[derive(Debug, Clone)]
pub struct Engine {
    cfg: EngineConfig,
    cost: CostModel,
    plan: MemoryPlan,
    pool: BlockPool,
    waiting: VecDeque<Req>,
    running: Vec<Req>,
    in_flight: Option<InFlight>,
    now: f64,
    next_id: u64,
    rng: Rng,
    stats: Stats,
    clock: f64,
    seen_prefill: bool,
    seen_decode: bool,
    /// Whether [`Engine::advance`] reports every output token (`true`, what a server needs to
    /// stream) or only finished requests (a statistics-only rehearsal: the counters and
    /// histograms are the same, the events a hundred times fewer).
    token_events: bool,
    /// Some running request is marked cancelled (so `reap_aborted` has work).
    cancel_pending: bool,
    /// The last step's schedule, kept for its allocation.
    spare_scheduled: Vec<(u64, u32)>,
    /// Running requests in steady decode; the rest of the batch is in `running`.
    decoders: Decoders,
    /// The next [`Req::seq`].
    next_seq: u64,
    /// What ended in the last step, kept for the allocation.
    spare_finished: Vec<(Req, FinishReason, bool)>,
    /// Positions in `running` of what ended in the last step, kept for the allocation.
    spare_ended: Vec<(usize, FinishReason, bool)>,
    /// Whether steady decoders join `decoders` (off only in the test that holds the
    /// shortcut to the plain scheduler).
    shortcut: bool,
    /// The last step's start and end: with async scheduling the step that follows it back to
    /// back was planned at its start, so only requests ready by then join it.
    planned_at: Option<(f64, f64)>,
}

impl Engine {
    /// Starts an engine (its clock at 0), or says why the configuration cannot run.
    pub fn new(cfg: EngineConfig) -> Result<Engine, MemoryError> {
        let plan = cfg.memory_plan()?;
        let stats = Stats::new(cfg.max_model_len, plan.num_blocks);
        Ok(Engine {
            cost: cfg.cost_model(),
            pool: if cfg.prefix_caching && !cfg.instant {
                BlockPool::with_prefix_cache(plan.num_blocks)
            } else {
                BlockPool::new(plan.num_blocks)
            },
            plan,
            waiting: VecDeque::new(),
            running: Vec::new(),
            in_flight: None,
            now: 0.0,
            next_id: 0,
            rng: Rng::new(cfg.seed),
            stats,
            clock: cfg.warmup.idle_clock_fraction.clamp(0.05, 1.0),
            seen_prefill: false,
            seen_decode: false,
            token_events: true,
            cfg,
            cancel_pending: false,
            spare_scheduled: Vec::new(),
            decoders: Decoders::default(),
            next_seq: 0,
            spare_finished: Vec::new(),
            spare_ended: Vec::new(),
            shortcut: true,
            planned_at: None,
        })
    }

    /// Reports every output token as an event (the default) or, with `false`, only requests
    /// that finished. What the engine computes and counts is the same either way.
    pub fn set_token_events(&mut self, on: bool) {
        self.token_events = on;
    }

    /// Records only the histograms `on` accepts (all of them by default); the others stay
    /// empty. For runs that read a few of vLLM's families (a rehearsal's queries): every
    /// other count, and every decision, is the same either way.
    pub fn record_histograms(&mut self, on: &dyn Fn(EngineHistogram) -> bool) {
        for h in EngineHistogram::ALL {
            self.stats.histogram_mut(h).set_recording(on(h));
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The memory layout (KV blocks).
    pub fn memory(&self) -> &MemoryPlan {
        &self.plan
    }

    /// The cost model.
    pub fn cost_model(&self) -> &CostModel {
        &self.cost
    }

    /// Everything counted so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The full blocks from the start of a `prompt_tokens`-token prompt holding `blocks`
    /// that this engine's prefix cache holds now (0 without prefix caching): what a
    /// prefix-aware router asks each replica.
    pub fn cached_blocks(&self, prompt_tokens: u32, blocks: &PromptBlocks) -> u32 {
        if matches!(blocks, PromptBlocks::Own) || !self.pool.caches_prefixes() {
            return 0;
        }
        let full = prompt_tokens / BLOCK_SIZE;
        self.pool.hits(
            (0..full).map_while(|i| shared_key(blocks, prompt_tokens, i)),
            full,
        )
    }

    /// The engine's clock: the end of the last step processed, or the last submission.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// GPU clocks as a fraction of boost (for telemetry).
    pub fn clock_fraction(&self) -> f64 {
        self.clock
    }

    /// When each request not yet finished arrived (queued or running), in no set order.
    pub fn arrivals_in_progress(&self) -> impl Iterator<Item = f64> + '_ {
        let d = &self.decoders;
        self.waiting
            .iter()
            .chain(&self.running)
            .map(|r| r.arrival)
            .chain(d.live_slots().map(|i| d.slots[i as usize].arrival))
    }

    /// Whether nothing is queued, running or in flight.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.running.is_empty()
            && self.decoders.len == 0
            && self.in_flight.is_none()
    }

    /// Frees what an idle engine holds beyond its statistics (its prefix cache, its queues'
    /// allocations): for a replica that left.
    pub fn shed(&mut self) {
        if !self.is_idle() {
            return;
        }
        self.pool.shed();
        self.waiting = VecDeque::new();
        self.running = Vec::new();
        self.spare_scheduled = Vec::new();
        self.spare_finished = Vec::new();
        self.spare_ended = Vec::new();
        self.decoders.slots = Vec::new();
        self.decoders.vacant = Vec::new();
        // With no member every entry is stale.
        for bucket in &mut self.decoders.ends {
            *bucket = Vec::new();
        }
    }

    /// Adds a request arriving at `now` and returns its id. The caller has checked it against
    /// `max_model_len`.
    pub fn submit(&mut self, spec: RequestSpec, now: f64) -> u64 {
        self.submit_with_cut(spec, now, None)
    }

    /// [`Engine::submit`], ending the request with `reason` once it has `tokens` output tokens
    /// (the simulator's stop strings and tool calls, whose end its deterministic text
    /// decides in advance, and its cut and malformed-stream faults: the engine and the client
    /// agree on how the request ended, with no race between the cut and the last tokens). A
    /// `Stop` or `Length` cut ends the request normally; `Abort` and `Error` do not count it
    /// as finished.
    pub fn submit_with_cut(
        &mut self,
        spec: RequestSpec,
        now: f64,
        cut: Option<(u32, FinishReason)>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let natural = match (spec.ignore_eos, self.cfg.output_length) {
            (true, _) | (false, OutputLength::MaxTokens) => u32::MAX,
            (false, OutputLength::LogNormal { median, sigma }) => {
                let z = self.rng.normal();
                (median.ln() + sigma * z)
                    .exp()
                    .round()
                    .clamp(1.0, f64::from(u32::MAX)) as u32
            }
        };
        let max_tokens = spec.max_tokens.max(1);
        let frontend = if self.cost.is_instant() {
            0.0
        } else {
            self.cfg.overheads.frontend_s
        };
        self.advance_idle_clock(now);
        self.now = self.now.max(now);
        self.stats.now = self.now;
        self.waiting.push_back(Req {
            id,
            seq: VACANT,
            g0: 0,
            prompt: spec.prompt_tokens.max(1),
            max_tokens,
            stop_at: max_tokens.min(natural),
            cut,
            arrival: now,
            ready: now + frontend,
            output: 0,
            computed: 0,
            blocks: 0,
            first_scheduled: None,
            first_token: None,
            last_token: now,
            preemptions: 0,
            cancelled: None,
            blocks_of: PromptBlocks::Own,
            pb: 0,
        });
        self.stats.waiting = self.waiting_now();
        id
    }

    /// [`Engine::submit`] for a prompt that starts with a shared `prefix`.
    pub fn submit_shared(&mut self, spec: RequestSpec, prefix: Prefix, now: f64) -> u64 {
        self.submit_with(spec, now, None, PromptBlocks::Shared(prefix))
    }

    /// [`Engine::submit_with_cut`] with what the prompt's blocks hold.
    pub fn submit_with(
        &mut self,
        spec: RequestSpec,
        now: f64,
        cut: Option<(u32, FinishReason)>,
        blocks: PromptBlocks,
    ) -> u64 {
        let id = self.submit_with_cut(spec, now, cut);
        if let Some(r) = self.waiting.back_mut() {
            r.blocks_of = blocks;
        }
        id
    }

    /// Requests in the scheduler's queue now: through the frontend (tokenised, handed to the
    /// engine core) and not yet running, as `vllm:num_requests_waiting` counts them.
    fn waiting_now(&self) -> u32 {
        self.waiting.partition_point(|r| r.ready <= self.now) as u32
    }

    /// Lets go of everything `r` holds: its private blocks and its prompt's cache entries.
    fn release(pool: &mut BlockPool, r: &mut Req) {
        pool.release(&mut r.blocks);
        if r.pb > 0 {
            pool.unhold(&r.block_keys(r.pb));
            r.pb = 0;
        }
    }

    /// Admits waiting request `r` to compute `n` more tokens: with prefix caching, a request
    /// holding nothing first takes its prompt's full blocks as cache entries, skipping the
    /// computed ones it finds (never the whole prompt: at least its last token is computed,
    /// as vLLM does); then its private blocks. False (and nothing held) when the cache is
    /// short. Returns the tokens it computes this step.
    fn admit(
        pool: &mut BlockPool,
        stats: &mut Stats,
        r: &mut Req,
        budget: u32,
        chunked: bool,
    ) -> Option<u32> {
        let mut hits = 0;
        let mut keys = Vec::new();
        if pool.caches_prefixes() && r.pb == 0 && r.computed == 0 {
            let full = r.prompt / BLOCK_SIZE;
            keys = r.block_keys(full);
            hits = pool.hits(keys.iter().copied(), (r.prompt - 1) / BLOCK_SIZE);
            // Whether the prompt's entries and the private blocks of this step's tokens both
            // fit, before holding anything (a request that waits at the head of the queue
            // would otherwise hold and let go of its prompt every step).
            let computed = u64::from(hits * BLOCK_SIZE);
            let want = r.total() - computed;
            let n = if want > u64::from(budget) {
                if !chunked {
                    return None;
                }
                u64::from(budget)
            } else {
                want
            };
            let private = blocks_for(computed + n).saturating_sub(full);
            if pool.hold_cost(&keys) + private > pool.available() {
                return None;
            }
            if !pool.hold(&keys) {
                return None;
            }
            r.pb = full;
            r.computed = u64::from(hits * BLOCK_SIZE);
        }
        let want = r.total() - r.computed;
        let n = if want > u64::from(budget) {
            if !chunked { None } else { Some(budget) }
        } else {
            Some(want as u32)
        };
        match n {
            Some(n) if pool.grow(&mut r.blocks, r.computed + u64::from(n), r.pb) => {
                if !keys.is_empty() || hits > 0 {
                    stats.prefix_cache_queries += u64::from(r.prompt);
                    stats.prefix_cache_hits += u64::from(hits * BLOCK_SIZE);
                }
                Some(n)
            }
            _ => {
                if !keys.is_empty() {
                    pool.unhold(&keys);
                    r.pb = 0;
                    r.computed = 0;
                }
                None
            }
        }
    }

    /// Cancels a request (its client went away); `abort` is counted when the engine lets go of
    /// it. Returns false when the request is unknown or already finished.
    pub fn abort(&mut self, id: u64, now: f64, events: &mut Vec<Event>) -> bool {
        self.cancel(id, now, FinishReason::Abort, events)
    }

    /// Ends a request early with `reason` (`abort` for a client that left, `error` for a
    /// failure). Returns false when the request is unknown or already finished.
    pub fn cancel(
        &mut self,
        id: u64,
        now: f64,
        reason: FinishReason,
        events: &mut Vec<Event>,
    ) -> bool {
        if let Some(r) = self.running.iter_mut().find(|r| r.id == id) {
            r.cancelled = Some(reason);
            self.cancel_pending = true;
            if self.in_flight.is_none() {
                self.reap_aborted(now.max(self.now), events);
            }
            return true;
        }
        let d = &self.decoders;
        let found = d.live_slots().find(|&i| d.slots[i as usize].id == id);
        if let Some(slot) = found {
            if self.in_flight.is_some() {
                // It computes its token in the step in flight; `complete` takes it out.
                let r = &mut self.decoders.slots[slot as usize];
                if r.cancelled.is_none() {
                    r.cancelled = Some(reason);
                    self.decoders.cancelled += 1;
                }
            } else {
                let mut r = self.decoders.take(slot);
                r.cancelled = Some(reason);
                self.insert_running(r);
                self.cancel_pending = true;
                self.reap_aborted(now.max(self.now), events);
            }
            return true;
        }
        if let Some(pos) = self.waiting_position(id) {
            if let Some(mut r) = self.waiting.remove(pos) {
                Self::release(&mut self.pool, &mut r);
                self.finish(r, reason, now.max(self.now), events);
            }
            self.stats.waiting = self.waiting_now();
            return true;
        }
        false
    }

    /// Where request `id` waits. The queue is in id order but for a request preempted twice
    /// in a row (first come, first served, and a preempted request goes back to the front),
    /// so a binary search finds it in a queue of thousands (a client timing out the oldest
    /// ones, which are near the front, in an overloaded rehearsal), and a scan the rest.
    fn waiting_position(&self, id: u64) -> Option<usize> {
        match self.waiting.binary_search_by_key(&id, |r| r.id) {
            Ok(p) => Some(p),
            Err(_) => self.waiting.iter().position(|r| r.id == id),
        }
    }

    /// Puts `r` back in `running` at its place in the batch's order.
    fn insert_running(&mut self, r: Req) {
        let at = self.running.partition_point(|x| x.seq < r.seq);
        self.running.insert(at, r);
    }

    /// Returns every member of the decoders to `running`, in the batch's order.
    fn materialize(&mut self) {
        let slots: Vec<u32> = self.decoders.live_slots().collect();
        for slot in slots {
            let r = self.decoders.take(slot);
            self.running.push(r);
        }
        self.running.sort_unstable_by_key(|r| r.seq);
    }

    /// When something next happens without new input: the end of the step in flight, or the
    /// moment a queued request becomes schedulable. `None` when idle.
    pub fn next_event_time(&self) -> Option<f64> {
        if let Some(f) = &self.in_flight {
            return Some(f.end);
        }
        if !self.running.is_empty() || self.decoders.len > 0 {
            return Some(self.now);
        }
        self.waiting.front().map(|r| r.ready.max(self.now))
    }

    /// Runs every step that ends at or before `until`, appending what happened to `events`:
    /// in time order, and at one instant a request's events in their order (its token, then
    /// its end), the requests in no particular order.
    #[inline]
    pub fn advance(&mut self, until: f64, events: &mut Vec<Event>) {
        // The common case of a fleet's many calls: the step in flight ends later.
        if self.in_flight.as_ref().is_some_and(|f| f.end > until) {
            return;
        }
        self.run_until(until, events);
    }

    fn run_until(&mut self, until: f64, events: &mut Vec<Event>) {
        loop {
            if let Some(f) = &self.in_flight {
                if f.end > until {
                    break;
                }
                let f = self.in_flight.take().expect("checked above");
                self.complete(f, events);
                continue;
            }
            let Some(start) = self.next_event_time() else {
                break;
            };
            if start > until {
                break;
            }
            self.advance_idle_clock(start);
            self.now = self.now.max(start);
            if !self.start_step(events) {
                // Nothing schedulable now (requests not yet through the frontend): wait.
                match self.waiting.front() {
                    Some(r) if r.ready > self.now => {
                        if r.ready > until {
                            break;
                        }
                        continue;
                    }
                    _ => break,
                }
            }
        }
        self.stats.now = self.now;
    }

    fn advance_idle_clock(&mut self, t: f64) {
        if self.in_flight.is_none() && t > self.now {
            let w = &self.cfg.warmup;
            let idle = (t - self.now).max(0.0);
            let floor = w.idle_clock_fraction;
            self.clock = floor + (self.clock - floor) * (-idle / w.clock_decay_s.max(1e-9)).exp();
        }
    }

    /// vLLM V1's `schedule()`: running requests first (decode tokens, then the rest of a
    /// partial prefill), preempting the most recently added request by recompute when the
    /// KV cache is full; then waiting requests while sequences, budget and blocks allow.
    /// Returns whether a step started.
    fn start_step(&mut self, events: &mut Vec<Event>) -> bool {
        self.reap_aborted(self.now, events);
        let mut budget = self.cfg.max_num_batched_tokens;
        let mut scheduled = std::mem::take(&mut self.spare_scheduled);
        scheduled.clear();
        let mut shape = StepShape::default();
        self.schedule_decoders(&mut budget, &mut shape);
        let preempted = self.schedule_running(&mut budget, &mut scheduled, &mut shape);
        if !preempted {
            let cutoff = self.admission_cutoff(&scheduled);
            self.admit_waiting(budget, cutoff, &mut scheduled, &mut shape);
        }
        self.stats.running = self.running.len() as u32 + self.decoders.len;
        self.stats.waiting = self.waiting_now();
        self.stats.kv_usage = self.pool.usage();
        if scheduled.is_empty() && self.decoders.len == 0 {
            self.spare_scheduled = scheduled;
            return false;
        }
        let duration = self.step_duration(&shape);
        self.in_flight = Some(InFlight {
            end: self.now + duration,
            scheduled,
        });
        self.planned_at = Some((self.now, self.now + duration));
        true
    }

    /// The decoders first: they are the front of the batch. When the cache holds their new
    /// blocks and the budget their tokens, they are scheduled as the plain list would schedule
    /// them one by one; otherwise they rejoin the plain list and go through it.
    fn schedule_decoders(&mut self, budget: &mut u32, shape: &mut StepShape) {
        if self.decoders.len == 0 {
            return;
        }
        let d = &self.decoders;
        let ordered = self.running.first().is_none_or(|r| r.seq > d.max_seq);
        if ordered && d.len <= *budget && self.pool.take(d.blocks_needed()) {
            *budget -= d.len;
            shape.decode_seqs += d.len;
            shape.decode_context_tokens += d.computed_sum + u64::from(d.len);
            shape.sampled += d.len;
        } else {
            self.materialize();
        }
    }

    /// The running requests in order, each its next chunk within the budget, preempting the
    /// lowest-priority request (the one added last) while the cache cannot hold a chunk.
    /// Returns whether any request was preempted.
    fn schedule_running(
        &mut self,
        budget: &mut u32,
        scheduled: &mut Vec<(u64, u32)>,
        shape: &mut StepShape,
    ) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let want = self.running[i].total() - self.running[i].computed;
            let n = want.min(u64::from(*budget)) as u32;
            if n == 0 {
                i += 1;
                continue;
            }
            let mut ok = false;
            loop {
                let r = &mut self.running[i];
                if self
                    .pool
                    .grow(&mut r.blocks, r.computed + u64::from(n), r.pb)
                {
                    ok = true;
                    break;
                }
                let Some(mut victim) = self.running.pop() else {
                    break;
                };
                let was_self = self.running.len() == i;
                Self::release(&mut self.pool, &mut victim);
                victim.computed = 0;
                victim.preemptions += 1;
                self.stats.preemptions += 1;
                preempted = true;
                self.waiting.push_front(victim);
                if was_self {
                    break;
                }
            }
            if !ok {
                break;
            }
            scheduled.push((self.running[i].seq, n));
            Self::add_to_shape(shape, &self.running[i], n);
            *budget -= n;
            i += 1;
        }
        preempted
    }

    /// The latest arrival this step may admit. With async scheduling and steps back to back,
    /// this step was planned when the one before it started: what became ready later waits
    /// for the next. A step that would otherwise be empty is planned now (the pipeline had
    /// drained).
    fn admission_cutoff(&self, scheduled: &[(u64, u32)]) -> f64 {
        match self.planned_at {
            Some((start, end))
                if self.cfg.overheads.async_scheduling
                    && !self.cfg.enforce_eager
                    && end == self.now
                    && !(scheduled.is_empty() && self.decoders.len == 0) =>
            {
                start
            }
            _ => self.now,
        }
    }

    /// Waiting requests ready by `cutoff`, in order, while the budget, the batch and the cache
    /// take them.
    fn admit_waiting(
        &mut self,
        mut budget: u32,
        cutoff: f64,
        scheduled: &mut Vec<(u64, u32)>,
        shape: &mut StepShape,
    ) {
        while budget > 0 && (self.running.len() as u32 + self.decoders.len) < self.cfg.max_num_seqs
        {
            let Some(r) = self.waiting.front_mut() else {
                break;
            };
            if r.ready > cutoff {
                break;
            }
            let Some(n) = Self::admit(
                &mut self.pool,
                &mut self.stats,
                r,
                budget,
                self.cfg.chunked_prefill,
            ) else {
                break;
            };
            let Some(mut r) = self.waiting.pop_front() else {
                break;
            };
            if r.first_scheduled.is_none() {
                r.first_scheduled = Some(self.now);
                self.stats.queue_time.observe(self.now - r.arrival);
            }
            r.seq = self.next_seq;
            self.next_seq += 1;
            scheduled.push((r.seq, n));
            Self::add_to_shape(shape, &r, n);
            budget -= n;
            self.running.push(r);
        }
    }

    /// How long a step of `shape` takes (the cost model, the first passes' warm-up, an
    /// injected slowdown), counted into the statistics; the clocks ramp up meanwhile.
    fn step_duration(&mut self, shape: &StepShape) -> f64 {
        let mut cost = self.cost.step(shape, 1.0 / self.clock);
        let mut duration = cost.total_s;
        if !self.cost.is_instant() {
            if shape.prefill_seqs > 0 && !self.seen_prefill {
                self.seen_prefill = true;
                duration += self.cfg.warmup.first_pass_s;
            }
            if shape.decode_seqs > 0 && !self.seen_decode {
                self.seen_decode = true;
                duration += self.cfg.warmup.first_pass_s;
            }
        }
        if let Some((factor, at)) = self.cfg.slowdown
            && self.now >= at
        {
            duration *= factor.max(0.0);
            cost.gpu_s *= factor.max(0.0);
        }
        let s = &mut self.stats;
        s.steps += 1;
        s.busy_s += duration;
        s.gpu_busy_s += cost.gpu_s.min(duration);
        s.gpu_memory_bound_s += cost.gpu_s.min(duration) * cost.memory_bound;
        s.bytes += cost.bytes;
        s.flops += cost.flops;
        s.iteration_tokens.observe(f64::from(shape.tokens()));
        if self.clock < 1.0 {
            // At full clocks this stays 1 (1 − 0 × anything): no exponential to take.
            let w = self.cfg.warmup;
            self.clock = 1.0 - (1.0 - self.clock) * (-duration / w.clock_ramp_s.max(1e-9)).exp();
        }
        duration
    }

    /// Adds request `r`, computing `n` tokens this step, to the step's shape (read before
    /// the step, as the scheduler hands it over).
    fn add_to_shape(s: &mut StepShape, r: &Req, n: u32) {
        {
            let is_decode = n == 1 && r.output > 0 && r.computed + 1 == r.total();
            if is_decode {
                s.decode_seqs += 1;
                s.decode_context_tokens += r.computed + 1;
            } else {
                let nf = f64::from(n);
                s.prefill_seqs += 1;
                s.prefill_tokens += n;
                s.prefill_context_tokens += r.computed;
                s.prefill_attention_pairs += nf * r.computed as f64 + nf * (nf + 1.0) / 2.0;
            }
            if r.computed + u64::from(n) == r.total() {
                s.sampled += 1;
            }
        }
    }

    /// Ends the step in flight at its end time: every scheduled request computed its tokens,
    /// those that produced one record it, those that reached their end finish, and what decodes
    /// next joins the decoders.
    fn complete(&mut self, f: InFlight, events: &mut Vec<Event>) {
        self.now = f.end;
        let t = f.end;
        self.rejoin_cancelled_decoders();
        let mut finished = std::mem::take(&mut self.spare_finished);
        finished.clear();
        self.advance_running(&f.scheduled, t, &mut finished, events);
        self.spare_scheduled = f.scheduled;
        let plain_ended = finished.len();
        self.advance_decoders(t, &mut finished, events);
        // Reported in the batch's order (the plain list's part is, reversed).
        finished[..plain_ended].reverse();
        if !finished.is_sorted_by_key(|f| f.0.seq) {
            finished.sort_unstable_by_key(|f| f.0.seq);
        }
        for (mut r, reason, normal) in finished.drain(..) {
            Self::release(&mut self.pool, &mut r);
            if normal {
                self.record_finished(&r, t);
            }
            self.finish(r, reason, t, events);
        }
        self.spare_finished = finished;
        self.reap_aborted(t, events);
        self.promote_decoders(t);
        self.stats.running = self.running.len() as u32 + self.decoders.len;
        self.stats.waiting = self.waiting_now();
        self.stats.kv_usage = self.pool.usage();
        self.stats.now = t;
    }

    /// Decoders cancelled during the step computed its token but produce nothing: they rejoin
    /// the plain list, where the reaper finds them.
    fn rejoin_cancelled_decoders(&mut self) {
        if self.decoders.cancelled == 0 {
            return;
        }
        let d = &self.decoders;
        let marked: Vec<u32> = d
            .live_slots()
            .filter(|&i| d.slots[i as usize].cancelled.is_some())
            .collect();
        for slot in marked {
            let mut r = self.decoders.take(slot);
            r.computed += 1;
            r.blocks = blocks_for(r.computed).saturating_sub(r.pb);
            self.insert_running(r);
            self.cancel_pending = true;
        }
        self.decoders.cancelled = 0;
    }

    /// The plain list's part of the step at `t`: each scheduled request computed its tokens;
    /// one that produced a token records it, and one that reached its end is removed from the
    /// running list into `finished` (in reverse batch order).
    fn advance_running(
        &mut self,
        scheduled: &[(u64, u32)],
        t: f64,
        finished: &mut Vec<(Req, FinishReason, bool)>,
        events: &mut Vec<Event>,
    ) {
        let mut ended = std::mem::take(&mut self.spare_ended);
        ended.clear();
        let mut j = 0;
        // Decoding requests mostly share one inter-token latency: record runs of equal
        // values with one bucket search.
        let mut itl_run = (0.0_f64, 0_u64);
        for &(seq, n) in scheduled {
            // Scheduled requests are still in `running`, in order (preemption happens only at
            // the start of a step); skip the ones that were not scheduled.
            while j < self.running.len() && self.running[j].seq != seq {
                j += 1;
            }
            let Some(r) = self.running.get_mut(j) else {
                break;
            };
            r.computed += u64::from(n);
            if r.computed < r.total() || r.cancelled.is_some() {
                continue;
            }
            r.output += 1;
            self.stats.generation_tokens += 1;
            match r.first_token {
                None => {
                    r.first_token = Some(t);
                    self.stats.prompt_tokens += u64::from(r.prompt);
                    if !self.pool.caches_prefixes() {
                        self.stats.prefix_cache_queries += u64::from(r.prompt);
                    }
                    self.stats.ttft.observe(t - r.arrival);
                    if let Some(s) = r.first_scheduled {
                        self.stats.prefill_time.observe(t - s);
                    }
                }
                Some(_) => {
                    let v = t - r.last_token;
                    if itl_run.1 > 0 && v.to_bits() == itl_run.0.to_bits() {
                        itl_run.1 += 1;
                    } else {
                        self.stats.itl.observe_repeated(itl_run.0, itl_run.1);
                        itl_run = (v, 1);
                    }
                }
            }
            r.last_token = t;
            if self.token_events {
                events.push(Event {
                    id: r.id,
                    t,
                    kind: EventKind::Token,
                    output_tokens: r.output,
                    prompt_tokens: r.prompt,
                    arrival: r.arrival,
                    first_token: None,
                    preemptions: 0,
                });
            }
            if let Some((n, reason)) = r.cut
                && r.output >= n
            {
                // A stop string ends a request normally; a fault's cut does not.
                ended.push((j, reason, reason.is_normal()));
            } else if r.output >= r.stop_at {
                let reason = if r.output >= r.max_tokens {
                    FinishReason::Length
                } else {
                    FinishReason::Stop
                };
                ended.push((j, reason, true));
            }
        }
        self.stats.itl.observe_repeated(itl_run.0, itl_run.1);
        // Removed from the back (each removal moves only the requests after it).
        for &(at, reason, normal) in ended.iter().rev() {
            finished.push((self.running.remove(at), reason, normal));
        }
        self.spare_ended = ended;
    }

    /// Every decoder computed and produced one token at `t`; those whose end came leave
    /// the decoders into `finished`.
    fn advance_decoders(
        &mut self,
        t: f64,
        finished: &mut Vec<(Req, FinishReason, bool)>,
        events: &mut Vec<Event>,
    ) {
        let d = &mut self.decoders;
        if d.len == 0 {
            return;
        }
        d.g += 1;
        d.computed_sum += u64::from(d.len);
        self.stats.generation_tokens += u64::from(d.len);
        self.stats
            .itl
            .observe_repeated(t - d.last_t, u64::from(d.len));
        d.last_t = t;
        if self.token_events {
            for slot in d.live_slots() {
                let r = &d.slots[slot as usize];
                events.push(Event {
                    id: r.id,
                    t,
                    kind: EventKind::Token,
                    output_tokens: r.output + (d.g - r.g0) as u32,
                    prompt_tokens: r.prompt,
                    arrival: r.arrival,
                    first_token: None,
                    preemptions: 0,
                });
            }
        }
        let at = (d.g % END_RING) as usize;
        // The bucket is worked in place: what waits another turn of the ring stays in it
        // (moved to the front), keeping its allocation.
        let mut due = std::mem::take(&mut d.ends[at]);
        let mut kept = 0;
        for i in 0..due.len() {
            let (seq, slot) = due[i];
            let Some(r) = d.slots.get(slot as usize).filter(|r| r.seq == seq) else {
                continue; // It left the decoders.
            };
            let left = u64::from(r.end()) - u64::from(r.output) - (d.g - r.g0);
            if left > 0 {
                if left.is_multiple_of(END_RING) {
                    due[kept] = (seq, slot); // Another turn of the ring.
                    kept += 1;
                }
                continue;
            }
            let r = d.take(slot);
            let (reason, normal) = match r.cut {
                Some((n, reason)) if r.output >= n => (reason, reason.is_normal()),
                _ if r.output >= r.max_tokens => (FinishReason::Length, true),
                _ => (FinishReason::Stop, true),
            };
            finished.push((r, reason, normal));
        }
        due.truncate(kept);
        debug_assert!(d.ends[at].is_empty());
        d.ends[at] = due;
    }

    /// What produced a token at `t` and decodes next joins the decoders.
    fn promote_decoders(&mut self, t: f64) {
        let d = &mut self.decoders;
        d.last_t = t;
        let shortcut = self.shortcut;
        self.running.retain(|r| {
            let decodes = shortcut
                && r.cancelled.is_none()
                && r.output > 0
                && r.last_token == t
                && r.computed + 1 == r.total();
            if decodes {
                debug_assert!(r.end() > r.output, "an ended request is not running");
                d.insert(r.clone(), r.end().saturating_sub(r.output));
            }
            !decodes
        });
    }

    fn reap_aborted(&mut self, t: f64, events: &mut Vec<Event>) {
        if !self.cancel_pending {
            return;
        }
        self.cancel_pending = false;
        while let Some(pos) = self.running.iter().position(|r| r.cancelled.is_some()) {
            let mut r = self.running.remove(pos);
            Self::release(&mut self.pool, &mut r);
            let reason = r.cancelled.unwrap_or(FinishReason::Abort);
            self.finish(r, reason, t, events);
        }
    }

    fn record_finished(&mut self, r: &Req, t: f64) {
        let s = &mut self.stats;
        s.e2e.observe(t - r.arrival);
        if let Some(start) = r.first_scheduled {
            s.inference_time.observe(t - start);
        }
        if let Some(first) = r.first_token {
            s.decode_time.observe(t - first);
            if r.output > 1 {
                s.tpot.observe((t - first) / f64::from(r.output - 1));
            }
        }
        s.request_prompt_tokens.observe(f64::from(r.prompt));
        s.request_generation_tokens.observe(f64::from(r.output));
        s.request_max_tokens.observe(f64::from(r.max_tokens));
        s.request_params_n.observe(1.0);
        s.num_preemptions.observe(f64::from(r.preemptions));
        s.prefill_kv_computed.observe(f64::from(r.prompt));
    }

    fn finish(&mut self, r: Req, reason: FinishReason, t: f64, events: &mut Vec<Event>) {
        self.stats.success[reason.index()] += 1;
        events.push(Event {
            id: r.id,
            t,
            kind: EventKind::Finished(reason),
            output_tokens: r.output,
            prompt_tokens: r.prompt,
            arrival: r.arrival,
            first_token: r.first_token,
            preemptions: r.preemptions,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::find_gpu;
    use crate::model::find_model;

    fn engine(gpu: &str, model: &str, f: impl FnOnce(&mut EngineConfig)) -> Engine {
        let mut c = EngineConfig::new(
            find_gpu(gpu).unwrap_or_else(|| unreachable!()),
            find_model(model).unwrap_or_else(|| unreachable!()),
        );
        f(&mut c);
        Engine::new(c).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A load: Poisson arrivals of mixed prompts and outputs, some cut short by a fault,
    /// some cancelled while queued, running or in a step.
    struct Load {
        rate: f64,
        duration: f64,
        prompt: (u32, u32),
        max_tokens: (u32, u32),
        cancel: f64,
        cut: f64,
        seed: u64,
    }

    /// Everything the engine says and counts under `load`: its events, and its statistics
    /// with the inter-token latency's sum apart (added in runs, it differs in rounding).
    fn run(mut e: Engine, load: &Load) -> (Vec<Event>, Stats, f64) {
        let mut rng = Rng::new(load.seed);
        let mut events = Vec::new();
        let mut live: Vec<u64> = Vec::new();
        let mut t = 0.0;
        let pick = |rng: &mut Rng, (lo, hi): (u32, u32)| {
            lo + (rng.next_u64() % u64::from(hi - lo + 1)) as u32
        };
        while t < load.duration {
            t += -rng.next_f64().max(1e-12).ln() / load.rate;
            e.advance(t, &mut events);
            let spec = RequestSpec {
                prompt_tokens: pick(&mut rng, load.prompt),
                max_tokens: pick(&mut rng, load.max_tokens),
                ignore_eos: rng.next_f64() < 0.5,
            };
            let cut = (rng.next_f64() < load.cut).then(|| {
                let reason = if rng.next_f64() < 0.5 {
                    FinishReason::Abort
                } else {
                    FinishReason::Error
                };
                (pick(&mut rng, (1, 50)), reason)
            });
            live.push(e.submit_with_cut(spec, t, cut));
            if rng.next_f64() < load.cancel {
                let id = live[(rng.next_u64() % live.len() as u64) as usize];
                e.cancel(id, t, FinishReason::Abort, &mut events);
            }
        }
        while let Some(next) = e.next_event_time() {
            e.advance(next, &mut events);
        }
        let mut stats = e.stats().clone();
        let itl_sum = std::mem::take(&mut stats.itl.sum);
        // One instant's events come request by request in no set order; each request's in
        // its own order (a token before the end).
        events.sort_by(|a, b| a.t.total_cmp(&b.t).then(a.id.cmp(&b.id)));
        (events, stats, itl_sum)
    }

    #[test]
    fn the_decode_shortcut_changes_nothing_the_plain_scheduler_does() {
        let cases: Vec<(&str, Engine, Load)> = vec![
            (
                "the seeds' deployment below saturation",
                engine("L40S", "Ministral-3-8B", |c| {
                    c.max_num_seqs = 128;
                    c.max_model_len = 8192;
                }),
                Load {
                    rate: 40.0,
                    duration: 20.0,
                    prompt: (34, 34),
                    max_tokens: (100, 100),
                    cancel: 0.0,
                    cut: 0.0,
                    seed: 1,
                },
            ),
            (
                "overloaded, mixed lengths",
                engine("L40S", "Ministral-3-8B", |c| {
                    c.max_num_seqs = 128;
                    c.max_model_len = 8192;
                }),
                Load {
                    rate: 80.0,
                    duration: 15.0,
                    prompt: (20, 200),
                    max_tokens: (50, 300),
                    cancel: 0.02,
                    cut: 0.02,
                    seed: 2,
                },
            ),
            (
                "a tight KV cache: preemption by recompute",
                engine("L4", "Llama-3.1-8B", |c| {
                    c.gpu_memory_utilization = 0.8;
                    c.max_model_len = 4096;
                    c.max_num_batched_tokens = 4096;
                    c.output_length = OutputLength::LogNormal {
                        median: 200.0,
                        sigma: 0.8,
                    };
                }),
                Load {
                    rate: 20.0,
                    duration: 20.0,
                    prompt: (100, 1500),
                    max_tokens: (100, 1500),
                    cancel: 0.05,
                    cut: 0.05,
                    seed: 3,
                },
            ),
            (
                "long prompts in small chunks",
                engine("H100", "Llama-3.1-8B", |c| c.max_num_batched_tokens = 512),
                Load {
                    rate: 15.0,
                    duration: 20.0,
                    prompt: (10, 3000),
                    max_tokens: (10, 400),
                    cancel: 0.05,
                    cut: 0.05,
                    seed: 4,
                },
            ),
            (
                "no chunked prefill",
                engine("H100", "Llama-3.1-8B", |c| {
                    c.chunked_prefill = false;
                    c.max_num_seqs = 64;
                }),
                Load {
                    rate: 30.0,
                    duration: 15.0,
                    prompt: (10, 2000),
                    max_tokens: (1, 300),
                    cancel: 0.1,
                    cut: 0.1,
                    seed: 5,
                },
            ),
            (
                "more sequences than the token budget",
                engine("L4", "Llama-3.1-8B", |c| {
                    c.max_num_seqs = 256;
                    c.max_num_batched_tokens = 64;
                    c.max_model_len = 2048;
                }),
                Load {
                    rate: 10.0,
                    duration: 20.0,
                    prompt: (10, 200),
                    max_tokens: (10, 200),
                    cancel: 0.02,
                    cut: 0.0,
                    seed: 6,
                },
            ),
        ];
        for (what, e, load) in cases {
            let mut plain = e.clone();
            plain.shortcut = false;
            let (ea, sa, ia) = run(plain, &load);
            let (eb, sb, ib) = run(e, &load);
            assert!(
                sa.steps > 100 && sa.ok() > 50,
                "{what}: the load is too light to tell"
            );
            assert_eq!(ea.len(), eb.len(), "{what}: events");
            for (a, b) in ea.iter().zip(&eb) {
                assert_eq!(a, b, "{what}");
            }
            assert_eq!(sa, sb, "{what}: statistics");
            assert!(
                (ia - ib).abs() <= 1e-9 * ia.abs().max(1.0),
                "{what}: ITL sum {ia} vs {ib}"
            );
        }
    }

    #[test]
    fn histograms_turned_off_stay_empty_and_change_nothing_else() {
        let load = Load {
            rate: 80.0,
            duration: 15.0,
            prompt: (20, 200),
            max_tokens: (50, 300),
            cancel: 0.02,
            cut: 0.02,
            seed: 2,
        };
        let e = engine("L40S", "Ministral-3-8B", |c| {
            c.max_num_seqs = 128;
            c.max_model_len = 8192;
        });
        let on = [EngineHistogram::EndToEnd, EngineHistogram::QueueTime];
        let mut few = e.clone();
        few.record_histograms(&|h| on.contains(&h));
        let (ea, sa, _) = run(e, &load);
        let (eb, mut sb, _) = run(few, &load);
        assert_eq!(ea, eb);
        for h in EngineHistogram::ALL {
            if on.contains(&h) {
                assert!(sb.histogram(h).count > 100, "{h:?}");
            } else {
                assert_eq!(sb.histogram(h).count, 0, "{h:?}");
                assert!(sa.histogram(h).count > 0, "{h:?}");
                *sb.histogram_mut(h) = sa.histogram(h).clone();
            }
        }
        assert_eq!(sa, sb);
    }
}
