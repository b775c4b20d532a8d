//! Model names as people write them, resolved to one built-in architecture and the weights'
//! dtype the name implies.
//!
//! A served model is named by its Hugging Face id, and the same architecture goes by many:
//! `meta-llama/Llama-3.1-70B` (the base), `…-Instruct`, `Meta-Llama-3.1-70B-Instruct` (the
//! older spelling), `nvidia/Llama-3.1-70B-Instruct-FP8` and `RedHatAI/…-quantized.w4a16`
//! (quantised re-uploads), `Qwen3-235B-A22B-Instruct-2507-FP8` (a dated release, quantised).
//! A name is matched in stages, each forgiving more than the one before, so that the closest
//! spelling wins when two built-ins differ only in what a later stage drops:
//!
//! 1. exactly, ignoring case and the organisation;
//! 2. without the quantisation words (`FP8`, `FP8-dynamic`, `AWQ`, `GPTQ-Int4`, `w4a16`,
//!    `NVFP4`, `MXFP4`, `BF16`, …), which set the weights' dtype instead;
//! 3. also without the release words (`Instruct`, `Chat`, `it`, `Base`, `hf`, `Thinking`,
//!    dates such as `2507` or `0528`, the `Meta-` of `Meta-Llama`);
//! 4. also without version words (`v0.2`, `v1.5`).
//!
//! A name none of the stages finds gets the closest built-in names in its error.
//!
//! ```
//! use inferscale_engine::model::WeightDtype;
//! use inferscale_engine::names::resolve;
//!
//! let r = resolve("nvidia/Llama-3.1-8B-Instruct-FP8").unwrap();
//! assert_eq!(r.spec.name, "Llama-3.1-8B");
//! assert_eq!(r.spec.native_dtype, WeightDtype::Fp8);
//! assert_eq!(resolve("meta-llama/Llama-3.1-70B").unwrap().spec.name, "Llama-3.1-70B");
//! let e = resolve("Lama-3.1-8B").unwrap_err();
//! assert!(e.suggestions.iter().any(|s| s == "Llama-3.1-8B"), "{e}");
//! ```

use std::fmt;

use crate::model::{ModelSpec, WeightDtype};

/// A name resolved to a built-in architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The architecture, with `native_dtype` set to what the name implies and `hf_id` set to
    /// the name as given when it names an organisation.
    pub spec: ModelSpec,
    /// The dtype the name's quantisation words imply (`None`: it says nothing).
    pub named_dtype: Option<WeightDtype>,
    /// The stage that matched (1 exact … 4 without version words).
    pub stage: u8,
}

/// A name that no built-in architecture answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownModel {
    /// The name as given.
    pub name: String,
    /// The closest built-in names, closest first (at most three).
    pub suggestions: Vec<String>,
}

