//! `inferscale sim`: serve the simulated engine.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use inferscale_engine::cost::StepShape;
use inferscale_engine::hardware::{GpuSpec, builtin_gpus, find_gpu};
use inferscale_engine::model::{ModelSpec, WeightDtype, builtin_models, find_model};
use inferscale_engine::{EngineConfig, PROFILES, profile};
use inferscale_sim::{Faults, Sim, SimConfig};

use crate::cli::SimArgs;
use crate::output::emit;
use crate::units::parse_duration;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn rate(name: &str, v: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        bail!("--{name} must be a fraction between 0 and 1, not {v}")
    }
}

/// Resolves the flags into a simulator configuration.
pub(crate) fn resolve(a: &SimArgs) -> Result<SimConfig> {
    let engine = engine(a)?;
    if !(a.speedup.is_finite() && a.speedup > 0.0 && a.speedup <= 10_000.0) {
        bail!(
            "--speedup must be a number in (0, 10000], not {}",
            a.speedup
        );
    }
    let faults = faults(a)?;
    let name = a
        .served_model_name
        .clone()
        .unwrap_or_else(|| engine.model.hf_id.clone());
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        bail!(
            "--served-model-name {name:?}: a model name is not empty and has no control characters"
        );
    }
    let mut cfg = SimConfig::new(engine, name);
    cfg.speedup = a.speedup;
    cfg.faults = faults;
    cfg.show_deprecated_metrics = a.show_deprecated_metrics;
    cfg.speaks = match a.engine {
        crate::cli::SimEngineArg::Vllm => inferscale_sim::Speaks::Vllm,
        crate::cli::SimEngineArg::Llamacpp => {
            if a.show_deprecated_metrics {
                bail!("--show-deprecated-metrics is vLLM's: llama.cpp has no deprecated names");
            }
            inferscale_sim::Speaks::LlamaCpp
        }
    };
    cfg.max_body_bytes = a.max_body;
    cfg.hostname = a.hostname.clone();
    cfg.access_log = a.access_log.clone();
    cfg.auto_tool_choice = a.enable_auto_tool_choice && a.tool_call_parser.is_some();
    cfg.api_key = match &a.api_key_file {
        Some(p) => Some(
            inferscale_sim::ApiKey::new(&crate::credentials::read_small(p, "API key file")?)
                .ok_or_else(|| anyhow!("the API key file {} is empty", p.display()))?,
        ),
        None => std::env::var(SERVER_KEY_ENV)
            .ok()
            .and_then(|k| inferscale_sim::ApiKey::new(&k)),
    };
    Ok(cfg)
}
/// The engine the flags describe: a profile, or a GPU and a model, with vLLM's flags over
/// them.
fn engine(a: &SimArgs) -> Result<EngineConfig> {
    let mut engine = match &a.profile {
        Some(name) => profile(name).ok_or_else(|| {
            anyhow!(
                "unknown profile {name:?}; the profiles are: {}",
                PROFILES
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?,
        None if a.gpu.is_none()
            && a.model.is_none()
            && a.gpu_spec.is_none()
            && a.model_spec.is_none() =>
        {
            profile("aws-eks-ministral-8b-l40s")
                .ok_or_else(|| anyhow!("the default profile is missing"))?
        }
        None => {
            // A custom setup: start from an H100 serving Llama-3.1-8B; the flags below replace
            // the parts given.
            let gpu = find_gpu("H100").ok_or_else(|| anyhow!("the default GPU is missing"))?;
            let model = find_model("Llama-3.1-8B")
                .ok_or_else(|| anyhow!("the default model is missing"))?;
            EngineConfig::new(gpu, model)
        }
    };
    if let Some(g) = &a.gpu {
        engine.gpu = find_gpu(g).ok_or_else(|| {
            anyhow!(
                "unknown GPU {g:?}; known: {}",
                builtin_gpus()
                    .iter()
                    .map(|g| g.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    }
    if let Some(p) = &a.gpu_spec {
        engine.gpu = crate::input::read_json::<GpuSpec>(p, "GPU spec")?;
    }
    if a.profile.is_none() && (a.gpu.is_some() || a.gpu_spec.is_some()) {
        // vLLM's batch defaults depend on the GPU (the flags below may still set them).
        (engine.max_num_seqs, engine.max_num_batched_tokens) = engine.gpu.batch_defaults();
    }
    if let Some(m) = &a.model {
        engine.model = inferscale_engine::names::resolve(m)
            .map(|r| r.spec)
            .map_err(|e| {
                anyhow!("--model: {e}; see inferscale sim --list, or pass --model-config")
            })?;
        engine.dtype = engine.model.native_dtype;
        engine.max_model_len = engine.model.max_context.min(32768);
    }
    if let Some(p) = &a.model_spec {
        engine.model = crate::input::read_json::<ModelSpec>(p, "model spec")?;
        engine.dtype = engine.model.native_dtype;
        engine.max_model_len = engine.model.max_context.min(32768);
    }
    if let Some(m) = &a.model_config {
        engine.model = crate::specs::read_model_config(m)?;
        engine.dtype = engine.model.native_dtype;
        engine.max_model_len = engine.model.max_context.min(32768);
    }
    let dtype = match a.quantization.as_deref() {
        None => None,
        Some("none") => Some(WeightDtype::Bf16),
        Some(q) => Some(WeightDtype::parse(q).ok_or_else(|| {
            anyhow!("--quantization {q:?}: expected fp8, awq, gptq, mxfp4, nvfp4 or none")
        })?),
    };
    engine.prefix_caching &= !a.no_enable_prefix_caching;
    // The flags vLLM and `predict` share, checked in one place.
    inferscale_engine::Settings {
        tensor_parallel_size: a.tensor_parallel_size,
        dtype,
        kv_dtype_bytes: a
            .kv_cache_dtype
            .as_deref()
            .map(|k| if k == "fp8" { 1.0 } else { 2.0 }),
        max_num_seqs: a.max_num_seqs,
        max_num_batched_tokens: a.max_num_batched_tokens,
        max_model_len: a.max_model_len,
        gpu_memory_utilization: a.gpu_memory_utilization,
        enforce_eager: None,
    }
    .apply(&mut engine)?;
    engine.enforce_eager |= a.enforce_eager;
    engine.seed = a.seed;
    Ok(engine)
}

/// The faults the flags inject.
fn faults(a: &SimArgs) -> Result<Faults> {
    let slowdown = match &a.fault_slowdown {
        None => None,
        Some(s) => {
            let (x, t) = s.split_once('@').ok_or_else(|| {
                anyhow!("--fault-slowdown {s:?}: expected FACTOR@TIME, e.g. 3@120s")
            })?;
            let x: f64 = x
                .parse()
                .map_err(|_| anyhow!("--fault-slowdown {s:?}: {x:?} is not a number"))?;
            if !(x.is_finite() && x > 0.0) {
                bail!("--fault-slowdown {s:?}: the factor must be positive");
            }
            let t = parse_duration(t).map_err(|e| anyhow!("--fault-slowdown {s:?}: {e}"))?;
            Some((x, t.as_secs_f64()))
        }
    };
    let faults = Faults {
        error_500_rate: rate("fault-500-rate", a.fault_500_rate)?,
        cut_rate: rate("fault-cut-rate", a.fault_cut_rate)?,
        stall_rate: rate("fault-stall-rate", a.fault_stall_rate)?,
        stall_s: a.fault_stall.as_secs_f64(),
        malformed_rate: rate("fault-malformed-rate", a.fault_malformed_rate)?,
        slowdown,
    };
    Ok(faults)
}

/// The environment variable vLLM reads its API key from.
const SERVER_KEY_ENV: &str = "VLLM_API_KEY";

fn list() -> String {
    let mut s = String::from("Profiles:\n");
    for p in PROFILES {
        s.push_str(&format!("  {:<28} {}\n", p.name, p.description));
    }
    s.push_str("\nGPUs:\n");
    for g in builtin_gpus() {
        s.push_str(&format!(
            "  {:<12} {:>6.0} MiB  {:>5.0} GB/s  BF16 {:>5.0} TFLOP/s  FP8 {}\n",
            g.name,
            g.memory_mib,
            g.mem_bandwidth_gbps,
            g.bf16_tflops,
            g.fp8_tflops
                .map_or("-".into(), |f| format!("{f:.0} TFLOP/s"))
        ));
    }
    s.push_str("\nModels:\n");
    for m in builtin_models() {
        s.push_str(&format!(
            "  {:<16} {:<40} {:>5.1}B  {} layers  KV {:.0} KiB/token\n",
            m.name,
            m.hf_id,
            m.params_b,
            m.layers,
            m.kv_bytes_per_token(1, 2.0) / 1024.0
        ));
    }
    s
}

/// A few lines on what is being simulated.
pub(crate) fn describe(cfg: &SimConfig, sim: &Sim) -> String {
    let e = &cfg.engine;
    let plan = sim.memory();
    let mut s = String::new();
    if e.instant {
        s.push_str("  engine  instant profile: no model delay, unlimited KV cache\n");
        return s;
    }
    let dtype = match e.dtype {
        WeightDtype::Bf16 => "bf16",
        other => other.name(),
    };
    s.push_str(&format!(
        "  model   {} ({}), {dtype} weights {:.2} GiB, KV cache {}\n",
        e.model.hf_id,
        e.model.name,
        e.model.loaded_bytes(e.dtype) / GIB,
        if e.kv_dtype_bytes < 2.0 {
            "fp8"
        } else {
            "auto (16-bit)"
        }
    ));
    s.push_str(&format!(
        "  gpu     {}× {} ({:.0} MiB, {:.0} GB/s), tensor parallel {}\n",
        e.tensor_parallel_size,
        e.gpu.product_name,
        e.gpu.memory_mib,
        e.gpu.mem_bandwidth_gbps,
        e.tensor_parallel_size
    ));
    s.push_str(&format!(
        "  vllm    max_num_seqs {}, max_num_batched_tokens {}, max_model_len {}, gpu_memory_utilization {}{}\n",
        e.max_num_seqs,
        e.max_num_batched_tokens,
        e.max_model_len,
        e.gpu_memory_utilization,
        if e.enforce_eager { ", enforce_eager" } else { ", CUDA graphs" }
    ));
    s.push_str(&format!(
        "  memory  KV cache {:.1} GiB = {} blocks = {} tokens ({:.1}× max_model_len)\n",
        plan.kv_cache / GIB,
        plan.num_blocks,
        plan.kv_tokens(),
        plan.kv_tokens() as f64 / f64::from(e.max_model_len)
    ));
    let cost = e.cost_model();
    let decode = |n: u32| StepShape {
        decode_seqs: n,
        decode_context_tokens: u64::from(n) * 512,
        sampled: n,
        ..StepShape::default()
    };
    let one = cost.step(&decode(1), 1.0).total_s;
    let full_batch = e.max_num_seqs.min((plan.kv_tokens() / 512) as u32).max(1);
    let full = cost.step(&decode(full_batch), 1.0).total_s;
    s.push_str(&format!(
        "  speed   decode step {:.1} ms at batch 1, {:.1} ms at batch {full_batch} (512-token contexts): ≈ {:.0} output tokens/s at that batch\n",
        one * 1e3,
        full * 1e3,
        f64::from(full_batch) / full
    ));
    s.push_str(&format!(
        "  ready   {:.1} s after start (simulated; {:.1} s wall at speed-up {})\n",
        sim.load_time_s(),
        sim.load_time_s() / cfg.speedup,
        cfg.speedup
    ));
    s
}

/// Runs the command.
pub(crate) fn run(args: &SimArgs) -> Result<ExitCode> {
    if args.list {
        emit(&list())?;
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = resolve(args)?;
    let api: SocketAddr = args.listen.parse().with_context(|| {
        format!(
            "--listen {:?} is not an address like 127.0.0.1:8000",
            args.listen
        )
    })?;
    let dcgm: Option<SocketAddr> = match &args.dcgm_listen {
        None => None,
        Some(d) => Some(d.parse().with_context(|| {
            format!("--dcgm-listen {d:?} is not an address like 127.0.0.1:9400")
        })?),
    };
    for (flag, base) in [("--listen", Some(api)), ("--dcgm-listen", dcgm)] {
        if let Some(b) = base
            && b.port() != 0
            && u32::from(b.port()) + u32::from(args.replicas) - 1 > 65535
        {
            bail!(
                "{flag} {b} with --replicas {}: replica i listens on port {} + i, and the last would be {}, past 65535",
                args.replicas,
                b.port(),
                u32::from(b.port()) + u32::from(args.replicas) - 1
            );
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut listeners = Vec::new();
        let mut lines = Vec::new();
        for i in 0..args.replicas {
            let at = |base: SocketAddr| {
                let mut a = base;
                if a.port() != 0 {
                    a.set_port(a.port().saturating_add(i));
                }
                a
            };
            let a = at(api);
            let l = inferscale_sim::listen(a).with_context(|| format!("cannot listen on {a}"))?;
            let a = l.local_addr()?;
            let d = match dcgm {
                None => None,
                Some(base) => {
                    let da = at(base);
                    Some(
                        inferscale_sim::listen(da)
                            .with_context(|| format!("cannot listen on {da} (DCGM)"))?,
                    )
                }
            };
            let dline = d
                .as_ref()
                .and_then(|l| l.local_addr().ok())
                .map_or(String::new(), |da| format!(", DCGM http://{da}/metrics"));
            lines.push(format!(
                "  serving http://{a} (OpenAI API, /metrics, /health){dline}"
            ));
            listeners.push((l, d));
        }
        if cfg.api_key.is_some() {
            lines.push(
                "  /v1/* requires the API key (Authorization: Bearer); /health and /metrics stay open"
                    .into(),
            );
        }
        let sim =
            Sim::start(cfg.clone(), usize::from(args.replicas))?;
        let title = args.profile.clone().unwrap_or_else(|| {
            if args.gpu.is_none() && args.model.is_none() {
                "aws-eks-ministral-8b-l40s".into()
            } else {
                "custom".into()
            }
        });
        let mut head = format!(
            "inferscale sim: {title}, served as {:?}\n",
            cfg.served_model_name
        );
        head.push_str(&describe(&cfg, &sim));
        for l in &lines {
            head.push_str(l);
            head.push('\n');
        }
        head.push_str("  stop with Ctrl-C\n");
        emit(&head)?;
        let access = sim.serve(listeners, crate::shutdown::signal()).await;
        eprintln!("inferscale sim: stopped");
        match access {
            None => Ok(ExitCode::SUCCESS),
            Some(Ok(line)) => {
                eprintln!("inferscale sim: {line}");
                Ok(ExitCode::SUCCESS)
            }
            Some(Err(e)) => Err(e.into()),
        }
    })
}
