//! The step-time model: how long one engine step takes for a given batch.
//!
//! A step is one forward pass over every scheduled token (one per decoding request, a chunk per
//! prefilling one) plus the engine's own work around it. Its duration is
//!
//! ```text
//! t_mem    = (weights + kv_write) / (bandwidth × η_mem) + kv_read / (bandwidth × η_mem × η_kv)
//! t_comp   = gemm_flops / (peak × η_compute) + attention_flops / (bf16_peak × η_compute)
//! gpu      = (max(t_mem, t_comp) + all_reduce + gpu_step) × clock_factor
//! cpu      = step_fixed + per_sequence × sequences
//! step     = max(gpu, dispatch, cpu)            (async scheduling, with CUDA graphs)
//!          = max(gpu, dispatch) + cpu           (enforce_eager)
//! ```
//!
//! - **bytes**: the weights this rank reads (all of them once per step; for mixture-of-experts
//!   models the experts some token was routed to), the KV cache of every context token the
//!   step attends to, and the KV entries it writes.
//! - **FLOPs**: 2 × active parameters per token for the linear layers, the LM head for every
//!   sampled token, and 4 × layers × heads × head_dim per (query, context) pair of attention.
//!   Attention runs at the 16-bit rate even with FP8 weights.
//! - **all_reduce** (tensor parallelism): two per layer of `tokens × hidden × 2` bytes each, a
//!   ring's `2(tp−1)/tp` of them over the interconnect plus a fixed latency.
//! - **dispatch**: the CPU time to issue the forward. Without CUDA graphs (`enforce_eager`)
//!   every PyTorch op of every layer is dispatched from Python (≈ 35 µs each; 12 ops per layer,
//!   4 more with FP8 dynamic activation quantisation); with graphs a decode-only batch of a
//!   captured size replays one graph, and mixed batches run piecewise (attention eager). The
//!   GPU works while the CPU dispatches, so the forward takes the longer of the two.
//! - **step_fixed / per_sequence**: scheduling, input preparation, sampling and output
//!   handling (Vidur's CPU-overhead profile of vLLM: ≈ 1.4 ms at small batch, ≈ 28 µs per
//!   sequence).
//!
//! Efficiencies come from the GPU table (`mem_efficiency`, `compute_efficiency`); the shared
//! parameters were fitted once on published measurements (docs/performance-model.md), and
//! nothing here is set for one deployment.

use serde::{Deserialize, Serialize};

use crate::hardware::GpuSpec;
use crate::model::{ModelSpec, WeightDtype};

/// The CPU-side constants of the model. The defaults are vLLM V1's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overheads {
    /// Fixed CPU time of every step (scheduler, input preparation, sampler launch), seconds.
    pub step_fixed_s: f64,
    /// CPU time per scheduled sequence per step, seconds.
    pub per_seq_s: f64,
    /// CPU time to dispatch one PyTorch op in eager mode, seconds.
    pub eager_op_s: f64,
    /// Ops per decoder layer in eager mode (16-bit weights).
    pub ops_per_layer: u32,
    /// Extra ops per layer with FP8 weights (dynamic activation quantisation per linear).
    pub fp8_extra_ops_per_layer: u32,
    /// Launching one captured CUDA graph, seconds.
    pub graph_replay_s: f64,
    /// Launching one piece of a piecewise graph, seconds.
    pub graph_piece_s: f64,
    /// Time from a request's arrival until the engine can schedule it (HTTP, tokenisation,
    /// hand-off to the engine core), with the way back of its tokens (detokenisation, the
    /// stream) counted here too, as one lump every request pays once, seconds.
    pub frontend_s: f64,
    /// GPU time of every step beyond the roofline: kernel launch gaps, the sampler, the copy
    /// of sampled tokens to the host, seconds.
    pub gpu_step_s: f64,
    /// Async scheduling (vLLM's default in graph mode): the scheduler prepares step `k + 1`
    /// while step `k` runs, so its CPU work overlaps the GPU's and a step lasts the longer of
    /// the two, and a request that arrives while a step runs waits one step more (the next
    /// one was planned without it).
    pub async_scheduling: bool,
    /// The share of the achieved weight-read bandwidth that paged attention's KV-cache reads
    /// reach (scattered 16-token blocks, not one long stream).
    pub kv_read_efficiency: f64,
}

impl Default for Overheads {
    fn default() -> Self {
        Overheads {
            step_fixed_s: 2.2e-3,
            per_seq_s: 28e-6,
            eager_op_s: 35e-6,
            ops_per_layer: 12,
            fp8_extra_ops_per_layer: 4,
            graph_replay_s: 0.1e-3,
            graph_piece_s: 10e-6,
            frontend_s: 7.75e-3,
            gpu_step_s: 0.22e-3,
            async_scheduling: true,
            kv_read_efficiency: 1.0,
        }
    }
}

