//! The paged KV cache: how many blocks fit (vLLM's memory profiling rule) and who holds them.

use crate::hardware::GpuSpec;
use crate::model::{ModelSpec, WeightDtype};

/// Tokens per KV block (vLLM's default).
pub const BLOCK_SIZE: u32 = 16;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How the GPU memory of one rank is spent, in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryPlan {
    /// `total × gpu_memory_utilization`.
    pub requested: f64,
    /// The weights on this rank.
    pub weights: f64,
    /// Peak activations of the profiling forward pass (`max_num_batched_tokens` tokens) and
    /// the sampler run over `max_num_seqs` requests.
    pub activations: f64,
    /// CUDA context growth, communication buffers, and captured graphs.
    pub other: f64,
    /// What is left for the KV cache.
    pub kv_cache: f64,
    /// KV bytes of one block on this rank.
    pub block_bytes: f64,
    /// Blocks in the pool.
    pub num_blocks: u32,
}

impl MemoryPlan {
    /// Tokens the KV cache holds.
    pub fn kv_tokens(&self) -> u64 {
        u64::from(self.num_blocks) * u64::from(BLOCK_SIZE)
    }
}

/// Why a configuration cannot start.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryError {
    /// The weights and activations do not leave room for any KV cache.
    NoRoom {
        /// The plan that came out negative.
        plan: MemoryPlan,
    },
    /// One request of `max_model_len` tokens would not fit in the whole cache.
    ContextTooLong {
        /// `max_model_len`.
        max_model_len: u32,
        /// Tokens the cache holds.
        kv_tokens: u64,
    },
}

impl std::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryError::NoRoom { plan } => write!(
                f,
                "no memory left for the KV cache: {:.2} GiB requested (gpu_memory_utilization × memory), \
                 weights {:.2} GiB + activations {:.2} GiB + other {:.2} GiB per GPU; \
                 raise --gpu-memory-utilization or --tensor-parallel-size, or lower --max-num-batched-tokens",
                plan.requested / GIB,
                plan.weights / GIB,
                plan.activations / GIB,
                plan.other / GIB
            ),
            MemoryError::ContextTooLong {
                max_model_len,
                kv_tokens,
            } => write!(
                f,
                "the model's max seq len ({max_model_len}) is larger than the maximum number of tokens \
                 that can be stored in KV cache ({kv_tokens}); lower --max-model-len"
            ),
        }
    }
}

impl std::error::Error for MemoryError {}

/// Plans one rank's memory as vLLM's worker does at start-up
/// (`requested − weights − peak activations − non-torch − graphs`, divided into blocks).
#[allow(clippy::too_many_arguments)]
pub fn plan_memory(
    gpu: &GpuSpec,
    model: &ModelSpec,
    dtype: WeightDtype,
    kv_bytes_per_token: f64,
    tp: u32,
    gpu_memory_utilization: f64,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
    max_model_len: u32,
    enforce_eager: bool,
) -> Result<MemoryPlan, MemoryError> {
    let tp_f = f64::from(tp.max(1));
    let requested = gpu.memory_bytes() * gpu_memory_utilization;
    let weights = model.loaded_bytes(dtype) / tp_f;
    let t = f64::from(max_num_batched_tokens);
    // The widest point of a layer: the residual stream plus the gate/up projection (2 × FFN).
    let per_token =
        (4.0 * f64::from(model.hidden) + 2.0 * f64::from(model.intermediate) / tp_f) * 2.0;
    // The sampler's dummy run: fp32 logits and probabilities for max_num_seqs requests.
    let sampler =
        f64::from(max_num_seqs.min(max_num_batched_tokens)) * f64::from(model.vocab) * 4.0 * 2.0;
    let activations = t * per_token + sampler;
    let other = 0.4 * GIB
        + if tp > 1 { 0.3 * GIB } else { 0.0 }
        + if enforce_eager { 0.0 } else { 0.5 * GIB };
    let block_bytes = kv_bytes_per_token * f64::from(BLOCK_SIZE);
    let kv_cache = requested - weights - activations - other;
    let num_blocks = if kv_cache > 0.0 {
        (kv_cache / block_bytes).floor() as u32
    } else {
        0
    };
    let plan = MemoryPlan {
        requested,
        weights,
        activations,
        other,
        kv_cache,
        block_bytes,
        num_blocks,
    };
    if num_blocks == 0 {
        return Err(MemoryError::NoRoom { plan });
    }
    if u64::from(max_model_len) > plan.kv_tokens() {
        return Err(MemoryError::ContextTooLong {
            max_model_len,
            kv_tokens: plan.kv_tokens(),
        });
    }
    Ok(plan)
}

