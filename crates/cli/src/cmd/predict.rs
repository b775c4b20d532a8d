//! `inferscale predict`: throughput, latency and capacity from the engine model.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use inferscale_catalog::units::format_seconds;
use inferscale_engine::hardware::{GpuSpec, builtin_gpus, find_gpu};
use inferscale_engine::model::{ModelSpec, WeightDtype};
use inferscale_engine::{EngineConfig, PromptCycle, Settings};
use inferscale_loadgen::trace::{Length, Shape};
use inferscale_predict::capacity::{Plan, plan, saturation_rps};
use inferscale_predict::summary::Stats;
use inferscale_predict::workload::{Dist, Load, SharedPrefix, Workload};
use inferscale_predict::{Summary, predict};
use inferscale_results::plan::PromptSource;

use crate::cli::{ArrivalsArg, PredictArgs};
use crate::exit;
use crate::output::emit;

fn gpus(args: &PredictArgs) -> Result<Vec<GpuSpec>> {
    if let Some(p) = &args.gpu_spec {
        return Ok(vec![crate::input::read_json::<GpuSpec>(p, "GPU spec")?]);
    }
    args.gpu
        .iter()
        .map(|g| {
            find_gpu(g.trim()).ok_or_else(|| {
                anyhow!(
                    "--gpu {g:?}: unknown GPU (known: {})",
                    builtin_gpus()
                        .iter()
                        .map(|g| g.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect()
}

fn model(args: &PredictArgs) -> Result<ModelSpec> {
    if let Some(p) = &args.model_config {
        return crate::specs::read_model_config(p);
    }
    let name = args.model.as_deref().unwrap_or_default();
    inferscale_engine::names::resolve(name)
        .map(|r| r.spec)
        .map_err(|e| anyhow!("--model: {e}; pass its Hugging Face config.json with --model-config"))
}

fn settings(args: &PredictArgs) -> Result<Settings> {
    let dtype = match &args.dtype {
        None => None,
        Some(d) => Some(WeightDtype::parse(d).ok_or_else(|| {
            anyhow!("--dtype {d:?}: expected bf16, fp16, fp8, int4 (awq, gptq), mxfp4 or nvfp4")
        })?),
    };
    Ok(Settings {
        tensor_parallel_size: args.tp,
        dtype,
        kv_dtype_bytes: args
            .kv_cache_dtype
            .as_deref()
            .map(|k| if k == "fp8" { 1.0 } else { 2.0 }),
        max_num_seqs: args.max_num_seqs,
        max_num_batched_tokens: args.max_num_batched_tokens,
        max_model_len: args.max_model_len,
        gpu_memory_utilization: args.gpu_memory_utilization,
        enforce_eager: args.enforce_eager.then_some(true),
    })
}

/// The prompts of `--shape` or `--trace`, in words, and a trace's mean rate and length
/// (its default load).
struct Sharing {
    cycle: PromptCycle,
    about: String,
    trace_rate: Option<(f64, f64)>,
}

fn sharing(args: &PredictArgs) -> Result<Option<Sharing>> {
    if let Some(spec) = &args.shape {
        let shape = Shape::parse(spec).map_err(|e| anyhow!("--shape {spec:?}: {e}"))?;
        let whole = |v: f64, flag: &str| -> Result<u32> {
            (v.fract() == 0.0 && (1.0..=1e6).contains(&v))
                .then_some(v as u32)
                .ok_or_else(|| anyhow!("{flag} {v}: with --shape, a whole number of tokens"))
        };
        let length = Length::Fixed {
            tokens: whole(args.input, "--input")?,
        };
        let output = Length::Fixed {
            tokens: whole(args.output, "--output")?,
        };
        return Ok(Some(Sharing {
            cycle: crate::job::prompts::of_shape(shape, length, output, 1)?,
            about: PromptSource::Shared { shape, length }.describe(),
            trace_rate: None,
        }));
    }
    let Some(path) = &args.trace else {
        return Ok(None);
    };
    let turns = crate::job::prompts::read_turns(path)?;
    let n = turns.len();
    let span = inferscale_loadgen::trace::span_s(&turns);
    // A trace's own window ends one mean gap after its last request, as its replay's does.
    let length = if n > 1 {
        span * n as f64 / (n - 1) as f64
    } else {
        1.0
    };
    let cycle = crate::job::prompts::of_turns(&turns)
        .ok_or_else(|| anyhow!("{}: no requests", path.display()))?;
    Ok(Some(Sharing {
        cycle,
        about: format!("trace {}'s prompts ({n} requests)", path.display()),
        // Rounded as a rate is written: 1.007 req/s.
        trace_rate: Some((
            (n as f64 / length.max(1e-3) * 1000.0).round().max(1.0) / 1000.0,
            length,
        )),
    }))
}

/// The loads asked for: one, or one per client count of a concurrency sweep.
fn loads(args: &PredictArgs) -> Result<Vec<Load>> {
    if let Some(c) = args.concurrency.iter().find(|c| **c == 0) {
        bail!("--concurrency {c}: at least 1 client");
    }
    if !args.concurrency.is_empty() {
        return Ok(args
            .concurrency
            .iter()
            .map(|&clients| Load::Concurrency { clients })
            .collect());
    }
    if args.requests.is_some() {
        bail!("--requests: closed loop only (with --concurrency)");
    }
    Ok(vec![match (args.rps, args.offline, args.sequential) {
        (Some(rps), ..) => Load::Rate {
            rps,
            poisson: args.arrivals == ArrivalsArg::Poisson,
        },
        (_, Some(n), _) if n > 0 => Load::Offline { requests: n },
        (_, _, Some(n)) if n > 0 => Load::Sequential,
        (None, None, None) => {
            bail!("give a load: --rps R, --concurrency N[,N...], --offline N or --sequential N")
        }
        (_, Some(n), _) => bail!("--offline {n}: at least 1 request"),
        (_, _, Some(n)) => bail!("--sequential {n}: at least 1 request"),
    }])
}

/// The workload of each load.
fn workloads(args: &PredictArgs) -> Result<Vec<Workload>> {
    let mut w = workload(args, Load::Sequential)?;
    let sharing = sharing(args)?;
    let given = args.rps.is_some()
        || !args.concurrency.is_empty()
        || args.offline.is_some()
        || args.sequential.is_some();
    let loads = match sharing.as_ref().and_then(|s| s.trace_rate) {
        Some((rps, length)) if !given => {
            w.duration_s = length;
            vec![Load::Rate { rps, poisson: true }]
        }
        _ => loads(args)?,
    };
    if let Some(s) = sharing {
        // What is sent: the prompts' own lengths, on average.
        let (input, output) = s.cycle.mean_lengths();
        w.input = Dist::Mean { mean: input };
        w.output = Dist::Mean { mean: output };
        w.prompts = Some(s.cycle);
        w.sharing = Some(s.about);
    }
    Ok(loads
        .into_iter()
        .map(|load| {
            let requests = match load {
                Load::Concurrency { .. } => args.requests,
                _ => w.requests,
            };
            Workload {
                load,
                requests,
                ..w.clone()
            }
        })
        .collect())
}

fn workload(args: &PredictArgs, load: Load) -> Result<Workload> {
    if !(args.input >= 1.0 && args.output >= 1.0 && (args.input + args.output) < 1e9) {
        bail!(
            "--input {} --output {}: each at least 1 token",
            args.input,
            args.output
        );
    }
    if args.duration.is_zero() || args.duration.as_secs() > 7 * 86_400 {
        bail!(
            "--duration {}: between 1 s and a week",
            format_seconds(args.duration.as_secs_f64())
        );
    }
    let prefix = match (&args.prompt_pool, &args.shared_prefix) {
        (Some(n), _) if *n > 0 => Some(SharedPrefix::Pool { prompts: *n }),
        (Some(_), _) => bail!("--prompt-pool must be at least 1"),
        (None, Some(s)) => {
            let (t, g) = s.split_once('x').ok_or_else(|| {
                anyhow!("--shared-prefix {s:?}: expected TOKENSxGROUPS, e.g. 200x4")
            })?;
            let parse = |v: &str, what: &str| {
                v.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        anyhow!("--shared-prefix {s:?}: {what} {v:?} is not a positive number")
                    })
            };
            Some(SharedPrefix::System {
                tokens: parse(t, "tokens")?,
                groups: parse(g, "groups")?,
            })
        }
        (None, None) => None,
    };
    Ok(Workload {
        input: Dist::with_std(args.input, args.input_std),
        output: Dist::of_mean(args.output),
        load,
        duration_s: args.duration.as_secs_f64(),
        requests: args.sequential.or(args.offline).map(u64::from),
        timeout_s: args.timeout.map(|d| d.as_secs_f64()),
        prefix,
        prompts: None,
        sharing: None,
        warm: !args.cold,
        seed: 1,
    })
}

fn engine(
    gpu: &GpuSpec,
    model: &ModelSpec,
    s: &Settings,
    args: &PredictArgs,
    w: &Workload,
) -> Result<EngineConfig> {
    let mut cfg = EngineConfig::new(gpu.clone(), model.clone());
    s.apply(&mut cfg)?;
    cfg.prefix_caching = !args.no_prefix_caching;
    // A request of the mean lengths, rounded up; a shape's or a trace's longest.
    let (longest, what) = match &w.prompts {
        Some(p) => (
            p.longest(),
            "the longest prompt and answer of --shape or --trace",
        ),
        None => (
            (args.input.ceil() + args.output.ceil()) as u32,
            "--input + --output",
        ),
    };
    if args.max_model_len.is_none() {
        cfg.max_model_len = cfg
            .max_model_len
            .max(longest.next_multiple_of(1024))
            .min(model.max_context.max(longest));
    }
    if longest > cfg.max_model_len {
        bail!(
            "a request of {longest} tokens ({what}) exceeds --max-model-len {}",
            cfg.max_model_len
        );
    }
    cfg.memory_plan().map_err(|e| {
        anyhow!(
            "{} on {}× {} does not fit: {e}",
            model.name,
            cfg.tensor_parallel_size,
            gpu.name
        )
    })?;
    Ok(cfg)
}

fn prices(args: &PredictArgs) -> Result<Vec<(String, f64)>> {
    args.price
        .iter()
        .map(|p| {
            let (g, v) = p.split_once('=').ok_or_else(|| {
                anyhow!("--price {p:?}: expected GPU=USD_PER_HOUR, e.g. H100=3.93")
            })?;
            let v: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| anyhow!("--price {p:?}: {v:?} is not a price in dollars"))?;
            Ok((g.trim().to_owned(), v))
        })
        .collect()
}

fn lat(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), format_seconds)
}

fn row(out: &mut String, name: &str, s: &Stats) {
    let _ = writeln!(
        out,
        "  {name:<6} {:>9} {:>9} {:>9} {:>9} {:>9}",
        lat(s.mean),
        lat(s.p50),
        lat(s.p90),
        lat(s.p95),
        lat(s.p99)
    );
}

fn describe(cfg: &EngineConfig, w: &Workload) -> String {
    let plan = cfg.memory_plan().ok();
    let load = match w.load {
        Load::Rate { rps, poisson } => format!(
            "{} {rps} req/s for {}",
            if poisson { "Poisson" } else { "constant" },
            inferscale_catalog::units::format_duration(std::time::Duration::from_secs_f64(
                w.duration_s
            ))
        ),
        Load::Concurrency { clients } => format!("{clients} clients in a closed loop"),
        Load::Offline { requests } => format!("{requests} requests at once"),
        Load::Sequential => "one request at a time".to_owned(),
    };
    let lengths = match (&w.prompts, &w.sharing) {
        (Some(p), Some(about)) => {
            let (i, o) = p.mean_lengths();
            format!("{about}, {i:.0} → {o:.0} tokens on average")
        }
        _ => format!("{:.0} → {} tokens", w.input.mean(), w.output.max()),
    };
    format!(
        "{} ({}) on {}× {}: max_num_seqs {}, max_num_batched_tokens {}, max_model_len {}, KV cache {} blocks ({} tokens){}\nworkload: {lengths}, {load}\n",
        cfg.model.name,
        cfg.dtype.name(),
        cfg.tensor_parallel_size,
        cfg.gpu.name,
        cfg.max_num_seqs,
        cfg.max_num_batched_tokens,
        cfg.max_model_len,
        plan.as_ref().map_or(0, |p| p.num_blocks),
        plan.as_ref().map_or(0, |p| p.kv_tokens()),
        if cfg.enforce_eager { ", eager" } else { "" },
    )
}

fn summary_text(s: &Summary, saturation: Option<f64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  throughput {:.2} req/s, {:.0} output tok/s ({} finished, {} timed out)",
        s.throughput_rps, s.output_tps, s.completed, s.failed
    );
    let _ = writeln!(
        out,
        "  {:<6} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "mean", "p50", "p90", "p95", "p99"
    );
    row(&mut out, "TTFT", &s.ttft);
    row(&mut out, "ITL", &s.itl);
    row(&mut out, "TPOT", &s.tpot);
    row(&mut out, "E2E", &s.e2e);
    let _ = writeln!(
        out,
        "  queue max {}, mean {:.1}; KV cache up to {:.0} % of {} blocks; {} preemptions{}",
        s.queue_max,
        s.queue_mean,
        s.kv_max * 100.0,
        s.kv_blocks,
        s.preemptions,
        crate::job::prompts::found_clause("the prefix cache", s.prefix_cache_hit_rate)
    );
    if let Some(r) = saturation {
        let _ = writeln!(
            out,
            "  saturation: one replica sustains up to ≈ {r:.1} req/s"
        );
    }
    out
}

