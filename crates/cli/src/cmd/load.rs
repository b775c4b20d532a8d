//! `inferscale load` and `inferscale warmup`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use inferscale_loadgen::discover::{ModelsError, resolve_model};
use inferscale_loadgen::prompt::{Api, Length, PromptSource, RequestSpec, SEEDS_WARMUP_PROMPT};
use inferscale_loadgen::report::{RunReport, StepReport, WarmupReport};
use inferscale_loadgen::schedule::{Arrival, Stage};
use inferscale_loadgen::threshold::Threshold;
use inferscale_loadgen::transport::{Client, ClientConfig, Get, wait_ready};
use inferscale_loadgen::{LoadConfig, Progress, Target};
use serde::Deserialize;

use crate::cli::{ApiArg, LoadArgs, WarmupArgs};
use crate::cmd::sim::shutdown_signal;
use crate::exit::AfterStartExt;
use crate::output::emit;
use crate::units::{format_seconds, parse_duration};

/// A duration in a plan file: seconds, or text like `60s`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Seconds(f64),
    Text(String),
}

impl DurationValue {
    fn get(&self, field: &str) -> Result<Duration> {
        match self {
            DurationValue::Seconds(s) if s.is_finite() && *s >= 0.0 => {
                Ok(Duration::from_secs_f64(*s))
            }
            DurationValue::Seconds(s) => bail!("plan field `{field}`: {s} is not a duration"),
            DurationValue::Text(t) => {
                parse_duration(t).map_err(|e| anyhow!("plan field `{field}`: {e}"))
            }
        }
    }
}

/// A token length in a plan file: a number, or text like `uniform:10,20`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum LengthValue {
    Tokens(u32),
    Text(String),
}

