//! `inferscale monitor`: the live terminal dashboard, `--once` and `--json`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use inferscale_kube::{Discovery, Kube};
use inferscale_loadgen::Target;
use inferscale_loadgen::prometheus::Prometheus;
use inferscale_monitor::app;
use inferscale_monitor::dashboard::Dashboard;
use inferscale_monitor::signals::Scope;
use inferscale_monitor::source::{Kind, PodTarget};
use inferscale_monitor::ui::{Screen, View};
use inferscale_monitor::{Config, Follow, Monitor, SourceSpec};
use inferscale_promql::Labels;

use crate::cli::{MonitorArgs, ViewArg};
use crate::exit;
use crate::labels::label;
use crate::output::emit;
use crate::units::format_duration;

/// Where `inferscale run` writes its rules.
const DEFAULT_RULES: &str = "inferscale-out/manifests/prometheusrule.yaml";
/// Where `inferscale sim` listens.
const DEFAULT_URL: &str = "http://127.0.0.1:8000";

/// The pods' targets: each URL with its labels (`#k=v` after it wins over the defaults).
fn pod_targets(args: &MonitorArgs) -> Result<Vec<PodTarget>> {
    let urls: Vec<String> = if args.service.is_some() {
        Vec::new()
    } else if args.urls.is_empty() {
        vec![DEFAULT_URL.to_owned()]
    } else {
        args.urls.clone()
    };
    let mut out: Vec<PodTarget> = Vec::new();
    let specs = urls
        .iter()
        .map(|u| (u, Kind::Engine))
        .chain(args.dcgm_urls.iter().map(|u| (u, Kind::Gpu)));
    for (spec, kind) in specs {
        let (url, extra) = spec.split_once('#').unwrap_or((spec, ""));
        let target = Target::parse_metrics(url)?;
        let authority = target.authority();
        let mut labels = match kind {
            Kind::Engine => Labels::new([
                ("job", args.job.as_str()),
                ("namespace", args.namespace.as_str()),
                ("pod", authority.as_str()),
                ("instance", authority.as_str()),
            ]),
            Kind::Gpu => Labels::new([("job", "dcgm-exporter"), ("instance", authority.as_str())]),
        };
        for pair in extra.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = label(pair, spec)?;
            labels.set(k, v);
        }
        if out.iter().any(|t| t.labels == labels) {
            bail!("two targets have the labels {labels}: give them different ones with URL#pod=…");
        }
        out.push(PodTarget {
            url: target.url.clone(),
            labels,
            kind,
        });
    }
    Ok(out)
}

/// The rules file: the one given, else `run`'s when it is there.
fn rules_path(args: &MonitorArgs) -> Option<PathBuf> {
    match &args.rules {
        Some(p) => Some(p.clone()),
        None => Path::new(DEFAULT_RULES)
            .is_file()
            .then(|| PathBuf::from(DEFAULT_RULES)),
    }
}

fn matchers(base: &[(&str, &str)], extra: Option<&str>) -> String {
    let mut parts: Vec<String> = base
        .iter()
        .map(|(k, v)| format!("{k}={}", inferscale_promql::quote(v)))
        .collect();
    if let Some(e) = extra.map(str::trim).filter(|e| !e.is_empty()) {
        parts.push(e.trim_matches(['{', '}']).to_owned());
    }
    parts.join(",")
}

/// Every flag checked, every file read, nothing contacted yet.
fn resolve(args: &MonitorArgs) -> Result<(Config, Option<PathBuf>)> {
    if args.refresh < std::time::Duration::from_millis(100) {
        bail!(
            "--refresh {} is too short (100ms at least)",
            format_duration(args.refresh)
        );
    }
    if args.window < 2 * args.refresh {
        bail!(
            "--window {} must be at least two --refresh intervals ({}): a rate needs two samples",
            format_duration(args.window),
            format_duration(2 * args.refresh)
        );
    }
    if args.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be longer than zero");
    }
    if args.once && args.collect < args.refresh {
        bail!(
            "--for {} is shorter than one --refresh ({})",
            format_duration(args.collect),
            format_duration(args.refresh)
        );
    }
    let rules_file = rules_path(args);
    let rules = match &rules_file {
        Some(p) => crate::job::rehearse::read_rules(p)?.0,
        None => Vec::new(),
    };
    let access = crate::credentials::scrape_access(&args.access, args.timeout)?;
    let source = match &args.prometheus {
        Some(url) => {
            let target = Target::parse(url).context("--prometheus")?;
            SourceSpec::Prometheus(Prometheus::new(target, access))
        }
        None => SourceSpec::Pods {
            targets: pod_targets(args)?,
            access,
        },
    };
    let server = match (args.engine, &source) {
        (Some(e), _) => e.engine(),
        (None, SourceSpec::Pods { targets, access }) => detect_engine(targets, access),
        (None, SourceSpec::Prometheus(_)) => inferscale_catalog::Engine::Vllm,
    };
    let ns = args.namespace.as_str();
    let scope = Scope {
        server,
        engine: matchers(&[("namespace", ns)], args.selector.as_deref()),
        up: matchers(&[("namespace", ns), ("job", args.job.as_str())], None),
        gpu: matchers(&[], args.dcgm_selector.as_deref()),
        window: format_duration(args.window),
        replica_label: args.replica_label.clone(),
    };
    Ok((
        Config {
            source,
            follow: None,
            rules,
            scope,
            history: 120,
        },
        rules_file,
    ))
}

