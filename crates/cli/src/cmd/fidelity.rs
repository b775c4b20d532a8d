//! `inferscale fidelity`: predictions against published measurements.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use inferscale_engine::hardware::GpuSpec;
use inferscale_predict::calibrate::{Physics, evaluate, fit};
use inferscale_predict::fidelity::{
    Case, Extended, Options, Report, read_cases, run as predict_cases,
};
use inferscale_predict::harness::{self, Applied};

use crate::cli::{ArrivalsArg, FidelityArgs};
use crate::exit;
use crate::input::{cap, read_text};
use crate::output::emit;

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

fn table(r: &Report, all: bool) -> String {
    let mut s = String::new();
    if all {
        let _ = writeln!(
            s,
            "{:<52} {:>12} {:>12} {:>8}",
            "case", "measured", "predicted", "error"
        );
        for c in &r.cases {
            let _ = writeln!(
                s,
                "{:<52} {:>12.3} {:>12.3} {:>8}",
                c.id,
                c.measured,
                c.predicted,
                c.ape.map_or_else(|| format!("±{:.3}", c.abs_error), pct)
            );
        }
        s.push('\n');
    }
    for (title, m) in [
        ("metric family", &r.per_family),
        ("metric", &r.per_metric),
        ("GPU", &r.per_gpu),
        ("GPU, family, architecture", &r.per_gpu_family),
    ] {
        let _ = writeln!(
            s,
            "{title:<32} {:>5} {:>12} {:>12} {:>12}",
            "n", "median error", "mean error", "median bias"
        );
        for (k, a) in m {
            let _ = writeln!(
                s,
                "{k:<32} {:>5} {:>12} {:>12} {:>12}",
                a.n,
                pct(a.median_ape),
                pct(a.mean_ape),
                format!("{:+.1} %", a.median_bias * 100.0)
            );
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "{} cases predicted, {} skipped",
        r.cases.len(),
        r.skipped.len()
    );
    for k in &r.skipped {
        let _ = writeln!(s, "  skipped {}: {}", k.id, k.reason);
    }
    s
}

/// Progress on standard error, on a terminal only (a line rewritten in place).
fn progress_line(text: &str) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{text}");
    }
}

fn progress_done() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