impl LengthValue {
    fn get(&self, field: &str) -> Result<Length> {
        match self {
            LengthValue::Tokens(n) if *n > 0 => Ok(Length::Fixed { tokens: *n }),
            LengthValue::Tokens(_) => bail!("plan field `{field}`: must be at least 1"),
            LengthValue::Text(t) => {
                Length::parse(t).with_context(|| format!("plan field `{field}`"))
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageFile {
    #[serde(default)]
    rate: Option<f64>,
    #[serde(default)]
    concurrency: Option<u32>,
    #[serde(default)]
    end_rate: Option<f64>,
    duration: DurationValue,
    #[serde(default)]
    rest: Option<DurationValue>,
}

/// `--plan FILE`: every load setting in one YAML or TOML document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanFile {
    url: Option<String>,
    model: Option<String>,
    rates: Option<Vec<f64>>,
    concurrency: Option<Vec<u32>>,
    step: Option<DurationValue>,
    rest: Option<DurationValue>,
    stages: Option<Vec<StageFile>>,
    arrival: Option<String>,
    max_in_flight: Option<usize>,
    api: Option<String>,
    stream: Option<bool>,
    max_tokens: Option<LengthValue>,
    prompt: Option<String>,
    prompt_tokens: Option<LengthValue>,
    dataset: Option<PathBuf>,
    temperature: Option<f64>,
    ignore_eos: Option<bool>,
    timeout: Option<DurationValue>,
    connection_reuse: Option<bool>,
    metrics_url: Option<String>,
    speedup: Option<f64>,
    seed: Option<u64>,
    warmup: Option<u32>,
    thresholds: Option<Vec<String>>,
}

fn read_plan(path: &Path) -> Result<PlanFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the plan {}", path.display()))?;
    let toml = path.extension().is_some_and(|e| e == "toml");
    let plan: PlanFile = if toml {
        toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
    } else {
        inferscale_manifests::yaml::from_str(&text).with_context(|| path.display().to_string())?
    };
    Ok(plan)
}

pub(crate) fn parse_arrival(s: &str) -> Result<Arrival> {
    match s {
        "constant" => Ok(Arrival::Constant),
        "poisson" => Ok(Arrival::Poisson),
        g => match g.strip_prefix("gamma:").and_then(|x| x.parse::<f64>().ok()) {
            Some(shape) if shape.is_finite() && shape > 0.0 => Ok(Arrival::Gamma { shape }),
            _ => bail!(
                "invalid arrival {s:?} (expected constant, poisson or gamma:SHAPE with SHAPE > 0)"
            ),
        },
    }
}

fn api_of(a: ApiArg) -> Api {
    match a {
        ApiArg::Completions => Api::Completions,
        ApiArg::Chat => Api::Chat,
    }
}

/// Adds where a key goes to a refusal for the lack of one.
fn hint_auth(e: ModelsError) -> anyhow::Error {
    if matches!(e, ModelsError::Unauthorized { .. }) {
        anyhow!(
            "{e}; put the key in the {} environment variable or in a file named by --api-key-file",
            crate::credentials::API_KEY_ENV
        )
    } else {
        e.into()
    }
}

/// Checks that `path` can be written (without touching an existing file).
pub(crate) fn check_writable(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(".inferscale-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").with_context(|| {
        format!(
            "cannot write {} (the directory {} is not writable)",
            path.display(),
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(probe);
    if path.is_dir() {
        bail!("{} is a directory, not a file", path.display());
    }
    Ok(())
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|f| f.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))
}

/// The load plan resolved from flags, a plan file and defaults.
pub(crate) struct Resolved {
    pub(crate) url: Target,
    pub(crate) model: Option<String>,
    pub(crate) config: LoadConfig,
    pub(crate) dataset: Option<PathBuf>,
    pub(crate) warmup: u32,
    pub(crate) thresholds: Vec<Threshold>,
    /// What the target is, when inferscale started it (recorded in run.json).
    pub(crate) simulated: Option<serde_json::Value>,
    /// The target's `max_num_seqs`, when known.
    pub(crate) max_num_seqs: Option<u32>,
    /// The embedded simulator's clock-lag meter: read after the load, recorded in run.json,
    /// and a warning when the machine did not hold the speed-up.
    pub(crate) sim_lag: Option<inferscale_sim::LagMeter>,
}

/// One stage per level, each `step` long, with `rest` between them (none after the last).
fn stepped<T>(
    levels: &[T],
    step: Duration,
    rest: Duration,
    stage: impl Fn(&T, f64, f64) -> Stage,
) -> Vec<Stage> {
    let n = levels.len();
    levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            stage(
                l,
                step.as_secs_f64(),
                if i + 1 < n { rest.as_secs_f64() } else { 0.0 },
            )
        })
        .collect()
}

pub(crate) fn resolve(a: &LoadArgs) -> Result<Resolved> {
    let p = match &a.plan {
        Some(path) => read_plan(path)?,
        None => PlanFile::default(),
    };
    let url_text = a
        .url
        .clone()
        .or(p.url.clone())
        .ok_or_else(|| anyhow!("--url is required (or `url:` in the plan)"))?;
    let url = Target::parse(&url_text).context("--url")?;
    let auth = crate::credentials::client_auth(&a.auth)?;
    let tls = crate::credentials::tls(&a.auth.tls)?;
    let step = match (a.step, &p.step) {
        (Some(s), _) => s,
        (None, Some(s)) => s.get("step")?,
        (None, None) => Duration::from_secs(60),
    };
    let rest = match (a.rest, &p.rest) {
        (Some(s), _) => s,
        (None, Some(s)) => s.get("rest")?,
        (None, None) => Duration::from_secs(30),
    };
    // Steps given as concurrency levels (closed loop), from the flag or the plan.
    let concurrency = match (&a.concurrency, &a.rates) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(_)) => None,
        (None, None) if p.stages.is_none() && p.rates.is_none() => p.concurrency.clone(),
        (None, None) => None,
    };
    if p.rates.is_some() && p.concurrency.is_some() {
        bail!("the plan gives both `rates` and `concurrency`; keep one");
    }
    let stages: Vec<Stage> = match (&a.rates, &p.stages, &p.rates) {
        _ if concurrency.is_some() => {
            let c = concurrency.unwrap_or_default();
            if c.is_empty() {
                bail!("--concurrency needs at least one level");
            }
            stepped(&c, step, rest, |level, d, r| Stage::closed(*level, d, r))
        }
        (Some(r), _, _) | (None, None, Some(r)) => {
            if r.is_empty() {
                bail!("--rates needs at least one rate");
            }
            stepped(r, step, rest, |rate, d, rest| {
                Stage::constant(*rate, d, rest)
            })
        }
        (None, Some(s), _) => s
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (rate, concurrency) = match (s.rate, s.concurrency) {
                    (Some(r), None) => (r, None),
                    (None, Some(c)) => (0.0, Some(c)),
                    _ => bail!("stages[{i}]: give either `rate` or `concurrency`"),
                };
                Ok(Stage {
                    rate,
                    concurrency,
                    end_rate: s.end_rate,
                    duration_s: s
                        .duration
                        .get(&format!("stages[{i}].duration"))?
                        .as_secs_f64(),
                    rest_s: s
                        .rest
                        .as_ref()
                        .map(|r| r.get(&format!("stages[{i}].rest")))
                        .transpose()?
                        .map_or(0.0, |d| d.as_secs_f64()),
                })
            })
            .collect::<Result<_>>()?,
        (None, None, None) => {
            let rates = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0];
            rates
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    Stage::constant(
                        *r,
                        step.as_secs_f64(),
                        if i + 1 < rates.len() {
                            rest.as_secs_f64()
                        } else {
                            0.0
                        },
                    )
                })
                .collect()
        }
    };
    for (i, s) in stages.iter().enumerate() {
        if s.concurrency.is_none() && !(s.rate.is_finite() && s.rate > 0.0) {
            bail!(
                "step {}: the rate must be a positive number of requests per second, not {}",
                i + 1,
                s.rate
            );
        }
    }
    let arrival = parse_arrival(
        a.arrival
            .as_deref()
            .or(p.arrival.as_deref())
            .unwrap_or("constant"),
    )?;
    let api = match (a.api, &p.api) {
        (Some(x), _) => api_of(x),
        (None, Some(s)) => match s.as_str() {
            "completions" => Api::Completions,
            "chat" => Api::Chat,
            other => bail!("plan field `api`: {other:?} is not completions or chat"),
        },
        (None, None) => Api::Completions,
    };
    let stream = if a.no_stream {
        false
    } else if a.stream {
        true
    } else {
        p.stream.unwrap_or(true)
    };
    let max_tokens = match (&a.max_tokens, &p.max_tokens) {
        (Some(s), _) => Length::parse(s).context("--max-tokens")?,
        (None, Some(v)) => v.get("max_tokens")?,
        (None, None) => Length::Fixed { tokens: 100 },
    };
    let dataset = a.dataset.clone().or(p.dataset.clone());
    let prompt = if let Some(d) = &dataset {
        PromptSource::Dataset {
            path: d.display().to_string(),
        }
    } else if let Some(t) = a.prompt.clone().or(p.prompt.clone()) {
        PromptSource::Fixed { text: t }
    } else if let Some(l) = &a.prompt_tokens {
        PromptSource::Synthetic {
            length: Length::parse(l).context("--prompt-tokens")?,
        }
    } else if let Some(l) = &p.prompt_tokens {
        PromptSource::Synthetic {
            length: l.get("prompt_tokens")?,
        }
    } else {
        PromptSource::Seeds
    };
    let temperature = a.temperature.or(p.temperature).unwrap_or(0.7);
    if !(temperature.is_finite() && temperature >= 0.0) {
        bail!("--temperature must be a non-negative number, not {temperature}");
    }
    let timeout = match (a.timeout, &p.timeout) {
        (Some(t), _) => t,
        (None, Some(t)) => t.get("timeout")?,
        (None, None) => Duration::from_secs(240),
    };
    if timeout.is_zero() {
        bail!("--timeout must be longer than zero");
    }
    let speedup = a.speedup.or(p.speedup).unwrap_or(1.0);
    if !(speedup.is_finite() && speedup > 0.0 && speedup <= 10_000.0) {
        bail!("--speedup must be a number in (0, 10000], not {speedup}");
    }
    let max_in_flight = a.max_in_flight.or(p.max_in_flight).unwrap_or(500);
    if max_in_flight == 0 {
        bail!("--max-in-flight must be at least 1");
    }
    let metrics = if a.no_metrics {
        None
    } else {
        match a.metrics_url.clone().or(p.metrics_url.clone()) {
            Some(m) => Some(Target::parse_metrics(&m).context("--metrics-url")?),
            None => Some(url.with_path("/metrics")),
        }
    };
    let mut thresholds = Vec::new();
    for t in a.thresholds.iter().chain(p.thresholds.iter().flatten()) {
        thresholds.push(Threshold::parse(t)?);
    }
    let model = a.model.clone().or(p.model.clone());
    let config = LoadConfig {
        client: ClientConfig {
            target: url.clone(),
            reuse: !(a.no_connection_reuse || p.connection_reuse == Some(false)),
            timeout,
            max_body: 64 << 20,
            auth,
            tls,
        },
        requests: RequestSpec {
            api,
            model: model.clone().unwrap_or_default(),
            prompt,
            max_tokens,
            temperature,
            stream,
            ignore_eos: a.ignore_eos || p.ignore_eos == Some(true),
        },
        stages,
        arrival,
        max_in_flight,
        speedup,
        seed: a.seed.or(p.seed).unwrap_or(0),
        metrics,
        sample_interval_s: 1.0,
        grace: a.grace,
    };
    Ok(Resolved {
        url,
        model,
        config,
        dataset,
        warmup: a.warmup.or(p.warmup).unwrap_or(0),
        thresholds,
        simulated: None,
        sim_lag: None,
        max_num_seqs: None,
    })
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), f)
}

