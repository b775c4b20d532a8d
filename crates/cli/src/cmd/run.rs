//! `inferscale run`: the main job. Warm-up, the stepped load, the analysis and the report,
//! into one folder; against the embedded simulator unless a URL is given.

use inferscale_clock::Instant;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use inferscale_loadgen::Target;
use inferscale_sim::{Sim, SimConfig};

use inferscale_loadgen::plan::{LengthValue, Plan, ResolvedPlan};
use inferscale_loadgen::report::RunReport;

use crate::cli::RunArgs;
use crate::exit::AfterStartExt;
use crate::job::analysis::{Written, degraded, simulator_fell_behind, write as write_analysis};
use crate::job::load::{Resolved, Workers, execute};
use crate::job::manifests::write as write_manifests;
use crate::job::rehearse::standard;
use crate::output::{check_writable, emit, write_all};

/// The embedded simulator's default speed-up: the seeds' 14-minute method in about 2 minutes.
pub(crate) const DEFAULT_SPEEDUP: f64 = 10.0;
/// The embedded simulator's default profile: the seeds' deployment.
pub(crate) const DEFAULT_PROFILE: &str = "aws-eks-ministral-8b-l40s";

/// An embedded simulator on loopback, stopped when dropped.
struct Embedded {
    url: String,
    lag: inferscale_sim::LagMeter,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Whether this binary was built without optimisation (`cargo run` without `--release`).
fn unoptimised() -> bool {
    env!("INFERSCALE_OPT_LEVEL") == "0"
}

async fn start_embedded(
    profile: &str,
    speedup: f64,
    prefix_caching: bool,
) -> Result<(Embedded, SimConfig)> {
    let mut engine = inferscale_engine::profile(profile).ok_or_else(|| {
        anyhow!("no simulator profile {profile:?}; `inferscale sim --list` shows them")
    })?;
    engine.prefix_caching &= prefix_caching;
    let name = engine.model.hf_id.clone();
    let mut cfg = SimConfig::new(engine, name);
    cfg.speedup = speedup;
    let sim = Sim::start(cfg.clone(), 1)?;
    let lag = sim.lag_meter();
    let load_s = sim.load_time_s();
    let listener =
        inferscale_sim::listen(([127, 0, 0, 1], 0).into()).context("cannot listen on 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        sim.serve(vec![(listener, None)], async {
            let _ = rx.await;
        })
        .await;
    });
    let url = format!("http://{addr}");
    eprintln!(
        "simulator: {profile} ({} on {}), {speedup}× speed-up, on {url}; loading the model ({load_s:.0} s simulated)",
        cfg.engine.model.name, cfg.engine.gpu.name
    );
    let health = Target::parse(&format!("{url}/health"))?;
    inferscale_loadgen::transport::wait_ready(
        &health,
        &inferscale_loadgen::transport::Get::new("*/*"),
        Duration::from_secs_f64(load_s / speedup + 30.0),
    )
    .await
    .context("the embedded simulator did not become healthy")?;
    Ok((
        Embedded {
            url,
            lag,
            _stop: tx,
        },
        cfg,
    ))
}

fn check_out_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the output folder {}", dir.display()))?;
    for f in ["run.json", "thresholds.json", "report.html"] {
        check_writable(&dir.join(f))?;
    }
    Ok(())
}

/// The same plan `load` resolves, from run's few flags (everything else at its default).
fn plan_of(a: &RunArgs, url: String, speedup: f64) -> Plan {
    Plan {
        url: Some(url),
        model: a.model.clone(),
        rates: a.rates.clone(),
        step: a.step.map(Into::into),
        rest: a.rest.map(Into::into),
        stream: a.no_stream.then_some(false),
        max_tokens: a.max_tokens.clone().map(LengthValue::Text),
        prompt_tokens: a.prompt_tokens.clone().map(LengthValue::Text),
        shape: a.shape.clone(),
        trace: a.trace.clone(),
        dispatch: a.dispatch.clone(),
        speed: a.speed.clone(),
        speedup: Some(speedup),
        warmup: Some(a.warmup),
        wait_ready: a.wait_ready.map(Into::into),
        slo: a.slo.clone(),
        probe_rate: a.probe_rate,
        ..Plan::default()
    }
}

