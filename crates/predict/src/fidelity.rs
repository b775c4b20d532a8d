//! How far the predictions are from published measurements: a CSV of cases (one measured
//! metric each, with the GPU, model, settings and load it was measured under), each
//! predicted, and the absolute percentage error per case, per metric, per metric family and
//! per GPU. Cases that share a setup and a load are simulated once. A case that cannot be
//! predicted is listed as skipped with the reason, never dropped.

use std::collections::BTreeMap;

use inferscale_engine::hardware::GpuSpec;
use inferscale_engine::model::{ModelSpec, WeightDtype};
use inferscale_engine::names::UnknownModel;
use inferscale_engine::{EngineConfig, Settings};
use serde::Serialize;

use crate::summary::Summary;
use crate::workload::{Dist, Load, SharedPrefix, Workload};

/// The columns a case file has (in any order; others are ignored).
pub const COLUMNS: [&str; 25] = [
    "id",
    "source",
    "engine",
    "engine_version",
    "gpu",
    "num_gpus",
    "tp",
    "model",
    "weights_dtype",
    "kv_dtype",
    "input_len",
    "output_len",
    "load_type",
    "load_value",
    "duration_s",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "enforce_eager",
    "metric",
    "value",
    "unit",
    "confidence",
    "notes",
];

/// Columns a case may add to describe its workload more exactly (empty or absent: the
/// defaults of [`Options`]).
pub const OPTIONAL_COLUMNS: [&str; 9] = [
    "num_prompts",
    "load_values",
    "arrivals",
    "timeout_s",
    "prompt_pool",
    "shared_prefix_tokens",
    "shared_prefix_groups",
    "generated_output_len",
    "input_len_std",
];

/// How cases that do not say are run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Poisson arrivals for `rate` cases (`vllm bench serve`'s default, and what
    /// inference-perf's "constant" timer draws) rather than evenly spaced ones.
    pub poisson: bool,
    /// The client's timeout, seconds (`None`: it waits).
    pub timeout_s: Option<f64>,
    /// Physics other than the engine's defaults (a calibration's trial).
    pub physics: Option<crate::calibrate::Physics>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            poisson: true,
            timeout_s: None,
            physics: None,
        }
    }
}

/// Why a case file cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaseFileError {
    /// Not CSV.
    #[error(transparent)]
    Csv(#[from] crate::csv::CsvError),
    /// A column is missing from the header.
    #[error("the header lacks the column {0:?} (expected: {cols})", cols = COLUMNS.join(", "))]
    Column(&'static str),
    /// No rows.
    #[error("no cases (only a header, or nothing)")]
    Empty,
}

/// One row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Case {
    /// Its line in the file.
    pub line: usize,
    /// Every column by name.
    pub fields: BTreeMap<String, String>,
}

impl Case {
    /// A column's value, trimmed (`""` when absent).
    pub fn get(&self, col: &str) -> &str {
        self.fields.get(col).map_or("", |s| s.trim())
    }
}

/// Reads a case file.
pub fn read_cases(text: &str) -> Result<Vec<Case>, CaseFileError> {
    let mut rows = crate::csv::rows(text.trim_start_matches('\u{feff}'))?.into_iter();
    let Some((_, header)) = rows.next() else {
        return Err(CaseFileError::Empty);
    };
    let header: Vec<String> = header.iter().map(|h| h.trim().to_owned()).collect();
    for c in COLUMNS {
        if !header.iter().any(|h| h == c) {
            return Err(CaseFileError::Column(c));
        }
    }
    let cases: Vec<Case> = rows
        .map(|(line, r)| Case {
            line,
            fields: header.iter().cloned().zip(r).collect(),
        })
        .collect();
    if cases.is_empty() {
        return Err(CaseFileError::Empty);
    }
    Ok(cases)
}