/// The end-of-run table, one row per step.
pub(crate) fn summary(report: &RunReport) -> String {
    let mut s = String::new();
    let k = report.plan.speedup;
    s.push_str(&format!(
        "\n{}{}\n",
        if report.interrupted {
            "INTERRUPTED — partial result. "
        } else {
            ""
        },
        if k != 1.0 {
            format!("times in the server's time (speed-up {k}×)")
        } else {
            String::new()
        }
    ));
    s.push_str(&format!(
        "{:>5} {:>8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>7}\n",
        "rps", "sent/s", "done/s", "ok", "fail", "drop", "e2e p50", "e2e p95", "e2e p99", "TTFT p95", "TPOT p50", "queue", "q max", "srv e2e95", "lag99"
    ));
    for st in &report.steps {
        s.push_str(&row(st));
    }
    s
}

fn row(st: &StepReport) -> String {
    let l = &st.latency_s;
    let srv = st.server.as_ref();
    format!(
        "{:>5} {:>8.2} {:>8.2} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>7}{}\n",
        match st.concurrency {
            Some(c) => format!("c={c}"),
            None => format!("{}", st.target_rps),
        },
        st.sent_rps,
        st.achieved_rps,
        st.requests.ok,
        st.requests.failed.total,
        st.requests.dropped,
        opt(l.e2e.p50, format_seconds),
        opt(l.e2e.p95, format_seconds),
        opt(l.e2e.p99, format_seconds),
        opt(l.ttft.p95, format_seconds),
        opt(l.tpot.p50, format_seconds),
        opt(srv.and_then(|s| s.queue_depth.p95), |v| format!("{v:.0}")),
        opt(srv.and_then(|s| s.queue_depth.max), |v| format!("{v:.0}")),
        opt(srv.and_then(|s| s.e2e_p95_s), format_seconds),
        opt(st.client.lag_p99_s, |v| format!("{:.2}ms", v * 1e3)),
        if st.client.client_limited {
            "  client-limited"
        } else {
            ""
        },
    )
}