/// A full block's identity in the prefix cache: the content it holds (a shared prefix's key,
/// or a request's own) and its index from the start of the prompt. vLLM hashes each full
/// block together with its parent's hash, so a block's identity is its content and position:
/// two requests share block `i` only when they share every token up to it, which is what one
/// key for a prefix and its index say.
pub type BlockKey = (u64, u32);

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Requests holding it.
    refs: u32,
    /// Its place in the eviction order while nobody holds it.
    stamp: u64,
}

/// vLLM V1's prefix cache over full blocks: a block is cached as soon as it is allocated for
/// the tokens a step computes (so a request scheduled later, even in the same step, reuses
/// it: the forward pass writes each layer's KV before that layer's attention reads it), and
/// stays cached after its requests let go of it, among the free blocks, until an allocation
/// needs it (least recently freed first).
#[derive(Debug, Clone, Default)]
struct PrefixCache {
    /// Keyed by what is already a hash: [`inferscale_rng::FastHash`] (SipHash cost a fifth
    /// of a rehearsal's time).
    entries: std::collections::HashMap<BlockKey, Entry, inferscale_rng::FastHash>,
    /// Cached blocks nobody holds, in the order they were freed (the free queue's order),
    /// with their stamp. A block held again stays in the queue until it reaches the front,
    /// where its stamp (no longer its entry's, or its entry held) shows it is not
    /// evictable: a removal from the middle costs nothing.
    evictable: std::collections::VecDeque<(u64, BlockKey)>,
    /// How many of `evictable` are still evictable.
    evictable_len: u32,
    next_stamp: u64,
}

impl PrefixCache {
    /// Takes the least recently freed block nobody holds out of the cache.
    fn evict_one(&mut self) -> bool {
        while let Some((stamp, key)) = self.evictable.pop_front() {
            if self
                .entries
                .get(&key)
                .is_some_and(|e| e.refs == 0 && e.stamp == stamp)
            {
                self.entries.remove(&key);
                self.evictable_len -= 1;
                return true;
            }
        }
        false
    }
}

/// The block pool: a count of free blocks and, per request, how many it holds privately;
/// with prefix caching, the prompt's full blocks are held as shared, refcounted cache
/// entries instead.
#[derive(Debug, Clone)]
pub struct BlockPool {
    total: u32,
    /// Blocks neither held nor cached.
    free: u32,
    cache: Option<PrefixCache>,
}

impl BlockPool {
    /// A pool of `total` blocks, all free, without prefix caching.
    pub fn new(total: u32) -> Self {
        BlockPool {
            total,
            free: total,
            cache: None,
        }
    }

    /// A pool of `total` blocks with vLLM's prefix cache.
    pub fn with_prefix_cache(total: u32) -> Self {
        BlockPool {
            total,
            free: total,
            cache: Some(PrefixCache::default()),
        }
    }

    /// Whether full prompt blocks are cached.
    pub fn caches_prefixes(&self) -> bool {
        self.cache.is_some()
    }

    /// Blocks in the pool.
    pub fn total(&self) -> u32 {
        self.total
    }

    fn evictable(&self) -> u32 {
        self.cache.as_ref().map_or(0, |c| c.evictable_len)
    }

