//! Gathering the evidence: the server's `/metrics` and `/v1/models` (through the one scrape
//! client and model discovery), the DCGM exporter's `/metrics`, a Prometheus' HTTP API, the
//! manifests and run folders, and `promtool check rules` when it is installed. Nothing here
//! judges; a failure to read is evidence too (kept as the error).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use inferscale_catalog::{Engine, Signal, names_of};
use inferscale_http::Target;
use inferscale_http::prometheus::Prometheus;
use inferscale_http::scrape::Scraper;
use inferscale_http::transport::{Get, get};
use inferscale_manifests::objects::{self, PrometheusRule};
use inferscale_promql::Value;

use crate::ReadError;
use crate::evidence::{
    Doc, Evidence, LoadedRule, Manifests, Names, PrometheusEvidence, Promtool, Row, RunDir, Served,
    ServedModel,
};

/// Where to look.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The vLLM server (or Service): its API base URL.
    pub url: Option<Target>,
    /// Its metrics URL.
    pub metrics_url: Option<Target>,
    /// A DCGM exporter's metrics URL.
    pub dcgm_url: Option<Target>,
    /// A Prometheus.
    pub prometheus: Option<Prometheus>,
    /// The manifests folder.
    pub manifests: Option<PathBuf>,
    /// An `inferscale run` folder.
    pub run_dir: Option<PathBuf>,
    /// The names the deployment's series carry.
    pub names: Names,
    /// How endpoints are read (timeout, limit, token, TLS).
    pub access: Get,
    /// How the server's API is read (its API key).
    pub api: Get,
    /// How far back to look in Prometheus for a scale-out → scale-in cycle, seconds.
    pub observe_s: f64,
    /// `promtool`, when installed.
    pub promtool: Option<PathBuf>,
    /// A live cluster, read instead of a manifests folder.
    pub cluster: Option<inferscale_kube::Kube>,
}

fn served(exp: &inferscale_promtext::Exposition<'_>) -> Served {
    let mut s = Served {
        engines: inferscale_catalog::detect(exp),
        ..Served::default()
    };
    for x in exp.samples() {
        let name = x.name();
        if name == inferscale_catalog::vllm::CACHE_CONFIG_INFO_NAME && s.cache_config.is_none() {
            s.cache_config = Some(
                x.labels()
                    .iter()
                    .map(|l| (l.name.to_string(), l.value.to_string()))
                    .collect(),
            );
        }
        if !s.samples.contains::<str>(name) {
            s.samples.insert(name.to_string());
        }
    }
    s
}

async fn scrape(target: &Target, access: &Get) -> Result<Served, ReadError> {
    let scraped = Scraper::new(target.clone(), access.clone())
        .fetch()
        .await
        .map_err(ReadError::Scrape)?;
    let exp = scraped.parse(None).map_err(ReadError::Exposition)?;
    Ok(served(&exp))
}

async fn models(target: &Target, api: &Get) -> Result<Vec<ServedModel>, ReadError> {
    let t = target.with_path("/v1/models");
    let mut how = api.clone();
    how.accept = "application/json".into();
    let f = get(&t, &how).await.map_err(ReadError::Fetch)?;
    if f.status != 200 {
        return Err(ReadError::Status {
            url: t.url,
            status: f.status,
        });
    }
    let list: inferscale_openai::ModelList =
        serde_json::from_slice(&f.body).map_err(|error| ReadError::NotModelList {
            url: t.url.clone(),
            error,
        })?;
    Ok(list
        .data
        .into_iter()
        .map(|m| ServedModel {
            id: m.id,
            root: m.root,
            max_model_len: m.max_model_len,
        })
        .collect())
}

fn rows(v: Value) -> Vec<Row> {
    match v {
        Value::Vector(s) => s
            .into_iter()
            .map(|s| {
                let labels: BTreeMap<String, String> = s
                    .labels
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                (labels, s.value)
            })
            .collect(),
        Value::Scalar(x) => vec![(BTreeMap::new(), x)],
        _ => Vec::new(),
    }
}

async fn instant(p: &Prometheus, q: &str) -> Result<Vec<Row>, ReadError> {
    let json = p.query(q, None).await.map_err(ReadError::Prometheus)?;
    inferscale_promql::from_api_json(&json)
        .map(rows)
        .map_err(ReadError::Answer)
}

async fn one(p: &Prometheus, q: &str) -> Result<Option<f64>, ReadError> {
    Ok(instant(p, q).await?.first().map(|(_, v)| *v))
}

