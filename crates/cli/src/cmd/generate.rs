//! `inferscale generate`: thresholds.json in; the production configuration out. With
//! `--load-job`: the workers of a split load as a Kubernetes Job.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Result, anyhow};
use clap::Parser as _;
use inferscale_manifests::loadjob::LoadJob;

use crate::cli::{Cli, Command, GenerateArgs};
use crate::job::manifests::{read_thresholds, write};
use crate::output::{emit, write_all};

/// Runs the command.
pub(crate) fn run(a: &GenerateArgs) -> Result<ExitCode> {
    if a.load_job {
        return load_job(a);
    }
    let job_only = [
        ("--workers", a.workers.is_some()),
        ("--start-at", a.start_at.is_some()),
        ("--worker-cpu", a.worker_cpu.is_some()),
        ("--api-key-secret", a.api_key_secret.is_some()),
        ("--deadline", a.deadline.is_some()),
        ("load flags after --", !a.load_args.is_empty()),
    ];
    if let Some((flag, _)) = job_only.iter().find(|(_, given)| *given) {
        return Err(anyhow!(
            "{flag} is for the load Job: add --load-job (and leave out --thresholds)"
        ));
    }
    let path = a
        .thresholds
        .as_ref()
        .ok_or_else(|| anyhow!("--thresholds FILE is required (or --load-job)"))?;
    let t = read_thresholds(path)?;
    let paths = write(&t, &a.cluster, &a.out)?;
    let mut text = format!("wrote {} files into {}:\n", paths.len(), a.out.display());
    for p in &paths {
        text.push_str(&format!(
            "  {}\n",
            p.strip_prefix(&a.out).unwrap_or(p).display()
        ));
    }
    text.push_str(&format!(
        "read {} for the order to apply them\n",
        a.out.join("README.md").display()
    ));
    if t.source.simulated.is_some() {
        text.push_str("note: the thresholds come from a simulated run\n");
    }
    text.push_str(&default_image_note(a));
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn default_image_note(a: &GenerateArgs) -> String {
    if a.cluster.inferscale_image == crate::cli::DEFAULT_IMAGE {
        format!(
            "note: the manifests name the default image {}: build and push yours (docs/deploy.md) and pass --inferscale-image\n",
            crate::cli::DEFAULT_IMAGE
        )
    } else {
        String::new()
    }
}

/// Load flags the Job sets itself, and why they cannot be given.
const JOB_OWNED: [(&str, &str); 8] = [
    (
        "--url",
        "the workers send to the Service (--service, --service-port, --namespace)",
    ),
    ("--segment", "each pod's completion index is its segment"),
    (
        "--start-at",
        "give it to generate, or let load-job.sh set a fresh one",
    ),
    ("--out", "each worker writes /out/part.json and prints it"),
    ("--emit-part", "the workers always print their parts"),
    (
        "--warmup",
        "the Job sends no warm-up: apply warmup-job.yaml first",
    ),
    ("--no-metrics", "the workers never scrape"),
    ("--json", "the workers print their parts, not run.json"),
];

/// Load flags naming a file on this machine, which the pods do not have.
const LOCAL_FILES: [&str; 6] = [
    "--plan",
    "--dataset",
    "--api-key-file",
    "--header-file",
    "--ca-file",
    "--requests-out",
];

fn names(arg: &str, flag: &str) -> bool {
    arg == flag || arg.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
}

/// Checks the workers' flags as `inferscale load` would, and returns the plan's length.
fn check_load_flags(args: &[String], url: &str) -> Result<Duration> {
    for arg in args {
        if let Some((flag, why)) = JOB_OWNED.iter().find(|(f, _)| names(arg, f)) {
            return Err(anyhow!("{flag} after --: the load Job sets it ({why})"));
        }
        if let Some(flag) = LOCAL_FILES.iter().find(|f| names(arg, f)) {
            return Err(anyhow!(
                "{flag} after --: it names a file on this machine, which the worker pods do not have (use --api-key-secret for a key; put plans and datasets in the flags or an image of your own)"
            ));
        }
    }
    let argv = ["inferscale", "load", "--url", url]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        let first = e.to_string();
        let first = first
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        anyhow!("the load flags after --: {first}")
    })?;
    let Command::Load(load) = cli.command else {
        return Err(anyhow!(
            "the load flags after --: not `inferscale load` flags"
        ));
    };
    let resolved = crate::job::load::resolve_load(&load)?;
    let c = &resolved.plan.config;
    let secs: f64 = c
        .stages
        .iter()
        .map(|s| s.duration_s + s.rest_s)
        .sum::<f64>()
        / c.speedup
        + c.grace.as_secs_f64();
    Ok(Duration::from_secs_f64(secs.max(0.0)))
}