/// The `load` flags that give each worker of `run --workers` the plan [`plan_of`] makes.
fn worker_args(a: &RunArgs, url: &str, speedup: f64) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec![
        "--url".into(),
        url.into(),
        "--speedup".into(),
        speedup.to_string().into(),
    ];
    let secs = |d: Duration| format!("{}s", d.as_secs_f64());
    if let Some(m) = &a.model {
        v.extend(["--model".into(), m.into()]);
    }
    if let Some(r) = &a.rates {
        let r: Vec<String> = r.iter().map(f64::to_string).collect();
        v.extend(["--rates".into(), r.join(",").into()]);
    }
    if let Some(d) = a.step {
        v.extend(["--step".into(), secs(d).into()]);
    }
    if let Some(d) = a.rest {
        v.extend(["--rest".into(), secs(d).into()]);
    }
    if a.no_stream {
        v.push("--no-stream".into());
    }
    if let Some(slo) = &a.slo {
        v.extend(["--slo".into(), slo.into()]);
    }
    if let Some(r) = a.probe_rate {
        // Every worker is given it; only the first sends the stream.
        v.extend(["--probe-rate".into(), r.to_string().into()]);
    }
    if let Some(m) = &a.max_tokens {
        v.extend(["--max-tokens".into(), m.into()]);
    }
    if let Some(p) = &a.prompt_tokens {
        v.extend(["--prompt-tokens".into(), p.into()]);
    }
    if let Some(s) = &a.shape {
        v.extend(["--shape".into(), s.into()]);
    }
    if let Some(t) = &a.trace {
        v.extend(["--trace".into(), t.into()]);
    }
    if let Some(d) = &a.dispatch {
        v.extend(["--dispatch".into(), d.into()]);
    }
    if let Some(x) = &a.speed {
        let x: Vec<String> = x.iter().map(f64::to_string).collect();
        v.extend(["--speed".into(), x.join(",").into()]);
    }
    // Credentials by file name (the key itself stays in the file or the environment, which
    // the workers inherit).
    if let Some(p) = &a.auth.api_key_file {
        v.extend(["--api-key-file".into(), p.into()]);
    }
    if let Some(p) = &a.auth.header_file {
        v.extend(["--header-file".into(), p.into()]);
    }
    if let Some(p) = &a.auth.tls.ca_file {
        v.extend(["--ca-file".into(), p.into()]);
    }
    if a.auth.tls.insecure {
        v.push("--insecure".into());
    }
    v
}

/// The replica calibrated from a real server's measurement, and how well it reproduces the
/// measured steps.
fn calibration_text(
    fit: &inferscale_analysis::replica::ReplicaFit,
    engine: &inferscale_engine::EngineConfig,
) -> String {
    let checks = inferscale_autoscale::replica::check(fit, engine, 1);
    let (thr, p50) = inferscale_autoscale::replica::errors(fit, &checks);
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.1} %", v * 100.0));
    format!(
        "\nreplica model for the rehearsal, calibrated from this measurement: {:.2} ms a step + {:.4} ms per running request, at most {} running ({}), {} prompt and {} output tokens a request: {:.1} req/s at saturation\nhow it reproduces the measured steps (median error on the sustained ones: throughput {}, e2e p50 {}):\n{}",
        fit.step_fixed_s * 1e3,
        fit.step_per_seq_s * 1e3,
        fit.max_concurrency,
        match fit.limit_from {
            inferscale_analysis::replica::LimitSource::MaxNumSeqs => "the engine's max_num_seqs",
            inferscale_analysis::replica::LimitSource::RunningWhileSaturated =>
                "the most it ran while saturated",
            inferscale_analysis::replica::LimitSource::Capacity => "from its capacity",
        },
        fit.prompt_tokens,
        fit.output_tokens,
        fit.capacity_rps,
        pct(thr),
        pct(p50),
        inferscale_autoscale::replica::table(&checks)
    )
}

