//! A model from its Hugging Face `config.json`: the architecture numbers that decide weight
//! bytes, KV bytes per token and FLOPs per token, for dense and mixture-of-experts models
//! alike, with the attention variants that change the KV cache (grouped-query, multi-head
//! latent, sliding windows) and the checkpoint's quantisation.
//!
//! The built-in models are such files (`crates/engine/models/*.json`, each the model's own
//! `config.json` keys with where they were read under `_inferscale`); a user's model is read
//! the same way (`--model-config`).
//!
//! ```
//! let m = inferscale_engine::hf::from_config(r#"{"architectures": ["LlamaForCausalLM"],
//!     "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
//!     "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
//!     "max_position_embeddings": 131072}"#, "my-llama").unwrap();
//! assert_eq!(m.kv_bytes_per_token(1, 2.0), 131072.0);
//! assert!((m.params_b - 8.03).abs() < 0.05, "{}", m.params_b);
//! ```

use serde_json::Value;

use crate::model::{ModelSpec, Moe, Sliding, WeightDtype};

/// Why a `config.json` could not be read as a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The key that is missing or wrong (empty: the document).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        message: message.into(),
    }
}

struct Cfg<'a>(&'a Value);

impl Cfg<'_> {
    fn opt(&self, key: &str) -> Result<Option<u32>, ConfigError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n <= u64::from(u32::MAX))
                .map(|n| Some(n as u32))
                .ok_or_else(|| err(key, format!("{v} is not a whole number"))),
        }
    }

    fn req(&self, key: &str) -> Result<u32, ConfigError> {
        self.opt(key)?
            .filter(|n| *n > 0)
            .ok_or_else(|| err(key, "missing (a positive whole number is needed)"))
    }

    fn first(&self, keys: &[&str]) -> Result<Option<u32>, ConfigError> {
        for k in keys {
            if let Some(v) = self.opt(k)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn flag(&self, key: &str) -> Option<bool> {
        self.0.get(key).and_then(Value::as_bool)
    }
}

/// Reads a model from `config.json` text; `name` is used when the file names none.
///
/// # Errors
///
/// When the text is not JSON or a required number is missing or wrong (the key named).
// Long: one config.json key after another, each with the aliases model families use and its
// check, in the order the model spec needs them.
pub fn from_config(text: &str, name: &str) -> Result<ModelSpec, ConfigError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| err("", format!("not JSON: {e}")))?;
    if !doc.is_object() {
        return Err(err("", "not a JSON object"));
    }
    // Multimodal checkpoints keep the language model's numbers in `text_config`; keys a
    // checkpoint leaves to its library's defaults are in `_inferscale.implied_defaults`.
    let root = Cfg(&doc);
    let ours = doc.get("_inferscale");
    let mut merged = ours
        .and_then(|o| o.get("implied_defaults"))
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let text = doc
        .get("text_config")
        .filter(|v| v.is_object())
        .unwrap_or(&doc);
    if let (Some(m), Some(t)) = (merged.as_object_mut(), text.as_object()) {
        for (k, v) in t {
            m.insert(k.clone(), v.clone());
        }
    }
    let t = Cfg(&merged);
    let our_f64 = |k: &str| ours.and_then(|o| o.get(k)).and_then(Value::as_f64);
    let our_text = |k: &str| ours.and_then(|o| o.get(k)).and_then(Value::as_str);
    let hidden = t.req("hidden_size")?;
    let layers = t.req("num_hidden_layers")?;
    let heads = t.req("num_attention_heads")?;
    let kv_heads = t.opt("num_key_value_heads")?.unwrap_or(heads).max(1);
    let head_dim = t.opt("head_dim")?.unwrap_or(hidden / heads).max(1);
    let vocab = t.req("vocab_size")?;
    let intermediate = t
        .first(&["intermediate_size", "ffn_dim"])?
        .unwrap_or(4 * hidden);
    let tied = t
        .flag("tie_word_embeddings")
        .or_else(|| root.flag("tie_word_embeddings"))
        .unwrap_or(false);
    let max_context = t.opt("max_position_embeddings")?.unwrap_or(4096);
    let (h, l) = (f64::from(hidden), f64::from(layers));

    // Attention, per layer.
    let kv_lora = t.opt("kv_lora_rank")?;
    let (attn_params, kv_latent_dim, attn_dims) = match kv_lora {
        Some(kv_lora) => {
            let rope = t.opt("qk_rope_head_dim")?.unwrap_or(64);
            let nope = t.opt("qk_nope_head_dim")?.unwrap_or(128);
            let v = t.opt("v_head_dim")?.unwrap_or(128);
            let hf = f64::from(heads);
            let q = match t.opt("q_lora_rank")? {
                Some(r) => h * f64::from(r) + f64::from(r) * hf * f64::from(nope + rope),
                None => h * hf * f64::from(nope + rope),
            };
            let kv = h * f64::from(kv_lora + rope) + f64::from(kv_lora) * hf * f64::from(nope + v);
            let o = hf * f64::from(v) * h;
            (
                q + kv + o,
                Some(kv_lora + rope),
                Some((kv_lora + rope, kv_lora)),
            )
        }
        None => {
            // Qwen3.5's gated attention: q_proj also yields the output gate.
            let gate = if t.flag("attn_output_gate").unwrap_or(false) {
                2.0
            } else {
                1.0
            };
            let q = gate * h * f64::from(heads * head_dim);
            let kv = 2.0 * h * f64::from(kv_heads * head_dim);
            let o = f64::from(heads * head_dim) * h;
            (q + kv + o, None, None)
        }
    };
    let (linear_layers, linear_params) =
        linear_attention(&t, layers, h, f64::from(heads * head_dim))?;

    // Feed-forward: dense layers, and the routed and shared experts of the sparse ones.
    let experts = t.first(&["n_routed_experts", "num_local_experts", "num_experts"])?;
    let top_k = t.first(&["num_experts_per_tok", "num_experts_per_token", "moe_topk"])?;
    let gated = 3.0; // gate, up and down projections
    let (ffn_params, moe) = match (experts, top_k) {
        (Some(e), Some(k)) if e > 1 => {
            let expert_size = t.opt("moe_intermediate_size")?.unwrap_or(intermediate);
            let shared = t.opt("n_shared_experts")?.unwrap_or(0);
            let shared_size = t
                .opt("shared_expert_intermediate_size")?
                .unwrap_or(expert_size * shared);
            let dense_first = t.opt("first_k_dense_replace")?.unwrap_or(0).min(layers);
            let step = t
                .first(&[
                    "decoder_sparse_step",
                    "moe_layer_freq",
                    "interleave_moe_layer_step",
                ])?
                .unwrap_or(1)
                .max(1);
            let mlp_only =
                t.0.get("mlp_only_layers")
                    .and_then(Value::as_array)
                    .map_or(0, |a| a.len() as u32);
            let sparse = (dense_first..layers)
                .filter(|i| (i + 1) % step == 0)
                .count() as u32;
            let sparse = sparse.saturating_sub(mlp_only);
            let dense = layers - sparse;
            let sf = f64::from(sparse);
            let routed = sf * f64::from(e) * gated * h * f64::from(expert_size);
            let shared_p = sf * gated * h * f64::from(shared_size);
            let router = sf * h * f64::from(e);
            // Llama 4 sizes its dense layers apart from its experts.
            let dense_size = t.opt("intermediate_size_mlp")?.unwrap_or(intermediate);
            let dense_p = f64::from(dense) * gated * h * f64::from(dense_size);
            (
                routed + shared_p + router + dense_p,
                Some(Moe {
                    experts: e,
                    top_k: k.min(e),
                    expert_params_b: routed / 1e9,
                }),
            )
        }
        _ => (l * gated * h * f64::from(intermediate), None),
    };
    let norms = l * 2.0 * h + h;
    let full_layers = f64::from(layers - linear_layers);
    let decoder = full_layers * attn_params + linear_params + ffn_params + norms;
    let embed = f64::from(vocab) * h;
    let head = if tied { 0.0 } else { embed };
    let extra_params_b = our_f64("extra_params_b").unwrap_or(0.0);
    let params_b = (decoder + embed + head) / 1e9 + extra_params_b;

    // Sliding windows: per layer types, an interleaving pattern, or every layer.
    let window = t.opt("sliding_window")?;
    let uses_window = t.flag("use_sliding_window").unwrap_or(true);
    let sliding = match window.filter(|w| *w > 0 && uses_window) {
        None => None,
        Some(w) => {
            let typed = t.0.get("layer_types").and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter(|x| x.as_str() == Some("sliding_attention"))
                    .count() as u32
            });
            let n = match (typed, t.opt("sliding_window_pattern")?) {
                (Some(n), _) => n,
                // One global layer every `pattern` layers.
                (None, Some(p)) if p > 1 => layers - layers / p,
                _ => our_f64("sliding_layers").map_or(layers, |v| v as u32),
            };
            (w < max_context && n > 0).then_some(Sliding {
                window: w,
                layers: n.min(layers),
            })
        }
    };

    // The checkpoint's weights.
    let quant = root
        .0
        .get("quantization_config")
        .or_else(|| t.0.get("quantization_config"));
    let method = quant
        .and_then(|q| q.get("quant_method"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let bits = quant.and_then(|q| q.get("bits")).and_then(Value::as_u64);
    let format = quant
        .and_then(|q| q.get("format"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let quantised = match (method.as_deref(), bits) {
        (None, _) => None,
        (Some("awq" | "gptq"), Some(8)) => Some(WeightDtype::Fp8),
        // llm-compressor's checkpoints name the packing: 4-bit integers packed, FP4, or
        // 8-bit floats or integers.
        (Some("compressed-tensors"), _) => Some(match format {
            "pack-quantized" | "marlin-24" => WeightDtype::Int4,
            "nvfp4-pack-quantized" => WeightDtype::Nvfp4,
            "mxfp4-pack-quantized" => WeightDtype::Mxfp4,
            "float-quantized" | "int-quantized" | "naive-quantized" => WeightDtype::Fp8,
            other => {
                return Err(err(
                    "quantization_config.format",
                    format!(
                        "{other:?} is not modelled (pack-quantized, nvfp4-pack-quantized, float-quantized, int-quantized)"
                    ),
                ));
            }
        }),
        (Some(m), _) => Some(WeightDtype::parse(m).ok_or_else(|| {
            err(
                "quantization_config.quant_method",
                format!("{m:?} is not modelled"),
            )
        })?),
    };
    // gpt-oss quantises its experts alone, and so do Kimi's INT4 releases.
    let (native_dtype, expert_dtype) = match quantised {
        Some(WeightDtype::Mxfp4) if moe.is_some() => (WeightDtype::Bf16, Some(WeightDtype::Mxfp4)),
        Some(WeightDtype::Int4) if moe.is_some() && format == "pack-quantized" => {
            (WeightDtype::Bf16, Some(WeightDtype::Int4))
        }
        Some(d) => (d, None),
        None => (WeightDtype::Bf16, None),
    };
    let name = our_text("name").unwrap_or(name).to_owned();
    let hf_id = our_text("hf_id").map_or_else(|| name.clone(), str::to_owned);
    Ok(ModelSpec {
        name,
        hf_id,
        params_b,
        layers,
        hidden,
        q_heads: heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        max_context,
        tied_embeddings: tied,
        extra_params_b,
        moe,
        native_dtype,
        loaded_gib: our_f64("loaded_gib"),
        kv_latent_dim,
        attn_dims,
        sliding,
        expert_dtype,
        linear_layers,
    })
}

/// Linear-attention layers (`layer_types` of `linear_attention`, MiniMax's `attn_type_list`
/// of 0, or one full layer every `full_attention_interval`) and their parameters: Gated
/// DeltaNet's projections from the `linear_*` keys, or, where a family names none,
/// lightning attention's (MiniMax: query, key, value, an output gate and the output, each
/// `heads × head_dim` wide, no grouping).
fn linear_attention(
    t: &Cfg<'_>,
    layers: u32,
    h: f64,
    width: f64,
) -> Result<(u32, f64), ConfigError> {
    let typed = t.0.get("layer_types").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter(|x| x.as_str() == Some("linear_attention"))
            .count() as u32
    });
    let listed =
        t.0.get("attn_type_list")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(|x| x.as_u64() == Some(0)).count() as u32);
    let n = match (typed, listed, t.opt("full_attention_interval")?) {
        (Some(n), _, _) | (None, Some(n), _) => n,
        (None, None, Some(k)) if k > 1 && t.opt("linear_num_value_heads")?.is_some() => {
            layers - layers / k
        }
        _ => 0,
    }
    .min(layers);
    if n == 0 {
        return Ok((0, 0.0));
    }
    let per_layer = match (
        t.opt("linear_num_key_heads")?,
        t.opt("linear_key_head_dim")?,
        t.opt("linear_num_value_heads")?,
        t.opt("linear_value_head_dim")?,
    ) {
        (Some(kh), Some(kd), Some(vh), Some(vd)) => {
            let key = f64::from(kh * kd);
            let value = f64::from(vh * vd);
            let kernel = f64::from(t.opt("linear_conv_kernel_dim")?.unwrap_or(4));
            // q, k, v and z in; the decay and gate (a, b) per value head; a short
            // convolution over q, k, v; out.
            h * (2.0 * key + 2.0 * value)
                + h * 2.0 * f64::from(vh)
                + (2.0 * key + value) * kernel
                + value * h
        }
        _ => 5.0 * h * width,
    };
    Ok((n, f64::from(n) * per_layer))
}

