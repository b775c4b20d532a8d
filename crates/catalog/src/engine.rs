//! Which engine (or exporter) produced an exposition.

use std::fmt;

use inferscale_promtext::Exposition;

/// A producer of metrics inferscale knows how to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Engine {
    /// vLLM (names `vllm:…`).
    Vllm,
    /// SGLang (names `sglang:…`).
    Sglang,
    /// Hugging Face text-generation-inference (names `tgi_…`).
    Tgi,
    /// llama.cpp's `llama-server --metrics` (names `llamacpp:…`).
    LlamaCpp,
    /// TensorRT-LLM's `trtllm-serve` (names `trtllm_…`).
    TrtLlm,
    /// NVIDIA's DCGM exporter (names `DCGM_FI_…`, or `dcgm_…` with `--use-old-namespace`).
    Dcgm,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 6] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::TrtLlm,
        Engine::Dcgm,
    ];

    /// The stable lower-case key used in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::LlamaCpp => "llamacpp",
            Engine::TrtLlm => "trtllm",
            Engine::Dcgm => "dcgm",
        }
    }

    /// The inference engines (every engine but the GPU exporter): what `--engine` accepts.
    pub const SERVING: [Engine; 5] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::TrtLlm,
    ];

    /// The engine whose [`key`](Engine::key) this is.
    pub fn from_key(key: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.key() == key.trim())
    }

    /// Its name as its project spells it (`llama.cpp`, `vLLM`).
    pub fn title(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::Tgi => "TGI",
            Engine::LlamaCpp => "llama.cpp",
            Engine::TrtLlm => "TensorRT-LLM",
            Engine::Dcgm => "DCGM exporter",
        }
    }

    /// The label its series carry the served model's name in, if any: vLLM and SGLang label
    /// every family with `model_name`; TGI and llama.cpp serve one model per process and
    /// label nothing, so their series are told apart by Prometheus' target labels alone.
    pub fn model_label(self) -> Option<&'static str> {
        match self {
            Engine::Vllm | Engine::Sglang => Some("model_name"),
            Engine::Tgi | Engine::LlamaCpp | Engine::TrtLlm | Engine::Dcgm => None,
        }
    }

    /// Whether it serves a metric for `signal` (under any name).
    pub fn serves(self, signal: crate::Signal) -> bool {
        crate::names_of(self, signal).next().is_some()
    }

    /// The signals the method reads that it does not serve, in display order (what the
    /// generated files say they substitute or leave out).
    pub fn lacks(self) -> Vec<crate::Signal> {
        crate::Signal::ALL
            .into_iter()
            .filter(|s| s.tier() != crate::Tier::Gpu && s.in_method() && !self.serves(*s))
            .collect()
    }

    /// Whether a metric name is one of this engine's.
    pub fn owns(self, name: &str) -> bool {
        match self {
            Engine::Vllm => name.starts_with("vllm:"),
            Engine::Sglang => name.starts_with("sglang:"),
            Engine::Tgi => name.starts_with("tgi_"),
            Engine::LlamaCpp => name.starts_with("llamacpp:"),
            Engine::TrtLlm => name.starts_with("trtllm_"),
            Engine::Dcgm => name.starts_with("DCGM_FI_") || name.starts_with("dcgm_"),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// The engines present in an exposition, most samples first. A node's scrape can hold
/// several (vLLM and the DCGM exporter behind one federation endpoint, say).
///
/// ```
/// use inferscale_catalog::{detect, Engine};
/// let exp = inferscale_promtext::parse(b"vllm:num_requests_waiting 1\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 40\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 4\n").unwrap();
/// assert_eq!(detect(&exp), vec![Engine::Dcgm, Engine::Vllm]);
/// ```
pub fn detect(exp: &Exposition<'_>) -> Vec<Engine> {
    let mut counts = [0usize; Engine::ALL.len()];
    for family in exp.families() {
        if let Some(i) = Engine::ALL.iter().position(|e| e.owns(family.name())) {
            counts[i] += family.len().max(1);
        }
    }
    let mut found: Vec<(usize, Engine)> = Engine::ALL
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(e, n)| (n, *e))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    found.into_iter().map(|(_, e)| e).collect()
}
