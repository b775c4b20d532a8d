//! vLLM's serving flags as one type: what `sim` takes on its command line, what `predict`
//! and `fidelity` take per case. Every field is optional; what is not given keeps the
//! defaults [`EngineConfig::new`] chose for the GPU (as vLLM picks them at start-up), and
//! what is given is checked, naming the flag.

use crate::engine::EngineConfig;
use crate::model::WeightDtype;

/// Overrides of vLLM's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `--tensor-parallel-size`.
    pub tensor_parallel_size: Option<u32>,
    /// The weights' storage (`--quantization`, or the checkpoint's).
    pub dtype: Option<WeightDtype>,
    /// Bytes per KV-cache element (`--kv-cache-dtype`: 2 for `auto` on 16-bit, 1 for `fp8`).
    pub kv_dtype_bytes: Option<f64>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u32>,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u32>,
    /// `--max-model-len`.
    pub max_model_len: Option<u32>,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// `--enforce-eager`.
    pub enforce_eager: Option<bool>,
}

/// A setting out of range: the flag, the value, and what is expected.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsError {
    /// The flag (`--max-num-seqs`).
    pub flag: &'static str,
    /// The value given.
    pub value: String,
    /// What it must be.
    pub expected: std::borrow::Cow<'static, str>,
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.flag, self.value, self.expected)
    }
}

impl std::error::Error for SettingsError {}

fn positive(flag: &'static str, v: Option<u32>, max: u32) -> Result<Option<u32>, SettingsError> {
    match v {
        Some(x) if x == 0 || x > max => Err(SettingsError {
            flag,
            value: x.to_string(),
            expected: "a positive whole number in range".into(),
        }),
        other => Ok(other),
    }
}

impl Settings {
    /// Applies the settings given to `cfg`.
    ///
    /// # Errors
    ///
    /// When a value is out of range.
    pub fn apply(&self, cfg: &mut EngineConfig) -> Result<(), SettingsError> {
        if let Some(tp) = positive("--tensor-parallel-size", self.tensor_parallel_size, 64)? {
            cfg.tensor_parallel_size = tp;
        }
        if let Some(d) = self.dtype {
            cfg.dtype = d;
        }
        if let Err(why) = cfg.gpu.runs(cfg.dtype) {
            return Err(SettingsError {
                flag: "--quantization",
                value: cfg.dtype.name().to_owned(),
                expected: why.to_string().into(),
            });
        }
        if let Some(b) = self.kv_dtype_bytes {
            if !(b == 1.0 || b == 2.0 || b == 4.0) {
                return Err(SettingsError {
                    flag: "--kv-cache-dtype",
                    value: format!("{b} bytes"),
                    expected: "auto (16-bit), fp8 or fp32".into(),
                });
            }
            cfg.kv_dtype_bytes = b;
        }
        if let Some(n) = positive("--max-num-seqs", self.max_num_seqs, 1 << 20)? {
            cfg.max_num_seqs = n;
        }
        if let Some(n) = positive(
            "--max-num-batched-tokens",
            self.max_num_batched_tokens,
            1 << 24,
        )? {
            cfg.max_num_batched_tokens = n;
        }
        if let Some(n) = positive("--max-model-len", self.max_model_len, 1 << 24)? {
            cfg.max_model_len = n;
        }
        if let Some(u) = self.gpu_memory_utilization {
            if !(u > 0.0 && u <= 1.0) {
                return Err(SettingsError {
                    flag: "--gpu-memory-utilization",
                    value: u.to_string(),
                    expected: "a fraction in (0, 1]".into(),
                });
            }
            cfg.gpu_memory_utilization = u;
        }
        if let Some(e) = self.enforce_eager {
            cfg.enforce_eager = e;
        }
        Ok(())
    }
}
