//! Model architectures: the numbers that decide weight bytes, KV bytes and FLOPs per token.
//!
//! Sources: the models' `config.json` as collected in the reference `perf/models.csv` (marked
//! there as verified, cross-checked or recalled). Ministral-3-8B-Instruct-2512's feed-forward
//! size and vocabulary are not in that table; they are taken as its Ministral family's
//! (14336, 131072), and its loaded size is the 9.81 GiB vLLM logged in the AWS EKS run.

use serde::{Deserialize, Serialize};

/// How the weights are stored on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// 16-bit (bf16 or fp16): two bytes per parameter.
    Bf16,
    /// FP8 linear layers (one byte per parameter); embeddings and the LM head stay 16-bit, as in
    /// vLLM's FP8 checkpoints.
    Fp8,
    /// 4-bit integer weights with 16-bit group scales (AWQ, GPTQ; groups of 128): weight-only,
    /// computed at the 16-bit rate after dequantisation.
    Int4,
    /// OCP MXFP4: 4-bit floats with an 8-bit scale per 32 (gpt-oss's experts).
    Mxfp4,
    /// NVIDIA NVFP4: 4-bit floats with an 8-bit scale per 16 (Blackwell's FP4 tensor cores).
    Nvfp4,
}

impl WeightDtype {
    /// Bytes per parameter of the decoder's linear layers, scales included.
    pub fn bytes(self) -> f64 {
        match self {
            WeightDtype::Bf16 => 2.0,
            WeightDtype::Fp8 => 1.0,
            WeightDtype::Int4 => 0.5 + 2.0 / 128.0,
            WeightDtype::Mxfp4 => 0.5 + 1.0 / 32.0,
            WeightDtype::Nvfp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// The name vLLM's `--quantization` and the checkpoints use.
    pub fn name(self) -> &'static str {
        match self {
            WeightDtype::Bf16 => "bf16",
            WeightDtype::Fp8 => "fp8",
            WeightDtype::Int4 => "int4",
            WeightDtype::Mxfp4 => "mxfp4",
            WeightDtype::Nvfp4 => "nvfp4",
        }
    }

    /// Reads a dtype or quantisation method as users and checkpoints write it (`fp16`,
    /// `bfloat16`, `fp8`, `awq`, `gptq`, `int4`, `mxfp4`, `nvfp4`, `modelopt_fp4`).
    pub fn parse(s: &str) -> Option<WeightDtype> {
        Some(match s.to_ascii_lowercase().as_str() {
            "bf16" | "fp16" | "bfloat16" | "float16" | "half" | "auto" => WeightDtype::Bf16,
            "fp8" | "float8" | "fp8_e4m3" | "compressed-tensors-fp8" => WeightDtype::Fp8,
            "int4" | "awq" | "gptq" | "awq_marlin" | "gptq_marlin" | "w4a16" => WeightDtype::Int4,
            "mxfp4" => WeightDtype::Mxfp4,
            "nvfp4" | "modelopt_fp4" | "fp4" => WeightDtype::Nvfp4,
            _ => return None,
        })
    }
}

/// Layers that attend over a sliding window of the last tokens only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sliding {
    /// The window, tokens.
    pub window: u32,
    /// How many of the layers use it (the others attend to everything).
    pub layers: u32,
}

/// The context a sliding-window layer's share of the per-token KV and attention is taken
/// against: vLLM frees a sliding layer's blocks once they leave the window, so per token of
/// a request of this length it holds `window / length` of what a full layer holds.
pub const SLIDING_REFERENCE_CONTEXT: f64 = 4096.0;

/// A mixture-of-experts feed-forward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moe {
    /// Experts per layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub top_k: u32,
    /// Parameters of all experts of all layers, billions.
    pub expert_params_b: f64,
}