/// `run`'s tuning: the built-in suite, the OpenAI SDK's clients, the run's cluster flags.
fn tune_for_run(
    a: &RunArgs,
    t: &inferscale_analysis::Thresholds,
    replica: &crate::job::replica::Replica,
) -> Result<(
    inferscale_autoscale::tune::TuneReport,
    Option<inferscale_analysis::scaling::Policy>,
)> {
    let o = crate::job::manifests::options(t, &a.cluster)?;
    crate::job::tune::run(crate::job::tune::Ask {
        thresholds: t,
        options: o,
        max_given: a.cluster.max_replicas.is_some(),
        replica,
        client: inferscale_autoscale::rehearse::Client::OPENAI_SDK,
        slo_e2e_s: None,
        attainment: 0.99,
        suite: None,
        held_out: None,
        seed: 1,
        gateway: a.cluster.gateway,
        prompts: crate::job::prompts::chosen(
            None,
            false,
            None,
            crate::job::replica::request(None, None, Some(t)).max_tokens,
            Some(t),
            1,
        )?,
    })
}

/// A few lines on the tuning for the terminal.
fn tune_summary(r: &inferscale_autoscale::tune::TuneReport) -> String {
    let mut s = format!(
        "tuning ({} rehearsals; one replica holds {:.1} req/s within the {} s SLO):\n",
        r.rehearsals, r.capacity_slo_rps, r.slo_e2e_s
    );
    for st in &r.statements {
        s.push_str(&format!("  - {st}\n"));
    }
    s
}

/// Runs the command. A run refused before it began leaves no output folder behind.
pub(crate) fn run(a: &RunArgs) -> Result<ExitCode> {
    let fresh = !a.out.exists();
    let r = run_in(a);
    if let Err(e) = &r
        && fresh
        && crate::exit::code(e) == crate::exit::USAGE
    {
        // Only an empty folder goes: nothing was written before a usage error.
        let _ = std::fs::remove_dir(&a.out);
    }
    r
}

fn run_in(a: &RunArgs) -> Result<ExitCode> {
    // The analysis's flags are read before the load, not after it.
    if matches!(
        inferscale_analysis::Knee::parse(&a.knee)?,
        inferscale_analysis::Knee::Goodput(_)
    ) && a.slo.is_none()
    {
        return Err(anyhow!(
            "--knee {}: goodput counts the requests within an SLO; give --slo (ttft=…,tpot=…,e2e=…)",
            a.knee
        ));
    }
    if let Some(k) = a.speedup
        && !(k.is_finite() && k > 0.0)
    {
        bail!("--speedup must be a positive number, not {k}");
    }
    crate::job::manifests::check_flags(&a.cluster)?;
    // The plan is resolved once, every load flag and credential checked, before the
    // simulator starts or a request is sent. The embedded simulator's address is not known
    // yet: a stand-in takes its place until it is.
    let speedup = a.speedup.unwrap_or(if a.url.is_some() {
        1.0
    } else {
        DEFAULT_SPEEDUP
    });
    let plan = plan_of(
        a,
        a.url.clone().unwrap_or_else(|| "http://127.0.0.1:1".into()),
        speedup,
    )
    .resolve(
        crate::credentials::client_auth(&a.auth)?,
        crate::credentials::tls(&a.auth.tls)?,
    )?;
    check_out_dir(&a.out)?;
    let started = Instant::now();
    let (report, written) = measure(a, plan, speedup)?;
    let generated = generate(a, &written)?;
    let rehearsal = rehearse(a, &report, &written, &generated)?;
    let text = closing(
        a,
        &report,
        &written,
        &generated,
        rehearsal.as_ref(),
        started,
    );
    emit(&text)?;
    Ok(if degraded(&report, &written.analysis) {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Measures: the embedded simulator started unless `--url` is given, the resolved `plan`
/// run against it, run.json written, and the analysis written beside it.
fn measure(a: &RunArgs, plan: ResolvedPlan, speedup: f64) -> Result<(RunReport, Written)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut embedded = None;
        let mut sim_cfg = None;
        let (url, plan) = match &a.url {
            Some(u) => (u.clone(), plan),
            None => {
                let profile = a.profile.as_deref().unwrap_or(DEFAULT_PROFILE);
                let k = speedup;
                if unoptimised() && k > 1.0 {
                    eprintln!(
                        "warning: this is an unoptimised build; the embedded simulator and the client may not hold a {k}× speed-up on this machine (the run will say so if they did not): build with `cargo run --release -- run`, or pass --speedup 1"
                    );
                }
                let (e, cfg) = start_embedded(profile, k, !a.no_prefix_caching).await?;
                let url = e.url.clone();
                embedded = Some(e);
                sim_cfg = Some((profile.to_owned(), cfg));
                let target = inferscale_loadgen::Target::parse(&url)
                    .with_context(|| format!("the embedded simulator's address {url}"))?;
                (url, plan.at(target))
            }
        };
        let run_json = a.out.join("run.json");
        let mut resolved = Resolved::new(plan);
        if let Some((profile, cfg)) = &sim_cfg {
            resolved.simulated = Some(inferscale_results::run::Simulated {
                profile: profile.clone(),
                gpu: cfg.engine.gpu.name.to_string(),
                model: cfg.engine.model.name.to_string(),
                max_num_seqs: cfg.engine.max_num_seqs,
                speedup,
                clock_lag: None,
                clock_held: None,
                prefix_caching: !a.no_prefix_caching,
            });
            resolved.max_num_seqs = Some(cfg.engine.max_num_seqs);
            resolved.sim_lag = embedded.as_ref().map(|e| e.lag.clone());
        }
        if a.workers > 1 {
            resolved.workers = Some(Workers {
                count: a.workers,
                args: worker_args(a, &url, speedup),
                dir: a.out.join("parts"),
            });
        }
        let out = execute(resolved, &run_json, None, false).await?;
        drop(embedded);
        eprintln!("analysis: finding the saturation point and the thresholds");
        let written = write_analysis(&out.report, &a.out, a.peak_rps, &a.knee)
            .with_context(|| kept(a))
            .after_start()?;
        Ok::<_, anyhow::Error>((out.report, written))
    })
}

