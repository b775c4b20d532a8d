//! Named setups (`--profile NAME`): a GPU, a model and vLLM flags that belong together.

use crate::engine::{EngineConfig, OutputLength};
use crate::hardware::find_gpu;
use crate::model::find_model;

/// A named setup and what it stands for.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The name on the command line.
    pub name: &'static str,
    /// One line on what it simulates.
    pub description: &'static str,
}

/// Every built-in profile.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "aws-eks-ministral-8b-l40s",
        description: "the seeds' deployment: Ministral-3-8B-Instruct-2512 (FP8) on one L40S (g6e.4xlarge), \
                      vLLM V1 with --max-num-seqs 128 --max-model-len 8192 --gpu-memory-utilization 0.9 --enforce-eager",
    },
    Profile {
        name: "h100-llama-3.1-8b",
        description: "Llama-3.1-8B-Instruct (BF16) on one H100 SXM with vLLM's defaults (CUDA graphs)",
    },
    Profile {
        name: "h100-llama-3.1-70b-tp4",
        description: "Llama-3.1-70B-Instruct (BF16) on four H100 SXM, tensor parallel 4",
    },
    Profile {
        name: "instant",
        description: "no model delay at all: every token is ready at once (for benchmarking clients and servers)",
    },
];

/// The configuration of a profile, or `None` for an unknown name.
pub fn profile(name: &str) -> Option<EngineConfig> {
    let gpu_model = |g: &str, m: &str| Some(EngineConfig::new(find_gpu(g)?, find_model(m)?));
    match name {
        "aws-eks-ministral-8b-l40s" => {
            let mut c = gpu_model("L40S", "Ministral-3-8B")?;
            c.max_num_seqs = 128;
            c.max_model_len = 8192;
            c.gpu_memory_utilization = 0.9;
            c.enforce_eager = true;
            // The seeds' prompt asks for "about 80 words" (≈ 1.35 tokens a word); with
            // max_tokens 100 most answers are cut at the limit, some end earlier.
            c.output_length = OutputLength::LogNormal {
                median: 110.0,
                sigma: 0.25,
            };
            Some(c)
        }
        "h100-llama-3.1-8b" => {
            let mut c = gpu_model("H100", "Llama-3.1-8B")?;
            c.output_length = OutputLength::LogNormal {
                median: 250.0,
                sigma: 0.8,
            };
            Some(c)
        }
        "h100-llama-3.1-70b-tp4" => {
            let mut c = gpu_model("H100", "Llama-3.1-70B")?;
            c.tensor_parallel_size = 4;
            c.output_length = OutputLength::LogNormal {
                median: 250.0,
                sigma: 0.8,
            };
            Some(c)
        }
        "instant" => {
            let mut c = gpu_model("H100", "Qwen3-0.6B")?;
            c.instant = true;
            c.max_num_seqs = 1_000_000;
            c.max_num_batched_tokens = u32::MAX / 4;
            c.max_model_len = 1 << 20;
            Some(c)
        }
        _ => None,
    }
}
