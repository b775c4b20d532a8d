//! Loading a server: a resolved plan run end to end (pre-flight checks, warm-up, the steps,
//! run.json), the sequential warm-up, the live progress lines and the end-of-run step table.
//! `load`, `warmup` and `run` all go through here, and `load`'s flags are resolved here
//! (`generate --load-job` checks its workers' flags with it).

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use inferscale_loadgen::discover::{ModelsError, resolve_model};
use inferscale_loadgen::plan::{LengthValue, Plan, ResolvedPlan};
use inferscale_loadgen::prompt::{Api, Length, PromptSource, RequestSpec, SEEDS_WARMUP_PROMPT};
use inferscale_loadgen::report::{RunReport, StepReport, WarmupReport};
use inferscale_loadgen::schedule::{Segment, Stage};
use inferscale_loadgen::trace::Dispatch;
use inferscale_loadgen::transport::{Client, ClientConfig, Get};
use inferscale_loadgen::{Progress, Target};

use crate::cli::{ApiArg, LoadArgs};
use crate::exit::AfterStartExt;
use crate::units::format_seconds;

/// A load plan resolved from flags, a plan file and defaults, with what `run` knows besides.
pub(crate) struct Resolved {
    /// The plan.
    pub(crate) plan: ResolvedPlan,
    /// What the target is, when inferscale started it (recorded in run.json).
    pub(crate) simulated: Option<inferscale_results::run::Simulated>,
    /// The target's `max_num_seqs`, when known.
    pub(crate) max_num_seqs: Option<u32>,
    /// The embedded simulator's clock-lag meter: read after the load, recorded in run.json,
    /// and a warning when the machine did not hold the speed-up.
    pub(crate) sim_lag: Option<inferscale_sim::LagMeter>,
    /// Send the load from several local worker processes (`run --workers N`) and merge
    /// their parts, instead of sending it from this process.
    pub(crate) workers: Option<Workers>,
}

/// Local worker processes, each `inferscale load --segment I/N` with the same flags.
pub(crate) struct Workers {
    /// N.
    pub(crate) count: u32,
    /// The `load` flags every worker gets (the plan and the target; no secrets: key files
    /// are named, not read).
    pub(crate) args: Vec<std::ffi::OsString>,
    /// Where the parts go.
    pub(crate) dir: std::path::PathBuf,
}

/// Runs the load as `w.count` worker processes starting at one instant, and merges their
/// parts (worker 0 scrapes the server's metrics; the others do not).
async fn run_workers(w: &Workers, quiet: bool) -> Result<inferscale_loadgen::LoadOutput> {
    use std::process::{Command, Stdio};
    use std::time::UNIX_EPOCH;
    std::fs::create_dir_all(&w.dir)
        .with_context(|| format!("cannot create the folder {}", w.dir.display()))?;
    let exe = std::env::current_exe().context("cannot find this program to start workers")?;
    // Time for every worker to start and prepare its share before the clock starts.
    let start = inferscale_clock::wall() + Duration::from_secs(2);
    let start_s = format!("{:.3}", start.duration_since(UNIX_EPOCH)?.as_secs_f64());
    if !quiet {
        eprintln!(
            "load: {} worker processes, each sending its share of the plan from {}; parts in {}",
            w.count,
            inferscale_loadgen::run::rfc3339(start),
            w.dir.display()
        );
    }
    let mut children = Vec::new();
    for i in 0..w.count {
        let part = w.dir.join(format!("part-{i}.json"));
        let mut c = Command::new(&exe);
        c.arg("load")
            .args(&w.args)
            .args(["--warmup", "0", "--segment"])
            .arg(format!("{i}/{}", w.count))
            .args(["--start-at", &start_s, "--out"])
            .arg(&part)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if i > 0 {
            c.arg("--no-metrics");
        }
        children.push((i, part, c.spawn().context("cannot start a worker")?));
    }
    let done = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|(i, part, ch)| (i, part, ch.wait_with_output()))
            .collect::<Vec<_>>()
    })
    .await?;
    let mut parts = Vec::new();
    for (i, part, out) in done {
        let out = out.with_context(|| format!("worker {i} could not be waited for"))?;
        // 1 is a load that ran (a breached threshold, every request failed): its part is kept.
        if !matches!(out.status.code(), Some(0 | 1)) {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            return Err(crate::exit::after_start(anyhow!(
                "worker {i} of {} failed ({}): {}",
                w.count,
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            )));
        }
        let report = crate::job::analysis::read(&part)?;
        parts.push((part.display().to_string(), report));
    }
    let merged = inferscale_loadgen::merge::merge(&parts, false, &[])
        .map_err(|e| crate::exit::after_start(anyhow!("{e}")))?;
    for wh in merged.workers.iter().filter(|wh| wh.late_s > 0.0) {
        eprintln!(
            "warning: worker {} started {:.3} s after the shared start",
            wh.index, wh.late_s
        );
    }
    Ok(inferscale_loadgen::LoadOutput {
        report: merged.report,
        records: Vec::new(),
        scrape_errors: Vec::new(),
    })
}

