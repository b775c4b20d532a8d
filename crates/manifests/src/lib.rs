//! What production needs, written from measured thresholds: a KEDA ScaledObject, a
//! PrometheusRule (and its promtool tests), Grafana dashboards for the three metric tiers,
//! ServiceMonitors, a vLLM Deployment patch, a warm-up Job, the Karpenter NodePool and
//! EC2NodeClass the GPU nodes come from, and a README — and the validators that check them
//! ([`validate`]). Pure: thresholds and names in, file contents out.

pub mod grafana;
pub mod k8s;
pub mod karpenter;
pub mod keda;
pub mod loadjob;
pub mod objects;
pub mod promql;
pub mod readme;
pub mod rules;
pub mod scaler;
pub mod validate;
pub mod yaml;

use inferscale_analysis::Thresholds;

/// The names a cluster has, and the choices the thresholds do not make.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Namespace of the Deployment (and of everything generated).
    pub namespace: String,
    /// The vLLM Deployment.
    pub deployment: String,
    /// The vLLM container's name in it (strategic-merge patches match by name).
    pub container: String,
    /// Its position among the pod's containers (JSON patches address by index).
    pub container_index: u32,
    /// Its Service (ServiceMonitor selects `app: <service>`; the warm-up Job calls it).
    pub service: String,
    /// The Service's port name and number.
    pub service_port: (String, u16),
    /// The served model's name (vLLM's `--served-model-name`, the `model_name` label of
    /// its metrics).
    pub model_name: String,
    /// The engine the Deployment runs: every query spells its metric names, and what it
    /// does not serve is substituted or left out, saying so ([`engine_notes`]).
    pub engine: inferscale_catalog::Engine,
    /// Where KEDA queries Prometheus.
    pub prometheus_url: String,
    /// Label the Prometheus operator selects rules and monitors by (kube-prometheus-stack's
    /// `release` label).
    pub prometheus_release: String,
    /// Replicas at least.
    pub min_replicas: u32,
    /// Replicas at most.
    pub max_replicas: u32,
    /// The p95 end-to-end SLO (seconds) the HighLatency alert pages on.
    pub slo_p95_e2e_s: f64,
    /// How long a new replica takes to serve (scheduling, a new node when it needs one, image,
    /// weights, warm-up), seconds.
    pub cold_start_s: u32,
    /// `--max-model-len` to set (sized from the workload when not given).
    pub max_model_len: u32,
    /// The image that runs `inferscale warmup`.
    pub inferscale_image: String,
    /// Where the runbooks live (`runbook_url` annotations), if anywhere.
    pub runbook_url: Option<String>,
    /// The GPU nodes the replicas run on (`karpenter-nodepool.yaml`).
    pub nodes: NodeOptions,
    /// Where the ScaledObject's values come from.
    pub scaler: ScalerKind,
    /// The scaling policy the ScaledObject is written from (`None`: the seeds' shape, queue
    /// depth primary).
    pub policy: Option<inferscale_analysis::scaling::Policy>,
}

/// The ScaledObject's source of values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScalerKind {
    /// KEDA's Prometheus scaler (the seeds' path): queries of what Prometheus scraped.
    #[default]
    Prometheus,
    /// `inferscale scaler` through KEDA's `external` trigger: the pods read directly
    /// (`scaler.yaml` is written beside the ScaledObject).
    External,
}

/// The GPU nodes Karpenter provisions for the replicas: what `karpenter-nodepool.yaml` asks
/// for, and what the README (and a rehearsal of the autoscaling) assume about nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOptions {
    /// The GPU, as Karpenter's `karpenter.k8s.aws/instance-gpu-name` label spells it
    /// (lowercase: `l40s`, `a10g`, `l4`, `h100`).
    pub gpu_name: String,
    /// GPUs on each node (`karpenter.k8s.aws/instance-gpu-count`).
    pub gpus_per_node: u32,
    /// GPUs each vLLM replica requests (`nvidia.com/gpu`: its tensor-parallel size).
    pub gpus_per_replica: u32,
    /// `karpenter.sh/capacity-type` values the pool may launch: `on-demand`, `spot`,
    /// `reserved`.
    pub capacity_types: Vec<String>,
    /// Of the cold start, the seconds a replica that needs a new node waits for it (NodeClaim
    /// created to Node ready with its GPUs allocatable). A replica placed on a node that is
    /// already up skips them.
    pub provisioning_s: u32,
    /// The root volume's size, GiB: the OS, the vLLM image and the model's weights.
    pub root_volume_gib: u32,
}