/// The message of a failure after the measurement: it is kept, what follows is not.
fn kept(a: &RunArgs) -> String {
    format!(
        "the measurement is kept in {}, but what follows from it could not be written",
        a.out.join("run.json").display()
    )
}

/// What follows from the thresholds: the replica to rehearse (calibrated from the run when
/// no profile models it), the tuned policy and the manifests.
#[derive(Default)]
struct Generated {
    /// The manifests' folder and the thresholds they were written from.
    manifests: Option<(std::path::PathBuf, inferscale_analysis::Thresholds)>,
    replica: Option<crate::job::replica::Replica>,
    tuned: Option<inferscale_autoscale::tune::TuneReport>,
    /// How well a calibrated replica reproduces the measured steps (empty otherwise).
    calibration: String,
}

/// Tunes the policy (unless `--signal queue` or the thresholds have one) and writes the
/// manifests; nothing when the run found no thresholds.
fn generate(a: &RunArgs, written: &Written) -> Result<Generated> {
    let kept = || kept(a);
    let Ok(t) = &written.analysis.thresholds else {
        return Ok(Generated::default());
    };
    let mut g = Generated::default();
    let replica = crate::job::replica::resolve(
        &crate::cli::ReplicaArgs {
            profile: None,
            measured_replica: false,
        },
        Some(t),
    )
    .with_context(kept)
    .after_start()?;
    if replica.profile.is_none()
        && let Some(fit) = &t.replica
    {
        g.calibration = calibration_text(fit, &replica.engine);
        eprint!("{}", g.calibration);
    }
    let mut t = t.clone();
    if a.cluster.signal == crate::cli::ScaleByArg::Tuned && t.scaling.is_none() {
        eprintln!(
            "tune: the scaling policy, searched in the rehearsal (inferscale tune; --signal queue skips it)"
        );
        let (report, policy) = tune_for_run(a, &t, &replica)
            .with_context(kept)
            .after_start()?;
        t.scaling = policy;
        let mut files = vec![
            (
                a.out.join("tune.json"),
                (serde_json::to_string_pretty(&report)? + "\n").into_bytes(),
            ),
            (
                a.out.join("tune.html"),
                inferscale_report::tune::render(&report, &t.source.model, &replica.about)
                    .into_bytes(),
            ),
        ];
        if t.scaling.is_some() {
            files.push((
                a.out.join("thresholds.json"),
                (serde_json::to_string_pretty(&t)? + "\n").into_bytes(),
            ));
        }
        write_all(&files).with_context(kept).after_start()?;
        g.tuned = Some(report);
    }
    let dir = a.out.join("manifests");
    write_manifests(&t, &a.cluster, &dir)
        .with_context(kept)
        .after_start()?;
    g.manifests = Some((dir, t));
    g.replica = Some(replica);
    Ok(g)
}

