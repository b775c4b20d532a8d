//! `inferscale query`: PromQL over live `/metrics` endpoints, with no Prometheus.

use inferscale_clock::Instant;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use inferscale_loadgen::Target;
use inferscale_loadgen::scrape::Scraper;
use inferscale_promql::{
    EvalError, Evaluator, Labels, Query, Store, Value, api_json, format_value,
};

use crate::cli::QueryArgs;
use crate::exit;
use crate::labels::label;
use crate::output::emit;
use crate::units::format_duration;

/// One target: where, and the labels its series get.
struct Scrapee {
    scraper: Scraper,
    labels: Labels,
}

/// A manifest or dashboard is a few megabytes at most.
const MAX_QUERY_FILE: u64 = 16 << 20;

/// The expressions given, then those of every `--file`, without repeats; each parsed.
fn queries(args: &QueryArgs) -> Result<Vec<Query>> {
    let mut vars: Vec<(String, String)> = inferscale_manifests::GRAFANA_INTERVALS
        .iter()
        .map(|v| ((*v).to_owned(), "1m".to_owned()))
        .collect();
    for pair in &args.vars {
        let Some((k, v)) = pair.split_once('=') else {
            bail!("--var: {pair:?} is not a variable (expected name=value)");
        };
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_owned(), v.to_owned()));
    }
    let mut out: Vec<Query> = Vec::new();
    let mut push = |q: Query| {
        if !out.iter().any(|x| x.text() == q.text()) {
            out.push(q);
        }
    };
    for e in &args.exprs {
        push(Query::parse(e)?);
    }
    for path in &args.files {
        let text = crate::input::read_text(path, "query file", MAX_QUERY_FILE)?;
        let found = inferscale_manifests::queries_in_text(&text)
            .with_context(|| format!("{} is not JSON or YAML", path.display()))?;
        if found.is_empty() {
            bail!(
                "{} holds no PromQL (expected a ScaledObject, PrometheusRule, rule file or \
                 Grafana dashboard, whose queries are under `expr` or `query`)",
                path.display()
            );
        }
        for (i, q) in found.iter().enumerate() {
            let text = inferscale_manifests::with_variables(q, &vars);
            if let Some(name) = inferscale_manifests::variables_in(&text).first() {
                bail!(
                    "{}: query {} of {} uses the dashboard variable ${name}: give it with --var {name}=VALUE: {text}",
                    path.display(),
                    i + 1,
                    found.len()
                );
            }
            let parsed = Query::parse(&text).with_context(|| {
                format!(
                    "{}: query {} of {}: {text}",
                    path.display(),
                    i + 1,
                    found.len()
                )
            })?;
            push(parsed);
        }
    }
    Ok(out)
}

fn resolve(args: &QueryArgs) -> Result<(Vec<Query>, Vec<Scrapee>)> {
    let queries = queries(args)?;
    if args.every.is_zero() {
        bail!("--every must be longer than zero");
    }
    if args.window > Duration::from_secs(24 * 3600) {
        bail!(
            "--for {} is longer than a day; the series are kept in memory",
            format_duration(args.window)
        );
    }
    let common: Vec<(String, String)> = args
        .labels
        .iter()
        .map(|l| label(l, "--label"))
        .collect::<Result<_>>()?;
    let access = crate::credentials::scrape_access(&args.access, args.timeout)?;
    let mut targets = Vec::new();
    for spec in &args.targets {
        let (url, extra) = spec.split_once('#').unwrap_or((spec, ""));
        let target = Target::parse_metrics(url)?;
        let mut labels = Labels::new([("job", "inferscale"), ("instance", &target.authority())]);
        for (k, v) in &common {
            labels.set(k.clone(), v.clone());
        }
        for pair in extra.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = label(pair, spec)?;
            labels.set(k, v);
        }
        if targets.iter().any(|t: &Scrapee| t.labels == labels) {
            bail!("two targets have the labels {labels}: give them different ones with URL#pod=…");
        }
        targets.push(Scrapee {
            scraper: Scraper::new(target, access.clone()),
            labels,
        });
    }
    Ok((queries, targets))
}

fn now_ms() -> i64 {
    inferscale_clock::unix(inferscale_clock::wall()).as_millis() as i64
}