impl Default for NodeOptions {
    /// The seeds' nodes: one L40S each (g6e), one GPU per replica, on-demand capacity, about
    /// three minutes from a pending pod to a ready GPU node, a 200 GiB root volume.
    fn default() -> Self {
        NodeOptions {
            gpu_name: "l40s".into(),
            gpus_per_node: 1,
            gpus_per_replica: 1,
            capacity_types: vec!["on-demand".into()],
            provisioning_s: 180,
            root_volume_gib: 200,
        }
    }
}

impl Options {
    /// The model's series in the namespace, in the engine's names: by the model's label
    /// where the engine has one, else by the Service's `job` (the engine serves one model
    /// and labels nothing).
    pub fn sel(&self) -> promql::Sel {
        match self.engine.model_label() {
            Some(_) => promql::Sel::model(self.engine, &self.namespace, &self.model_name),
            None => promql::Sel::exact(&[("namespace", &self.namespace), ("job", &self.service)])
                .of(self.engine),
        }
    }

    /// The label that tells this model's series apart, and its value: the engine's model
    /// label, or the Service's `job` for an engine that labels nothing.
    pub fn model_match(&self) -> (&'static str, &str) {
        match self.engine.model_label() {
            Some(k) => (k, &self.model_name),
            None => ("job", &self.service),
        }
    }

    /// The seeds' deployment (Ministral 3 8B, one replica at least, five at most, a 5 s p95
    /// SLO) in namespace `llm`, with kube-prometheus-stack's names: what the examples, the
    /// snapshot tests and the PromQL agreement tests generate for.
    pub fn example() -> Options {
        Options {
            namespace: "llm".into(),
            deployment: "vllm".into(),
            container: "vllm".into(),
            container_index: 0,
            service: "vllm".into(),
            service_port: ("http".into(), 8000),
            model_name: "mistralai/Ministral-3-8B-Instruct-2512".into(),
            engine: inferscale_catalog::Engine::Vllm,
            prometheus_url: "http://kube-prometheus-stack-prometheus.monitoring.svc:9090".into(),
            prometheus_release: "kube-prometheus-stack".into(),
            min_replicas: 1,
            max_replicas: 5,
            slo_p95_e2e_s: 5.0,
            cold_start_s: 300,
            max_model_len: 0,
            inferscale_image: "ghcr.io/inferscale/inferscale:0.1.0".into(),
            runbook_url: None,
            nodes: NodeOptions::default(),
            scaler: ScalerKind::Prometheus,
            policy: None,
        }
    }
}

/// One generated file.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    /// Path relative to the output folder.
    pub path: String,
    /// Contents.
    pub contents: String,
}