/// Finds GPUs and models by the names cases use.
pub trait Catalog: Sync {
    /// The GPU named `name`.
    fn gpu(&self, name: &str) -> Option<GpuSpec>;
    /// The model named `name` (a Hugging Face id or a short name).
    ///
    /// # Errors
    ///
    /// When none answers to it, with the closest names.
    fn model(&self, name: &str) -> Result<ModelSpec, UnknownModel>;
}

/// The built-in tables.
pub struct Builtin;

impl Catalog for Builtin {
    fn gpu(&self, name: &str) -> Option<GpuSpec> {
        inferscale_engine::hardware::find_gpu(name)
    }
    fn model(&self, name: &str) -> Result<ModelSpec, UnknownModel> {
        inferscale_engine::names::resolve(name).map(|r| r.spec)
    }
}

/// The built-in tables plus GPUs and models a user brings: a name matches ignoring case,
/// and a model also by the last part of a Hugging Face id (`org/Name` matches `Name`).
#[derive(Debug, Clone, Default)]
pub struct Extended {
    /// GPUs from JSON specs, found by their `name`.
    pub gpus: Vec<GpuSpec>,
    /// Models from `config.json`s, with the names cases use for them.
    pub models: Vec<(String, ModelSpec)>,
}

fn last_part(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

impl Catalog for Extended {
    fn gpu(&self, name: &str) -> Option<GpuSpec> {
        self.gpus
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .cloned()
            .or_else(|| Builtin.gpu(name))
    }
    fn model(&self, name: &str) -> Result<ModelSpec, UnknownModel> {
        match self.models.iter().find(|(n, _)| {
            n.eq_ignore_ascii_case(name) || last_part(n).eq_ignore_ascii_case(last_part(name))
        }) {
            Some((_, m)) => Ok(m.clone()),
            None => Builtin.model(name),
        }
    }
}

/// What the measurement was of, and how to read it off a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Requests or tokens per second.
    Throughput,
    /// Time to first token.
    Ttft,
    /// Inter-token latency or time per output token.
    Itl,
    /// End-to-end latency.
    E2e,
    /// One engine step (a static batch's prefill, a decode iteration).
    Step,
    /// Queue depth.
    Queue,
    /// Start-up and first request.
    Startup,
}

/// How a case counts output tokens when the client saw fewer than the server generated
/// (`generated_output_len` beside `output_len`): measured ITL and output rates use the
/// client's count, so the prediction is put in the same terms.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClientView {
    /// Output tokens the client counted per request.
    counted: f64,
    /// Output tokens the server generated per request.
    generated: f64,
}

/// The prediction of `metric` (`None`: not something the model predicts), and its family.
fn read_metric(
    metric: &str,
    s: &Summary,
    cfg: &EngineConfig,
    view: Option<ClientView>,
) -> Option<(Family, Option<f64>)> {
    // Per-token figures over the client's count of tokens.
    let (per_token, tokens) = match view {
        Some(v) if v.counted > 1.0 && v.generated > 1.0 => (
            (v.generated - 1.0) / (v.counted - 1.0),
            v.counted / v.generated,
        ),
        _ => (1.0, 1.0),
    };
    let ms = |v: Option<f64>| v.map(|x| x * 1000.0);
    let pct = |st: &crate::summary::Stats, what: &str| match what {
        "mean" => st.mean,
        "p50" => st.p50,
        "p90" => st.p90,
        "p95" => st.p95,
        "p99" => st.p99,
        _ => None,
    };
    let (fam, v) = match metric {
        "throughput_rps" => (Family::Throughput, Some(s.throughput_rps)),
        "output_tps" => (Family::Throughput, Some(s.output_tps * tokens)),
        "queue_depth_max" => (Family::Queue, Some(f64::from(s.queue_max))),
        "prefill_batch_latency" => (Family::Step, ms(s.ttft_max_s)),
        "decode_step_latency" => (Family::Step, ms(s.itl.mean)),
        "itl_mean_ms" => (Family::Itl, ms(s.itl.mean.map(|v| v * per_token))),
        "tpot_mean_ms" => (Family::Itl, ms(s.tpot.mean.map(|v| v * per_token))),
        "first_request_ms" => (Family::Startup, ms(s.first_e2e_s)),
        "model_load_time" => (
            Family::Startup,
            Some(
                cfg.model.loaded_bytes(cfg.dtype)
                    / f64::from(cfg.tensor_parallel_size.max(1))
                    / (cfg.cold_start.load_gbps * 1e9),
            ),
        ),
        m => {
            let (base, unit) = m.rsplit_once('_')?;
            if unit != "ms" {
                return None;
            }
            let (what, stat) = base.split_once('_')?;
            let (fam, st) = match what {
                "ttft" => (Family::Ttft, &s.ttft),
                "e2e" => (Family::E2e, &s.e2e),
                "itl" => (Family::Itl, &s.itl),
                "tpot" => (Family::Itl, &s.tpot),
                _ => return None,
            };
            (fam, ms(pct(st, stat)?.into()))
        }
    };
    Some((fam, v))
}