/// What one step computes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepShape {
    /// Requests decoding one token.
    pub decode_seqs: u32,
    /// Tokens already in the KV cache of the decoding requests (attended and read).
    pub decode_context_tokens: u64,
    /// Requests prefilling a chunk.
    pub prefill_seqs: u32,
    /// Tokens of all prefill chunks.
    pub prefill_tokens: u32,
    /// Tokens already in the KV cache before each chunk (read), summed over chunks.
    pub prefill_context_tokens: u64,
    /// (query, key) pairs the prefill chunks attend over: for a chunk of `n` tokens after `s`
    /// cached ones, `n·s + n(n+1)/2`.
    pub prefill_attention_pairs: f64,
    /// Requests that sample a token at the end of the step.
    pub sampled: u32,
}

impl StepShape {
    /// Tokens computed in the step.
    pub fn tokens(&self) -> u32 {
        self.decode_seqs + self.prefill_tokens
    }

    /// Sequences in the step.
    pub fn seqs(&self) -> u32 {
        self.decode_seqs + self.prefill_seqs
    }
}

/// The cost of one step and what it did, for timing and for the GPU telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepCost {
    /// Wall duration of the step, seconds.
    pub total_s: f64,
    /// Time the GPU was busy, seconds.
    pub gpu_s: f64,
    /// Bytes moved from device memory (one rank).
    pub bytes: f64,
    /// FLOPs executed (one rank).
    pub flops: f64,
    /// Of the GPU time, the part bound by memory (0–1).
    pub memory_bound: f64,
}

/// A step time measured rather than derived from the hardware: a real server's steps, fitted
/// from its measured latency at several loads (`fixed + per_seq × sequences + per_token ×
/// tokens computed`). The scheduler around it is unchanged, so the replica still admits at
/// most `max_num_seqs` requests and queues the rest: what the measured server did past its
/// knee.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredStep {
    /// Time of a step whatever its batch, seconds.
    pub fixed_s: f64,
    /// Time each sequence in the batch adds, seconds.
    pub per_seq_s: f64,
    /// Time each computed token adds (prefill chunks; a decoding sequence computes one),
    /// seconds.
    pub per_token_s: f64,
}

impl MeasuredStep {
    /// The duration of a step of `s`.
    pub fn step_s(&self, s: &StepShape) -> f64 {
        self.fixed_s
            + self.per_seq_s * f64::from(s.seqs())
            + self.per_token_s * f64::from(s.tokens())
    }
}

/// The step-time model of one engine configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    gpu: GpuSpec,
    model: ModelSpec,
    dtype: WeightDtype,
    tp: u32,
    kv_bytes_per_token: f64,
    enforce_eager: bool,
    max_capture_size: u32,
    /// CPU-side constants.
    pub overheads: Overheads,
    /// Zero-cost model (the `instant` profile): every step takes no time.
    instant: bool,
    /// Steps timed by a fit to a measured server instead of the hardware.
    measured: Option<MeasuredStep>,
    /// The weight bytes a step reads, for a dense model (the same at any batch).
    dense_weight_bytes: Option<f64>,
    /// Terms of every step that depend on the GPU and model only, taken once (each as the
    /// step's formula writes it, so the step's arithmetic is unchanged).
    k: Constants,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Constants {
    /// `2 × active decoder parameters`.
    two_active_params: f64,
    lm_head_flops: f64,
    attention_flops_per_context_token: f64,
    /// Bytes per second the memory moves.
    mem_rate: f64,
    /// FLOP/s of the GEMMs (FP8 where the weights and the GPU have it).
    gemm_rate: f64,
    /// FLOP/s of attention (BF16).
    attn_rate: f64,
}

impl Constants {
    fn new(g: &GpuSpec, m: &ModelSpec, dtype: WeightDtype) -> Self {
        // Weights run on the tensor cores of their format when the GPU has them; otherwise
        // they are dequantised and multiplied at the 16-bit rate (weight-only kernels).
        let gemm_peak = match (dtype, g.fp8_tflops, g.fp4_tflops) {
            (WeightDtype::Fp8, Some(fp8), _) => fp8,
            (WeightDtype::Nvfp4 | WeightDtype::Mxfp4, _, Some(fp4)) => fp4,
            _ => g.bf16_tflops,
        };
        Constants {
            two_active_params: 2.0 * m.active_decoder_params(),
            lm_head_flops: m.lm_head_flops(),
            attention_flops_per_context_token: m.attention_flops_per_context_token(),
            mem_rate: g.mem_bandwidth_gbps * 1e9 * g.mem_efficiency,
            gemm_rate: gemm_peak * 1e12 * g.compute_efficiency,
            attn_rate: g.bf16_tflops * 1e12 * g.compute_efficiency,
        }
    }
}