impl Resolved {
    /// A plan with nothing known about the target.
    pub(crate) fn new(plan: ResolvedPlan) -> Self {
        Resolved {
            plan,
            simulated: None,
            max_num_seqs: None,
            sim_lag: None,
            workers: None,
        }
    }
}

/// Adds where a key goes to a refusal for the lack of one.
pub(crate) fn hint_auth(e: ModelsError) -> anyhow::Error {
    if matches!(e, ModelsError::Unauthorized { .. }) {
        anyhow!(
            "{e}; put the key in the {} environment variable or in a file named by --api-key-file",
            crate::credentials::API_KEY_ENV
        )
    } else {
        e.into()
    }
}

pub(crate) fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
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
    // Goodput and the prefix cache's hit rate, when the run counted them.
    let extra = Extra {
        goodput: report.steps.iter().any(|s| s.goodput.is_some()),
        cache: report.steps.iter().any(|s| s.cache.is_some()),
    };
    if extra.cache {
        s.push_str(&format!(
            "prompts: {}; cache hit: the server's prefix-cache hit rate / what the prompts' structure implies\n",
            report.plan.requests.prompt.describe()
        ));
    }
    s.push_str(&format!(
        "{:>5} {:>8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8}{}{}\n",
        "rps", "sent/s", "done/s", "ok", "fail", "drop", "e2e p50", "e2e p95", "e2e p99", "TTFT p95", "TPOT p50", "queue", "q max", "srv e2e95", "lag99",
        if extra.goodput { format!(" {:>17}", "goodput") } else { String::new() },
        if extra.cache { format!(" {:>13}", "cache hit") } else { String::new() },
    ));
    for st in &report.steps {
        s.push_str(&row(st, extra));
    }
    s
}

/// The optional columns of the step table.
#[derive(Clone, Copy, Default)]
struct Extra {
    goodput: bool,
    cache: bool,
}

fn row(st: &StepReport, extra: Extra) -> String {
    let c = inferscale_report::text::StepCells::of(st, format_seconds);
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let goodput = if extra.goodput {
        format!(" {:>17}", dash(c.goodput))
    } else {
        String::new()
    };
    let cache = if extra.cache {
        format!(" {:>13}", dash(c.cache_hit))
    } else {
        String::new()
    };
    format!(
        "{:>5} {:>8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8}{goodput}{cache}{}\n",
        c.offered,
        c.sent,
        c.achieved,
        c.ok,
        c.failed,
        c.dropped,
        dash(c.e2e_p50),
        dash(c.e2e_p95),
        dash(c.e2e_p99),
        dash(c.ttft_p95),
        dash(c.tpot_p50),
        dash(c.queue_p95),
        dash(c.queue_max),
        dash(c.server_e2e_p95),
        dash(c.lag_p99),
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
                    None => eprintln!(
                        "step {}/{of}: {} req/s",
                        index + 1,
                        inferscale_report::text::offered(target_rps)
                    ),
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
                eprint!(
                    "  done: {}",
                    row(
                        &st,
                        Extra {
                            goodput: st.goodput.is_some(),
                            cache: st.cache.is_some(),
                        }
                    )
                    .trim_start()
                );
            }
        }
    }
}

/// What a load run wrote and whether its thresholds held.
pub(crate) struct Outcome {
    pub(crate) report: RunReport,
    pub(crate) breached: bool,
}