/// The generated ScaledObject and the seeds' shape rehearsed under a step; the report is
/// written again with the verdict at its end. A rehearsal that cannot run is a warning.
fn rehearse(
    a: &RunArgs,
    report: &RunReport,
    written: &Written,
    g: &Generated,
) -> Result<Option<crate::job::rehearse::Verdict>> {
    let (Some((dir, t)), Some(replica)) = (&g.manifests, &g.replica) else {
        return Ok(None);
    };
    eprintln!(
        "rehearsal: the generated ScaledObject and the seeds' shape under a step to 2.5× the capacity and back, in virtual time"
    );
    let o = crate::job::manifests::options(t, &a.cluster)?;
    let unit = g.tuned.as_ref().map(|r| r.capacity_rps);
    match standard(
        t,
        &o,
        dir,
        replica,
        &a.out,
        unit,
        crate::job::replica::routing(a.cluster.gateway),
    ) {
        Ok(v) => {
            let page = inferscale_report::html::render_with(report, &written.analysis, &v.html);
            write_all(&[(written.report.clone(), page.into_bytes())]).after_start()?;
            Ok(Some(v))
        }
        Err(e) => {
            eprintln!("warning: the rehearsal could not run: {e:#}");
            Ok(None)
        }
    }
}

/// What the run prints at its end: the summary, the tuning and the rehearsal's verdicts,
/// and where everything is.
fn closing(
    a: &RunArgs,
    report: &RunReport,
    written: &Written,
    g: &Generated,
    rehearsal: Option<&crate::job::rehearse::Verdict>,
    started: Instant,
) -> String {
    let mut text = inferscale_report::summary(report, &written.analysis);
    text.push_str(&g.calibration);
    if let Some(r) = &g.tuned {
        text.push('\n');
        text.push_str(&tune_summary(r));
    }
    if let Some(v) = rehearsal {
        text.push('\n');
        text.push_str(&v.text);
    }
    text.push_str(&format!(
        "\nall in {} ({} of wall time):\n  {}  the measurement (every step, every second)\n",
        a.out.display(),
        crate::units::format_duration(Duration::from_secs(started.elapsed().as_secs())),
        a.out.join("run.json").display()
    ));
    if let Some(t) = &written.thresholds {
        text.push_str(&format!(
            "  {}  the thresholds, with the reason for each\n",
            t.display()
        ));
    }
    text.push_str(&format!(
        "  {}  the report: open it in a browser\n",
        written.report.display()
    ));
    if rehearsal.is_some() {
        text.push_str(&format!(
            "  {}  the rehearsal of the generated ScaledObject\n",
            a.out.join("rehearsal.html").display()
        ));
    }
    if g.tuned.is_some() {
        text.push_str(&format!(
            "  {}  the tuning: every policy tried on every trace\n",
            a.out.join("tune.html").display()
        ));
    }
    if let Some((m, _)) = &g.manifests {
        text.push_str(&format!(
            "  {}/  KEDA, alerts, dashboards, Deployment patches: see its README.md\n",
            m.display()
        ));
    }
    if report.target.simulated.is_some() {
        text.push_str(&format!(
            "These numbers come from the embedded simulator at {}× speed-up; point --url at a real server to measure it.\n",
            report.plan.speedup
        ));
        if simulator_fell_behind(report) {
            let lag = report.target.simulated.as_ref().and_then(|s| s.clock_lag);
            text.push_str(&format!(
                "NOT HELD: the simulator fell behind its clock ({}): this machine could not hold a {}× speed-up, so the latencies above are overstated by the machine, not computed by the model. Rerun with a release build (`cargo run --release -- run`) or a lower --speedup.\n",
                lag.map_or_else(|| "release lag not recorded".into(), |l| l.describe()),
                report.plan.speedup
            ));
        }
    }
    text
}
