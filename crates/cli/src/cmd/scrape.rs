//! `inferscale scrape`: read the three metric tiers from endpoints, files or stdin.

use std::fmt::Write as _;
use std::io::Read as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use inferscale_catalog::{NameStatus, Signal, Snapshot, Tier};
use inferscale_promtext::{Format, ParseOptions, parse_with, validate_openmetrics};
use serde_json::{Map, Value, json};

use crate::cli::{FormatArg, ScrapeArgs};
use crate::output::emit;
use crate::units::{format_duration, format_seconds};
use inferscale_loadgen::Auth;
use inferscale_loadgen::Target;
use inferscale_loadgen::transport::{Fetched, Get, get};

/// The `Accept` header Prometheus sends: OpenMetrics preferred, text accepted.
const ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";

/// Where a target's text comes from.
#[derive(Debug, Clone)]
enum Source {
    Url(Target),
    File(String),
    Stdin,
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::Url(t) => t.url.clone(),
            Source::File(p) => p.clone(),
            Source::Stdin => "<stdin>".to_owned(),
        }
    }
}

/// A fetched body and what the transport said about its format.
struct Body {
    bytes: Bytes,
    content_type: Option<String>,
}

/// The validated form of the command line.
struct Config {
    targets: Vec<(String, Result<Source>)>,
    interval: Option<Duration>,
    json: bool,
    format: FormatArg,
    strict: bool,
    timeout: Duration,
    max_body: usize,
    auth: Auth,
    tls: Option<inferscale_loadgen::tls::TlsConfig>,
}

fn resolve(args: ScrapeArgs) -> Result<Config> {
    if args.strict && args.format == FormatArg::Prometheus {
        bail!("--strict validates OpenMetrics; it cannot be combined with --format prometheus");
    }
    if args.strict && args.interval.is_some() {
        bail!("--strict only validates; it cannot be combined with --interval");
    }
    let stdin_count = args.targets.iter().filter(|t| *t == "-").count();
    if stdin_count > 1 {
        bail!("standard input (-) can be given only once");
    }
    if stdin_count == 1 && args.interval.is_some() {
        bail!("--interval reads every target twice, which standard input (-) cannot do");
    }
    if args.interval.is_some_and(|d| d.is_zero()) {
        bail!("--interval must be longer than zero");
    }
    let targets = args
        .targets
        .iter()
        .map(|t| {
            let source = if t == "-" {
                Ok(Source::Stdin)
            } else if t.contains("://") {
                Target::parse_metrics(t)
                    .map(Source::Url)
                    .map_err(anyhow::Error::from)
            } else {
                Ok(Source::File(t.clone()))
            };
            (t.clone(), source)
        })
        .collect();
    Ok(Config {
        targets,
        interval: args.interval,
        json: args.json,
        format: args.format,
        strict: args.strict,
        timeout: args.timeout,
        max_body: args.max_body,
        auth: crate::credentials::scrape_auth(args.bearer_token_file.as_deref())?,
        tls: crate::credentials::tls(&args.tls)?,
    })
}

async fn fetch(source: &Source, cfg: &Config) -> Result<Body> {
    match source {
        Source::Url(t) => {
            let Fetched {
                status,
                body,
                content_type,
            } = get(
                t,
                &Get {
                    accept: ACCEPT.to_owned(),
                    timeout: cfg.timeout,
                    max_body: cfg.max_body,
                    auth: cfg.auth.clone(),
                    tls: cfg.tls.clone(),
                },
            )
            .await?;
            if status != 200 {
                let snippet: String = String::from_utf8_lossy(&body[..body.len().min(200)])
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect();
                if snippet.is_empty() {
                    bail!("HTTP {status}");
                }
                bail!("HTTP {status}: {snippet}");
            }
            Ok(Body {
                bytes: body,
                content_type,
            })
        }
        Source::File(path) => {
            let meta = std::fs::metadata(path).map_err(|e| anyhow!("cannot read the file: {e}"))?;
            if meta.len() > cfg.max_body as u64 {
                bail!(
                    "the file is {} bytes, larger than --max-body {}",
                    meta.len(),
                    cfg.max_body
                );
            }
            let bytes = std::fs::read(path).map_err(|e| anyhow!("cannot read the file: {e}"))?;
            Ok(Body {
                bytes: bytes.into(),
                content_type: None,
            })
        }
        Source::Stdin => {
            let mut buf = Vec::new();
            std::io::stdin()
                .take(cfg.max_body as u64 + 1)
                .read_to_end(&mut buf)
                .map_err(|e| anyhow!("cannot read standard input: {e}"))?;
            if buf.len() > cfg.max_body {
                bail!("standard input is larger than --max-body {}", cfg.max_body);
            }
            Ok(Body {
                bytes: buf.into(),
                content_type: None,
            })
        }
    }
}

