//! `inferscale scrape`: read the three metric tiers from endpoints, files or stdin.

use inferscale_clock::Instant;
use std::fmt::Write as _;
use std::io::Read as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use inferscale_catalog::Snapshot;
use inferscale_promtext::{Format, ParseOptions, parse_with, validate_openmetrics};
use serde_json::{Map, Value, json};

use crate::cli::{FormatArg, ScrapeArgs};
use crate::output::emit;
use crate::units::format_duration;
use inferscale_loadgen::Target;
use inferscale_loadgen::scrape::{ScrapeError, Scraper};
use inferscale_loadgen::transport::Get;

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
    access: Get,
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
            (inferscale_loadgen::target::redact(t), source)
        })
        .collect();
    Ok(Config {
        targets,
        interval: args.interval,
        json: args.json,
        format: args.format,
        strict: args.strict,
        access: crate::credentials::scrape_access(&args.access, args.timeout)?,
    })
}

async fn fetch(source: &Source, cfg: &Config) -> Result<Body> {
    match source {
        Source::Url(t) => {
            let access = cfg.access.clone();
            // The target's name leads the message already; say only what went wrong.
            let scraped = Scraper::new(t.clone(), access)
                .fetch()
                .await
                .map_err(|e| match e {
                    ScrapeError::Fetch { source, .. } => anyhow::Error::from(source),
                    ScrapeError::Status {
                        status, snippet, ..
                    } if snippet.is_empty() => anyhow!("HTTP {status}"),
                    ScrapeError::Status {
                        status, snippet, ..
                    } => anyhow!("HTTP {status}: {snippet}"),
                    other => other.into(),
                })?;
            Ok(Body {
                bytes: scraped.body,
                content_type: scraped.content_type,
            })
        }
        Source::File(path) => {
            let bytes = crate::input::read_small_bytes(
                std::path::Path::new(path),
                "exposition file",
                cfg.access.max_body as u64,
            )?;
            Ok(Body {
                bytes: bytes.into(),
                content_type: None,
            })
        }
        Source::Stdin => {
            let mut buf = Vec::new();
            std::io::stdin()
                .take(cfg.access.max_body as u64 + 1)
                .read_to_end(&mut buf)
                .map_err(|e| anyhow!("cannot read standard input: {e}"))?;
            if buf.len() > cfg.access.max_body {
                bail!(
                    "standard input is larger than --max-body {}",
                    cfg.access.max_body
                );
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

/// A snapshot's JSON view (its `Serialize`), as an object to add the target's fields to.
fn snapshot_json(snap: &Snapshot) -> Result<Map<String, Value>> {
    match serde_json::to_value(snap)? {
        Value::Object(m) => Ok(m),
        _ => bail!("a snapshot did not serialise as an object"),
    }
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
                    let mut v = snapshot_json(snap)?;
                    v.insert("target".into(), json!(name));
                    v.insert("ok".into(), json!(true));
                    v.insert("format".into(), json!(format.to_string()));
                    Ok(Value::Object(v))
                }
                Err(e) => Ok(json!({ "target": name, "ok": false, "error": format!("{e:#}") })),
            })
            .collect::<Result<_>>()?;
        let out = json!({
            "version": 1,
            "window_seconds": cfg.interval.and(aggregate.as_ref().and_then(|a| a.window_seconds)),
            "targets": targets,
            "aggregate": aggregate.as_ref().map(serde_json::to_value).transpose()?,
        });
        emit(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
    } else {
        let mut out = String::new();
        for (name, r) in &results {
            if let Ok((snap, format)) = r {
                inferscale_catalog::table::render(&mut out, name, Some(&format.to_string()), snap);
            }
        }
        if ok_count > 1
            && let Some(a) = &aggregate
        {
            inferscale_catalog::table::render(
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
