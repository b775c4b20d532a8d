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
}

impl WeightDtype {
    /// Bytes per parameter of the decoder's linear layers.
    pub fn bytes(self) -> f64 {
        match self {
            WeightDtype::Bf16 => 2.0,
            WeightDtype::Fp8 => 1.0,
        }
    }
}

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

    /// Bytes the weights take on the GPUs (all ranks together).
    pub fn loaded_bytes(&self, dtype: WeightDtype) -> f64 {
        if let (Some(gib), true) = (self.loaded_gib, dtype == self.native_dtype) {
            return gib * GIB;
        }
        self.decoder_params() * dtype.bytes()
            + (self.embed_params() + self.untied_head_params() + self.extra_params_b * 1e9) * 2.0
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
                all - m.expert_params_b * 1e9 * dtype.bytes() * scale * unused
            }
        }
    }

    fn loaded_bytes_estimate(&self, dtype: WeightDtype) -> f64 {
        self.decoder_params() * dtype.bytes()
            + (self.embed_params() + self.untied_head_params() + self.extra_params_b * 1e9) * 2.0
    }

    /// FLOPs of the LM head for one sampled token.
    pub fn lm_head_flops(&self) -> f64 {
        2.0 * self.embed_params()
    }

    /// KV-cache bytes per token on one GPU with tensor parallelism `tp` (key heads are split
    /// across ranks; a rank holds at least one).
    pub fn kv_bytes_per_token(&self, tp: u32, kv_dtype_bytes: f64) -> f64 {
        let heads = (self.kv_heads / tp.max(1)).max(1);
        2.0 * f64::from(self.layers) * f64::from(heads) * f64::from(self.head_dim) * kv_dtype_bytes
    }

    /// Attention FLOPs for one query token over `context` tokens, all layers and heads.
    pub fn attention_flops_per_context_token(&self) -> f64 {
        4.0 * f64::from(self.layers) * f64::from(self.q_heads) * f64::from(self.head_dim)
    }
}

#[allow(clippy::too_many_arguments)]
fn model(
    name: &str,
    hf_id: &str,
    params_b: f64,
    shape: (u32, u32, u32, u32, u32),
    intermediate: u32,
    vocab: u32,
    max_context: u32,
    tied: bool,
) -> ModelSpec {
    let (layers, hidden, q_heads, kv_heads, head_dim) = shape;
    ModelSpec {
        name: name.to_owned(),
        hf_id: hf_id.to_owned(),
        params_b,
        layers,
        hidden,
        q_heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        max_context,
        tied_embeddings: tied,
        extra_params_b: 0.0,
        moe: None,
        native_dtype: WeightDtype::Bf16,
        loaded_gib: None,
    }
}