/// One model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Short name used on the command line.
    pub name: String,
    /// The Hugging Face id vLLM would be started with.
    pub hf_id: String,
    /// Total parameters, billions.
    pub params_b: f64,
    /// Decoder layers.
    pub layers: u32,
    /// Hidden size.
    pub hidden: u32,
    /// Attention (query) heads.
    pub q_heads: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// Feed-forward size.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Context window.
    pub max_context: u32,
    /// Whether the LM head shares the embedding matrix.
    pub tied_embeddings: bool,
    /// Parameters outside the text decoder (a vision encoder), billions; loaded, not run for
    /// text requests.
    #[serde(default)]
    pub extra_params_b: f64,
    /// The feed-forward's experts, for mixture-of-experts models.
    #[serde(default)]
    pub moe: Option<Moe>,
    /// The dtype the model is published in (`fp8` for FP8-only checkpoints).
    #[serde(default = "default_dtype")]
    pub native_dtype: WeightDtype,
    /// Measured loaded size in the native dtype, GiB, when known (overrides the estimate).
    #[serde(default)]
    pub loaded_gib: Option<f64>,
    /// Multi-head latent attention (DeepSeek): the cached latent per token per layer
    /// (`kv_lora_rank + qk_rope_head_dim`), replicated on every tensor-parallel rank.
    #[serde(default)]
    pub kv_latent_dim: Option<u32>,
    /// Per head, the query-key and value dimensions attention multiplies over (`None`:
    /// `head_dim` both; MLA's absorbed decode: `kv_lora_rank + qk_rope_head_dim` and
    /// `kv_lora_rank`).
    #[serde(default)]
    pub attn_dims: Option<(u32, u32)>,
    /// Sliding-window layers.
    #[serde(default)]
    pub sliding: Option<Sliding>,
    /// The routed experts' own storage when it differs from the rest (gpt-oss: MXFP4
    /// experts, 16-bit attention).
    #[serde(default)]
    pub expert_dtype: Option<WeightDtype>,
    /// Layers of linear attention (Qwen3.5's Gated DeltaNet, MiniMax-M1's lightning
    /// attention): a fixed-size state per sequence instead of a KV cache that grows with it,
    /// so they add no KV bytes and no attention work per token of context.
    #[serde(default)]
    pub linear_layers: u32,
}

fn default_dtype() -> WeightDtype {
    WeightDtype::Bf16
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

impl ModelSpec {
    fn embed_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    fn untied_head_params(&self) -> f64 {
        if self.tied_embeddings {
            0.0
        } else {
            self.embed_params()
        }
    }

    /// Parameters of the text decoder's layers (attention and feed-forward), all experts.
    pub fn decoder_params(&self) -> f64 {
        self.params_b * 1e9
            - self.embed_params()
            - self.untied_head_params()
            - self.extra_params_b * 1e9
    }

    /// Decoder parameters one token runs through (all of them for dense models).
    pub fn active_decoder_params(&self) -> f64 {
        match &self.moe {
            None => self.decoder_params(),
            Some(m) => {
                let shared = self.decoder_params() - m.expert_params_b * 1e9;
                shared + m.expert_params_b * 1e9 * f64::from(m.top_k) / f64::from(m.experts)
            }
        }
    }

    /// Bytes per routed-expert parameter with the weights in `dtype`: the experts' own
    /// storage when the checkpoint keeps them apart and the weights are as published.
    fn expert_bytes(&self, dtype: WeightDtype) -> f64 {
        match self.expert_dtype {
            Some(e) if dtype == self.native_dtype => e.bytes(),
            _ => dtype.bytes(),
        }
    }

    fn routed_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| m.expert_params_b * 1e9)
    }

    /// Bytes the weights take on the GPUs (all ranks together).
    pub fn loaded_bytes(&self, dtype: WeightDtype) -> f64 {
        if let (Some(gib), true) = (self.loaded_gib, dtype == self.native_dtype) {
            return gib * GIB;
        }
        self.loaded_bytes_estimate(dtype)
    }

    /// Bytes a forward pass reads from the weights (all ranks together) when `tokens` tokens
    /// run: everything but the embedding table (only looked up) and the extra encoder; for
    /// mixture-of-experts models, only the experts some token was routed to (expected value
    /// for uniform routing).
    pub fn step_weight_bytes(&self, dtype: WeightDtype, tokens: u32) -> f64 {
        let not_read = self.extra_params_b * 1e9 * 2.0
            + if self.tied_embeddings {
                0.0
            } else {
                self.embed_params() * 2.0
            };
        let all = self.loaded_bytes(dtype) - not_read;
        match &self.moe {
            None => all,
            Some(m) => {
                let unused =
                    (1.0 - f64::from(m.top_k) / f64::from(m.experts)).powi(tokens.max(1) as i32);
                let scale = self.loaded_bytes(dtype) / self.loaded_bytes_estimate(dtype);
                all - m.expert_params_b * 1e9 * self.expert_bytes(dtype) * scale * unused
            }
        }
    }

    fn loaded_bytes_estimate(&self, dtype: WeightDtype) -> f64 {
        let routed = self.routed_params();
        (self.decoder_params() - routed) * dtype.bytes()
            + routed * self.expert_bytes(dtype)
            + (self.embed_params() + self.untied_head_params() + self.extra_params_b * 1e9) * 2.0
    }

    /// FLOPs of the LM head for one sampled token.
    pub fn lm_head_flops(&self) -> f64 {
        2.0 * self.embed_params()
    }

    /// Layers weighted by how much of a request's context they keep: a full layer counts 1,
    /// a sliding one `window / SLIDING_REFERENCE_CONTEXT` (at most 1), a linear-attention
    /// one 0.
    fn effective_layers(&self) -> f64 {
        let layers = f64::from(self.layers.saturating_sub(self.linear_layers));
        match self.sliding {
            Some(s) if s.layers > 0 => {
                let sl = f64::from(s.layers.min(self.layers));
                layers - sl + sl * (f64::from(s.window) / SLIDING_REFERENCE_CONTEXT).min(1.0)
            }
            _ => layers,
        }
    }

    /// KV-cache bytes per token on one GPU with tensor parallelism `tp`: key and value heads
    /// are split across ranks (a rank holds at least one); MLA's latent is replicated.
    pub fn kv_bytes_per_token(&self, tp: u32, kv_dtype_bytes: f64) -> f64 {
        if let Some(latent) = self.kv_latent_dim {
            return self.effective_layers() * f64::from(latent) * kv_dtype_bytes;
        }
        let heads = (self.kv_heads / tp.max(1)).max(1);
        2.0 * self.effective_layers() * f64::from(heads) * f64::from(self.head_dim) * kv_dtype_bytes
    }

    /// Attention FLOPs for one query token over `context` tokens, all layers and heads.
    pub fn attention_flops_per_context_token(&self) -> f64 {
        let (qk, v) = self.attn_dims.unwrap_or((self.head_dim, self.head_dim));
        2.0 * self.effective_layers() * f64::from(self.q_heads) * f64::from(qk + v)
    }
}