/// One predicted case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// `id`.
    pub id: String,
    /// `gpu`.
    pub gpu: String,
    /// `model`.
    pub model: String,
    /// `metric`.
    pub metric: String,
    /// Its family.
    pub family: Family,
    /// `unit`.
    pub unit: String,
    /// Measured.
    pub measured: f64,
    /// Predicted.
    pub predicted: f64,
    /// `|predicted − measured| / measured`; `None` when the measurement is 0 (the case is
    /// then left out of the aggregates).
    pub ape: Option<f64>,
    /// `|predicted − measured|`, in the unit.
    pub abs_error: f64,
    /// `dense` or `moe`: the model's feed-forward.
    pub architecture: &'static str,
}

/// A case not predicted, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    /// `id`.
    pub id: String,
    /// Why.
    pub reason: String,
}

/// Errors over a set of cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// Cases.
    pub n: usize,
    /// Median absolute percentage error (a fraction).
    pub median_ape: f64,
    /// Mean absolute percentage error (a fraction).
    pub mean_ape: f64,
    /// Median signed error, `(predicted − measured) / measured` (a fraction): positive when
    /// the model predicts high.
    pub median_bias: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Aggregate {
    /// Over signed relative errors.
    fn of(signed: &[f64]) -> Aggregate {
        let n = signed.len();
        let apes: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
        Aggregate {
            n,
            median_ape: median(apes.clone()),
            mean_ape: if n == 0 {
                0.0
            } else {
                apes.iter().sum::<f64>() / n as f64
            },
            median_bias: median(signed.to_vec()),
        }
    }
}

/// Everything `fidelity` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Every predicted case.
    pub cases: Vec<CaseResult>,
    /// Errors per metric.
    pub per_metric: BTreeMap<String, Aggregate>,
    /// Errors per metric family.
    pub per_family: BTreeMap<String, Aggregate>,
    /// Errors per GPU.
    pub per_gpu: BTreeMap<String, Aggregate>,
    /// Errors per GPU, metric family and architecture (`H100-SXM ttft dense`).
    pub per_gpu_family: BTreeMap<String, Aggregate>,
    /// Cases not predicted, with the reason.
    pub skipped: Vec<Skipped>,
}

/// The columns that make two cases one simulation.
const SETUP: [&str; 26] = [
    "num_prompts",
    "load_values",
    "arrivals",
    "timeout_s",
    "prompt_pool",
    "shared_prefix_tokens",
    "shared_prefix_groups",
    "generated_output_len",
    "input_len_std",
    "gpu",
    "num_gpus",
    "tp",
    "model",
    "weights_dtype",
    "kv_dtype",
    "input_len",
    "output_len",
    "load_type",
    "load_value",
    "duration_s",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "enforce_eager",
    "engine_version",
];