/// `NAME[:KEY]` of `--api-key-secret`.
fn secret(text: &str) -> Result<(String, String)> {
    let (name, key) = text.split_once(':').unwrap_or((text, "api-key"));
    inferscale_manifests::validate::rfc1123_subdomain(name)
        .map_err(|e| anyhow!("--api-key-secret {text:?}: {e}"))?;
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    if !key_ok {
        return Err(anyhow!(
            "--api-key-secret {text:?}: the key {key:?} is not a Secret data key (letters, digits, '-', '_', '.')"
        ));
    }
    Ok((name.to_owned(), key.to_owned()))
}

/// `--worker-cpu`: a plain CPU quantity (`2`, `1.5`, `500m`).
fn cpu(text: &str) -> Result<String> {
    let digits = text.strip_suffix('m').unwrap_or(text);
    let ok = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.parse::<f64>().is_ok_and(|v| v > 0.0);
    if ok {
        Ok(text.to_owned())
    } else {
        Err(anyhow!(
            "--worker-cpu {text:?}: expected a CPU quantity such as 2, 1.5 or 500m"
        ))
    }
}

fn load_job(a: &GenerateArgs) -> Result<ExitCode> {
    let o = crate::job::manifests::load_job_options(&a.cluster)?;
    let url = format!(
        "http://{}.{}.svc:{}",
        o.service, o.namespace, o.service_port.1
    );
    let length = check_load_flags(&a.load_args, &url)?;
    let start = match &a.start_at {
        Some(t) => crate::job::load::parse_start_at(t)?,
        None => {
            let now = inferscale_clock::unix(inferscale_clock::wall()).as_secs();
            // Ten minutes ahead, on the minute.
            SystemTime::UNIX_EPOCH + Duration::from_secs((now + 600).div_ceil(60) * 60)
        }
    };
    let deadline = match a.deadline {
        Some(d) if d < length => {
            return Err(anyhow!(
                "--deadline {}s is shorter than the plan ({:.0} s): the Job would be stopped before the workers finish",
                d.as_secs(),
                length.as_secs_f64()
            ));
        }
        Some(d) => d,
        None => length + Duration::from_secs(3600),
    };
    let workers = a.workers.unwrap_or(4);
    let lj = LoadJob {
        workers,
        start_at: inferscale_loadgen::run::rfc3339(start),
        load_args: a.load_args.clone(),
        cpu: cpu(a.worker_cpu.as_deref().unwrap_or("2"))?,
        api_key_secret: a.api_key_secret.as_deref().map(secret).transpose()?,
        deadline_s: deadline.as_secs().max(1),
    };
    let files: Vec<_> = inferscale_manifests::loadjob::generate(&o, &lj)?
        .into_iter()
        .map(|f| (a.out.join(&f.path), f.contents.into_bytes()))
        .collect();
    write_all(&files)?;
    let mut text = format!(
        "wrote the load Job for {} workers into {} (load-job.yaml, load-job.sh)\n",
        workers,
        a.out.display()
    );
    text.push_str(&format!(
        "each worker sends 1/{} of a {:.0} s plan; start it, wait, and merge the parts with: sh {}\n",
        workers,
        length.as_secs_f64(),
        a.out.join("load-job.sh").display()
    ));
    text.push_str(&default_image_note(a));
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