/// The built-in models (`crates/engine/models/*.json`, read by [`crate::hf`]).
pub fn builtin_models() -> Vec<ModelSpec> {
    crate::hf::builtin()
}

/// Finds a built-in model by a name as people write it ([`crate::names`]).
pub fn find_model(name: &str) -> Option<ModelSpec> {
    crate::hf::find(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_bytes_match_the_reference_table() {
        let m = find_model("Llama-3.1-8B").unwrap();
        assert_eq!(m.kv_bytes_per_token(1, 2.0), 131072.0);
        assert_eq!(m.kv_bytes_per_token(2, 2.0), 65536.0);
        let m = find_model("Ministral-3-8B").unwrap();
        assert_eq!(m.kv_bytes_per_token(1, 2.0), 139264.0);
        let m = find_model("Llama-3.1-70B").unwrap();
        // TP 16 > 8 KV heads: each rank still holds one head.
        assert_eq!(m.kv_bytes_per_token(16, 2.0), m.kv_bytes_per_token(8, 2.0));
    }

    #[test]
    fn weight_bytes() {
        let m = find_model("Llama-3.1-8B").unwrap();
        let gb = m.loaded_bytes(WeightDtype::Bf16) / 1e9;
        assert!((gb - 16.06).abs() < 0.05, "{gb}");
        // FP8 halves the decoder, not the embeddings.
        let fp8 = m.loaded_bytes(WeightDtype::Fp8) / 1e9;
        assert!((fp8 - 9.0).abs() < 0.1, "{fp8}");
        let e = find_model("Ministral-3-8B").unwrap();
        assert!((e.loaded_bytes(WeightDtype::Fp8) / GIB - 9.81).abs() < 1e-9);
        // Mixtral: a lone token reads about a quarter of the experts, a big batch all of them.
        let x = find_model("Mixtral-8x7B").unwrap();
        let one = x.step_weight_bytes(WeightDtype::Bf16, 1);
        let many = x.step_weight_bytes(WeightDtype::Bf16, 256);
        assert!(one < 0.4 * many, "{one} {many}");
        assert!(
            (x.active_decoder_params() / 1e9 - 12.3).abs() < 0.5,
            "{}",
            x.active_decoder_params()
        );
    }
}