/// Why a case cannot be simulated; the case is skipped with this as its reason.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A case whose GPU the source did not state.
    #[error("no GPU: the column gpu is empty (the source does not say what it ran on)")]
    NoGpu,
    /// A GPU neither built in nor given.
    #[error("unknown GPU {0:?} (see inferscale sim --list, or pass --gpu-spec)")]
    UnknownGpu(String),
    /// A model neither built in nor given.
    #[error("{0}: pass --model-config with its Hugging Face config.json")]
    UnknownModel(UnknownModel),
    /// A column whose value is not one the model reads.
    #[error("{column} {value:?} is not {expected}")]
    Value {
        /// The column.
        column: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// A load without the value that sizes it.
    #[error(
        "{} {kind} case without load_value{}",
        if kind.starts_with('o') { "an" } else { "a" },
        if *kind == "rate" { " or load_values" } else { "" }
    )]
    NoLoadValue {
        /// The load type.
        kind: &'static str,
    },
    /// Settings the engine refuses.
    #[error(transparent)]
    Settings(#[from] inferscale_engine::SettingsError),
    /// The model does not fit the GPUs as set up.
    #[error("the setup does not fit ({layout}): {error}")]
    DoesNotFit {
        /// Why.
        error: inferscale_engine::kv::MemoryError,
        /// The replicas and ranks the case was read as.
        layout: String,
    },
}

fn num<T: std::str::FromStr>(c: &Case, column: &'static str) -> Result<Option<T>, CaseError> {
    match c.get(column) {
        "" => Ok(None),
        v => v.parse().map(Some).map_err(|_| CaseError::Value {
            column,
            value: v.to_owned(),
            expected: "a number",
        }),
    }
}

/// A length column: tokens, at least one, whole or a published mean (217.4).
fn length(c: &Case, column: &'static str) -> Result<Option<f64>, CaseError> {
    match num::<f64>(c, column)? {
        Some(v) if !(v.is_finite() && v >= 1.0 && v <= f64::from(u32::MAX)) => {
            Err(CaseError::Value {
                column,
                value: c.get(column).to_owned(),
                expected: "a length of at least 1 token",
            })
        }
        v => Ok(v),
    }
}

/// The weights' dtype a case names, read as checkpoints and reports write it (`bf16`,
/// `FP8`, `awq`, `w4a16`, `nvfp4`, `mxfp4 (native)`: a note in brackets is ignored).
///
/// # Errors
///
/// A dtype the model does not know.
pub fn weights_dtype(s: &str) -> Result<Option<WeightDtype>, CaseError> {
    let bare = s.split('(').next().unwrap_or_default().trim();
    match bare.to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(None),
        b => WeightDtype::parse(b)
            .or_else(|| inferscale_engine::names::resolve_dtype_word(b))
            .map(Some)
            .ok_or_else(|| CaseError::Value {
                column: "weights dtype",
                value: s.to_owned(),
                expected: "modelled (bf16, fp16, fp8, int4/awq/gptq/w4a16, mxfp4, nvfp4)",
            }),
    }
}

/// Bytes per KV element a case names.
///
/// # Errors
///
/// A dtype the model does not know.
pub fn kv_bytes(s: &str) -> Result<Option<f64>, CaseError> {
    match s.to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(None),
        "fp16" | "bf16" | "float16" | "bfloat16" => Ok(Some(2.0)),
        "fp8" | "fp8_e4m3" | "fp8_e5m2" => Ok(Some(1.0)),
        other => Err(CaseError::Value {
            column: "kv dtype",
            value: other.to_owned(),
            expected: "modelled (auto, fp16, bf16, fp8)",
        }),
    }
}