fn progress_printer(tty: bool, quiet: bool) -> impl FnMut(Progress) + Send {
    let mut last_len = 0usize;
    move |p| {
        if quiet {
            return;
        }
        match p {
            Progress::StepStarted {
                index,
                target_rps,
                concurrency,
                of,
            } => {
                if tty && last_len > 0 {
                    eprint!("\r{:width$}\r", "", width = last_len);
                    last_len = 0;
                }
                match concurrency {
                    Some(c) => eprintln!("step {}/{of}: {c} in flight (closed loop)", index + 1),
                    None => eprintln!("step {}/{of}: {target_rps} req/s", index + 1),
                }
            }
            Progress::Tick(t) if tty => {
                let Some(step) = t.step else { return };
                let line = format!(
                    "  step {} · {:.1} req/s sent · ok {} fail {} drop {} · in flight {} · e2e p95 {} · server queue {}",
                    step + 1,
                    t.rate,
                    t.ok,
                    t.failed,
                    t.dropped,
                    t.in_flight,
                    opt(t.e2e_p95_s, format_seconds),
                    opt(t.queue_depth, |q| format!("{q:.0}"))
                );
                eprint!("\r{line:width$}", width = last_len);
                last_len = line.chars().count();
            }
            Progress::Tick(_) => {}
            Progress::StepEnded(st) => {
                if tty && last_len > 0 {
                    eprint!("\r{:width$}\r", "", width = last_len);
                    last_len = 0;
                }
                eprint!("  done: {}", row(&st).trim_start());
            }
        }
    }
}

/// What a load run wrote and whether its thresholds held.
pub(crate) struct Outcome {
    pub(crate) report: RunReport,
    pub(crate) breached: bool,
}