/// Scrapes every target every `every` for `window` into a store; the errors met, per target.
async fn record(
    targets: &[Scrapee],
    window: Duration,
    every: Duration,
    quiet: bool,
) -> (Store, Vec<Vec<String>>, u64) {
    let mut store = Store::new();
    let mut ok = 0;
    let mut errors = vec![Vec::new(); targets.len()];
    let started = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut rounds = 0u64;
    loop {
        tick.tick().await;
        let t = now_ms();
        let scrapers: Vec<Scraper> = targets.iter().map(|t| t.scraper.clone()).collect();
        let results = inferscale_loadgen::scrape::scrape_all(&scrapers).await;
        for (i, parsed) in results.into_iter().enumerate() {
            match parsed {
                Ok(exp) => {
                    store.scrape(&targets[i].labels, t, Some(&exp));
                    ok += 1;
                }
                Err(e) => {
                    store.scrape(&targets[i].labels, t, None);
                    if errors[i].len() < 5 {
                        errors[i].push(inferscale_loadgen::with_causes(&e));
                    }
                }
            }
        }
        rounds += 1;
        if !quiet && rounds.is_multiple_of(10) {
            eprintln!(
                "  {} of {} scraped, {} series",
                format_duration(started.elapsed()),
                format_duration(window),
                store.series().len()
            );
        }
        if started.elapsed() + every > window {
            break;
        }
    }
    (store, errors, ok)
}

fn table(out: &mut String, q: &Query, r: &Result<Value, EvalError>) {
    let _ = writeln!(out, "{}", q.text());
    match r {
        Err(e) => {
            let _ = writeln!(out, "  error: {e}");
        }
        Ok(Value::Scalar(v)) => {
            let _ = writeln!(out, "  scalar  {}", format_value(*v));
        }
        Ok(Value::String(s)) => {
            let _ = writeln!(out, "  string  {s:?}");
        }
        Ok(Value::Vector(v)) if v.is_empty() => {
            let _ = writeln!(out, "  (empty)");
        }
        Ok(Value::Vector(v)) => {
            let mut rows: Vec<(String, String)> = v
                .iter()
                .map(|s| (s.labels.to_string(), format_value(s.value)))
                .collect();
            rows.sort();
            let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
            for (l, v) in rows {
                let _ = writeln!(out, "  {l:<w$}  {v}");
            }
        }
        Ok(Value::Matrix(m)) => {
            for s in m {
                let _ = writeln!(out, "  {}  {} samples", s.labels, s.points.len());
            }
        }
    }
    out.push('\n');
}

/// Runs the command.
pub(crate) fn run(args: &QueryArgs) -> Result<ExitCode> {
    let (queries, targets) = resolve(args)?;
    if !args.json {
        eprintln!(
            "scraping {} target{} every {} for {} …",
            targets.len(),
            if targets.len() == 1 { "" } else { "s" },
            format_duration(args.every),
            format_duration(args.window)
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (store, errors, ok) = rt.block_on(record(&targets, args.window, args.every, args.json));
    for (t, errs) in targets.iter().zip(&errors) {
        if let Some(first) = errs.first() {
            eprintln!("warning: scraping {} failed: {first}", t.scraper.url());
        }
    }
    let t = now_ms();
    let ev = Evaluator::new(&store);
    let results: Vec<Result<Value, EvalError>> = queries.iter().map(|q| ev.eval(q, t)).collect();
    if args.json {
        let arr: Vec<serde_json::Value> = queries
            .iter()
            .zip(&results)
            .map(|(q, r)| {
                let mut v = api_json(r, t);
                if let Some(o) = v.as_object_mut() {
                    o.insert("query".into(), q.text().into());
                }
                v
            })
            .collect();
        emit(&format!("{}\n", serde_json::to_string_pretty(&arr)?))?;
    } else {
        let mut out = String::new();
        for (q, r) in queries.iter().zip(&results) {
            table(&mut out, q, r);
        }
        emit(&out)?;
    }
    if ok == 0 {
        bail!("no target could be scraped; the results above are over no data");
    }
    if results.iter().any(Result::is_err) {
        return Ok(ExitCode::from(exit::CHECK_FAILED));
    }
    Ok(ExitCode::from(exit::SUCCESS))
}