/// The engine and workload a case describes, and the replicas its GPUs make (data
/// parallelism: `num_gpus / tp`, the load split evenly).
// Long: one case column after another, each read with the column named in its error, in the
// order the engine and workload need them.
fn setup(
    c: &Case,
    cat: &dyn Catalog,
    opts: &Options,
) -> Result<(EngineConfig, Vec<Workload>, u32, Option<ClientView>), CaseError> {
    let gpu_name = c.get("gpu");
    if gpu_name.is_empty() {
        return Err(CaseError::NoGpu);
    }
    let gpu = cat
        .gpu(gpu_name)
        .ok_or_else(|| CaseError::UnknownGpu(gpu_name.to_owned()))?;
    let model_name = c.get("model");
    let model = cat.model(model_name).map_err(CaseError::UnknownModel)?;
    let mut cfg = EngineConfig::new(gpu, model);
    let tp: u32 = num(c, "tp")?.unwrap_or(1).max(1);
    let gpus: u32 = num(c, "num_gpus")?.unwrap_or(tp).max(tp);
    let settings = Settings {
        tensor_parallel_size: Some(tp),
        dtype: weights_dtype(c.get("weights_dtype"))?,
        kv_dtype_bytes: kv_bytes(c.get("kv_dtype"))?,
        max_num_seqs: num(c, "max_num_seqs")?,
        max_num_batched_tokens: num(c, "max_num_batched_tokens")?,
        max_model_len: num(c, "max_model_len")?,
        gpu_memory_utilization: num(c, "gpu_memory_utilization")?,
        enforce_eager: match c.get("enforce_eager").to_ascii_lowercase().as_str() {
            "" => None,
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            other => {
                return Err(CaseError::Value {
                    column: "enforce_eager",
                    value: other.to_owned(),
                    expected: "true or false",
                });
            }
        },
    };
    settings.apply(&mut cfg)?;
    if let Some(p) = &opts.physics {
        p.apply(&mut cfg);
    }
    let replicas = gpus / tp;
    let input = length(c, "input_len")?;
    let output = length(c, "output_len")?;
    let load_value: Option<f64> = num(c, "load_value")?;
    let duration: Option<f64> = num(c, "duration_s")?;
    let share = |v: f64| v / f64::from(replicas);
    let poisson = match c.get("arrivals").to_ascii_lowercase().as_str() {
        "" => opts.poisson,
        "poisson" => true,
        "constant" | "uniform" => false,
        other => {
            return Err(CaseError::Value {
                column: "arrivals",
                value: other.to_owned(),
                expected: "poisson or constant",
            });
        }
    };
    // A statement that covers several rates ("near zero through 50 req/s") lists them in
    // `load_values`: each is simulated and the case takes the largest prediction.
    let rates: Vec<f64> = match (load_value, c.get("load_values")) {
        (Some(v), _) => vec![v],
        (None, "") => Vec::new(),
        (None, list) => list
            .split([',', ' ', ';'])
            .filter(|x| !x.is_empty())
            .map(|x| {
                x.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| CaseError::Value {
                        column: "load_values",
                        value: x.to_owned(),
                        expected: "a positive number",
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let (load, warm, requests) = match c.get("load_type") {
        "rate" => {
            let rps = *rates
                .first()
                .ok_or(CaseError::NoLoadValue { kind: "rate" })?;
            (
                Load::Rate {
                    rps: share(rps),
                    poisson,
                },
                true,
                None,
            )
        }
        // A sweep point of `vllm bench serve --max-concurrency C --num-prompts N`: the
        // clients stop after N requests, however long that takes.
        "concurrency" => {
            let n = load_value.ok_or(CaseError::NoLoadValue {
                kind: "concurrency",
            })?;
            let prompts: Option<f64> = num(c, "num_prompts")?;
            (
                Load::Concurrency {
                    clients: share(n).round().max(1.0) as u32,
                },
                true,
                prompts.map(|p| share(p).round().max(1.0) as u64),
            )
        }
        "offline" => {
            let n = load_value.ok_or(CaseError::NoLoadValue { kind: "offline" })?;
            (
                Load::Offline {
                    requests: share(n).round().max(1.0) as u32,
                },
                true,
                None,
            )
        }
        "sequential" => (
            Load::Sequential,
            false,
            Some(load_value.unwrap_or(1.0).max(1.0) as u64),
        ),
        "" => (Load::Sequential, false, Some(1)),
        other => {
            return Err(CaseError::Value {
                column: "load_type",
                value: other.to_owned(),
                expected: "rate, concurrency, offline or sequential",
            });
        }
    };
    let input = input.unwrap_or(128.0);
    let output = output.unwrap_or(128.0);
    let generated = length(c, "generated_output_len")?;
    let std: Option<f64> = num(c, "input_len_std")?;
    let pool: Option<u32> = num(c, "prompt_pool")?;
    let prefix_tokens: Option<u32> = num(c, "shared_prefix_tokens")?;
    let prefix_groups: Option<u32> = num(c, "shared_prefix_groups")?;
    let input_dist = Dist::with_std(input, std);
    let prefix = match (pool, prefix_tokens) {
        (Some(p), _) if p > 0 => Some(SharedPrefix::Pool { prompts: p }),
        (_, Some(t)) if t > 0 => Some(SharedPrefix::System {
            groups: prefix_groups.unwrap_or(1).max(1),
            tokens: t,
        }),
        _ => None,
    };
    let view = generated.map(|g| ClientView {
        counted: output,
        generated: g,
    });
    let mut w = Workload {
        input: input_dist,
        output: Dist::of_mean(generated.unwrap_or(output)),
        load,
        duration_s: duration.unwrap_or(60.0),
        requests,
        timeout_s: num(c, "timeout_s")?.or(opts.timeout_s),
        prefix,
        prompts: None,
        sharing: None,
        warm,
        seed: 1,
    };
    let mut ws = Vec::new();
    if let Load::Rate { poisson, .. } = w.load
        && rates.len() > 1
    {
        for r in &rates {
            w.load = Load::Rate {
                rps: share(*r),
                poisson,
            };
            ws.push(w.clone());
        }
    } else {
        ws.push(w);
    }
    Ok((cfg, ws, replicas, view))
}

/// What one setup's simulations gave: the configuration, a summary per load, and how the
/// client counted tokens.
type Outcome = Result<(EngineConfig, Vec<Summary>, Option<ClientView>), CaseError>;

fn simulate_setup(c: &Case, cat: &dyn Catalog, opts: &Options) -> Outcome {
    let (cfg, ws, replicas, view) = setup(c, cat, opts)?;
    let tp = cfg.tensor_parallel_size;
    let layout = format!(
        "{replicas} replica{} of tensor parallelism {tp}{}",
        if replicas == 1 { "" } else { "s" },
        if c.get("tp").is_empty() && replicas > 1 {
            ", as num_gpus without tp reads; expert- or data-parallel layouts are not modelled"
        } else {
            ""
        }
    );
    let sums = ws
        .iter()
        .map(|w| {
            crate::predict(&cfg, w).map_err(|error| CaseError::DoesNotFit {
                error,
                layout: layout.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cfg, sums, view))
}

/// Predicts every case of `cases`.
pub fn run(
    cases: &[Case],
    cat: &dyn Catalog,
    opts: &Options,
    progress: &mut dyn FnMut(usize, usize),
) -> Report {
    let mut groups: BTreeMap<Vec<String>, Vec<&Case>> = BTreeMap::new();
    for c in cases {
        let key: Vec<String> = SETUP.iter().map(|k| c.get(k).to_owned()).collect();
        groups.entry(key).or_default().push(c);
    }
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    let groups: Vec<Vec<&Case>> = groups.into_values().collect();
    let total = groups.len();
    // The setups are independent: simulated on every core, reported in order.
    let outcomes: Vec<Outcome> = {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done = std::sync::Mutex::new(Vec::<(usize, Outcome)>::new());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(total.max(1));
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let tx = tx.clone();
                let (next, done, groups) = (&next, &done, &groups);
                scope.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(g) = groups.get(i) else { break };
                        let o = simulate_setup(g[0], cat, opts);
                        if let Ok(mut d) = done.lock() {
                            d.push((i, o));
                        }
                        let _ = tx.send(());
                    }
                });
            }
            drop(tx);
            let mut n = 0;
            progress(0, total);
            while rx.recv().is_ok() {
                n += 1;
                progress(n, total);
            }
        });
        let mut d = done.into_inner().unwrap_or_default();
        d.sort_by_key(|(i, _)| *i);
        d.into_iter().map(|(_, o)| o).collect()
    };
    for (group, outcome) in groups.iter().zip(&outcomes) {
        for c in group {
            let id = c.get("id").to_owned();
            let skip = |reason: String| Skipped {
                id: id.clone(),
                reason,
            };
            let (cfg, sums, view) = match outcome {
                Ok(x) => x,
                Err(e) => {
                    skipped.push(skip(e.to_string()));
                    continue;
                }
            };
            let metric = c.get("metric");
            let measured: f64 = match c.get("value").parse() {
                Ok(v) => v,
                Err(_) => {
                    skipped.push(skip(format!(
                        "no single measured value (value {:?}; a range or a statement is not compared)",
                        c.get("value")
                    )));
                    continue;
                }
            };
            let read: Vec<_> = sums
                .iter()
                .map(|s| read_metric(metric, s, cfg, *view))
                .collect();
            let Some(Some((family, _))) = read.first().copied() else {
                skipped.push(skip(format!(
                    "{metric} is not something the engine model predicts"
                )));
                continue;
            };
            // Over several rates, the largest prediction (the statement holds through all).
            let predicted = read
                .iter()
                .map(|r| r.and_then(|(_, v)| v))
                .collect::<Option<Vec<f64>>>()
                .and_then(|v| v.into_iter().reduce(f64::max));
            let Some(predicted) = predicted else {
                skipped.push(skip(format!(
                    "the simulation gave no {metric} (no request finished)"
                )));
                continue;
            };
            // A measured 0 has no relative error: the absolute one is reported, and the case
            // is left out of the percentage aggregates.
            let ape = (measured != 0.0).then(|| ((predicted - measured) / measured).abs());
            results.push(CaseResult {
                id,
                gpu: c.get("gpu").to_owned(),
                model: c.get("model").to_owned(),
                metric: metric.to_owned(),
                family,
                unit: c.get("unit").to_owned(),
                measured,
                predicted,
                ape,
                abs_error: (predicted - measured).abs(),
                architecture: if cfg.model.moe.is_some() {
                    "moe"
                } else {
                    "dense"
                },
            });
        }
    }
    report(results, skipped)
}

/// The report of the cases predicted: their errors aggregated every way it gives them.
fn report(results: Vec<CaseResult>, skipped: Vec<Skipped>) -> Report {
    let mut per_metric: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut per_family: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut per_gpu: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut per_gpu_family: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &results {
        if r.ape.is_none() {
            continue;
        }
        let signed = (r.predicted - r.measured) / r.measured;
        per_metric.entry(r.metric.clone()).or_default().push(signed);
        let fam = serde_json::to_value(r.family)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        per_gpu_family
            .entry(format!("{} {fam} {}", r.gpu, r.architecture))
            .or_default()
            .push(signed);
        per_family.entry(fam).or_default().push(signed);
        per_gpu.entry(r.gpu.clone()).or_default().push(signed);
    }
    let agg = |m: BTreeMap<String, Vec<f64>>| {
        m.into_iter()
            .map(|(k, v)| (k, Aggregate::of(&v)))
            .collect::<BTreeMap<_, _>>()
    };
    Report {
        cases: results,
        per_metric: agg(per_metric),
        per_family: agg(per_family),
        per_gpu: agg(per_gpu),
        per_gpu_family: agg(per_gpu_family),
        skipped,
    }
}