/// The built-in models.
pub fn builtin_models() -> Vec<ModelSpec> {
    let mut v = vec![
        model(
            "Llama-3.2-1B",
            "meta-llama/Llama-3.2-1B-Instruct",
            1.24,
            (16, 2048, 32, 8, 64),
            8192,
            128256,
            131072,
            true,
        ),
        model(
            "Llama-3.2-3B",
            "meta-llama/Llama-3.2-3B-Instruct",
            3.21,
            (28, 3072, 24, 8, 128),
            8192,
            128256,
            131072,
            true,
        ),
        model(
            "Llama-3.1-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            8.03,
            (32, 4096, 32, 8, 128),
            14336,
            128256,
            131072,
            false,
        ),
        model(
            "Llama-3.1-70B",
            "meta-llama/Llama-3.1-70B-Instruct",
            70.6,
            (80, 8192, 64, 8, 128),
            28672,
            128256,
            131072,
            false,
        ),
        model(
            "Llama-2-7B",
            "meta-llama/Llama-2-7b-hf",
            6.74,
            (32, 4096, 32, 32, 128),
            11008,
            32000,
            4096,
            false,
        ),
        model(
            "Llama-2-70B",
            "meta-llama/Llama-2-70b-hf",
            69.0,
            (80, 8192, 64, 8, 128),
            28672,
            32000,
            4096,
            false,
        ),
        model(
            "CodeLlama-34B",
            "codellama/CodeLlama-34b-Instruct-hf",
            33.7,
            (48, 8192, 64, 8, 128),
            22016,
            32000,
            16384,
            false,
        ),
        model(
            "Mistral-7B",
            "mistralai/Mistral-7B-Instruct-v0.3",
            7.25,
            (32, 4096, 32, 8, 128),
            14336,
            32768,
            32768,
            false,
        ),
        model(
            "Ministral-8B",
            "mistralai/Ministral-8B-Instruct-2410",
            8.02,
            (36, 4096, 32, 8, 128),
            12288,
            131072,
            32768,
            false,
        ),
        model(
            "Qwen2.5-0.5B",
            "Qwen/Qwen2.5-0.5B-Instruct",
            0.49,
            (24, 896, 14, 2, 64),
            4864,
            151936,
            32768,
            true,
        ),
        model(
            "Qwen2.5-1.5B",
            "Qwen/Qwen2.5-1.5B-Instruct",
            1.54,
            (28, 1536, 12, 2, 128),
            8960,
            151936,
            32768,
            true,
        ),
        model(
            "Qwen2.5-3B",
            "Qwen/Qwen2.5-3B-Instruct",
            3.09,
            (36, 2048, 16, 2, 128),
            11008,
            151936,
            32768,
            true,
        ),
        model(
            "Qwen2.5-7B",
            "Qwen/Qwen2.5-7B-Instruct",
            7.62,
            (28, 3584, 28, 4, 128),
            18944,
            152064,
            32768,
            false,
        ),
        model(
            "Qwen2.5-14B",
            "Qwen/Qwen2.5-14B-Instruct",
            14.7,
            (48, 5120, 40, 8, 128),
            13824,
            152064,
            32768,
            false,
        ),
        model(
            "Qwen2.5-32B",
            "Qwen/Qwen2.5-32B-Instruct",
            32.5,
            (64, 5120, 40, 8, 128),
            27648,
            152064,
            32768,
            false,
        ),
        model(
            "Qwen2.5-72B",
            "Qwen/Qwen2.5-72B-Instruct",
            72.7,
            (80, 8192, 64, 8, 128),
            29568,
            152064,
            32768,
            false,
        ),
        model(
            "Qwen3-0.6B",
            "Qwen/Qwen3-0.6B",
            0.6,
            (28, 1024, 16, 8, 128),
            3072,
            151936,
            40960,
            true,
        ),
        model(
            "Qwen3-1.7B",
            "Qwen/Qwen3-1.7B",
            1.7,
            (28, 2048, 16, 8, 128),
            6144,
            151936,
            40960,
            true,
        ),
        model(
            "Qwen3-4B",
            "Qwen/Qwen3-4B",
            4.0,
            (36, 2560, 32, 8, 128),
            9728,
            151936,
            40960,
            true,
        ),
        model(
            "Qwen3-8B",
            "Qwen/Qwen3-8B",
            8.2,
            (36, 4096, 32, 8, 128),
            12288,
            151936,
            40960,
            false,
        ),
        model(
            "Qwen3-14B",
            "Qwen/Qwen3-14B",
            14.8,
            (40, 5120, 40, 8, 128),
            17408,
            151936,
            40960,
            false,
        ),
        model(
            "Qwen3-32B",
            "Qwen/Qwen3-32B",
            32.8,
            (64, 5120, 64, 8, 128),
            25600,
            151936,
            40960,
            false,
        ),
    ];
    let mut mixtral = model(
        "Mixtral-8x7B",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        46.7,
        (32, 4096, 32, 8, 128),
        14336,
        32000,
        32768,
        false,
    );
    // 8 experts × 3 matrices × 4096 × 14336 × 32 layers.
    mixtral.moe = Some(Moe {
        experts: 8,
        top_k: 2,
        expert_params_b: 45.1,
    });
    v.push(mixtral);
    let mut ministral3 = model(
        "Ministral-3-8B",
        "mistralai/Ministral-3-8B-Instruct-2512",
        8.4,
        (34, 4096, 32, 8, 128),
        14336,
        131072,
        262144,
        false,
    );
    ministral3.extra_params_b = 0.4; // vision encoder
    ministral3.native_dtype = WeightDtype::Fp8;
    ministral3.loaded_gib = Some(9.81);
    v.push(ministral3);
    v
}

/// Finds a built-in model by short name or Hugging Face id, ignoring case.
pub fn find_model(name: &str) -> Option<ModelSpec> {
    builtin_models()
        .into_iter()
        .find(|m| m.name.eq_ignore_ascii_case(name) || m.hf_id.eq_ignore_ascii_case(name))
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
