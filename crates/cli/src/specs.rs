//! The GPUs and models a user brings as files (`--model-config`, `--gpu-spec`), read the one
//! way every command reads them.

use anyhow::{Result, anyhow};
use inferscale_engine::model::ModelSpec;

use crate::input::{cap, read_text};

/// Reads `--model-config [NAME=]FILE`: a Hugging Face `config.json`, named NAME, else its
/// `_name_or_path`, else its folder's name.
pub(crate) fn read_model_config(arg: &str) -> Result<ModelSpec> {
    let (name, path) = match arg.split_once('=') {
        Some((n, p)) if !n.is_empty() && !std::path::Path::new(arg).exists() => {
            (Some(n.to_owned()), std::path::PathBuf::from(p))
        }
        _ => (None, std::path::PathBuf::from(arg)),
    };
    let text = read_text(&path, "model config", cap::SMALL)?;
    let name = name
        .or_else(|| {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()?
                .get("_name_or_path")?
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            path.canonicalize()
                .ok()
                .and_then(|p| {
                    p.parent()?
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "model".to_owned())
        });
    inferscale_engine::hf::from_config(&text, &name).map_err(|e| anyhow!("{}: {e}", path.display()))
}