/// Why nothing was generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// A name Kubernetes would refuse, and the flag it came from.
    #[error("--{flag}: {error}")]
    Name {
        /// The flag, without dashes.
        flag: &'static str,
        /// What is wrong with it.
        error: validate::NameError,
    },
    /// A load Job with no workers, or more than it may have.
    #[error(
        "--workers {workers}: a load Job has 1 to {} workers",
        loadjob::MAX_WORKERS
    )]
    Workers {
        /// As given.
        workers: u32,
    },
    /// `--min-replicas 0`.
    #[error(
        "--min-replicas must be at least 1 (a model takes minutes to load; scale-to-zero needs a queue outside vLLM to wake it)"
    )]
    MinReplicas,
    /// `--max-replicas` below `--min-replicas`.
    #[error("--max-replicas ({max}) is below --min-replicas ({min})")]
    ReplicaRange {
        /// `--min-replicas`.
        min: u32,
        /// `--max-replicas`.
        max: u32,
    },
    /// An SLO outside what the engine's latency histogram can resolve.
    #[error(
        "--slo-p95-e2e must be above {floor} s{} and at most 10 minutes, not {seconds} s",
        if *floor > 0.0 { " (the first bucket of the engine's latency histogram)" } else { "" }
    )]
    Slo {
        /// What was given.
        seconds: f64,
        /// The lowest it may be (exclusive).
        floor: f64,
    },
    /// Not an http(s) URL.
    #[error("--prometheus-url {url:?} is not an http(s) URL")]
    PrometheusUrl {
        /// What was given.
        url: String,
    },
    /// `--model-name ''`.
    #[error("--model-name must not be empty")]
    EmptyModelName,
    /// A value Kubernetes would refuse where it goes.
    #[error("--{flag} {value:?}: {why}")]
    Value {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: String,
        /// What it must be.
        why: String,
    },
    /// A `--max-model-len` the measured requests do not fit in.
    #[error(
        "--max-model-len {given} is shorter than the longest measured request ({need} tokens: prompt plus max_tokens); give at least {need}, or leave it out to size it from the run"
    )]
    MaxModelLen {
        /// What was given.
        given: u32,
        /// The longest request, tokens.
        need: u32,
    },
    /// A generated query is not valid PromQL (a generator bug).
    #[error("{path} carries a query that does not parse")]
    Query {
        /// The file.
        path: String,
        /// The query and why.
        #[source]
        source: inferscale_promql::ParseError,
    },
    /// A generated JSON file does not parse (a generator bug).
    #[error("{path} is not valid JSON")]
    Json {
        /// The file.
        path: String,
        /// Where it breaks.
        #[source]
        source: serde_json::Error,
    },
    /// A generated YAML file does not parse (a generator bug).
    #[error("{path} is not valid YAML")]
    Yaml {
        /// The file.
        path: String,
        /// Where it breaks (boxed: the parser's error is large).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// A generated object fails its schema or KEDA's/the HPA's rules (a generator bug, or
    /// options that make an object Kubernetes would refuse).
    #[error("{path} does not validate:\n  {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Invalid {
        /// The file.
        path: String,
        /// Each problem, with its field path.
        problems: Vec<validate::Finding>,
    },
    /// A generated object could not be written (a generator bug).
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: yaml::ExplainError,
    },
}

/// The header every generated file starts with.
pub fn header(t: &Thresholds, what: &str) -> String {
    format!(
        "{what}\nGenerated by inferscale {} from thresholds.json (run of {} against {}, model {}).\nSaturation: {} req/s sustained, {} not; capacity ≈ {} req/s per replica.",
        env!("CARGO_PKG_VERSION"),
        t.source.started_at,
        t.source.url,
        t.source.model,
        t.saturation_rps.map_or("-".into(), |v| format!("{v}")),
        t.first_saturated_rps.map_or("-".into(), |v| format!("{v}")),
        t.capacity_rps.map_or("-".into(), |v| format!("{v:.1}")),
    )
}