/// The dataset (or trace) the plan names, read and checked, or `None`; a trace's replay
/// sets the plan's steps.
fn dataset(r: &mut Resolved) -> Result<Option<String>> {
    let trace = matches!(r.plan.config.requests.prompt, PromptSource::Trace { .. });
    let dataset = match &r.plan.dataset {
        Some(p) => Some(crate::input::read_text(
            p,
            if trace { "trace" } else { "dataset" },
            crate::input::cap::DATASET,
        )?),
        None => None,
    };
    if let Some(d) = &dataset
        && let Some(replay) = inferscale_loadgen::run::trace_replay(&mut r.plan.config, Some(d))?
    {
        if let PromptSource::Trace {
            dispatch: Dispatch::ThinkTime,
            path,
            ..
        } = &r.plan.config.requests.prompt
            && replay.follow.waits.iter().all(|w| *w == 0)
        {
            eprintln!(
                "warning: {path} has no conversation of two turns or more (no session_id shared by two lines) and no request that names another as its parent: under think-time dispatch every request is sent at its timestamp, as under timestamp dispatch"
            );
        }
    } else if let Some(d) = &dataset {
        inferscale_loadgen::prompt::load_dataset(
            d,
            &r.plan
                .dataset
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        )?;
    }
    Ok(dataset)
}

/// Says what the load will do: steps, requests, wall time, model and where it writes.
fn announce(r: &Resolved, model: &str, out: &Path) {
    let n: f64 = r
        .plan
        .config
        .stages
        .iter()
        .map(Stage::expected_requests)
        .sum();
    let secs: f64 = r
        .plan
        .config
        .stages
        .iter()
        .map(|s| s.duration_s + s.rest_s)
        .sum::<f64>()
        / r.plan.config.speedup;
    eprintln!(
        "load: {} steps, {:.0} requests, about {} of wall time; model {model:?}; results in {}",
        r.plan.config.stages.len(),
        n,
        crate::units::format_duration(Duration::from_secs(secs.round().max(1.0) as u64)),
        out.display()
    );
}

/// Records in run.json how far the embedded simulator fell behind its clock (and warns when
/// it did not hold the speed-up).
fn record_sim_lag(r: &Resolved, report: &mut RunReport, quiet: bool) -> Result<()> {
    if let (Some(meter), Some(sim)) = (&r.sim_lag, report.target.simulated.as_mut()) {
        let lag = meter.read();
        if !quiet && !lag.held() {
            eprintln!(
                "warning: the simulator fell behind its clock ({}): this machine could not hold a {}× speed-up, so latencies are overstated; use a release build or a lower --speedup",
                lag.describe(),
                r.plan.config.speedup
            );
        }
        sim.clock_lag = Some(lag);
        sim.clock_held = Some(lag.held());
    }
    Ok(())
}

/// Writes run.json and, when asked, every request's record as JSON lines.
fn write_results(
    report: &RunReport,
    records: &[inferscale_loadgen::record::Record],
    out: &Path,
    requests_out: Option<&Path>,
) -> Result<()> {
    let json = serde_json::to_vec_pretty(report)?;
    crate::output::write_atomic(out, &json)
        .context("the measurement is lost: run.json could not be written")
        .after_start()?;
    if let Some(p) = requests_out {
        let mut lines = Vec::new();
        for rec in records {
            serde_json::to_writer(&mut lines, rec)?;
            lines.push(b'\n');
        }
        crate::output::write_atomic(p, &lines)
            .with_context(|| format!("run.json was written to {}", out.display()))
            .after_start()?;
    }
    Ok(())
}

