//! `inferscale fidelity`: predictions against published measurements.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use inferscale_predict::calibrate::{evaluate, fit};
use inferscale_predict::fidelity::{
    Builtin, Case, Options, Report, read_cases, run as predict_cases,
};

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
                pct(c.ape)
            );
        }
        s.push('\n');
    }
    for (title, m) in [
        ("metric family", &r.per_family),
        ("metric", &r.per_metric),
        ("GPU", &r.per_gpu),
    ] {
        let _ = writeln!(
            s,
            "{title:<24} {:>5} {:>12} {:>12}",
            "n", "median error", "mean error"
        );
        for (k, a) in m {
            let _ = writeln!(
                s,
                "{k:<24} {:>5} {:>12} {:>12}",
                a.n,
                pct(a.median_ape),
                pct(a.mean_ape)
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

fn calibrate(args: &FidelityArgs, cases: &[Case], opts: &Options) -> Result<ExitCode> {
    let gpu_of = |c: &Case| c.get("gpu").to_ascii_lowercase();
    let (fit_on, held): (Vec<Case>, Vec<Case>) = match &args.leave_out {
        None => (cases.to_vec(), Vec::new()),
        Some(g) => {
            let g = g.to_ascii_lowercase();
            let (held, fit): (Vec<Case>, Vec<Case>) =
                cases.iter().cloned().partition(|c| gpu_of(c) == g);
            if held.is_empty() {
                anyhow::bail!(
                    "--leave-out {g}: no case of that GPU in {}",
                    args.cases.display()
                );
            }
            (fit, held)
        }
    };
    let json = args.json;
    let f = fit(&fit_on, &Builtin, opts, &mut |n, j| {
        if !json {
            eprint!("\r  {n} evaluations, objective {j:.3} …");
        }
    });
    if !json {
        eprintln!();
    }
    let on_fit = evaluate(&fit_on, &Builtin, opts, &f.physics);
    let on_held = (!held.is_empty()).then(|| evaluate(&held, &Builtin, opts, &f.physics));
    if json {
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "fit": f, "fitted_cases": on_fit, "held_out_gpu": args.leave_out, "held_out_cases": on_held,
            }))?
        ))?;
        return Ok(ExitCode::from(exit::SUCCESS));
    }
    let mut s = format!(
        "fitted on {} cases in {} evaluations (objective {:.3}):\n{}\n\non the cases fitted:\n{}",
        fit_on.len(),
        f.evaluations,
        f.objective,
        serde_json::to_string_pretty(&f.physics)?,
        table(&on_fit, false)
    );
    if let (Some(h), Some(g)) = (&on_held, &args.leave_out) {
        let _ = write!(
            s,
            "\non the {} cases of {g}, left out of the fit:\n{}",
            held.len(),
            table(h, false)
        );
    }
    emit(&s)?;
    Ok(ExitCode::from(exit::SUCCESS))
}

/// Runs the command.
pub(crate) fn run(args: &FidelityArgs) -> Result<ExitCode> {
    let text = read_text(&args.cases, "case file", cap::SMALL)?;
    let cases = read_cases(&text).with_context(|| format!("{}", args.cases.display()))?;
    let json = args.json;
    let opts = Options {
        poisson: args.arrivals == ArrivalsArg::Poisson,
        timeout_s: args.timeout.map(|d| d.as_secs_f64()),
        physics: None,
    };
    if args.calibrate {
        return calibrate(args, &cases, &opts);
    }
    let report = predict_cases(&cases, &Builtin, &opts, &mut |i, n| {
        if !json && i < n {
            eprint!("\r  simulating setup {}/{n} …", i + 1);
        } else if !json {
            eprintln!();
        }
    });
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        emit(&table(&report, args.all))?;
    }
    Ok(ExitCode::from(exit::SUCCESS))
}