/// Checks the options (names are RFC 1123, counts make sense).
pub fn check(o: &Options) -> Result<(), GenerateError> {
    use validate::{rfc1123_label, rfc1123_subdomain};
    let name = |flag: &'static str| move |error| GenerateError::Name { flag, error };
    rfc1123_label(&o.namespace).map_err(name("namespace"))?;
    rfc1123_subdomain(&o.deployment).map_err(name("deployment"))?;
    rfc1123_label(&o.service).map_err(name("service"))?;
    rfc1123_label(&o.container).map_err(name("container"))?;
    if o.min_replicas < 1 {
        return Err(GenerateError::MinReplicas);
    }
    if o.max_replicas < o.min_replicas {
        return Err(GenerateError::ReplicaRange {
            min: o.min_replicas,
            max: o.max_replicas,
        });
    }
    // The floor is the first bucket of a latency histogram; an engine without one (llama.cpp:
    // the mean by Little's law) has none.
    let floor = if o.engine.serves(inferscale_catalog::Signal::E2eLatency) {
        0.3
    } else {
        0.0
    };
    if !(o.slo_p95_e2e_s.is_finite() && o.slo_p95_e2e_s > floor && o.slo_p95_e2e_s <= 600.0) {
        return Err(GenerateError::Slo {
            seconds: o.slo_p95_e2e_s,
            floor,
        });
    }
    if !(o.prometheus_url.starts_with("http://") || o.prometheus_url.starts_with("https://")) {
        return Err(GenerateError::PrometheusUrl {
            url: o.prometheus_url.clone(),
        });
    }
    if o.model_name.is_empty() {
        return Err(GenerateError::EmptyModelName);
    }
    label_value("prometheus-release", &o.prometheus_release)?;
    service_port_name("service-port", &o.service_port.0)?;
    if o.service_port.1 == 0 {
        return Err(GenerateError::Value {
            flag: "service-port",
            value: "0".into(),
            why: "a port is a number from 1 to 65535".into(),
        });
    }
    if o.inferscale_image.is_empty() || o.inferscale_image.chars().any(char::is_whitespace) {
        return Err(GenerateError::Value {
            flag: "inferscale-image",
            value: o.inferscale_image.clone(),
            why: "an image reference is not empty and has no spaces (e.g. ghcr.io/inferscale/inferscale:0.1.0)".into(),
        });
    }
    if o.container_index > MAX_CONTAINER_INDEX {
        return Err(GenerateError::Value {
            flag: "container-index",
            value: o.container_index.to_string(),
            why: format!("a pod's container position is at most {MAX_CONTAINER_INDEX}"),
        });
    }
    if o.max_replicas > MAX_REPLICAS {
        return Err(GenerateError::Value {
            flag: "max-replicas",
            value: o.max_replicas.to_string(),
            why: format!("at most {MAX_REPLICAS} replicas"),
        });
    }
    karpenter::check(o)
}

/// The highest `--container-index` taken (a vLLM pod has a handful of containers).
pub const MAX_CONTAINER_INDEX: u32 = 99;

/// The most replicas a generated ScaledObject may ask for.
pub const MAX_REPLICAS: u32 = 10_000;

/// A Kubernetes label value: at most 63 characters of `[A-Za-z0-9._-]`, beginning and ending
/// with a letter or digit (or empty).
/// `flag` names the value in the error.
fn label_value(flag: &'static str, v: &str) -> Result<(), GenerateError> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let refuse = |why: String| GenerateError::Value {
        flag,
        value: v.to_owned(),
        why,
    };
    if v.len() > 63 {
        return Err(refuse(format!(
            "a label value is at most 63 characters, this has {}",
            v.len()
        )));
    }
    if !v.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.')) {
        return Err(refuse(
            "a label value holds only letters, digits, '-', '_' and '.'".into(),
        ));
    }
    if !(v.is_empty() || v.starts_with(alnum) && v.ends_with(alnum)) {
        return Err(refuse(
            "a label value begins and ends with a letter or digit".into(),
        ));
    }
    Ok(())
}

/// A Service port name (IANA_SVC_NAME): 1–15 lowercase letters, digits and '-', with a
/// letter, no '-' at either end and no "--". `flag` names the value in the error.
fn service_port_name(flag: &'static str, v: &str) -> Result<(), GenerateError> {
    let ok = !v.is_empty()
        && v.len() <= 15
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && v.chars().any(|c| c.is_ascii_lowercase())
        && !v.starts_with('-')
        && !v.ends_with('-')
        && !v.contains("--");
    if ok {
        Ok(())
    } else {
        Err(GenerateError::Value {
            flag,
            value: v.to_owned(),
            why: "a port name is 1 to 15 lowercase letters, digits and '-' with at least one letter (e.g. http)".into(),
        })
    }
}