/// Runs a resolved plan (pre-flight checks, warm-up, the plan) and writes its files. Used by
/// `load` and `run`.
pub(crate) async fn execute(
    mut r: Resolved,
    out: &Path,
    requests_out: Option<&Path>,
    quiet: bool,
) -> Result<Outcome> {
    check_writable(out)?;
    if let Some(p) = requests_out {
        check_writable(p)?;
    }
    let access = Get::like(&r.config.client);
    let model = resolve_model(&r.url, &access, r.model.clone())
        .await
        .map_err(hint_auth)?;
    r.config.requests.model = model.clone();
    let dataset = match &r.dataset {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the dataset {}", p.display()))?,
        ),
        None => None,
    };
    if let Some(d) = &dataset {
        inferscale_loadgen::prompt::load_dataset(
            d,
            &r.dataset
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        )?;
    }
    let tty = std::io::stderr().is_terminal();
    let warmup = if r.warmup > 0 {
        if !quiet {
            eprintln!("warm-up: {} sequential requests", r.warmup);
        }
        Some(
            Warmup {
                url: &r.url,
                access: &access,
                model: &model,
                n: r.warmup,
                timeout: r.config.client.timeout,
                speedup: r.config.speedup,
                prompt: None,
                quiet,
                api: Api::Completions,
                stream: false,
                max_tokens: 100,
            }
            .run()
            .await?,
        )
    } else {
        None
    };
    if !quiet {
        let n: f64 = r.config.stages.iter().map(Stage::expected_requests).sum();
        let secs: f64 = r
            .config
            .stages
            .iter()
            .map(|s| s.duration_s + s.rest_s)
            .sum::<f64>()
            / r.config.speedup;
        eprintln!(
            "load: {} steps, {:.0} requests, about {} of wall time; model {model:?}; results in {}",
            r.config.stages.len(),
            n,
            crate::units::format_duration(Duration::from_secs_f64(secs)),
            out.display()
        );
    }
    let thresholds = std::mem::take(&mut r.thresholds);
    let output = inferscale_loadgen::run(
        r.config.clone(),
        dataset,
        progress_printer(tty, quiet),
        shutdown_signal(),
    )
    .await
    .map_err(|e| match e {
        // A task that died mid-run is a failure after work began; the rest are refusals
        // before the first request.
        e @ inferscale_loadgen::LoadError::TaskPanicked => {
            crate::exit::after_start(anyhow::Error::new(e).context("the load run failed"))
        }
        e => e.into(),
    })?;
    let mut report = output.report;
    report.warmup = warmup;
    report.target.simulated = r.simulated.take();
    if let (Some(meter), Some(serde_json::Value::Object(sim))) =
        (&r.sim_lag, report.target.simulated.as_mut())
    {
        let lag = meter.read();
        if !quiet && !lag.held() {
            eprintln!(
                "warning: the simulator fell behind its clock ({}): this machine could not hold a {}× speed-up, so latencies are overstated; use a release build or a lower --speedup",
                lag.describe(),
                r.config.speedup
            );
        }
        sim.insert("clock_lag".into(), serde_json::to_value(lag)?);
        sim.insert("clock_held".into(), lag.held().into());
    }
    report.target.max_num_seqs = r.max_num_seqs;
    report.thresholds = thresholds
        .iter()
        .map(|t| t.evaluate(&output.records, r.config.speedup))
        .collect();
    let json = serde_json::to_vec_pretty(&report)?;
    write_atomic(out, &json)
        .context("the measurement is lost: run.json could not be written")
        .after_start()?;
    if let Some(p) = requests_out {
        let mut lines = Vec::new();
        for rec in &output.records {
            serde_json::to_writer(&mut lines, rec)?;
            lines.push(b'\n');
        }
        write_atomic(p, &lines)
            .with_context(|| format!("run.json was written to {}", out.display()))
            .after_start()?;
    }
    if !quiet && !output.scrape_errors.is_empty() {
        eprintln!(
            "warning: {} scrapes of the server's metrics failed; first: {}",
            output.scrape_errors.len(),
            output.scrape_errors[0]
        );
    }
    let breached = report.thresholds.iter().any(|t| !t.ok);
    Ok(Outcome { report, breached })
}