    /// Blocks an allocation can take: the free ones and the cached ones nobody holds.
    pub fn available(&self) -> u32 {
        self.free + self.evictable()
    }

    /// Blocks in use (held by a request).
    pub fn used(&self) -> u32 {
        self.total - self.available()
    }

    /// Fraction of blocks in use, `vllm:kv_cache_usage_perc` (cached blocks nobody holds
    /// count as free, as vLLM counts them).
    pub fn usage(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            f64::from(self.used()) / f64::from(self.total)
        }
    }

    /// Takes `n` blocks, evicting cached ones nobody holds (least recently freed first) when
    /// the free ones run out; false (and nothing taken) when fewer are available.
    pub fn take(&mut self, n: u32) -> bool {
        if n > self.available() {
            return false;
        }
        while self.free < n {
            let Some(c) = self.cache.as_mut() else {
                return false;
            };
            if !c.evict_one() {
                return false;
            }
            self.free += 1;
        }
        self.free -= n;
        true
    }

    /// Grows `held` (private blocks) to cover `tokens` tokens, of which the first `shared`
    /// blocks are held as cache entries; false (and nothing taken) when the pool is short.
    pub fn grow(&mut self, held: &mut u32, tokens: u64, shared: u32) -> bool {
        let need = blocks_for(tokens).saturating_sub(shared);
        if need <= *held {
            return true;
        }
        if !self.take(need - *held) {
            return false;
        }
        *held = need;
        true
    }

    /// Returns a request's private blocks to the pool.
    pub fn release(&mut self, held: &mut u32) {
        self.free += *held;
        *held = 0;
    }

    /// How many of `keys` (a prompt's full blocks, in order) a new request can reuse: the
    /// cached ones from the start, at most `max`.
    pub fn hits(&self, keys: impl Iterator<Item = BlockKey>, max: u32) -> u32 {
        let Some(c) = &self.cache else { return 0 };
        keys.take(max as usize)
            .take_while(|k| c.entries.contains_key(k))
            .count() as u32
    }

    /// The blocks holding `keys` would take that are not cached yet.
    pub fn missing(&self, keys: impl Iterator<Item = BlockKey>) -> u32 {
        let Some(c) = &self.cache else { return 0 };
        keys.filter(|k| !c.entries.contains_key(k)).count() as u32
    }

    /// The blocks holding `keys` would use up: those to create, and the cached ones nobody
    /// holds (no longer evictable once held).
    pub fn hold_cost(&self, keys: &[BlockKey]) -> u32 {
        let Some(c) = self.cache.as_ref() else {
            return 0;
        };
        keys.iter()
            .filter(|k| c.entries.get(k).is_none_or(|e| e.refs == 0))
            .count() as u32
    }

    /// Holds the entries of `keys`, creating (and taking a block for) those not cached;
    /// false (and nothing held) when the pool is short.
    pub fn hold(&mut self, keys: &[BlockKey]) -> bool {
        let Some(c) = self.cache.as_ref() else {
            return true;
        };
        // One look-up a key: the blocks to create, and the cached ones nobody holds that
        // this request is about to hold (no longer evictable).
        let (mut need, mut reused) = (0u32, 0u32);
        for k in keys {
            match c.entries.get(k) {
                None => need += 1,
                Some(e) if e.refs == 0 => reused += 1,
                Some(_) => {}
            }
        }
        if need + reused > self.available() {
            return false;
        }
        let Some(c) = self.cache.as_mut() else {
            return true;
        };
        // Hold the cached ones first, so that taking blocks for the others cannot evict them.
        let mut fresh = Vec::with_capacity(need as usize);
        for k in keys {
            match c.entries.get_mut(k) {
                Some(e) => {
                    if e.refs == 0 {
                        // Its place in the queue is skipped when it comes up (see
                        // `evictable`).
                        c.evictable_len -= 1;
                    }
                    e.refs += 1;
                }
                None => fresh.push(*k),
            }
        }
        // Enough is available (checked above, with the reused ones no longer evictable).
        if !self.take(need) {
            return false;
        }
        if let Some(c) = self.cache.as_mut() {
            for k in fresh {
                c.entries.insert(k, Entry { refs: 1, stamp: 0 });
            }
        }
        true
    }

    /// Drops every cached block nobody holds and the cache's allocations (an engine that
    /// left keeps only its statistics: a rehearsal that starts hundreds of replicas must not
    /// keep hundreds of caches).
    pub fn shed(&mut self) {
        if let Some(c) = self.cache.as_mut() {
            self.free += c.evictable_len;
            c.entries.retain(|_, e| e.refs > 0);
            c.entries.shrink_to_fit();
            c.evictable = std::collections::VecDeque::new();
            c.evictable_len = 0;
        }
    }

    /// Lets go of `keys` (in reverse, as vLLM frees a request's blocks, so that its last
    /// blocks are evicted first): a block nobody holds stays cached, evictable.
    pub fn unhold(&mut self, keys: &[BlockKey]) {
        let Some(c) = self.cache.as_mut() else { return };
        for k in keys.iter().rev() {
            let Some(e) = c.entries.get_mut(k) else {
                continue;
            };
            e.refs = e.refs.saturating_sub(1);
            if e.refs == 0 {
                e.stamp = c.next_stamp;
                c.next_stamp += 1;
                c.evictable.push_back((e.stamp, *k));
                c.evictable_len += 1;
            }
        }
        if c.evictable.len() > 2 * c.evictable_len as usize + 1024 {
            // Mostly places of blocks held again since: drop them, keeping the order.
            let entries = &c.entries;
            c.evictable.retain(|(stamp, key)| {
                entries
                    .get(key)
                    .is_some_and(|e| e.refs == 0 && e.stamp == *stamp)
            });
        }
    }
}