/// The inference engine the first engine target's `/metrics` shows (vLLM when it cannot be
/// read now: the monitor then says the pod is down).
fn detect_engine(
    targets: &[inferscale_monitor::source::PodTarget],
    access: &inferscale_loadgen::transport::Get,
) -> inferscale_catalog::Engine {
    use inferscale_catalog::Engine;
    let Some(t) = targets.iter().find(|t| t.kind == Kind::Engine) else {
        return Engine::Vllm;
    };
    let Ok(target) = Target::parse_metrics(&t.url) else {
        return Engine::Vllm;
    };
    let fetched = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
        .and_then(|rt| {
            rt.block_on(inferscale_loadgen::scrape::Scraper::new(target, access.clone()).fetch())
                .ok()
        });
    fetched
        .and_then(|s| {
            inferscale_promtext::parse(&s.body)
                .ok()
                .map(|exp| inferscale_catalog::detect(&exp))
        })
        .and_then(|found| found.into_iter().find(|e| *e != Engine::Dcgm))
        .unwrap_or(Engine::Vllm)
}

fn view(v: ViewArg) -> View {
    match v {
        ViewArg::Overview => View::Overview,
        ViewArg::Replicas => View::Replicas,
        ViewArg::Alerts => View::Alerts,
    }
}

/// Whether anything at all was read: some pod answered, or some query did.
fn read_anything(d: &Dashboard) -> bool {
    if d.targets.is_empty() {
        d.errors.is_empty() || d.service.queue.is_some() || !d.replicas.is_empty()
    } else {
        d.targets.iter().any(|t| t.up)
    }
}

/// Runs the command.
/// `--service NAME[:PORT]`: the Service and its port (8000, vLLM's, by default).
fn service(spec: &str) -> Result<(String, String)> {
    let (name, port) = spec.split_once(':').unwrap_or((spec, "8000"));
    if inferscale_manifests::validate::rfc1123_label(name).is_err() || port.is_empty() {
        bail!(
            "--service {spec:?} is not NAME or NAME:PORT (a Service name such as vllm, a port such as 8000 or http)"
        );
    }
    Ok((name.to_owned(), port.to_owned()))
}

/// With --service: the Service to follow, through the API the flags (or the environment) name.
async fn follow(args: &MonitorArgs) -> Result<Option<Follow>> {
    let Some(spec) = &args.service else {
        return Ok(None);
    };
    let (name, port) = service(spec)?;
    let Some(kube) = Kube::connect(&args.kube.access())
        .await
        .context("the Kubernetes API")?
    else {
        bail!(
            "--service {spec} needs the Kubernetes API: give --kubeconfig or --context (or --kube-api), or run in a pod"
        );
    };
    kube.probe().await?;
    Ok(Some(Follow {
        discovery: Discovery::new(kube),
        namespace: args.namespace.clone(),
        service: name,
        port,
        job: args.job.clone(),
    }))
}

pub(crate) fn run(args: &MonitorArgs) -> Result<ExitCode> {
    let (mut config, rules_file) = resolve(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    config.follow = rt.block_on(follow(args))?;
    if let Some(f) = &config.follow {
        // The engine is read from the first pod's /metrics (unless --engine says).
        if args.engine.is_none()
            && let Ok(targets) = rt.block_on(f.discovery.urls(&f.namespace, &f.service, &f.port))
            && let Some(first) = targets.first()
            && let SourceSpec::Pods { access, .. } = &config.source
            && let Ok(t) = Target::parse_metrics(&format!("{first}/metrics"))
        {
            config.scope.server = detect_engine(
                &[PodTarget {
                    url: t.url.clone(),
                    labels: Labels::new([("job", args.job.as_str())]),
                    kind: Kind::Engine,
                }],
                access,
            );
        }
    }
    let mut monitor = Monitor::new(config)?;
    let live = !args.once && !args.json;
    if live && !std::io::stdout().is_terminal() {
        bail!(
            "standard output is not a terminal: use --once (one frame as text) or --json (a line per refresh)"
        );
    }
    if !live && !args.json {
        match &rules_file {
            Some(p) => eprintln!("alert rules from {}", p.display()),
            None => eprintln!("no alert rules (give --rules FILE, e.g. {DEFAULT_RULES})"),
        }
    }
    if args.once {
        if !args.json && !monitor.reads_prometheus() {
            eprintln!(
                "reading {} for {} …",
                monitor.describe(),
                format_duration(args.collect)
            );
        }
        let d = rt.block_on(app::once(&mut monitor, args.collect, args.refresh));
        if args.json {
            emit(&format!("{}\n", serde_json::to_string(&d)?))?;
        } else {
            let width = args.width.unwrap_or_else(terminal_width);
            let screen = Screen {
                view: view(args.view),
                paused: false,
            };
            emit(&app::render_text(&d, monitor.history(), screen, width))?;
        }
        if !read_anything(&d) {
            bail!("nothing could be read; the frame above is empty");
        }
        return Ok(ExitCode::from(exit::SUCCESS));
    }
    let stop = async {
        match args.duration {
            Some(d) => {
                tokio::select! {
                    () = crate::shutdown::signal() => {}
                    () = tokio::time::sleep(d) => {}
                }
            }
            None => crate::shutdown::signal().await,
        }
    };
    if args.json {
        let mut out = std::io::stdout().lock();
        rt.block_on(app::json_lines(
            &mut monitor,
            args.refresh,
            args.duration,
            stop,
            &mut out,
        ))?;
    } else {
        rt.block_on(app::live(&mut monitor, args.refresh, stop))?;
    }
    Ok(ExitCode::from(exit::SUCCESS))
}

/// The terminal's width when standard output is one (`COLUMNS`), else 120.
fn terminal_width() -> u16 {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|w| (40..=1000).contains(w))
        .or_else(|| {
            ratatui::crossterm::terminal::size()
                .ok()
                .map(|(w, _)| w)
                .filter(|w| *w >= 40 && std::io::stdout().is_terminal())
        })
        .unwrap_or(120)
}
