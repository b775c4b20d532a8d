//! `inferscale load`: flags and a plan file become one [`Plan`]; the job does the rest.

use std::path::Path;
use std::process::ExitCode;

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use inferscale_loadgen::plan::{LengthValue, Plan};
use inferscale_loadgen::schedule::Segment;

use crate::cli::{ApiArg, LoadArgs};
use crate::job::load::{Resolved, execute, opt, summary};
use crate::output::emit;

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
fn flags(a: &LoadArgs) -> Plan {
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
    }
}

/// The flags over the plan file over the defaults, checked, with the client's credentials.
pub(crate) fn resolve(a: &LoadArgs) -> Result<Resolved> {
    let file = match &a.plan {
        Some(path) => read_plan(path)?,
        None => Plan::default(),
    };
    let auth = crate::credentials::client_auth(&a.auth)?;
    let tls = crate::credentials::tls(&a.auth.tls)?;
    let mut plan = flags(a).over(file).resolve(auth, tls)?;
    if let Some(s) = &a.segment {
        plan.config.segment = Segment::parse(s).map_err(|e| anyhow!(e))?;
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