impl CostModel {
    /// The model for a configuration.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: GpuSpec,
        model: ModelSpec,
        dtype: WeightDtype,
        kv_dtype_bytes: f64,
        tp: u32,
        enforce_eager: bool,
        max_num_seqs: u32,
        max_num_batched_tokens: u32,
    ) -> Self {
        let kv_bytes_per_token = model.kv_bytes_per_token(tp, kv_dtype_bytes);
        // vLLM: max_cudagraph_capture_size = min(2 × max_num_seqs, 512), capped by the token budget.
        let max_capture_size = (2 * max_num_seqs).min(512).min(max_num_batched_tokens);
        let dense_weight_bytes = model
            .moe
            .is_none()
            .then(|| model.step_weight_bytes(dtype, 1));
        CostModel {
            dense_weight_bytes,
            k: Constants::new(&gpu, &model, dtype),
            gpu,
            model,
            dtype,
            tp: tp.max(1),
            kv_bytes_per_token,
            enforce_eager,
            max_capture_size,
            overheads: Overheads::default(),
            instant: false,
            measured: None,
        }
    }

    /// A model whose steps take what `m` says (a measured server), not what the GPU would.
    pub fn measured(mut self, m: MeasuredStep) -> Self {
        self.measured = Some(m);
        self
    }

    /// The measured step fit, when steps are timed by one.
    pub fn measured_step(&self) -> Option<&MeasuredStep> {
        self.measured.as_ref()
    }

    /// A model in which nothing takes time (for benchmarking clients and servers).
    pub fn instant(mut self) -> Self {
        self.instant = true;
        self
    }

    /// Whether this is the zero-cost model.
    pub fn is_instant(&self) -> bool {
        self.instant
    }

    /// KV-cache bytes per token on one rank.
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.kv_bytes_per_token
    }

    /// The largest decode batch replayed as one CUDA graph.
    pub fn max_capture_size(&self) -> u32 {
        self.max_capture_size
    }

    /// CPU time to dispatch the forward pass.
    fn dispatch_s(&self, s: &StepShape) -> f64 {
        let o = &self.overheads;
        let layers = f64::from(self.model.layers);
        if self.enforce_eager {
            let ops = o.ops_per_layer
                + if self.dtype == WeightDtype::Fp8 {
                    o.fp8_extra_ops_per_layer
                } else {
                    0
                };
            layers * f64::from(ops) * o.eager_op_s
        } else if s.prefill_tokens == 0 && s.decode_seqs <= self.max_capture_size {
            o.graph_replay_s
        } else {
            layers * (o.eager_op_s + o.graph_piece_s)
        }
    }

    /// The duration and footprint of one step. `clock_factor` (≥ 1) slows the GPU while its
    /// clocks are still ramping up.
    pub fn step(&self, s: &StepShape, clock_factor: f64) -> StepCost {
        if self.instant || s.seqs() == 0 {
            return StepCost::default();
        }
        if let Some(m) = &self.measured {
            let t = m.step_s(s).max(0.0);
            return StepCost {
                total_s: t,
                gpu_s: t,
                bytes: 0.0,
                flops: 0.0,
                memory_bound: 1.0,
            };
        }
        let tp = f64::from(self.tp);
        let g = &self.gpu;
        let tokens = s.tokens();
        let weight_bytes = self
            .dense_weight_bytes
            .unwrap_or_else(|| self.model.step_weight_bytes(self.dtype, tokens))
            / tp;
        let kv_read =
            (s.decode_context_tokens + s.prefill_context_tokens) as f64 * self.kv_bytes_per_token;
        let kv_write = f64::from(tokens) * self.kv_bytes_per_token;
        let bytes = weight_bytes + kv_read + kv_write;
        let k = &self.k;
        let t_mem = (weight_bytes + kv_write) / k.mem_rate
            + kv_read / (k.mem_rate * self.overheads.kv_read_efficiency.clamp(0.05, 1.0));

        let gemm_flops =
            (k.two_active_params * f64::from(tokens) + k.lm_head_flops * f64::from(s.sampled)) / tp;
        let attn_flops = k.attention_flops_per_context_token
            * (s.decode_context_tokens as f64 + s.prefill_attention_pairs)
            / tp;
        let t_compute = gemm_flops / k.gemm_rate + attn_flops / k.attn_rate;

        let t_allreduce = if self.tp > 1 {
            let msg = f64::from(tokens) * f64::from(self.model.hidden) * 2.0;
            2.0 * f64::from(self.model.layers)
                * (g.allreduce_latency_us * 1e-6
                    + msg * 2.0 * (tp - 1.0) / tp / (g.interconnect_gbps * 1e9))
        } else {
            0.0
        };
        let o = &self.overheads;
        let gpu_s = (t_mem.max(t_compute) + t_allreduce + o.gpu_step_s) * clock_factor.max(1.0);
        let cpu_s = o.step_fixed_s + o.per_seq_s * f64::from(s.seqs());
        let dispatch = self.dispatch_s(s);
        let total_s = if o.async_scheduling && !self.enforce_eager {
            // The scheduler's work for the next step runs while this one's graph replays.
            (gpu_s.max(dispatch)).max(cpu_s)
        } else {
            // Eager dispatch keeps the one Python thread busy: nothing overlaps it.
            gpu_s.max(dispatch) + cpu_s
        };
        StepCost {
            total_s,
            gpu_s,
            bytes,
            flops: gemm_flops + attn_flops,
            memory_bound: if t_mem >= t_compute {
                1.0
            } else {
                t_mem / t_compute
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::find_gpu;
    use crate::model::find_model;

    fn decode(n: u32, ctx: u64) -> StepShape {
        StepShape {
            decode_seqs: n,
            decode_context_tokens: n as u64 * ctx,
            sampled: n,
            ..Default::default()
        }
    }

    /// Llama 3.1 8B in bf16 on one H100, with vLLM's defaults.
    fn h100_8b() -> CostModel {
        CostModel::new(
            find_gpu("H100").unwrap(),
            find_model("Llama-3.1-8B").unwrap(),
            WeightDtype::Bf16,
            2.0,
            1,
            false,
            256,
            8192,
        )
    }

    #[test]
    fn decode_is_memory_bound_and_grows_slowly_with_batch() {
        let m = h100_8b();
        let one = m.step(&decode(1, 500), 1.0);
        let many = m.step(&decode(128, 500), 1.0);
        // ≈ 16 GB at 2.68 TB/s effective: about 6 ms, plus the CPU side.
        assert!((6e-3..10e-3).contains(&one.total_s), "{}", one.total_s);
        assert!(many.total_s > one.total_s && many.total_s < 3.0 * one.total_s);
        assert_eq!(one.memory_bound, 1.0);
    }

    #[test]
    fn prefill_is_compute_bound() {
        let m = h100_8b();
        let n = 4096u32;
        let s = StepShape {
            prefill_seqs: 1,
            prefill_tokens: n,
            prefill_attention_pairs: f64::from(n) * f64::from(n + 1) / 2.0,
            sampled: 1,
            ..Default::default()
        };
        let c = m.step(&s, 1.0);
        assert!(c.memory_bound < 1.0);
        // 2 × 7.5e9 × 4096 ≈ 61 TFLOP at 807 TFLOP/s effective (81.6 % of 989) ≈ 0.08 s.
        assert!((0.06..0.15).contains(&c.total_s), "{}", c.total_s);
    }

    #[test]
    fn eager_dispatch_and_tensor_parallelism() {
        let gpu = find_gpu("L40S").unwrap();
        let model = find_model("Ministral-3-8B").unwrap();
        let graphs = CostModel::new(
            gpu.clone(),
            model.clone(),
            WeightDtype::Fp8,
            2.0,
            1,
            false,
            128,
            2048,
        );
        let eager = CostModel::new(gpu, model, WeightDtype::Fp8, 2.0, 1, true, 128, 2048);
        assert!(eager.step(&decode(1, 50), 1.0).total_s > graphs.step(&decode(1, 50), 1.0).total_s);
        let h = find_gpu("H100").unwrap();
        let l70 = find_model("Llama-3.1-70B").unwrap();
        let tp4 = CostModel::new(
            h.clone(),
            l70.clone(),
            WeightDtype::Bf16,
            2.0,
            4,
            false,
            256,
            8192,
        );
        let tp8 = CostModel::new(h, l70, WeightDtype::Bf16, 2.0, 8, false, 256, 8192);
        let (a, b) = (
            tp4.step(&decode(8, 500), 1.0).total_s,
            tp8.step(&decode(8, 500), 1.0).total_s,
        );
        assert!(b < a && b > a / 2.0, "TP8 is faster but not twice: {a} {b}");
    }
}