fn loaded_rules(json: &serde_json::Value) -> Vec<LoadedRule> {
    let mut out = Vec::new();
    for g in json
        .pointer("/data/groups")
        .and_then(|g| g.as_array())
        .into_iter()
        .flatten()
    {
        for r in g
            .get("rules")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
        {
            if r.get("type").and_then(|t| t.as_str()) != Some("alerting") {
                continue;
            }
            let text = |k: &str| r.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            out.push(LoadedRule {
                name: text("name").unwrap_or_default(),
                health: text("health").unwrap_or_else(|| "unknown".into()),
                last_error: text("lastError").filter(|e| !e.is_empty()),
            });
        }
    }
    out
}

/// The Prometheus triggers' queries of the manifests' ScaledObjects.
fn trigger_queries(m: Option<&Manifests>) -> Vec<String> {
    let mut out = Vec::new();
    for f in m.map(|m| m.docs.as_slice()).unwrap_or_default() {
        if let Doc::ScaledObject(v) = &f.doc {
            for t in v
                .pointer("/spec/triggers")
                .and_then(|t| t.as_array())
                .into_iter()
                .flatten()
            {
                if t.get("type").and_then(|x| x.as_str()) == Some("prometheus")
                    && let Some(q) = t.pointer("/metadata/query").and_then(|q| q.as_str())
                {
                    out.push(q.to_owned());
                }
            }
        }
    }
    out
}

async fn prometheus(
    p: &Prometheus,
    names: &Names,
    engine: Engine,
    manifests: Option<&Manifests>,
    observe_s: f64,
) -> PrometheusEvidence {
    let q = inferscale_promql::quote;
    let sel = format!("namespace={},job={}", q(&names.namespace), q(&names.job));
    let up = instant(p, &format!("up{{{sel}}}")).await;
    let engine_series = instant(
        p,
        &format!(
            "{}{{namespace={}}}",
            catalog_name(engine, Signal::QueueDepth),
            q(&names.namespace)
        ),
    )
    .await;
    let gpu_series = instant(p, catalog_name(Engine::Dcgm, Signal::GpuUtil)).await;
    let rules = p
        .alert_rules()
        .await
        .map(|j| loaded_rules(&j))
        .map_err(ReadError::Prometheus);
    let mut triggers = Vec::new();
    for t in trigger_queries(manifests) {
        let n = instant(p, &t).await.map(|r| r.len());
        triggers.push((t, n));
    }
    let ready = format!("count(up{{{sel}}} == 1)");
    let window = format!("{}s", observe_s.round() as u64);
    let replicas = async {
        let lo = one(p, &format!("min_over_time(({ready})[{window}:1m])")).await?;
        let hi = one(p, &format!("max_over_time(({ready})[{window}:1m])")).await?;
        let last = one(p, &ready).await?;
        Ok(match (lo, hi, last) {
            (Some(lo), Some(hi), last) => Some((lo, hi, last.unwrap_or(0.0))),
            _ => None,
        })
    }
    .await;
    PrometheusEvidence {
        url: p.url().to_owned(),
        up,
        engine_series,
        gpu_series,
        rules,
        triggers,
        replicas,
        observed_s: observe_s,
    }
}

/// `promtool check rules` on every rule file (a PrometheusRule's `spec` written to a
/// temporary rule file first, as the operator would hand it to Prometheus).
fn promtool(tool: Option<&Path>, m: Option<&Manifests>) -> Promtool {
    let Some(tool) = tool else {
        return Promtool::Missing;
    };
    let mut verdicts = Vec::new();
    let Some(m) = m else {
        return Promtool::Ran(verdicts);
    };
    let mut seen: Vec<&str> = Vec::new();
    for f in &m.docs {
        let Doc::Rules(Ok(set)) = &f.doc else {
            continue;
        };
        if seen.contains(&f.path.as_str()) {
            continue;
        }
        seen.push(&f.path);
        let path = m.dir.join(&f.path);
        let verdict = (|| -> Result<(), ReadError> {
            let text = match m.inline.get(&f.path) {
                Some(t) => t.clone(),
                None => crate::read::read_bounded(&path)?,
            };
            let mut temp = None;
            let file = if set.object {
                let mut groups = Vec::new();
                for doc in inferscale_manifests::yaml_documents(&text) {
                    if let Ok(r) = objects::load::<PrometheusRule>(doc)
                        && r.kind == "PrometheusRule"
                    {
                        groups.extend(r.spec.groups);
                    }
                }
                let spec = objects::RuleFile {
                    groups,
                    extra: Default::default(),
                };
                let t = std::env::temp_dir().join(format!(
                    "inferscale-check-{}-{}.yaml",
                    std::process::id(),
                    verdicts.len()
                ));
                std::fs::write(&t, objects::to_yaml(&spec)).map_err(ReadError::Io)?;
                temp = Some(t.clone());
                t
            } else {
                path.clone()
            };
            let out = std::process::Command::new(tool)
                .args(["check", "rules"])
                .arg(&file)
                .output()
                .map_err(|error| ReadError::Promtool {
                    tool: tool.to_owned(),
                    error,
                });
            if let Some(t) = temp {
                let _ = std::fs::remove_file(t);
            }
            let out = out?;
            if out.status.success() {
                Ok(())
            } else {
                let text = String::from_utf8_lossy(&out.stderr).into_owned()
                    + &String::from_utf8_lossy(&out.stdout);
                Err(ReadError::Refused(
                    text.split_whitespace().collect::<Vec<_>>().join(" "),
                ))
            }
        })();
        verdicts.push((f.path.clone(), verdict));
    }
    Promtool::Ran(verdicts)
}

