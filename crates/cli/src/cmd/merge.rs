//! `inferscale merge`: the run.json parts of a split load in, one run.json out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use inferscale_loadgen::Target;
use inferscale_loadgen::merge::merge;
use inferscale_loadgen::prometheus::Prometheus;
use inferscale_loadgen::report::RunReport;
use inferscale_loadgen::threshold::Threshold;
use inferscale_manifests::promql::Sel;

use crate::cli::MergeArgs;
use crate::output::{emit, write_atomic};

/// The part files: the files given, and every `*.json` of the folders given (sorted). `-`
/// (standard input) is left for [`stdin_parts`].
fn part_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in args {
        if p.as_os_str() == "-" {
            continue;
        } else if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read the folder {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json") && f.is_file())
                .collect();
            if files.is_empty() {
                return Err(anyhow!("{}: no *.json parts in this folder", p.display()));
            }
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn read_part(path: &Path) -> Result<RunReport> {
    crate::job::analysis::read(path)
}

/// The parts on standard input: a tar archive of run.json files, or the workers' logs with
/// the frames `inferscale load --emit-part` printed. Each is named `stdin:NAME`.
fn stdin_parts() -> Result<Vec<(String, RunReport)>> {
    use std::io::Read as _;
    let cap = crate::input::cap::RUN;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    if bytes.len() as u64 > cap {
        return Err(anyhow!(
            "standard input: more than {} MiB of parts; merge files instead",
            cap >> 20
        ));
    }
    let parts =
        inferscale_loadgen::parts::read(&bytes).map_err(|e| anyhow!("standard input: {e}"))?;
    parts
        .into_iter()
        .map(|p| {
            let name = format!("stdin:{}", p.name);
            let text = String::from_utf8(p.contents)
                .map_err(|_| anyhow!("{name}: not UTF-8 text, so not a run.json"))?;
            let run = inferscale_analysis::read_run(&text).with_context(|| name.clone())?;
            Ok((name, run))
        })
        .collect()
}

/// Runs the command.
pub(crate) fn run(a: &MergeArgs) -> Result<ExitCode> {
    let thresholds = a
        .thresholds
        .iter()
        .map(|t| Threshold::parse(t).map_err(|e| anyhow!("{e}")))
        .collect::<Result<Vec<_>>>()?;
    // The Prometheus flags are checked before any part is read.
    let prom = match &a.prometheus {
        Some(url) => {
            let target = Target::parse(url).context("--prometheus")?;
            let access = crate::credentials::scrape_access(&a.access, a.timeout)?;
            Some(Prometheus::new(target, access))
        }
        None => None,
    };
    crate::output::check_writable(&a.out)?;
    let files = part_files(&a.parts)?;
    let mut parts = Vec::with_capacity(files.len());
    for f in &files {
        if f == &a.out {
            return Err(anyhow!(
                "{}: the output is also a part; write it elsewhere with --out",
                f.display()
            ));
        }
        parts.push((f.display().to_string(), read_part(f)?));
    }
    match a.parts.iter().filter(|p| p.as_os_str() == "-").count() {
        0 => {}
        1 => parts.extend(stdin_parts()?),
        _ => return Err(anyhow!("- (standard input) is given more than once")),
    }
    let mut m = merge(&parts, a.allow_missing, &thresholds).map_err(|e| anyhow!("{e}"))?;
    let mut from_prometheus = None;
    if let Some(prom) = &prom {
        let url = prom.url();
        let sel = match &a.selector {
            Some(s) => Sel::raw(s.trim().trim_matches(['{', '}'])),
            None => Sel::exact(&[("model_name", m.report.target.model.as_str())]),
        };
        let t0 = crate::job::server_view::start_of(&parts).ok_or_else(|| {
            anyhow!("the parts carry no start time to place the steps in Prometheus' time")
        })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let n = rt.block_on(crate::job::server_view::fill(prom, &sel, &mut m.report, t0))?;
        if n == 0 {
            eprintln!(
                "warning: Prometheus at {url} has no series matching {{{}}} during the run: the merged run has no server side",
                sel.matchers()
            );
        }
        from_prometheus = Some(n);
    }
    let json = serde_json::to_string_pretty(&m.report)? + "\n";
    write_atomic(&a.out, json.as_bytes())?;
    let breached = m.report.thresholds.iter().any(|t| !t.ok);
    if a.json {
        emit(&json)?;
    } else {
        let mut text = format!(
            "merged {} of {} parts into {}\n",
            parts.len(),
            m.workers.len(),
            a.out.display()
        );
        for w in &m.workers {
            let health = match &w.file {
                None => "MISSING".to_owned(),
                Some(f) => {
                    let mut h = vec![f.clone()];
                    if w.late_s > 0.0 {
                        h.push(format!("started {:.3} s late", w.late_s));
                    }
                    if !w.client_limited_steps.is_empty() {
                        let steps: Vec<String> = w
                            .client_limited_steps
                            .iter()
                            .map(|s| (s + 1).to_string())
                            .collect();
                        h.push(format!("client-limited in step {}", steps.join(", ")));
                    }
                    if let Some(l) = w.lag_p99_max_s {
                        h.push(format!("lag p99 up to {:.2} ms", l * 1e3));
                    }
                    h.join("; ")
                }
            };
            text.push_str(&format!("  worker {}: {health}\n", w.index));
        }
        if let Some(n) = from_prometheus {
            text.push_str(&format!(
                "  server side: from Prometheus, {n} of {} steps\n",
                m.report.steps.len()
            ));
        }
        for s in &m.report.steps {
            text.push_str(&format!(
                "  step {}: {} scheduled, {} ok, {} failed, {} dropped; sent {:.2} req/s; e2e p95 {}\n",
                s.index + 1,
                s.requests.scheduled,
                s.requests.ok,
                s.requests.failed.total,
                s.requests.dropped,
                s.sent_rps,
                s.latency_s
                    .e2e
                    .p95
                    .map_or("-".into(), |v| format!("{v:.3} s"))
            ));
        }
        for t in &m.report.thresholds {
            text.push_str(&format!(
                "threshold {}: {} ({})\n",
                t.expr,
                if t.ok { "ok" } else { "BREACHED" },
                t.value.map_or("-".into(), |v| format!("{v:.4}"))
            ));
        }
        emit(&text)?;
    }
    if !m.missing.is_empty() {
        eprintln!(
            "warning: segments {:?} of {} are missing: the merged run is partial",
            m.missing,
            m.workers.len()
        );
    }
    Ok(if breached || !m.missing.is_empty() {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