/// The built-in models' files.
const BUILTIN: &[&str] = &[
    include_str!("../models/CodeLlama-34B.json"),
    include_str!("../models/DeepSeek-R1.json"),
    include_str!("../models/DeepSeek-V2-Lite.json"),
    include_str!("../models/DeepSeek-V2.json"),
    include_str!("../models/DeepSeek-V3.2.json"),
    include_str!("../models/DeepSeek-V3.json"),
    include_str!("../models/GLM-4.5-Air.json"),
    include_str!("../models/GLM-4.5.json"),
    include_str!("../models/GLM-4.6.json"),
    include_str!("../models/Gemma-2-27B.json"),
    include_str!("../models/Gemma-2-2B.json"),
    include_str!("../models/Gemma-2-9B.json"),
    include_str!("../models/Gemma-3-1B.json"),
    include_str!("../models/Gemma-3-27B.json"),
    include_str!("../models/Kimi-K2.5.json"),
    include_str!("../models/Kimi-K2.json"),
    include_str!("../models/Llama-2-70B.json"),
    include_str!("../models/Llama-2-7B.json"),
    include_str!("../models/Llama-3-8B.json"),
    include_str!("../models/Llama-3.1-405B.json"),
    include_str!("../models/Llama-3.1-70B.json"),
    include_str!("../models/Llama-3.1-8B.json"),
    include_str!("../models/Llama-3.2-1B.json"),
    include_str!("../models/Llama-3.2-3B.json"),
    include_str!("../models/Llama-3.3-70B.json"),
    include_str!("../models/Llama-4-Maverick.json"),
    include_str!("../models/Llama-4-Scout.json"),
    include_str!("../models/MiniMax-M1.json"),
    include_str!("../models/MiniMax-M2.5.json"),
    include_str!("../models/MiniMax-M2.json"),
    include_str!("../models/Ministral-3-8B.json"),
    include_str!("../models/Ministral-8B.json"),
    include_str!("../models/Mistral-7B.json"),
    include_str!("../models/Mistral-Nemo-12B.json"),
    include_str!("../models/Mistral-Small-24B.json"),
    include_str!("../models/Mixtral-8x22B.json"),
    include_str!("../models/Mixtral-8x7B.json"),
    include_str!("../models/Phi-3-medium.json"),
    include_str!("../models/Phi-3-mini.json"),
    include_str!("../models/Phi-3-small.json"),
    include_str!("../models/Phi-3.5-mini.json"),
    include_str!("../models/Phi-4-mini.json"),
    include_str!("../models/Phi-4.json"),
    include_str!("../models/Qwen2.5-0.5B.json"),
    include_str!("../models/Qwen2.5-1.5B.json"),
    include_str!("../models/Qwen2.5-14B.json"),
    include_str!("../models/Qwen2.5-32B.json"),
    include_str!("../models/Qwen2.5-3B.json"),
    include_str!("../models/Qwen2.5-72B.json"),
    include_str!("../models/Qwen2.5-7B.json"),
    include_str!("../models/Qwen3-0.6B.json"),
    include_str!("../models/Qwen3-1.7B.json"),
    include_str!("../models/Qwen3-14B.json"),
    include_str!("../models/Qwen3-235B-A22B.json"),
    include_str!("../models/Qwen3-30B-A3B.json"),
    include_str!("../models/Qwen3-32B.json"),
    include_str!("../models/Qwen3-4B.json"),
    include_str!("../models/Qwen3-8B.json"),
    include_str!("../models/Qwen3-Coder-480B-A35B.json"),
    include_str!("../models/Qwen3.5-122B-A10B.json"),
    include_str!("../models/Qwen3.5-27B.json"),
    include_str!("../models/Qwen3.5-35B-A3B.json"),
    include_str!("../models/Qwen3.5-397B-A17B.json"),
    include_str!("../models/Yi-1.5-34B.json"),
    include_str!("../models/Yi-34B.json"),
    include_str!("../models/gpt-oss-120b.json"),
    include_str!("../models/gpt-oss-20b.json"),
];