impl fmt::Display for UnknownModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown model {:?}", self.name)?;
        if !self.suggestions.is_empty() {
            write!(f, " (closest built-in: {})", self.suggestions.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownModel {}

/// Words that say how the weights are stored, and the dtype each implies (`None`: a word of
/// a quantisation recipe that implies nothing alone, such as `dynamic`).
fn quant_word(w: &str) -> Option<Option<WeightDtype>> {
    Some(match w {
        "fp8" | "f8" | "w8a8" | "w8a16" | "int8" | "8bit" | "fp8dynamic" => Some(WeightDtype::Fp8),
        "awq" | "gptq" | "int4" | "w4a16" | "4bit" | "bnb" | "w4a4" => Some(WeightDtype::Int4),
        "nvfp4" | "fp4" | "modelopt" => Some(WeightDtype::Nvfp4),
        "mxfp4" => Some(WeightDtype::Mxfp4),
        "bf16" | "fp16" | "bfloat16" | "float16" => Some(WeightDtype::Bf16),
        "dynamic" | "static" | "block" | "quantized" | "marlin" | "kv" | "gguf" | "mlx" => None,
        _ => return None,
    })
}

/// The dtype one quantisation word names (`w8a8`, `int4`, `fp4`), as in model names.
pub fn resolve_dtype_word(w: &str) -> Option<WeightDtype> {
    quant_word(&w.to_ascii_lowercase()).flatten()
}

/// Words that name a release of an architecture rather than the architecture.
fn release_word(w: &str) -> bool {
    matches!(
        w,
        "instruct" | "chat" | "it" | "base" | "hf" | "thinking" | "reasoning" | "preview"
    ) || (w.len() >= 4 && w.len() <= 8 && w.bytes().all(|b| b.is_ascii_digit()))
}

/// `v0.2`, `v3`, `v1.5`.
fn version_word(w: &str) -> bool {
    w.strip_prefix('v')
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// A name's words at `stage` (see the module's doc), and the dtype its quantisation words
/// imply.
fn words(name: &str, stage: u8) -> (Vec<String>, Option<WeightDtype>) {
    let last = name.trim().rsplit('/').next().unwrap_or_default();
    let lower = last.to_ascii_lowercase().replace(['_', ' '], "-");
    let mut dtype = None;
    let mut out = Vec::new();
    for w in lower.split('-').filter(|w| !w.is_empty()) {
        // `quantized.w4a16`: each dotted part may be a quantisation word.
        let parts: Vec<&str> = w.split('.').collect();
        let q: Vec<Option<Option<WeightDtype>>> = parts.iter().map(|p| quant_word(p)).collect();
        if q.iter().all(Option::is_some) && !parts.iter().any(|p| p.is_empty()) {
            if let Some(d) = q.into_iter().flatten().flatten().next() {
                dtype.get_or_insert(d);
            }
            if stage >= 2 {
                continue;
            }
        }
        if stage >= 3 && release_word(w) {
            continue;
        }
        if stage >= 4 && version_word(w) {
            continue;
        }
        out.push(w.to_owned());
    }
    if stage >= 3 && out.first().is_some_and(|w| w == "meta") && out.len() > 1 {
        out.remove(0);
    }
    (out, dtype)
}

fn key(name: &str, stage: u8) -> String {
    words(name, stage).0.join("-")
}

/// Edit distance between two short strings (names).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Resolves `name` among `known`: each architecture with every name it answers to (its
/// short name, Hugging Face id and aliases).
///
/// # Errors
///
/// When no stage matches; the error carries the closest names.
pub fn resolve_among(
    name: &str,
    known: &[(ModelSpec, Vec<String>)],
) -> Result<Resolved, UnknownModel> {
    let named_dtype = words(name, 1).1;
    for stage in 1..=4u8 {
        let want = key(name, stage);
        if want.is_empty() {
            break;
        }
        let hit = known
            .iter()
            .find(|(_, names)| names.iter().any(|n| key(n, stage) == want));
        if let Some((spec, _)) = hit {
            let mut spec = spec.clone();
            if let Some(d) = named_dtype
                && d != spec.native_dtype
            {
                // A re-upload in another dtype: the measured size was of the original.
                spec.native_dtype = d;
                spec.loaded_gib = None;
                spec.expert_dtype = None;
            }
            if name.contains('/') {
                name.trim().clone_into(&mut spec.hf_id);
            }
            return Ok(Resolved {
                spec,
                named_dtype,
                stage,
            });
        }
    }
    let want = key(name, 3);
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .map(|(spec, names)| {
            let d = names
                .iter()
                .map(|n| distance(&key(n, 3), &want))
                .min()
                .unwrap_or(usize::MAX);
            (d, spec.name.as_str())
        })
        .collect();
    scored.sort();
    // Only names near enough to be a misspelling or a sibling size.
    let limit = (want.chars().count() / 2).max(3);
    Err(UnknownModel {
        name: name.trim().to_owned(),
        suggestions: scored
            .into_iter()
            .filter(|(d, _)| *d <= limit)
            .take(3)
            .map(|(_, n)| n.to_owned())
            .collect(),
    })
}

/// Resolves `name` among the built-in models.
///
/// # Errors
///
/// When no built-in model answers to it; the error carries the closest names.
pub fn resolve(name: &str) -> Result<Resolved, UnknownModel> {
    resolve_among(name, crate::hf::builtin_names())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> String {
        resolve(n)
            .map(|r| r.spec.name)
            .unwrap_or_else(|e| e.to_string())
    }

    fn dtype(n: &str) -> WeightDtype {
        resolve(n).unwrap().spec.native_dtype
    }

    #[test]
    fn names_as_people_write_them_find_one_architecture() {
        for (given, want) in [
            ("meta-llama/Llama-3.1-70B", "Llama-3.1-70B"),
            ("meta-llama/Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
            ("meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
            ("llama-3.1-70b", "Llama-3.1-70B"),
            ("nvidia/Llama-3.1-8B-Instruct-FP8", "Llama-3.1-8B"),
            (
                "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
                "Llama-3.1-8B",
            ),
            (
                "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
                "Llama-3.1-8B",
            ),
            ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen3-235B-A22B"),
            ("mistralai/Mistral-7B-Instruct-v0.2", "Mistral-7B"),
            ("Qwen/Qwen2.5-7B", "Qwen2.5-7B"),
            ("deepseek-ai/DeepSeek-R1-0528", "DeepSeek-R1"),
        ] {
            assert_eq!(name(given), want, "{given}");
        }
    }

    #[test]
    fn the_name_s_quantisation_sets_the_weights() {
        assert_eq!(dtype("nvidia/Llama-3.1-8B-Instruct-FP8"), WeightDtype::Fp8);
        assert_eq!(
            dtype("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"),
            WeightDtype::Int4
        );
        assert_eq!(
            dtype("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16"),
            WeightDtype::Int4
        );
        assert_eq!(
            dtype("nvidia/Llama-3.3-70B-Instruct-FP4"),
            WeightDtype::Nvfp4
        );
        assert_eq!(dtype("RedHatAI/Qwen3-32B-NVFP4"), WeightDtype::Nvfp4);
        assert_eq!(dtype("meta-llama/Llama-3.1-8B-Instruct"), WeightDtype::Bf16);
        // A checkpoint published in FP8 stays FP8 when the name says nothing.
        assert_eq!(dtype("deepseek-ai/DeepSeek-V3"), WeightDtype::Fp8);
        // A re-upload's size is its own, not the original's measured one.
        let r = resolve("Ministral-3-8B-Instruct-2512-BF16").unwrap();
        assert_eq!(r.spec.native_dtype, WeightDtype::Bf16);
        assert_eq!(r.spec.loaded_gib, None);
    }

    #[test]
    fn an_unknown_name_gets_the_closest_ones() {
        let e = resolve("meta-llama/Lama-3.1-8B-Instruct").unwrap_err();
        assert_eq!(
            e.suggestions.first().map(String::as_str),
            Some("Llama-3.1-8B"),
            "{e}"
        );
        let e = resolve("Qwen3-33B").unwrap_err();
        assert!(e.suggestions.iter().any(|s| s == "Qwen3-32B"), "{e}");
        let e = resolve("gpt-5").unwrap_err();
        assert!(e.to_string().starts_with("unknown model \"gpt-5\""), "{e}");
        assert!(resolve("").is_err());
    }

    #[test]
    fn the_closest_spelling_wins() {
        // Exact beats a stage that drops words.
        assert_eq!(name("Llama-3.2-1B"), "Llama-3.2-1B");
        assert_eq!(name("Qwen3-30B-A3B"), "Qwen3-30B-A3B");
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