/// Runs a resolved plan (pre-flight checks, warm-up, the plan) and writes its files. Used by
/// `load` and `run`.
pub(crate) async fn execute(
    mut r: Resolved,
    out: &Path,
    requests_out: Option<&Path>,
    quiet: bool,
) -> Result<Outcome> {
    crate::output::check_writable(out)?;
    if let Some(p) = requests_out {
        crate::output::check_writable(p)?;
        crate::output::check_distinct(&[out, p])?;
    }
    let access = Get::like(&r.plan.config.client);
    if let Some(limit) = r.plan.wait_ready {
        let health = r.plan.url.with_path("/health");
        if !quiet {
            eprintln!(
                "waiting up to {} for {} to answer 200",
                crate::units::format_duration(limit),
                health.url
            );
        }
        inferscale_loadgen::transport::wait_ready(&health, &access, limit).await?;
    }
    let model = resolve_model(&r.plan.url, &access, r.plan.model.clone())
        .await
        .map_err(hint_auth)?;
    r.plan.config.requests.model = model.clone();
    let dataset = dataset(&mut r)?;
    let tty = std::io::stderr().is_terminal();
    let warmup = if r.plan.warmup > 0 {
        if !quiet {
            eprintln!("warm-up: {} sequential requests", r.plan.warmup);
        }
        Some(
            Warmup {
                url: &r.plan.url,
                access: &access,
                model: &model,
                n: r.plan.warmup,
                timeout: r.plan.config.client.timeout,
                speedup: r.plan.config.speedup,
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
        announce(&r, &model, out);
    }
    let thresholds = std::mem::take(&mut r.plan.thresholds);
    let output = match &r.workers {
        Some(w) => run_workers(w, quiet).await?,
        // On a worker thread of the runtime, not on the thread that blocks on it: the loop
        // that hands out requests then spawns them onto its own worker's queue and is woken
        // by their ends without a cross-thread wake-up (a futex call and two context
        // switches per request otherwise).
        None => tokio::spawn(inferscale_loadgen::run(
            r.plan.config.clone(),
            dataset,
            progress_printer(tty, quiet),
            crate::shutdown::signal(),
        ))
        .await
        .unwrap_or(Err(inferscale_loadgen::LoadError::TaskPanicked))
        .map_err(|e| match e {
            // A task that died mid-run is a failure after work began; the rest are
            // refusals before the first request.
            e @ inferscale_loadgen::LoadError::TaskPanicked => {
                crate::exit::after_start(anyhow::Error::new(e).context("the load run failed"))
            }
            e => e.into(),
        })?,
    };
    let mut report = output.report;
    report.warmup = warmup;
    report.target.simulated = r.simulated.take();
    record_sim_lag(&r, &mut report, quiet)?;
    report.target.max_num_seqs = r.max_num_seqs;
    report.thresholds = thresholds
        .iter()
        .map(|t| t.evaluate(&output.records, r.plan.config.speedup))
        .collect();
    if let Some(slo) = r.plan.slo {
        if r.workers.is_none() {
            inferscale_loadgen::record::annotate_goodput(&mut report, &output.records, slo);
        } else {
            // Each worker counted its own requests; the merge added them.
            report.slo = Some(slo);
        }
    }
    write_results(&report, &output.records, out, requests_out)?;
    if !quiet && !output.scrape_errors.is_empty() {
        eprintln!(
            "warning: {} scrapes of the server's metrics failed; first: {}",
            output.scrape_errors.len(),
            output.scrape_errors[0]
        );
    }
    if !quiet {
        for line in failure_reasons(&output.records) {
            eprintln!("{line}");
        }
    }
    let mut breached = report.thresholds.iter().any(|t| !t.ok);
    let sent: u64 = report.steps.iter().map(|s| s.requests.scheduled).sum();
    let ok: u64 = report.steps.iter().map(|s| s.requests.ok).sum();
    if sent > 0 && ok == 0 {
        // A run in which nothing succeeded measured nothing; its file says why each failed.
        eprintln!(
            "error: all {sent} requests failed (see the failures in {}): nothing was measured",
            out.display()
        );
        breached = true;
    }
    Ok(Outcome { report, breached })
}

/// The commonest reasons requests failed (the server's own words where it gave them), most
/// frequent first, at most three: what to fix before measuring again.
fn failure_reasons(records: &[inferscale_loadgen::record::Record]) -> Vec<String> {
    let mut by: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for r in records {
        if !matches!(
            r.outcome,
            inferscale_loadgen::transport::Outcome::Ok
                | inferscale_loadgen::transport::Outcome::Dropped
        ) && let Some(e) = &r.error
        {
            *by.entry(e.as_str()).or_default() += 1;
        }
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    let total: u64 = v.iter().map(|x| x.1).sum();
    let mut out = Vec::new();
    if total > 0 {
        out.push(format!("{total} requests failed; the commonest reasons:"));
        out.extend(v.iter().take(3).map(|(why, n)| format!("  {n} × {why}")));
    }
    out
}

/// A sequential warm-up, as `inferscale warmup` and the start of `load`/`run` send it.
pub(crate) struct Warmup<'a> {
    pub(crate) url: &'a Target,
    pub(crate) access: &'a Get,
    pub(crate) model: &'a str,
    pub(crate) n: u32,
    pub(crate) timeout: Duration,
    pub(crate) speedup: f64,
    pub(crate) prompt: Option<String>,
    pub(crate) quiet: bool,
    pub(crate) api: Api,
    pub(crate) stream: bool,
    pub(crate) max_tokens: u32,
}

impl Warmup<'_> {
    pub(crate) async fn run(self) -> Result<WarmupReport> {
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

// `inferscale load`'s flags, resolved: shared by `load` and by `generate --load-job`, which
// checks its workers' flags the way `load` would.

/// Reads a plan file: YAML, or TOML when the name ends in `.toml`.
pub(crate) fn read_plan(path: &Path) -> Result<Plan> {
    let text = crate::input::read_text(path, "plan", crate::input::cap::SMALL)?;
    if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
    } else {
        inferscale_manifests::yaml::from_str(&text).with_context(|| path.display().to_string())
    }
}

/// What the command line says, as a plan layer (a flag not given says nothing).
fn load_flags(a: &LoadArgs) -> Plan {
    Plan {
        url: a.url.clone(),
        model: a.model.clone(),
        rates: a.rates.clone(),
        concurrency: a.concurrency.clone(),
        step: a.step.map(Into::into),
        rest: a.rest.map(Into::into),
        stages: None,
        arrival: a.arrival.clone(),
        max_in_flight: a.max_in_flight,
        api: a.api.map(|x| {
            match x {
                ApiArg::Completions => "completions",
                ApiArg::Chat => "chat",
            }
            .to_owned()
        }),
        stream: if a.no_stream {
            Some(false)
        } else {
            a.stream.then_some(true)
        },
        max_tokens: a.max_tokens.clone().map(LengthValue::Text),
        prompt: a.prompt.clone(),
        prompt_tokens: a.prompt_tokens.clone().map(LengthValue::Text),
        dataset: a.dataset.clone(),
        shape: a.shape.clone(),
        trace: a.trace.clone(),
        dispatch: a.dispatch.clone(),
        speed: a.speed.clone(),
        temperature: a.temperature,
        ignore_eos: a.ignore_eos.then_some(true),
        timeout: a.timeout.map(Into::into),
        connection_reuse: a.no_connection_reuse.then_some(false),
        metrics: a.no_metrics.then_some(false),
        metrics_url: a.metrics_url.clone(),
        speedup: a.speedup,
        seed: a.seed,
        warmup: a.warmup,
        thresholds: (!a.thresholds.is_empty()).then(|| a.thresholds.clone()),
        grace: a.grace.map(Into::into),
        wait_ready: a.wait_ready.map(Into::into),
        slo: a.slo.clone(),
        probe_rate: a.probe_rate,
    }
}

/// The flags over the plan file over the defaults, checked, with the client's credentials.
pub(crate) fn resolve_load(a: &LoadArgs) -> Result<Resolved> {
    let file = match &a.plan {
        Some(path) => read_plan(path)?,
        None => Plan::default(),
    };
    let auth = crate::credentials::client_auth(&a.auth)?;
    let tls = crate::credentials::tls(&a.auth.tls)?;
    let mut plan = load_flags(a).over(file).resolve(auth, tls)?;
    if let Some(s) = &a.segment {
        plan.config.segment = Segment::parse(s)?;
    }
    if let Some(t) = &a.start_at {
        plan.config.start_at = Some(parse_start_at(t)?);
    }
    Ok(Resolved::new(plan))
}

/// `--start-at`: Unix seconds, or RFC 3339 in UTC (`Z`) or with an offset (`+01:00`).
pub(crate) fn parse_start_at(text: &str) -> Result<SystemTime> {
    let bad = || {
        anyhow!(
            "--start-at {text:?}: expected RFC 3339 (2026-12-02T15:00:00Z, 2026-12-02T16:00:00+01:00) or Unix seconds (1796223600)"
        )
    };
    let t = text.trim();
    let secs = match t.parse::<f64>() {
        Ok(v) => v,
        Err(_) => inferscale_loadgen::run::parse_rfc3339(t).ok_or_else(bad)?,
    };
    if !(0.0..1e11).contains(&secs) {
        return Err(bad());
    }
    Ok(UNIX_EPOCH + std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_parse_in_both_forms_and_bad_ones_are_named() {
        let at = |t| {
            parse_start_at(t)
                .unwrap()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        assert_eq!(at("1796223600"), 1_796_223_600.0);
        assert_eq!(at("1970-01-01T00:00:00Z"), 0.0);
        assert_eq!(at("2026-12-02T15:00:00Z"), 1_796_223_600.0);
        assert_eq!(at("2026-12-02T16:00:00+01:00"), 1_796_223_600.0);
        assert_eq!(at("2000-02-29T12:00:00.25Z"), 951_825_600.25);
        for bad in [
            "tomorrow",
            "2026-13-02T15:00:00Z",
            "2026-12-02T15:00:00",
            "-5",
            "2026-12-02T15:00:00+1",
        ] {
            let e = parse_start_at(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