/// The built-in models, read from their `config.json` files.
pub fn builtin() -> Vec<ModelSpec> {
    builtin_names().iter().map(|(m, _)| m.clone()).collect()
}

/// The built-in models, read once, each with every name it answers to: its short name, its
/// Hugging Face id and the aliases its file lists (other ids of the same architecture).
pub fn builtin_names() -> &'static [(ModelSpec, Vec<String>)] {
    static READ: std::sync::OnceLock<Vec<(ModelSpec, Vec<String>)>> = std::sync::OnceLock::new();
    READ.get_or_init(|| {
        BUILTIN
            .iter()
            .filter_map(|text| {
                let m = from_config(text, "").ok()?;
                let aliases = serde_json::from_str::<Value>(text)
                    .ok()
                    .and_then(|d| d.pointer("/_inferscale/aliases").cloned())
                    .and_then(|a| a.as_array().cloned())
                    .unwrap_or_default();
                let mut names = vec![m.name.clone(), m.hf_id.clone()];
                names.extend(aliases.iter().filter_map(Value::as_str).map(str::to_owned));
                Some((m, names))
            })
            .collect()
    })
}

/// The built-in model `name` answers to, as [`crate::names::resolve`] reads names (the
/// organisation, case, quantisation and release words forgiven; the weights' dtype set by
/// the name's quantisation words).
pub fn find(name: &str) -> Option<ModelSpec> {
    crate::names::resolve(name).ok().map(|r| r.spec)
}