/// `inferscale load`.
pub(crate) fn run_load(a: &LoadArgs) -> Result<ExitCode> {
    let resolved = resolve(a)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(execute(resolved, &a.out, a.requests_out.as_deref(), a.json))?;
    let mut text = String::new();
    if a.json {
        text = serde_json::to_string_pretty(&out.report)? + "\n";
    } else {
        text.push_str(&summary(&out.report));
        for t in &out.report.thresholds {
            text.push_str(&format!(
                "threshold {}: {} ({})\n",
                t.expr,
                if t.ok { "ok" } else { "BREACHED" },
                opt(t.value, |v| format!("{v:.4}"))
            ));
        }
        text.push_str(&format!(
            "wrote {}{}\n",
            a.out.display(),
            a.requests_out
                .as_ref()
                .map_or(String::new(), |p| format!(" and {}", p.display()))
        ));
    }
    emit(&text)?;
    Ok(if out.breached {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// A sequential warm-up, as `inferscale warmup` and the start of `load`/`run` send it.
struct Warmup<'a> {
    url: &'a Target,
    access: &'a Get,
    model: &'a str,
    n: u32,
    timeout: Duration,
    speedup: f64,
    prompt: Option<String>,
    quiet: bool,
    api: Api,
    stream: bool,
    max_tokens: u32,
}

impl Warmup<'_> {
    async fn run(self) -> Result<WarmupReport> {
        let Warmup {
            url,
            access,
            model,
            n,
            timeout,
            speedup,
            prompt,
            quiet,
            api,
            stream,
            max_tokens,
        } = self;
        let client = Client::new(ClientConfig {
            target: url.clone(),
            reuse: true,
            timeout,
            max_body: 64 << 20,
            auth: access.auth.clone(),
            tls: access.tls.clone(),
        });
        let spec = RequestSpec {
            api,
            model: model.to_owned(),
            prompt: PromptSource::Fixed {
                text: prompt.unwrap_or_else(|| SEEDS_WARMUP_PROMPT.to_owned()),
            },
            max_tokens: Length::Fixed { tokens: max_tokens },
            temperature: 0.7,
            stream,
            ignore_eos: false,
        };
        let tty = std::io::stderr().is_terminal() && !quiet;
        let report = inferscale_loadgen::warmup(&client, &spec, n as usize, speedup, 0, |i, l| {
            if tty {
                eprint!(
                    "\r  warm-up {}/{n}: {}      ",
                    i + 1,
                    opt(l, format_seconds)
                );
            }
        })
        .await?;
        if tty {
            eprintln!();
        }
        Ok(report)
    }
}

/// `inferscale warmup`.
pub(crate) fn run_warmup_cmd(a: &WarmupArgs) -> Result<ExitCode> {
    let url = Target::parse(&a.url).context("--url")?;
    if !(a.speedup.is_finite() && a.speedup > 0.0) {
        bail!("--speedup must be a positive number, not {}", a.speedup);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut access = Get::new("*/*");
    access.auth = crate::credentials::client_auth(&a.auth)?;
    access.tls = crate::credentials::tls(&a.auth.tls)?;
    let report = rt.block_on(async {
        if let Some(limit) = a.wait_ready {
            wait_ready(&url.with_path("/health"), &access, limit).await?;
        }
        let model = resolve_model(&url, &access, a.model.clone())
            .await
            .map_err(hint_auth)?;
        Warmup {
            url: &url,
            access: &access,
            model: &model,
            n: a.requests,
            timeout: a.timeout,
            speedup: a.speedup,
            prompt: a.prompt.clone(),
            quiet: a.json,
            api: api_of(a.api),
            stream: a.stream,
            max_tokens: a.max_tokens,
        }
        .run()
        .await
    })?;
    if a.json {
        emit(
            &(serde_json::to_string_pretty(
                &serde_json::json!({ "version": 1, "warmup": report }),
            )? + "\n"),
        )?;
    } else {
        emit(&format!(
            "warm-up: {} requests, {} ok\n  first   {}\n  median  {}\n  steady  {} (median of the second half)\n  cold/steady {}\n",
            report.requests,
            report.ok,
            opt(report.first_s, format_seconds),
            opt(report.median_s, format_seconds),
            opt(report.steady_s, format_seconds),
            opt(report.cold_ratio, |r| format!("{r:.2}×"))
        ))?;
    }
    let all_ok = report.ok == report.requests;
    if all_ok && let Some(p) = &a.done_file {
        write_atomic(p, b"warm\n")?;
    }
    if a.hold {
        // A sidecar that exits is restarted (and would warm up again): stay until told to go.
        eprintln!("warm-up done; holding until terminated");
        rt.block_on(shutdown_signal());
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::CHECK_FAILED)
    })
}