/// The engine the checks expect, and how it was chosen: `--engine`; else the one the
/// server's `/metrics` shows; else the one whose names the manifests read; else the one
/// thresholds.json was measured on; else vLLM.
fn engine(
    inputs: &Inputs,
    metrics: Option<&(String, Result<Served, ReadError>)>,
    manifests: Option<&Manifests>,
    run: Option<&RunDir>,
) -> (Engine, String) {
    if let Some(e) = inputs.names.engine {
        return (e, "--engine".to_owned());
    }
    if let Some((url, Ok(s))) = metrics
        && let Some(e) = s.engines.iter().find(|e| **e != Engine::Dcgm)
    {
        return (*e, url.clone());
    }
    if let Some(m) = manifests {
        let names: Vec<String> = crate::judge::manifest_names(m);
        if let Some(e) = Engine::SERVING
            .into_iter()
            .find(|e| names.iter().any(|n| e.owns(n)))
        {
            return (e, format!("the names {} reads", m.dir.display()));
        }
    }
    if let Some(RunDir {
        thresholds: Some(Ok(t)),
        dir,
        ..
    }) = run
        && let Some(e) = t.source.engine.as_deref().and_then(Engine::from_key)
    {
        return (e, format!("{}", dir.join("thresholds.json").display()));
    }
    (Engine::Vllm, "the default".to_owned())
}

/// Reads everything `inputs` names. Never fails: what could not be read is kept as the
/// reason, for the checks to judge.
pub async fn gather(inputs: &Inputs) -> Evidence {
    let (cluster, mut manifests) = match &inputs.cluster {
        Some(k) => {
            let (c, m) = crate::cluster::read(k, &inputs.names.namespace).await;
            (Some(c), Some(m))
        }
        None => (None, None),
    };
    if let Some(d) = inputs.manifests.as_deref() {
        manifests = Some(crate::read::manifests(d).unwrap_or_else(|why| Manifests {
            dir: d.to_owned(),
            unreadable: vec![(d.display().to_string(), why)],
            ..Manifests::default()
        }));
    }
    let metrics = match &inputs.metrics_url {
        Some(t) => Some((t.url.clone(), scrape(t, &inputs.access).await)),
        None => None,
    };
    let models = match &inputs.url {
        Some(t) => Some(models(t, &inputs.api).await),
        None => None,
    };
    let dcgm = match &inputs.dcgm_url {
        Some(t) => Some((t.url.clone(), scrape(t, &inputs.access).await)),
        None => None,
    };
    let run = inputs.run_dir.as_deref().map(crate::read::run_dir);
    let (engine, engine_from) = engine(inputs, metrics.as_ref(), manifests.as_ref(), run.as_ref());
    let prom = match &inputs.prometheus {
        Some(p) => Some(
            prometheus(
                p,
                &inputs.names,
                engine,
                manifests.as_ref(),
                inputs.observe_s,
            )
            .await,
        ),
        None => None,
    };
    let promtool = promtool(inputs.promtool.as_deref(), manifests.as_ref());
    Evidence {
        names: inputs.names.clone(),
        engine,
        engine_from,
        metrics,
        models,
        dcgm,
        prometheus: prom,
        manifests,
        promtool,
        run,
        cluster,
    }
}

/// The catalog's current name for an engine's signal (every signal `check` asks for has one).
fn catalog_name(engine: Engine, signal: Signal) -> &'static str {
    names_of(engine, signal)
        .map(|n| n.name)
        .next()
        .unwrap_or_else(|| unreachable!("the catalog names {engine}'s {signal:?}"))
}