/// Every built-in file reads (a test holds it; `builtin` skips one that would not).
pub fn builtin_errors() -> Vec<String> {
    BUILTIN
        .iter()
        .enumerate()
        .filter_map(|(i, text)| {
            from_config(text, "")
                .err()
                .map(|e| format!("file {i}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> ModelSpec {
        find(name).unwrap_or_else(|| panic!("no {name}"))
    }

    #[test]
    fn every_builtin_file_reads_and_its_parameters_match_the_published_count() {
        assert_eq!(builtin_errors(), Vec::<String>::new());
        assert_eq!(builtin().len(), BUILTIN.len());
        for text in BUILTIN {
            let doc: Value = serde_json::from_str(text).unwrap();
            let m = from_config(text, "").unwrap();
            let Some(published) = doc.pointer("/_inferscale/params_b").and_then(Value::as_f64)
            else {
                continue;
            };
            // Counts from the architecture: within 6 % of the model card's (cards round, and
            // some count tied or multi-token-prediction weights differently).
            let err = (m.params_b - published).abs() / published;
            assert!(
                err < 0.06,
                "{}: {:.2}B from config, {published}B published",
                m.name,
                m.params_b
            );
            if let (Some(active), Some(_)) = (
                doc.pointer("/_inferscale/active_params_b")
                    .and_then(Value::as_f64),
                &m.moe,
            ) {
                let a =
                    (m.active_decoder_params() + f64::from(m.vocab) * f64::from(m.hidden)) / 1e9;
                let err = (a - active).abs() / active;
                assert!(
                    err < 0.15,
                    "{}: {a:.2}B active from config, {active}B published",
                    m.name
                );
            }
        }
    }

    #[test]
    fn attention_variants_change_the_kv_bytes_per_token() {
        // Grouped-query attention, the reference table's values.
        assert_eq!(model("Llama-3.1-8B").kv_bytes_per_token(1, 2.0), 131072.0);
        assert_eq!(model("Llama-2-7B").kv_bytes_per_token(1, 2.0), 524288.0);
        assert_eq!(
            model("Llama-3.1-70B").kv_bytes_per_token(4, 2.0),
            327680.0 / 4.0
        );
        // MLA: 61 layers × (512 + 64) latent, not split by tensor parallelism.
        let ds = model("DeepSeek-V3");
        assert_eq!(ds.kv_bytes_per_token(8, 1.0), 61.0 * 576.0);
        assert_eq!(ds.native_dtype, WeightDtype::Fp8);
        // gpt-oss: half its layers keep a 128-token window; MXFP4 experts.
        let oss = model("gpt-oss-120b");
        let full = 2.0 * 36.0 * 8.0 * 64.0 * 2.0;
        let kv = oss.kv_bytes_per_token(1, 2.0);
        assert!(kv < 0.6 * full && kv > 0.5 * full, "{kv} of {full}");
        assert_eq!(oss.expert_dtype, Some(WeightDtype::Mxfp4));
        // ~117B parameters in ~65 GB: experts at about half a byte.
        let gb = oss.loaded_bytes(oss.native_dtype) / 1e9;
        assert!((55.0..75.0).contains(&gb), "{gb} GB");
        // An MoE step reads the experts tokens were routed to, not all of them.
        let q = model("Qwen3-30B-A3B");
        assert!(q.step_weight_bytes(q.native_dtype, 1) < 0.2 * q.loaded_bytes(q.native_dtype));
        assert!(q.step_weight_bytes(q.native_dtype, 512) > 0.9 * q.loaded_bytes(q.native_dtype));
    }

    #[test]
    fn a_bad_config_names_the_key() {
        let e = from_config(r#"{"hidden_size": 4096}"#, "x").unwrap_err();
        assert_eq!(e.key, "num_hidden_layers");
        let e =
            from_config(r#"{"hidden_size": 4096, "num_hidden_layers": "many"}"#, "x").unwrap_err();
        assert!(
            e.to_string()
                .contains("num_hidden_layers: \"many\" is not a whole number"),
            "{e}"
        );
        assert!(from_config("[1]", "x").is_err());
        let e = from_config(
            r#"{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10,
               "quantization_config": {"quant_method": "bitsandbytes"}}"#,
            "x",
        )
        .unwrap_err();
        assert_eq!(e.key, "quantization_config.quant_method");
    }
}