/// Fetches every target concurrently, keeping the order.
async fn fetch_all(cfg: &Arc<Config>) -> Vec<Result<Body>> {
    let handles: Vec<_> = (0..cfg.targets.len())
        .map(|i| {
            let cfg = Arc::clone(cfg);
            tokio::spawn(async move {
                match &cfg.targets[i].1 {
                    Ok(s) => fetch(s, &cfg).await,
                    Err(e) => Err(anyhow!("{e:#}")),
                }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(
            h.await
                .unwrap_or_else(|e| Err(anyhow!("the fetch task failed: {e}"))),
        );
    }
    out
}

fn format_of(body: &Body, arg: FormatArg) -> Format {
    match arg {
        FormatArg::Prometheus => Format::PrometheusText,
        FormatArg::Openmetrics => Format::OpenMetrics,
        FormatArg::Auto => body
            .content_type
            .as_deref()
            .and_then(Format::from_content_type)
            .unwrap_or_else(|| Format::detect(&body.bytes)),
    }
}

fn read_snapshot(name: &str, body: &Body, arg: FormatArg) -> Result<(Snapshot, Format)> {
    let format = format_of(body, arg);
    let exp = parse_with(
        &body.bytes,
        ParseOptions {
            format: Some(format),
            strict: false,
        },
    )
    .map_err(|e| anyhow!("not a valid {format} exposition: {e}"))?;
    Ok((Snapshot::read(&exp, name), format))
}

/// Runs the command.
pub(crate) fn run(args: ScrapeArgs) -> Result<ExitCode> {
    let cfg = resolve(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(Arc::new(cfg)))
}

async fn run_async(cfg: Arc<Config>) -> Result<ExitCode> {
    let started = Instant::now();
    let first = fetch_all(&cfg).await;
    if cfg.strict {
        return validate(&cfg, &first);
    }
    let mut failed = false;
    let mut results: Vec<(String, Result<(Snapshot, Format)>)> = cfg
        .targets
        .iter()
        .zip(&first)
        .map(|((raw, source), body)| {
            let name = source.as_ref().map_or_else(|_| raw.clone(), Source::name);
            let snap = body
                .as_ref()
                .map_err(|e| anyhow!("{e:#}"))
                .and_then(|b| read_snapshot(&name, b, cfg.format));
            (name, snap)
        })
        .collect();
    if let Some(interval) = cfg.interval {
        let elapsed = started.elapsed();
        if !cfg.json {
            eprintln!("scraping again in {} …", format_duration(interval));
        }
        tokio::time::sleep(interval.saturating_sub(elapsed.min(interval))).await;
        let window = started.elapsed().as_secs_f64();
        let second = fetch_all(&cfg).await;
        for ((name, result), body) in results.iter_mut().zip(&second) {
            let Ok((earlier, _)) = result else { continue };
            *result = body
                .as_ref()
                .map_err(|e| anyhow!("second scrape: {e:#}"))
                .and_then(|b| read_snapshot(name, b, cfg.format))
                .map(|(later, format)| (later.window(earlier, window), format));
        }
    }
    let mut aggregate: Option<Snapshot> = None;
    let mut ok_count = 0;
    for (_, r) in &results {
        if let Ok((snap, _)) = r {
            ok_count += 1;
            match aggregate.as_mut() {
                None => aggregate = Some(snap.clone()),
                Some(a) => a.merge(snap.clone()),
            }
        }
    }
    if let (Some(a), Some(_)) = (aggregate.as_mut(), cfg.interval) {
        // Merging keeps the first target's window length; all targets share the same one.
        a.window_seconds = results
            .iter()
            .find_map(|(_, r)| r.as_ref().ok())
            .and_then(|(s, _)| s.window_seconds);
    }
    if cfg.json {
        let targets: Vec<Value> = results
            .iter()
            .map(|(name, r)| match r {
                Ok((snap, format)) => {
                    let mut v = snapshot_json(snap);
                    v.insert("target".into(), json!(name));
                    v.insert("ok".into(), json!(true));
                    v.insert("format".into(), json!(format.to_string()));
                    Value::Object(v)
                }
                Err(e) => json!({ "target": name, "ok": false, "error": format!("{e:#}") }),
            })
            .collect();
        let out = json!({
            "version": 1,
            "window_seconds": cfg.interval.and(aggregate.as_ref().and_then(|a| a.window_seconds)),
            "targets": targets,
            "aggregate": aggregate.as_ref().map(|a| Value::Object(snapshot_json(a))),
        });
        emit(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
    } else {
        let mut out = String::new();
        for (name, r) in &results {
            if let Ok((snap, format)) = r {
                render(&mut out, name, Some(*format), snap);
            }
        }
        if ok_count > 1
            && let Some(a) = &aggregate
        {
            render(
                &mut out,
                &format!("aggregate of {ok_count} targets"),
                None,
                a,
            );
        }
        emit(&out)?;
    }
    for (name, r) in &results {
        if let Err(e) = r {
            failed = true;
            eprintln!("error: {name}: {e:#}");
        }
    }
    Ok(if failed {
        ExitCode::from(crate::exit::USAGE)
    } else {
        ExitCode::SUCCESS
    })
}

fn validate(cfg: &Config, bodies: &[Result<Body>]) -> Result<ExitCode> {
    let mut text = String::new();
    let mut invalid = false;
    let mut unreadable = false;
    let mut verdicts = Vec::new();
    for ((raw, source), body) in cfg.targets.iter().zip(bodies) {
        let name = source.as_ref().map_or_else(|_| raw.clone(), Source::name);
        match body {
            Err(e) => {
                unreadable = true;
                verdicts.push(json!({ "target": name, "valid": null, "error": format!("{e:#}") }));
                if !cfg.json {
                    eprintln!("error: {name}: {e:#}");
                }
            }
            Ok(b) => match validate_openmetrics(&b.bytes) {
                Ok(exp) => {
                    verdicts.push(json!({ "target": name, "valid": true, "families": exp.family_count(), "samples": exp.sample_count() }));
                    if !cfg.json {
                        let _ = writeln!(
                            text,
                            "{name}: valid OpenMetrics ({} families, {} samples)",
                            exp.family_count(),
                            exp.sample_count()
                        );
                    }
                }
                Err(e) => {
                    invalid = true;
                    verdicts.push(json!({ "target": name, "valid": false, "line": e.line, "column": e.column, "error": e.message }));
                    if !cfg.json {
                        let _ = writeln!(text, "{name}:{}:{}: {}", e.line, e.column, e.message);
                    }
                }
            },
        }
    }
    if cfg.json {
        let _ = writeln!(
            text,
            "{}",
            serde_json::to_string_pretty(&json!({ "version": 1, "targets": verdicts }))?
        );
    }
    emit(&text)?;
    Ok(if unreadable {
        ExitCode::from(crate::exit::USAGE)
    } else if invalid {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn num(v: Option<f64>) -> Value {
    match v {
        Some(x) if x.is_finite() => json!(x),
        _ => Value::Null,
    }
}

fn snapshot_json(snap: &Snapshot) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "engine".into(),
        json!(snap.engines.first().map(|e| e.key())),
    );
    m.insert(
        "engines".into(),
        json!(snap.engines.iter().map(|e| e.key()).collect::<Vec<_>>()),
    );
    m.insert("families".into(), json!(snap.families));
    m.insert("samples".into(), json!(snap.samples));
    m.insert("window_seconds".into(), num(snap.window_seconds));
    let signals: Map<String, Value> = snap
        .signals()
        .into_iter()
        .map(|(k, v)| (k, num(v)))
        .collect();
    m.insert("signals".into(), Value::Object(signals));
    let sources: Map<String, Value> = Signal::ALL
        .iter()
        .filter(|s| snap.has(**s))
        .map(|s| {
            let names: Vec<Value> = snap
                .sources(*s)
                .iter()
                .map(|n| json!({ "name": n.name, "engine": n.engine.key(), "status": status_key(n.status) }))
                .collect();
            (s.key().to_owned(), Value::Array(names))
        })
        .collect();
    m.insert("sources".into(), Value::Object(sources));
    let reasons: Map<String, Value> = snap
        .finish_reasons()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    m.insert("finish_reasons".into(), Value::Object(reasons));
    let gpus: Vec<Value> = snap
        .gpus
        .iter()
        .map(|g| {
            let values: Map<String, Value> = g.values.iter().map(|(s, v)| (s.key().to_owned(), json!(v))).collect();
            json!({ "source": g.source, "gpu": g.index, "uuid": g.uuid, "model": g.model, "hostname": g.host, "signals": values })
        })
        .collect();
    m.insert("gpus".into(), Value::Array(gpus));
    m
}

fn status_key(s: NameStatus) -> &'static str {
    match s {
        NameStatus::Current => "current",
        NameStatus::Deprecated => "deprecated",
        NameStatus::Unverified => "unverified",
    }
}

const MISSING: &str = "-";

fn fmt_count(v: Option<f64>) -> String {
    match v {
        None => MISSING.to_owned(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{}", x as i64),
        Some(x) => format!("{x:.2}"),
    }
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING.to_owned(), |x| format!("{x:.2}/s"))
}

fn fmt_secs(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING.to_owned(), format_seconds)
}

fn fmt_pct(v: Option<f64>, fraction: bool) -> String {
    v.map_or_else(
        || MISSING.to_owned(),
        |x| format!("{:.1}%", if fraction { x * 100.0 } else { x }),
    )
}

/// A note naming the metric a signal was read from, when that is worth knowing.
fn source_note(snap: &Snapshot, signal: Signal) -> String {
    let notes: Vec<String> = snap
        .sources(signal)
        .iter()
        .filter(|n| n.status != NameStatus::Current)
        .map(|n| format!("{} ({})", n.name, status_key(n.status)))
        .collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!("  [{}]", notes.join(", "))
    }
}

fn row(out: &mut String, label: &str, value: &str, note: &str) {
    let _ = writeln!(out, "    {label:<22} {value}{note}");
}

fn counter_cell(snap: &Snapshot, signal: Signal) -> String {
    if snap.window_seconds.is_some() {
        fmt_rate(snap.rate(signal))
    } else {
        fmt_count(snap.value(signal))
    }
}

fn render(out: &mut String, title: &str, format: Option<Format>, snap: &Snapshot) {
    let engines = if snap.engines.is_empty() {
        "no known engine".to_owned()
    } else {
        snap.engines
            .iter()
            .map(|e| e.key())
            .collect::<Vec<_>>()
            .join("+")
    };
    let _ = write!(
        out,
        "{title}\n  {engines} · {} families · {} samples",
        snap.families, snap.samples
    );
    if let Some(f) = format {
        let _ = write!(out, " · {f}");
    }
    if let Some(w) = snap.window_seconds {
        let _ = write!(
            out,
            " · window {}",
            format_duration(Duration::from_secs_f64(w))
        );
    }
    out.push('\n');
    for tier in [Tier::Service, Tier::Engine, Tier::Gpu] {
        let _ = writeln!(out, "  {}", tier.title());
        match tier {
            Tier::Service => render_service(out, snap),
            Tier::Engine => render_engine(out, snap),
            Tier::Gpu => render_gpu(out, snap),
        }
    }
    out.push('\n');
}

fn render_histogram(out: &mut String, snap: &Snapshot, signal: Signal) {
    let h = snap.histogram(signal);
    let value = match &h {
        None => MISSING.to_owned(),
        Some(h) => {
            let q = |p| snap.quantile(signal, p);
            let mean = Some(h.mean()).filter(|m| !m.is_nan());
            format!(
                "p50 {}  p95 {}  p99 {}  mean {}  n={}",
                fmt_secs(q(0.5)),
                fmt_secs(q(0.95)),
                fmt_secs(q(0.99)),
                fmt_secs(mean),
                fmt_count(Some(h.observations()).filter(|n| !n.is_nan()))
            )
        }
    };
    row(out, signal.label(), &value, &source_note(snap, signal));
}

fn render_service(out: &mut String, snap: &Snapshot) {
    for s in [Signal::QueueDepth, Signal::Running] {
        row(
            out,
            s.label(),
            &fmt_count(snap.value(s)),
            &source_note(snap, s),
        );
    }
    let requests = format!(
        "ok {}  aborted {}  errored {}  error rate {}",
        counter_cell(snap, Signal::RequestsOk),
        counter_cell(snap, Signal::RequestsAborted),
        counter_cell(snap, Signal::RequestsErrored),
        fmt_pct(snap.error_rate(), true),
    );
    row(
        out,
        "requests",
        &requests,
        &source_note(snap, Signal::RequestsOk),
    );
    for s in [
        Signal::Ttft,
        Signal::Tpot,
        Signal::Itl,
        Signal::E2eLatency,
        Signal::QueueTime,
    ] {
        render_histogram(out, snap, s);
    }
}

fn render_engine(out: &mut String, snap: &Snapshot) {
    let kv = match snap.value(Signal::KvCacheUsage) {
        None => MISSING.to_owned(),
        Some(mean) => format!(
            "{} (max {})",
            fmt_pct(Some(mean), true),
            fmt_pct(snap.max(Signal::KvCacheUsage), true)
        ),
    };
    row(
        out,
        Signal::KvCacheUsage.label(),
        &kv,
        &source_note(snap, Signal::KvCacheUsage),
    );
    for s in [
        Signal::Preemptions,
        Signal::PromptTokens,
        Signal::GenerationTokens,
    ] {
        row(
            out,
            s.label(),
            &counter_cell(snap, s),
            &source_note(snap, s),
        );
    }
    let it = snap
        .histogram(Signal::IterationTokens)
        .map_or(MISSING.to_owned(), |h| {
            let q = |p| snap.quantile(Signal::IterationTokens, p);
            format!(
                "p50 {}  p95 {}  mean {}",
                fmt_count(q(0.5).map(f64::round)),
                fmt_count(q(0.95).map(f64::round)),
                fmt_count(Some((h.mean() * 10.0).round() / 10.0).filter(|m| !m.is_nan()))
            )
        });
    row(out, Signal::IterationTokens.label(), &it, "");
}

fn render_gpu(out: &mut String, snap: &Snapshot) {
    if snap.gpus.is_empty() {
        row(out, "GPUs", MISSING, "");
        return;
    }
    let summary = format!(
        "{} GPUs  util {}  mem-copy {}  FB used {} MiB  free {} MiB  power {} W  temp max {} °C  ECC SBE {}",
        snap.gpus.len(),
        fmt_pct(snap.value(Signal::GpuUtil), false),
        fmt_pct(snap.value(Signal::MemCopyUtil), false),
        fmt_count(snap.value(Signal::FbUsed)),
        fmt_count(snap.value(Signal::FbFree)),
        fmt_count(snap.value(Signal::Power).map(f64::round)),
        fmt_count(snap.value(Signal::GpuTemp)),
        counter_cell(snap, Signal::EccSbeVolatile),
    );
    row(out, "all", &summary, &source_note(snap, Signal::GpuUtil));
    let _ = writeln!(
        out,
        "    {:<6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>5}  model / host",
        "gpu", "util%", "memcopy%", "FB used", "FB free", "power", "temp", "SM MHz", "ECC",
    );
    for g in &snap.gpus {
        let v = |s: Signal| g.values.get(&s).copied();
        let ident = [g.model.as_deref(), g.host.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" @ ");
        let _ = writeln!(
            out,
            "    {:<6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>5}  {}",
            g.index,
            fmt_count(v(Signal::GpuUtil)),
            fmt_count(v(Signal::MemCopyUtil)),
            fmt_count(v(Signal::FbUsed)),
            fmt_count(v(Signal::FbFree)),
            fmt_count(v(Signal::Power).map(f64::round)),
            fmt_count(v(Signal::GpuTemp)),
            fmt_count(v(Signal::SmClock)),
            fmt_count(v(Signal::EccSbeVolatile)),
            ident
        );
    }
}