/// Every PromQL query in a parsed manifest or dashboard: the strings under `expr` and `query`
/// keys (a rule's `expr`, a ScaledObject trigger's `metadata.query`, a Grafana target's
/// `expr`), outside Grafana's `templating` (whose queries are Grafana's `label_values(…)`, not
/// PromQL). Grafana's variables are left in.
pub fn queries_in(v: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        _ if k == "templating" => {}
                        serde_json::Value::String(s) if k == "expr" || k == "query" => {
                            out.push(s.clone())
                        }
                        _ => walk(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

/// A query with Grafana's interval variables replaced by a duration, as Grafana sends it.
pub fn with_grafana_intervals(q: &str, interval: &str) -> String {
    let vars: Vec<(String, String)> = GRAFANA_INTERVALS
        .iter()
        .map(|v| ((*v).to_owned(), interval.to_owned()))
        .collect();
    with_variables(q, &vars)
}

/// Grafana's built-in interval variables.
pub const GRAFANA_INTERVALS: [&str; 3] = ["__rate_interval", "__interval", "__range"];

/// A query with dashboard variables replaced, as Grafana writes them: `$name`, `${name}`,
/// `${name:format}` and `[[name]]`. A variable not in `vars` is left as it was.
///
/// ```
/// use inferscale_manifests::with_variables;
/// let vars = [("model".to_owned(), "m".to_owned())];
/// assert_eq!(
///     with_variables("x{model=\"$model\", y=\"$model_name\"} + ${model}", &vars),
///     "x{model=\"m\", y=\"$model_name\"} + m"
/// );
/// ```
pub fn with_variables(q: &str, vars: &[(String, String)]) -> String {
    scan_variables(q, |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

/// The dashboard variables a query still refers to, in order (`$model`, `${node}`,
/// `[[x]]`; not `$1` nor a regex's `$`).
///
/// ```
/// let left = inferscale_manifests::variables_in("rate(x{a=~\"$model\", b=\"^c$\"}[${w}]) + $1");
/// assert_eq!(left, ["model", "w"]);
/// ```
pub fn variables_in(q: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    scan_variables(q, |name| {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        None
    });
    out
}

/// Walks the variable references of `q` (`$name`, `${name}`, `${name:format}`, `[[name]]`),
/// replacing each for which `value` gives a value.
fn scan_variables(q: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    let ident = |s: &str| {
        let starts = s
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if starts {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len())
        } else {
            0
        }
    };
    let mut out = String::with_capacity(q.len());
    let mut rest = q;
    while let Some(i) = rest.find(['$', '[']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        // (the variable's name, how much of `tail` its reference spans)
        let found = if let Some(braced) = tail.strip_prefix("${") {
            braced.find('}').map(|end| {
                let name = braced[..end].split(':').next().unwrap_or("");
                (name, end + 3)
            })
        } else if let Some(bracketed) = tail.strip_prefix("[[") {
            bracketed.find("]]").map(|end| (&bracketed[..end], end + 4))
        } else if let Some(bare) = tail.strip_prefix('$') {
            let n = ident(bare);
            (n > 0).then(|| (&bare[..n], n + 1))
        } else {
            None
        };
        match found
            .filter(|(name, _)| ident(name) == name.len() && !name.is_empty())
            .and_then(|(name, len)| Some((value(name)?, len)))
        {
            Some((v, len)) => {
                out.push_str(&v);
                rest = &tail[len..];
            }
            None => {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every PromQL query in a file's text, in order and without repeats: a Grafana dashboard
/// (JSON) or YAML documents separated by `---` (ScaledObjects, PrometheusRules, rule files,
/// whatever else carries `expr` or `query`; see [`queries_in`]).
pub fn queries_in_text(text: &str) -> Result<Vec<String>, serde_saphyr::Error> {
    let docs: Vec<serde_json::Value> = match serde_json::from_str(text) {
        Ok(v) => vec![v],
        Err(_) => yaml_documents(text)
            .into_iter()
            .map(yaml::from_str)
            .collect::<Result<_, _>>()?,
    };
    let mut out: Vec<String> = Vec::new();
    for q in docs.iter().flat_map(queries_in) {
        if !out.contains(&q) {
            out.push(q);
        }
    }
    Ok(out)
}

/// The documents of a YAML stream that hold something (not only comments and blank lines),
/// split at `---` and `...` lines: `karpenter-nodepool.yaml`'s NodePool and EC2NodeClass, a
/// user's file of several objects.
///
/// ```
/// let docs = inferscale_manifests::yaml_documents("# a\nkind: A\n---\n# only a comment\n---\nkind: B\n");
/// assert_eq!(docs, ["# a\nkind: A\n", "kind: B\n"]);
/// ```
pub fn yaml_documents(text: &str) -> Vec<&str> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if l == "---" || l.starts_with("--- ") || l == "..." {
            docs.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    docs.push(&text[start..]);
    docs.retain(|d| {
        d.lines().any(|l| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        })
    });
    docs
}

/// Every query of a generated file parses as PromQL.
fn check_queries(path: &str, doc: &serde_json::Value) -> Result<(), GenerateError> {
    for q in queries_in(doc) {
        inferscale_promql::Query::parse(&with_grafana_intervals(&q, "1m")).map_err(|source| {
            GenerateError::Query {
                path: path.to_owned(),
                source,
            }
        })?;
    }
    Ok(())
}

/// A typed object's text, or which file could not be written.
fn written(path: &str, text: Result<String, yaml::ExplainError>) -> Result<String, GenerateError> {
    text.map_err(|source| GenerateError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Every file, in the order the README lists them. Each Kubernetes object is validated (CRD
/// schemas, KEDA/HPA rules); a generator bug is an error here, not a surprise at apply time.
pub fn generate(t: &Thresholds, o: &Options) -> Result<Vec<File>, GenerateError> {
    check(o)?;
    let need = k8s::longest_request(t).ceil().min(f64::from(u32::MAX)) as u32;
    if o.max_model_len > 0 && o.max_model_len < need {
        return Err(GenerateError::MaxModelLen {
            given: o.max_model_len,
            need,
        });
    }
    let rules = rules::Rules::new(t, o);
    let mut files = vec![
        File {
            path: "scaledobject.yaml".into(),
            contents: written("scaledobject.yaml", keda::for_options(t, o).to_yaml())?,
        },
        File {
            path: "prometheusrule.yaml".into(),
            contents: written("prometheusrule.yaml", rules.prometheus_rule().to_yaml())?,
        },
        File {
            path: "prometheus-rules.yaml".into(),
            contents: written("prometheus-rules.yaml", rules.rule_file().to_yaml())?,
        },
        File {
            path: "prometheusrule.test.yaml".into(),
            contents: rules.tests(),
        },
        File {
            path: "servicemonitor.yaml".into(),
            contents: written("servicemonitor.yaml", k8s::service_monitor(t, o).to_yaml())?,
        },
        File {
            path: "dcgm-servicemonitor.yaml".into(),
            contents: written(
                "dcgm-servicemonitor.yaml",
                k8s::dcgm_service_monitor(t, o).to_yaml(),
            )?,
        },
        File {
            path: "vllm-deployment-patch.yaml".into(),
            contents: written(
                "vllm-deployment-patch.yaml",
                k8s::deployment_patch(t, o).to_yaml(),
            )?,
        },
        File {
            path: "warmup-job.yaml".into(),
            contents: written("warmup-job.yaml", k8s::warmup_job(t, o).to_yaml())?,
        },
        File {
            path: "karpenter-nodepool.yaml".into(),
            contents: written("karpenter-nodepool.yaml", karpenter::node_pool_file(t, o))?,
        },
    ];
    if o.engine == inferscale_catalog::Engine::Vllm {
        let at = files.len() - 2;
        files.insert(
            at,
            File {
                path: "vllm-args-patch.yaml".into(),
                contents: written("vllm-args-patch.yaml", k8s::args_patch(t, o).to_yaml())?,
            },
        );
    }
    if o.scaler == ScalerKind::External {
        files.push(File {
            path: "scaler.yaml".into(),
            contents: written("scaler.yaml", scaler::scaler_file(t, o))?,
        });
    }
    for (name, json) in grafana::dashboards(t, o) {
        files.push(File {
            path: format!("grafana/{name}"),
            contents: json,
        });
    }
    files.push(File {
        path: "README.md".into(),
        contents: readme::readme(t, o, &rules),
    });
    check_files(&files)?;
    Ok(files)
}

/// What the files do differently because the engine does not serve a signal the method
/// reads, in words (empty for vLLM): each a substitute or a leaving-out, never a query that
/// could only return nothing.
pub fn engine_notes(o: &Options) -> Vec<String> {
    use inferscale_catalog::Signal;
    let (e, sel) = (o.engine, o.sel());
    let mut notes = Vec::new();
    let queue = inferscale_catalog::names_of(e, Signal::QueueDepth)
        .map(|n| n.name)
        .next()
        .unwrap_or_default();
    if !sel.serves(Signal::QueueTime) {
        notes.push(format!(
            "scaledobject.yaml has no queue-time guardrail: {} serves no queue-time histogram; its queue ({queue}) is read directly by the queue trigger",
            e.title()
        ));
    }
    if !sel.serves(Signal::E2eLatency) {
        notes.push(format!(
            "the service dashboard and HighLatency read the mean end-to-end latency by Little's law (in flight over finishing): {} serves no latency histogram",
            e.title()
        ));
    }
    for (s, what) in [
        (Signal::Ttft, "time-to-first-token panel"),
        (Signal::Tpot, "time-per-output-token panel"),
        (Signal::KvCacheUsage, "KV-cache panel and KVCacheFull"),
        (Signal::Preemptions, "preemption panel and PreemptionSpike"),
        (Signal::IterationTokens, "tokens-per-step panel"),
    ] {
        if !sel.serves(s) {
            notes.push(format!("no {what}: {} serves no {}", e.title(), s.label()));
        }
    }
    if e != inferscale_catalog::Engine::Vllm {
        notes.push(format!(
            "no vllm-args-patch.yaml: its flags (--gpu-memory-utilization, --max-model-len) are vLLM's; size {}'s memory and context with its own flags",
            e.title()
        ));
        notes.push(format!(
            "no error-ratio or finish-reason panels and no VLLMHighErrorRate: those read vLLM's HTTP and finish-reason counters, which {} does not serve",
            e.title()
        ));
    }
    notes
}

/// Checks generated files before they are written: JSON parses and its queries are PromQL;
/// each YAML object validates (schemas, KEDA/HPA/Karpenter rules).
pub(crate) fn check_files(files: &[File]) -> Result<(), GenerateError> {
    for f in files {
        if f.path.ends_with(".json") {
            let doc = serde_json::from_str::<serde_json::Value>(&f.contents).map_err(|source| {
                GenerateError::Json {
                    path: f.path.clone(),
                    source,
                }
            })?;
            check_queries(&f.path, &doc)?;
            continue;
        }
        if !f.path.ends_with(".yaml") {
            continue;
        }
        // A file may hold several objects (the NodePool and its EC2NodeClass): each is checked,
        // and named by its position and kind when it fails.
        let docs = yaml_documents(&f.contents);
        for (k, text) in docs.iter().enumerate() {
            let doc: serde_json::Value =
                yaml::from_str(text).map_err(|source| GenerateError::Yaml {
                    path: f.path.clone(),
                    source: Box::new(source),
                })?;
            check_queries(&f.path, &doc)?;
            // Patches and promtool files are not objects; the rest are.
            if doc.get("apiVersion").is_none() {
                continue;
            }
            let problems = validate::object(&doc);
            if !problems.is_empty() {
                let path = if docs.len() > 1 {
                    format!(
                        "{} (document {}, {})",
                        f.path,
                        k + 1,
                        doc["kind"].as_str().unwrap_or("?")
                    )
                } else {
                    f.path.clone()
                };
                return Err(GenerateError::Invalid { path, problems });
            }
        }
    }
    Ok(())
}
