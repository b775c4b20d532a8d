//! `inferscale tune`: the scaling policy searched in the rehearsal, from thresholds.json.

use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow};
use inferscale_autoscale::tune::Trace;

use crate::cli::TuneArgs;
use crate::job::manifests::{options, read_thresholds};
use crate::job::rehearse::read_trace;
use crate::job::replica::{client, resolve};
use crate::job::tune::{Ask, run as tune, text};
use crate::output::{check_writable, emit, write_all};

/// The traces of `paths`; a request trace sends its own prompts unless `own_prompts` is
/// false (`--shape` or `--unique-prompts` said otherwise).
fn traces(paths: &[std::path::PathBuf], own_prompts: bool) -> Result<Vec<Trace>> {
    paths
        .iter()
        .map(|p| {
            let name = p.file_stem().map_or_else(
                || p.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            );
            let (traffic, prompts) = read_trace(p)?;
            let mut trace = Trace::from_traffic(&name, traffic);
            if own_prompts {
                trace.prompts = prompts.map(|p| p.cycle);
            }
            Ok(trace)
        })
        .collect()
}

/// Runs the command.
pub(crate) fn run(a: &TuneArgs) -> Result<ExitCode> {
    let t = read_thresholds(&a.thresholds)?;
    if !(a.attainment.is_finite() && a.attainment > 0.0 && a.attainment < 100.0) {
        return Err(anyhow!(
            "--attainment {}: expected a percentage above 0 and below 100",
            a.attainment
        ));
    }
    let replica = resolve(&a.replica, Some(&t))?;
    let own = a.sharing.shape.is_none() && !a.sharing.unique_prompts;
    let suite = (!a.trace.is_empty())
        .then(|| traces(&a.trace, own))
        .transpose()?;
    let held_out = if a.no_held_out {
        Some(Vec::new())
    } else if !a.held_out.is_empty() {
        Some(traces(&a.held_out, own)?)
    } else {
        None
    };
    let o = options(&t, &a.cluster)?;
    let prompts = crate::job::prompts::chosen(
        a.sharing.shape.as_deref(),
        a.sharing.unique_prompts,
        a.prompt_tokens,
        crate::job::replica::request(None, None, Some(&t)).max_tokens,
        Some(&t),
        a.seed,
    )?;
    // Every input is read and checked before the output folder is made.
    let files = ["thresholds.json", "tune.json", "tune.html"].map(|f| a.out.join(f));
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create the output folder {}", a.out.display()))?;
    for f in &files {
        check_writable(f)?;
    }
    let (report, policy) = tune(Ask {
        thresholds: &t,
        options: o.clone(),
        max_given: a.cluster.max_replicas.is_some(),
        replica: &replica,
        client: client(&a.clients),
        slo_e2e_s: a.slo_e2e.map(|d| d.as_secs_f64()),
        attainment: a.attainment / 100.0,
        suite,
        held_out,
        seed: a.seed,
        gateway: a.cluster.gateway,
        prompts,
    })?;
    let mut tuned = t.clone();
    if let Some(p) = &policy {
        tuned.scaling = Some(p.clone());
    }
    write_all(&[
        (
            files[0].clone(),
            (serde_json::to_string_pretty(&tuned)? + "\n").into_bytes(),
        ),
        (
            files[1].clone(),
            (serde_json::to_string_pretty(&report)? + "\n").into_bytes(),
        ),
        (
            files[2].clone(),
            inferscale_report::tune::render(&report, &o.model_name, &replica.about).into_bytes(),
        ),
    ])?;
    if a.json {
        emit(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        let mut s = text(&report);
        match &policy {
            Some(p) => s.push_str(&format!(
                "\nthe policy: {}\nwrote {} (its `scaling`), {} and {}; next: inferscale generate --thresholds {}\n",
                p.describe(),
                files[0].display(),
                files[1].display(),
                files[2].display(),
                files[0].display()
            )),
            None => s.push_str(&format!(
                "\nno policy held: {} is the input unchanged; {} and {} say what each candidate did\n",
                files[0].display(),
                files[1].display(),
                files[2].display()
            )),
        }
        emit(&s)?;
    }
    Ok(if policy.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::CHECK_FAILED)
    })
}