/// A concurrency sweep, a line per client count.
fn sweep_text<'a>(rows: impl Iterator<Item = (&'a Workload, &'a Summary)>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "clients", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "E2E p50", "E2E p99"
    );
    for (w, s) in rows {
        let clients = match w.load {
            Load::Concurrency { clients } => clients,
            _ => 0,
        };
        let _ = writeln!(
            out,
            "  {clients:>7} {:>9.2} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9}",
            s.throughput_rps,
            s.output_tps,
            lat(s.ttft.p50),
            lat(s.ttft.p99),
            lat(s.tpot.p50),
            lat(s.e2e.p50),
            lat(s.e2e.p99)
        );
    }
    out
}

/// Runs the command.
pub(crate) fn run(args: &PredictArgs) -> Result<ExitCode> {
    let gpus = gpus(args)?;
    let model = model(args)?;
    let s = settings(args)?;
    let ws = workloads(args)?;
    let w = ws[0].clone();
    let prices = prices(args)?;
    for (g, _) in &prices {
        if !gpus.iter().any(|x| x.name.eq_ignore_ascii_case(g)) {
            bail!("--price {g}=…: {g} is not one of the --gpu values");
        }
    }
    let cfgs: Vec<EngineConfig> = gpus
        .iter()
        .map(|g| engine(g, &model, &s, args, &w))
        .collect::<Result<_>>()?;
    if let Some(slo) = args.target_p95_e2e {
        let target = args.rps.unwrap_or_default();
        let mut plans: Vec<(String, Option<Plan>)> = Vec::new();
        for cfg in &cfgs {
            let price = prices
                .iter()
                .find(|(g, _)| g.eq_ignore_ascii_case(&cfg.gpu.name))
                .map(|(_, p)| *p);
            let p = plan(cfg, &w, target, slo.as_secs_f64(), price)
                .with_context(|| format!("{} on {}", model.name, cfg.gpu.name))?;
            plans.push((cfg.gpu.name.clone(), p));
        }
        if args.json {
            let v: Vec<serde_json::Value> = plans
                .iter()
                .map(|(g, p)| serde_json::json!({"gpu": g, "plan": p}))
                .collect();
            emit(&format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::json!({
                    "version": 1, "model": model.name, "target_rps": target,
                    "target_p95_e2e_s": slo.as_secs_f64(), "workload": w, "gpus": v,
                }))?
            ))?;
            return Ok(ExitCode::from(exit::SUCCESS));
        }
        let mut out = describe(&cfgs[0], &w);
        let _ = writeln!(
            out,
            "\n{target} req/s within a p95 end-to-end latency of {}:\n",
            format_seconds(slo.as_secs_f64())
        );
        let _ = writeln!(
            out,
            "  {:<10} {:>12} {:>9} {:>6} {:>12} {:>10} {:>14}",
            "GPU", "per replica", "replicas", "GPUs", "p95 e2e", "$/hour", "$/M out tokens"
        );
        for (g, p) in &plans {
            match p {
                None => {
                    let _ = writeln!(
                        out,
                        "  {g:<10} not even one request at a time meets the SLO"
                    );
                }
                Some(p) => {
                    let _ = writeln!(
                        out,
                        "  {g:<10} {:>7.1} req/s {:>9} {:>6} {:>12} {:>10} {:>14}",
                        p.per_replica_rps,
                        p.replicas,
                        p.gpus,
                        lat(p.at_target.e2e.p95),
                        p.usd_per_hour.map_or("-".to_owned(), |v| format!("{v:.2}")),
                        p.usd_per_million_output_tokens
                            .map_or("-".to_owned(), |v| format!("{v:.3}"))
                    );
                }
            }
        }
        emit(&out)?;
        return Ok(ExitCode::from(exit::SUCCESS));
    }
    let mut results = Vec::new();
    for cfg in &cfgs {
        for w in &ws {
            let sum = predict(cfg, w).with_context(|| model.name.clone())?;
            let sat = if args.saturation {
                saturation_rps(cfg, w)?
            } else {
                None
            };
            results.push((cfg, w, sum, sat));
        }
    }
    if args.json {
        let v: Vec<serde_json::Value> = results
            .iter()
            .map(|(cfg, w, s, sat)| {
                serde_json::json!({
                    "gpu": cfg.gpu.name, "model": cfg.model.name, "tp": cfg.tensor_parallel_size,
                    "load": w.load, "summary": s, "saturation_rps": sat,
                })
            })
            .collect();
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(
                &serde_json::json!({"version": 1, "workload": w, "predictions": v})
            )?
        ))?;
    } else if ws.len() > 1 {
        let mut out = String::new();
        for chunk in results.chunks(ws.len()) {
            out.push_str(&describe(chunk[0].0, chunk[0].1));
            out.push_str(&sweep_text(chunk.iter().map(|(_, w, s, _)| (*w, s))));
            out.push('\n');
        }
        emit(&out)?;
    } else {
        let mut out = String::new();
        for (cfg, w, s, sat) in &results {
            out.push_str(&describe(cfg, w));
            out.push_str(&summary_text(s, *sat));
            out.push('\n');
        }
        emit(&out)?;
    }
    Ok(ExitCode::from(exit::SUCCESS))
}