/// Blocks needed for `tokens` tokens.
pub fn blocks_for(tokens: u64) -> u32 {
    tokens
        .div_ceil(u64::from(BLOCK_SIZE))
        .min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::find_gpu;
    use crate::model::find_model;

    #[test]
    fn the_seeds_deployment_fits_a_large_cache() {
        let gpu = find_gpu("L40S").unwrap();
        let m = find_model("Ministral-3-8B").unwrap();
        let kv = m.kv_bytes_per_token(1, 2.0);
        let plan = plan_memory(
            &gpu,
            &m,
            WeightDtype::Fp8,
            kv,
            1,
            0.9,
            128,
            2048,
            8192,
            true,
        )
        .unwrap();
        // 44.99 GiB × 0.9 − 9.81 GiB of weights − the rest: roughly 29 GiB of KV cache.
        assert!(
            (28.0..31.0).contains(&(plan.kv_cache / GIB)),
            "{}",
            plan.kv_cache / GIB
        );
        assert_eq!(plan.block_bytes, 139264.0 * 16.0);
        assert!(
            plan.num_blocks > 13_000 && plan.num_blocks < 15_000,
            "{}",
            plan.num_blocks
        );
    }

    #[test]
    fn too_big_a_model_is_refused_with_the_numbers() {
        let gpu = find_gpu("L4").unwrap();
        let m = find_model("Llama-3.1-70B").unwrap();
        let err = plan_memory(
            &gpu,
            &m,
            WeightDtype::Bf16,
            m.kv_bytes_per_token(1, 2.0),
            1,
            0.9,
            256,
            2048,
            8192,
            false,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("no memory left for the KV cache"),
            "{err}"
        );
        // The same model across eight H100s fits.
        let h = find_gpu("H100").unwrap();
        assert!(
            plan_memory(
                &h,
                &m,
                WeightDtype::Bf16,
                m.kv_bytes_per_token(8, 2.0),
                8,
                0.9,
                1024,
                8192,
                131072,
                false
            )
            .is_ok()
        );
    }

    #[test]
    fn blocks() {
        let mut pool = BlockPool::new(4);
        let (mut a, mut b) = (0, 0);
        assert!(pool.grow(&mut a, 17, 0)); // 2 blocks
        assert!(pool.grow(&mut a, 32, 0)); // still 2
        assert!(!pool.grow(&mut b, 48, 0)); // 3 needed, 2 free
        assert_eq!(b, 0);
        assert!(pool.grow(&mut b, 32, 0));
        assert_eq!(pool.usage(), 1.0);
        pool.release(&mut a);
        assert_eq!((a, pool.used()), (0, 2));
    }

    #[test]
    fn cached_blocks_are_reused_until_evicted_least_recently_freed_first() {
        let mut pool = BlockPool::with_prefix_cache(4);
        let a = [(7, 0), (7, 1)];
        assert_eq!(pool.hits(a.iter().copied(), 2), 0);
        assert!(pool.hold(&a));
        assert_eq!(pool.hits(a.iter().copied(), 2), 2);
        assert_eq!(pool.hits(a.iter().copied(), 1), 1, "at most the cap");
        // A second holder takes no new block.
        assert!(pool.hold(&a));
        assert_eq!(pool.used(), 2);
        pool.unhold(&a);
        pool.unhold(&a);
        // Cached but free: usage 0, still a hit.
        assert_eq!((pool.used(), pool.hits(a.iter().copied(), 2)), (0, 2));
        // Taking three blocks evicts one cached block: the last one of the prompt first.
        assert!(pool.take(3));
        assert_eq!(pool.hits(a.iter().copied(), 2), 1);
        assert!(!pool.take(2));
    }

    #[test]
    fn a_block_held_again_leaves_the_eviction_order_and_rejoins_at_its_end() {
        let mut pool = BlockPool::with_prefix_cache(3);
        let (a, b, c) = ([(1, 0)], [(2, 0)], [(3, 0)]);
        for k in [&a, &b, &c] {
            assert!(pool.hold(k));
        }
        // Freed in the order a, b, c; then a is held again and freed last: b goes first.
        for k in [&a, &b, &c] {
            pool.unhold(k);
        }
        assert!(pool.hold(&a));
        assert_eq!(pool.available(), 2, "a is held: not evictable");
        pool.unhold(&a);
        assert_eq!(pool.available(), 3);
        assert!(pool.take(1));
        let cached = |p: &BlockPool, k: &[BlockKey]| p.hits(k.iter().copied(), 1) == 1;
        assert!(!cached(&pool, &b) && cached(&pool, &a) && cached(&pool, &c));
        assert!(pool.take(1));
        assert!(!cached(&pool, &c) && cached(&pool, &a), "then c, then a");
        // Holding and freeing one block many times keeps the queue short.
        for _ in 0..10_000 {
            assert!(pool.hold(&a));
            pool.unhold(&a);
        }
        let queued = pool.cache.as_ref().map_or(0, |c| c.evictable.len());
        assert!(queued <= 1026, "{queued}");
        assert!(pool.take(1));
        assert!(!cached(&pool, &a));
    }

    #[test]
    fn shedding_drops_the_cache_nobody_holds_and_keeps_what_is_held() {
        let mut pool = BlockPool::with_prefix_cache(4);
        let (a, b) = ([(1, 0), (1, 1)], [(2, 0)]);
        assert!(pool.hold(&a) && pool.hold(&b));
        pool.unhold(&a);
        pool.shed();
        assert_eq!(pool.hits(a.iter().copied(), 2), 0, "a was evictable: gone");
        assert_eq!(pool.hits(b.iter().copied(), 1), 1, "b is held: kept");
        assert_eq!(pool.available(), 3);
        assert_eq!(pool.cache.as_ref().map_or(1, |c| c.evictable.len()), 0);
        pool.unhold(&b);
        assert_eq!(pool.available(), 4);
    }
}