fn facts(applied: &[Applied]) -> String {
    let mut s = String::new();
    for a in applied {
        let facts: Vec<String> = a.facts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "harness facts: {} ({} cases): {}",
            a.name,
            a.cases,
            facts.join(", ")
        );
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

fn calibrate(
    args: &FidelityArgs,
    cases: &[Case],
    cat: &Extended,
    opts: &Options,
    applied: &[Applied],
) -> Result<ExitCode> {
    let gpu_of = |c: &Case| c.get("gpu").to_ascii_lowercase();
    let mut left_out: Vec<String> = Vec::new();
    match args.leave_out.as_deref() {
        None => {}
        Some("all") => {
            for c in cases {
                if !left_out.contains(&gpu_of(c)) {
                    left_out.push(gpu_of(c));
                }
            }
        }
        Some(g) => {
            let g = g.to_ascii_lowercase();
            if !cases.iter().any(|c| gpu_of(c) == g) {
                anyhow::bail!(
                    "--leave-out {g:?}: no case of that GPU in {} (GPUs there: {})",
                    args.cases.display(),
                    {
                        let mut gs: Vec<String> = cases.iter().map(gpu_of).collect();
                        gs.sort();
                        gs.dedup();
                        gs.join(", ")
                    }
                );
            }
            left_out.push(g);
        }
    }
    let json = args.json;
    let fit_on = |label: &str, fit_cases: &[Case]| {
        let f = fit(fit_cases, cat, opts, Physics::prior(), &mut |n, j| {
            progress_line(&format!("  {label}: {n} evaluations, objective {j:.3} …"));
        });
        progress_done();
        f
    };
    let prior = evaluate(cases, cat, opts, &Physics::prior());
    let f = fit_on("fit on all cases", cases);
    let on_all = evaluate(cases, cat, opts, &f.physics);
    let mut held_out = Vec::new();
    for g in &left_out {
        let (held, rest): (Vec<Case>, Vec<Case>) =
            cases.iter().cloned().partition(|c| gpu_of(c) == *g);
        let fg = fit_on(&format!("fit without {g}"), &rest);
        let on_held = evaluate(&held, cat, opts, &fg.physics);
        held_out.push((g.clone(), rest.len(), fg, on_held));
    }
    if json {
        let held: Vec<serde_json::Value> = held_out
            .iter()
            .map(|(g, n, fg, r)| {
                serde_json::json!({"gpu": g, "fitted_on": n, "fit": fg, "held_out_cases": r})
            })
            .collect();
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "version": 1, "prior": Physics::prior(), "prior_cases": prior, "fit": f, "fitted_cases": on_all,
                "leave_one_gpu_out": held, "harness_facts": applied,
            }))?
        ))?;
        return Ok(ExitCode::from(exit::SUCCESS));
    }
    let mut s = facts(applied);
    let _ = write!(
        s,
        "the prior (before any fit):\n{}\n\non the cases:\n{}\n",
        serde_json::to_string_pretty(&Physics::prior())?,
        table(&prior, false)
    );
    let _ = write!(
        s,
        "fitted from the prior on {} cases in {} evaluations (objective {:.3}):\n{}\n\non the cases fitted:\n{}",
        cases.len(),
        f.evaluations,
        f.objective,
        serde_json::to_string_pretty(&f.physics)?,
        table(&on_all, false)
    );
    for (g, n, fg, r) in &held_out {
        let _ = write!(
            s,
            "\nleft out {g}: fitted on the other {n} cases (objective {:.3}):\n{}\n\non the {} cases of {g}:\n{}",
            fg.objective,
            serde_json::to_string(&fg.physics)?,
            r.cases.len() + r.skipped.len(),
            table(r, false)
        );
    }
    emit(&s)?;
    Ok(ExitCode::from(exit::SUCCESS))
}

fn catalog(args: &FidelityArgs) -> Result<Extended> {
    let mut cat = Extended::default();
    for m in &args.model_config {
        let spec = crate::specs::read_model_config(m)?;
        let name = spec.name.clone();
        cat.models.push((name, spec));
    }
    for p in &args.gpu_spec {
        cat.gpus
            .push(crate::input::read_json::<GpuSpec>(p, "GPU spec")?);
    }
    Ok(cat)
}

/// Runs the command.
pub(crate) fn run(args: &FidelityArgs) -> Result<ExitCode> {
    let text = read_text(&args.cases, "case file", cap::SMALL)?;
    let mut cases = read_cases(&text).with_context(|| format!("{}", args.cases.display()))?;
    let cat = catalog(args)?;
    let applied = if args.no_harness_facts {
        Vec::new()
    } else {
        harness::apply(&mut cases, &harness::builtin())
    };
    let opts = Options {
        poisson: args.arrivals == ArrivalsArg::Poisson,
        timeout_s: args.timeout.map(|d| d.as_secs_f64()),
        physics: match &args.physics {
            None => None,
            Some(p) => Some(crate::input::read_json::<Physics>(p, "physics")?),
        },
    };
    if args.calibrate {
        return calibrate(args, &cases, &cat, &opts, &applied);
    }
    let report = predict_cases(&cases, &cat, &opts, &mut |i, n| {
        progress_line(&format!("  simulated {i} of {n} setups …"));
    });
    progress_done();
    if args.json {
        let mut v = serde_json::json!({ "version": 1 });
        if let (Some(o), serde_json::Value::Object(r)) =
            (v.as_object_mut(), serde_json::to_value(&report)?)
        {
            o.extend(r);
        }
        v["harness_facts"] = serde_json::to_value(&applied)?;
        emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        emit(&format!("{}{}", facts(&applied), table(&report, args.all)))?;
    }
    Ok(ExitCode::from(exit::SUCCESS))
}
