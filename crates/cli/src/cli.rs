//! The command line as clap sees it. Flags are resolved into library configurations in each
//! command's module, not here.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::units::{parse_duration, parse_rate, parse_size, parse_speed};

/// Measure, monitor and autoscale LLM inference deployments.
#[derive(Debug, Parser)]
#[command(
    name = "inferscale",
    version,
    about = "Measure, monitor and autoscale LLM inference deployments (vLLM and other OpenAI-compatible engines)",
    after_help = crate::exit::TABLE
)]
pub(crate) struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The image the generated manifests name unless `--inferscale-image` says otherwise.
pub(crate) const DEFAULT_IMAGE: &str = "ghcr.io/inferscale/inferscale:0.1.0";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// One look at the three metric tiers of live endpoints or saved expositions.
    Scrape(ScrapeArgs),
    /// Serve a simulated vLLM server (OpenAI API, /metrics, DCGM metrics) on a performance model.
    Sim(Box<SimArgs>),
    /// Warm a server up with sequential requests and show the cold-start cost.
    Warmup(WarmupArgs),
    /// Load a server step by step at constant arrival rates and write run.json.
    Load(Box<LoadArgs>),
    /// Find the saturation point and the scaling thresholds in a run.json; write the report.
    Analyze(AnalyzeArgs),
    /// Join the run.json parts of a split load (`load --segment I/N`) into one run.json, as if
    /// one client had sent everything; judge --threshold on the whole.
    Merge(MergeArgs),
    /// The main job: warm-up, stepped load, analysis and report (on the embedded simulator
    /// unless --url is given).
    Run(Box<RunArgs>),
    /// Write KEDA, alerting, dashboard and Deployment configuration from thresholds.json.
    Generate(Box<GenerateArgs>),
    /// Rehearse a ScaledObject before deploying it: traffic against simulated replicas under
    /// the HPA, KEDA, Prometheus and Karpenter, in virtual time.
    Rehearse(Box<RehearseArgs>),
    /// Search the scaling policy in the rehearsal over a traffic suite: the cheapest that holds
    /// the SLO with no flap at steady load, the Pareto front, and what cannot be held.
    Tune(Box<TuneArgs>),
    /// Serve KEDA's external-scaler gRPC (and a metrics-api JSON) from the pods' own /metrics:
    /// queue depth, latency percentiles, or the replica count with a latency guardrail.
    Scaler(ScalerArgs),
    /// Evaluate PromQL over live /metrics endpoints, with no Prometheus: scrape them for a
    /// while, then print each expression's result.
    Query(QueryArgs),
    /// The three metric tiers and the alert rules' states, live in the terminal: from the
    /// pods' /metrics directly or from a Prometheus.
    Monitor(Box<MonitorArgs>),
    /// The production-readiness checklist (the seeds' eleven checks and more) against the
    /// server, its Prometheus, the manifests and an inferscale run's folder.
    Check(Box<CheckArgs>),
    /// Predict throughput, latency and capacity of a GPU, model and load from the engine
    /// model in virtual time; compare GPUs by replicas and cost at an SLO.
    Predict(Box<PredictArgs>),
    /// Predict every case of a CSV of published measurements and report the error.
    Fidelity(Box<FidelityArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to standard output.
    #[command(after_help = "\
Examples:
  inferscale completions bash > /etc/bash_completion.d/inferscale
  inferscale completions zsh > \"${fpath[1]}/_inferscale\"
  inferscale completions fish > ~/.config/fish/completions/inferscale.fish")]
    Completions(CompletionsArgs),
    /// Print the manual page (roff) to standard output: `inferscale man | man -l -`.
    Man,
}

/// `inferscale completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// Credentials for the server (shared by `warmup`, `load` and `run`). Never on the command
/// line: from the environment or files.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AuthArgs {
    /// A file holding the server's API key (vLLM's `--api-key`), sent as `Authorization:
    /// Bearer`. Default: the OPENAI_API_KEY environment variable, when set. A key is never
    /// taken on the command line and never written to run.json, a report or a log.
    #[arg(long, value_name = "PATH")]
    pub(crate) api_key_file: Option<std::path::PathBuf>,
    /// A file of extra headers a gateway wants, one `Name: value` per line (`#` comments);
    /// their values are treated as secrets.
    #[arg(long, value_name = "PATH")]
    pub(crate) header_file: Option<std::path::PathBuf>,
    /// How an https server's certificate is checked.
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

/// How an https server's certificate is checked (shared by every command that reads a
/// server).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct TlsArgs {
    /// For https: trust the CA certificates in this PEM file instead of the public roots.
    #[arg(long, value_name = "PATH")]
    pub(crate) ca_file: Option<std::path::PathBuf>,
    /// For https: do not check the server's certificate at all (said in the output).
    #[arg(long, conflicts_with = "ca_file")]
    pub(crate) insecure: bool,
}

/// How a metrics endpoint is read (shared by `scrape` and `query`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ScrapeAccessArgs {
    /// Refuse bodies larger than this.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub(crate) max_body: usize,
    /// A file holding a bearer token sent with every scrape (as Prometheus' scrape config
    /// takes `bearer_token_file`); never on the command line.
    #[arg(long, value_name = "PATH")]
    pub(crate) bearer_token_file: Option<std::path::PathBuf>,
    /// How an https server's certificate is checked.
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

/// The names a cluster has (shared by `generate` and `run`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ClusterArgs {
    /// Namespace of the vLLM Deployment.
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub(crate) namespace: String,
    /// The vLLM Deployment.
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub(crate) deployment: String,
    /// The vLLM container in it.
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub(crate) container: String,
    /// Its position among the pod's containers (for the JSON args patch).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) container_index: u32,
    /// The Service in front of it (default: the Deployment's name).
    #[arg(long, value_name = "NAME")]
    pub(crate) service: Option<String>,
    /// The Service's port: NAME:NUMBER.
    #[arg(long, value_name = "NAME:PORT", default_value = "http:8000")]
    pub(crate) service_port: String,
    /// vLLM's model_name label, i.e. --served-model-name (default: the measured model).
    #[arg(long, value_name = "NAME")]
    pub(crate) model_name: Option<String>,
    /// The engine the Deployment runs, whose metric names every query, rule and panel
    /// spells (default: the one the measured server's /metrics showed; vllm for thresholds
    /// written before engines were told apart). What an engine does not serve (llama.cpp
    /// has no latency histograms) is substituted or left out, and the README says which.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub(crate) engine: Option<EngineArg>,
    /// Where KEDA reaches Prometheus.
    #[arg(
        long,
        value_name = "URL",
        default_value = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    )]
    pub(crate) prometheus_url: String,
    /// The `release` label Prometheus selects rules and monitors by.
    #[arg(long, value_name = "NAME", default_value = "kube-prometheus-stack")]
    pub(crate) prometheus_release: String,
    /// Replicas at least.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) min_replicas: u32,
    /// Replicas at most (default: what the peak needs plus one, or 5).
    #[arg(long, value_name = "N")]
    pub(crate) max_replicas: Option<u32>,
    /// The p95 end-to-end latency SLO the HighLatency alert pages on (default: the measured
    /// guardrail).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) slo_p95_e2e: Option<Duration>,
    /// How long a new replica takes to serve on a new node (node, image, weights, warm-up)
    /// [default: for a simulated profile, a node's 3 minutes, a minute for the image and the
    /// profile's load time; else 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) cold_start: Option<Duration>,
    /// --max-model-len to set (default: sized from the measured requests).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_model_len: Option<u32>,
    /// The container image with the inferscale binary (warm-up sidecar and Job); the
    /// repository's Dockerfile builds it (docs/deploy.md).
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_IMAGE)]
    pub(crate) inferscale_image: String,
    /// Base URL of your runbooks (adds runbook_url annotations).
    #[arg(long, value_name = "URL")]
    pub(crate) runbook_url: Option<String>,
    /// Where the ScaledObject's values come from: prometheus (KEDA's Prometheus scaler, the
    /// seeds' path) or external (inferscale scaler reads the pods directly; also writes
    /// scaler.yaml).
    #[arg(long, value_enum, value_name = "KIND", default_value_t = ScalerArg::Prometheus)]
    pub(crate) scaler: ScalerArg,
    /// What the ScaledObject scales by: tuned (the policy `inferscale tune` chose, recorded in
    /// thresholds.json; without one, in-flight derived by rule), in-flight, arrival-rate, or
    /// queue (the seeds' shape: queue depth primary).
    #[arg(long, value_enum, value_name = "SIGNAL", default_value_t = ScaleByArg::Tuned)]
    pub(crate) signal: ScaleByArg,
    /// The deployment sits behind an inference gateway (llm-d's router, its InferencePool
    /// named as --deployment). generate also writes scaledobject-gateway.yaml: the same
    /// replicas and behavior on the gateway's endpoint picker, its flow-control queue, 1 per
    /// pod, and its running requests, per pod by Little's law from the measured capacity
    /// (`inferscale rehearse` rehearses it). tune and run also try scaling on the gateway's
    /// requests in flight and its token backlog (the rehearsal models the picker; not with
    /// --scaler external, which reads the pods), and their rehearsals route as the picker
    /// does: to the pod whose prefix cache holds most of the prompt, unless it is 16 requests
    /// behind the least loaded (without --gateway: at random, as a Service does).
    #[arg(long)]
    pub(crate) gateway: bool,
}

/// `--signal`: what a ScaledObject scales by, which `Primary` (or the seeds' queue shape) its
/// primary trigger reads. Not a `catalog::Signal`, the one thing "signal" names in the code:
/// a metric, whatever the engine calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScaleByArg {
    /// The tuned policy from thresholds.json (in-flight by rule when there is none).
    Tuned,
    /// Requests in flight per pod, at a target by Little's law.
    InFlight,
    /// Requests arriving per second per pod, against the capacity.
    ArrivalRate,
    /// The seeds' shape: waiting requests per pod, a p95 queue-time guardrail.
    Queue,
    /// Requests in flight at an inference gateway's endpoint picker (llm-d's router, its
    /// InferencePool named as --deployment), per pod, at the in-flight target.
    GatewayInFlight,
    /// The gateway's token backlog (uncached prompt tokens dispatched), per pod: the
    /// in-flight target times the measured mean prompt.
    GatewayTokens,
}

/// How the rehearsal's clients behave (`rehearse`, `tune`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ClientArgs {
    /// The clients: openai-sdk (a 600 s timeout, 2 retries with 0.5 s doubling backoff, as
    /// the OpenAI SDKs) or patient (wait forever, never retry: a load test's view).
    #[arg(long, value_enum, value_name = "KIND", default_value_t = ClientArg::OpenaiSdk)]
    pub(crate) client: ClientArg,
    /// The clients' timeout, instead of the kind's.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) client_timeout: Option<Duration>,
    /// The clients' retries after a timeout or a refused connection, instead of the kind's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) client_retries: Option<u32>,
}

/// `--client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ClientArg {
    /// The OpenAI SDKs' defaults.
    OpenaiSdk,
    /// Waits forever, never retries.
    Patient,
}

/// Which replica a rehearsal runs (`rehearse`, `tune`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ReplicaArgs {
    /// The engine profile of every replica (see `inferscale sim --list`) [default: the
    /// profile the thresholds were measured on; for a real server, the replica calibrated
    /// from its measurement; without thresholds, aws-eks-ministral-8b-l40s].
    #[arg(long, value_name = "NAME")]
    pub(crate) profile: Option<String>,
    /// Run the replica calibrated from the thresholds' measurement (its capacity, its latency
    /// per step, its queue past the knee) even for a simulated run.
    #[arg(long, conflicts_with = "profile")]
    pub(crate) measured_replica: bool,
}

/// `--engine`: the inference engines whose metric names are verified against a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EngineArg {
    /// vLLM 0.8 to 0.34 (`vllm:` names; deprecated ones as fallbacks).
    Vllm,
    /// SGLang (`sglang:` names).
    Sglang,
    /// Hugging Face text-generation-inference (`tgi_` names).
    Tgi,
    /// llama.cpp's `llama-server --metrics` (`llamacpp:` names).
    Llamacpp,
}

impl EngineArg {
    /// The catalog's engine.
    pub(crate) fn engine(self) -> inferscale_catalog::Engine {
        match self {
            EngineArg::Vllm => inferscale_catalog::Engine::Vllm,
            EngineArg::Sglang => inferscale_catalog::Engine::Sglang,
            EngineArg::Tgi => inferscale_catalog::Engine::Tgi,
            EngineArg::Llamacpp => inferscale_catalog::Engine::LlamaCpp,
        }
    }
}

/// `sim --engine`: the engines whose `/metrics` the simulator serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SimEngineArg {
    /// vLLM 0.33.
    Vllm,
    /// llama.cpp's llama-server.
    Llamacpp,
}

/// `--scaler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScalerArg {
    /// KEDA's Prometheus scaler on queries of what Prometheus scraped.
    Prometheus,
    /// KEDA's external trigger on `inferscale scaler`.
    External,
}

/// `inferscale generate`.
#[derive(Debug, Args)]
#[command(after_help = "\
Writes into --out:
  scaledobject.yaml            KEDA: queue depth per pod (primary), p95 queue-time guardrail
                               (--scaler external: one external trigger on inferscale scaler)
  scaler.yaml                  with --scaler external: the scaler's Deployment, Service,
                               ServiceAccount, and a Role that may only list/watch EndpointSlices
  prometheusrule.yaml          the seeds' five alerts and four more, thresholds from the run
  prometheus-rules.yaml        the same rules as a plain Prometheus rule file
  prometheusrule.test.yaml     promtool unit tests: each alert fires, and stays quiet
  grafana/*.json               dashboards: service SLIs, vLLM engine, GPUs (DCGM)
  servicemonitor.yaml          Prometheus scrapes vLLM
  dcgm-servicemonitor.yaml     ... and the DCGM exporter
  vllm-deployment-patch.yaml   warm-up before ready, do-not-disrupt, drain on stop
  vllm-args-patch.yaml         --gpu-memory-utilization 0.85, --max-model-len sized
  warmup-job.yaml              a Job that warms the Service after a rollout
  karpenter-nodepool.yaml      a GPU NodePool (taint, consolidateAfter) and an EC2NodeClass
  README.md                    what to apply in which order; where each number comes from
Every Kubernetes object is validated against the KEDA, prometheus-operator and Karpenter CRD
schemas and KEDA's, Karpenter's and the HPA's rules before anything is written. Rehearse the
ScaledObject before applying it: `inferscale rehearse --scaledobject DIR/scaledobject.yaml`.

With --load-job, writes instead a split load for several client pods (no thresholds needed):
  load-job.yaml                an Indexed Job: pod I runs `inferscale load --segment I/N` of
                               one shared schedule from one --start-at, non-root, read-only
                               root filesystem, and prints its part to its log
  load-job.sh                  creates the Job with a fresh start, waits, and merges the
                               parts from the pods' logs (`inferscale merge -`) into run.json
The flags after `--` are the workers' `inferscale load` flags (the plan and the requests);
the Job sets --url (the Service), --segment, --start-at, --out and --warmup 0.

Examples:
  inferscale generate --thresholds inferscale-out/thresholds.json --out k8s/
  inferscale generate --thresholds t.json --namespace llm --deployment vllm-ministral \\
      --service vllm-svc --model-name ministral --max-replicas 8 --slo-p95-e2e 5s
  inferscale generate --load-job --workers 8 --namespace llm --out load/ \\
      -- --rates 100,200,400 --step 2m --max-tokens 256

Exit codes: 0 written; 2 a missing or malformed thresholds.json, a bad name, or bad load flags.")]
pub(crate) struct GenerateArgs {
    /// The thresholds.json written by `inferscale analyze` or `inferscale run`.
    #[arg(long, value_name = "FILE", required_unless_present = "load_job")]
    pub(crate) thresholds: Option<std::path::PathBuf>,
    /// Write the load Job (load-job.yaml, load-job.sh) instead of the production
    /// configuration.
    #[arg(long, conflicts_with = "thresholds")]
    pub(crate) load_job: bool,
    /// The load Job's workers (pods), each sending 1/N of the schedule [default: 4].
    #[arg(long, value_name = "N")]
    pub(crate) workers: Option<u32>,
    /// The shared start written into load-job.yaml, RFC 3339 or Unix seconds (load-job.sh
    /// replaces it by a fresh one; default: ten minutes from now).
    #[arg(long, value_name = "TIME")]
    pub(crate) start_at: Option<String>,
    /// CPU each worker requests, no limit set: throttling shows as schedule lag [default: 2].
    #[arg(long, value_name = "CPU")]
    pub(crate) worker_cpu: Option<String>,
    /// The Secret (and key, default api-key) holding the API key, given to the workers as
    /// OPENAI_API_KEY: NAME or NAME:KEY.
    #[arg(long, value_name = "NAME[:KEY]")]
    pub(crate) api_key_secret: Option<String>,
    /// How long the load Job may run, its activeDeadlineSeconds (default: the plan's length
    /// and an hour for scheduling, image pulls and the start's lead).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) deadline: Option<Duration>,
    /// The workers' `inferscale load` flags, after `--`.
    #[arg(last = true, value_name = "LOAD_FLAGS")]
    pub(crate) load_args: Vec<String>,
    /// The output folder.
    #[arg(long, value_name = "DIR", default_value = "manifests")]
    pub(crate) out: std::path::PathBuf,
    /// The cluster's names.
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
}

/// `inferscale analyze`.
#[derive(Debug, Args)]
#[command(after_help = "\
Reads a run.json written by `inferscale load` (or `inferscale run`), judges every step
(did the server keep up with the offered rate; did its queue grow), finds the highest rate
sustained and the first one not, estimates the capacity, and derives the thresholds: queue
depth per pod for scale-out, the p95 latency guardrail, the scale-in condition and KEDA's
activation. The method is in docs/analysis.md.

Writes thresholds.json and report.html (a self-contained page with charts) next to the
run.json, or into --out.

Examples:
  inferscale analyze run.json
  inferscale analyze inferscale-out/run.json --peak-rps 400 --out /tmp/report

Exit codes: 0 done; 1 analysed, but the run was partial (interrupted), client-limited, or gave
no thresholds; 2 the file is missing, truncated, or of another version.")]
pub(crate) struct AnalyzeArgs {
    /// The run.json to analyse.
    #[arg(value_name = "RUN_JSON")]
    pub(crate) run: std::path::PathBuf,
    /// Where to write thresholds.json and report.html (default: the run.json's folder).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<std::path::PathBuf>,
    /// The peak traffic to plan replicas for, req/s.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub(crate) peak_rps: Option<f64>,
    /// What judges a step sustained: queue (the method's: the server kept up, its queue
    /// flat) or goodput:PERCENT (at least that share of the step's requests within the run's
    /// --slo; `goodput` alone is 95). The knee is the highest rate sustained.
    #[arg(long, value_name = "KNEE", default_value = "queue")]
    pub(crate) knee: String,
    /// Another run.json to compare with (the same workload with prefix caching off, on
    /// another release, another setup): the summary and the report say how far the knee
    /// and the capacity moved, and each run's prefix-cache hit rate at its knee.
    #[arg(long, value_name = "RUN_JSON")]
    pub(crate) baseline: Option<std::path::PathBuf>,
    /// Print thresholds.json to stdout instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `inferscale merge`.
#[derive(Debug, Args)]
#[command(after_help = "\
The parts are the run.json files that `inferscale load --segment I/N` wrote, one per worker,
given as files or folders (every *.json in a folder), or `-`: standard input holding a tar
archive of them, or the workers' logs with the parts `load --emit-part` printed (what the
load Job of `generate --load-job` leaves; its load-job.sh pipes them in). Histograms are added bucket by bucket,
so the merged percentiles are those of every request; counts, tokens and rates are summed;
timelines are added second by second; the server's metrics are taken from the part that
scraped them. Each worker's late start and client-limited steps are listed.

Parts of different runs (another plan, target, worker count or run.json version), two parts
of one segment, and parts without histograms are refused, naming the file. A missing part is
refused unless --allow-missing.

Examples:
  inferscale merge parts/ --out run.json
  inferscale merge w0.json w1.json w2.json w3.json --threshold 'p95(e2e)<5s' --out run.json
  kubectl logs -l job-name=vllm-load --tail=-1 | inferscale merge - --out run.json
  tar c parts/ | inferscale merge - --out run.json
  inferscale merge parts/ --prometheus http://prometheus.monitoring.svc:9090 \\
      --selector 'namespace=\"llm\"' --out run.json
  inferscale analyze run.json

Exit codes: 0 merged; 1 merged, but a --threshold was breached or a part is missing; 2 the
parts do not merge.")]
pub(crate) struct MergeArgs {
    /// The parts: run.json files, folders of them, or - for standard input (a tar archive, or
    /// workers' logs with `load --emit-part` parts).
    #[arg(value_name = "PART", required = true)]
    pub(crate) parts: Vec<std::path::PathBuf>,
    /// Where to write the merged run.json.
    #[arg(long, value_name = "FILE", default_value = "run.json")]
    pub(crate) out: std::path::PathBuf,
    /// Merge the parts there are when some are missing (and say which).
    #[arg(long)]
    pub(crate) allow_missing: bool,
    /// A k6-style threshold judged on the merged data (repeatable): p95(e2e)<5s, error_rate<1%.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub(crate) thresholds: Vec<String>,
    /// Take the server's side of each step (queue, running, KV cache, preemptions, server
    /// p95s) from this Prometheus, over the step's window: for workers that ran
    /// --no-metrics behind a Service. Replaces what a part scraped.
    #[arg(long, value_name = "URL")]
    pub(crate) prometheus: Option<String>,
    /// With --prometheus: the label matchers of the engine's series (default: the served
    /// model, model_name="...").
    #[arg(long, value_name = "MATCHERS", requires = "prometheus")]
    pub(crate) selector: Option<String>,
    /// With --prometheus: give up on one query after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// With --prometheus: body cap, token, TLS.
    #[command(flatten)]
    pub(crate) access: ScrapeAccessArgs,
    /// Print the merged run.json to stdout instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `inferscale run`.
#[derive(Debug, Args)]
#[command(after_help = "\
With no --url it starts the embedded simulator (the seeds' deployment: Ministral-3-8B FP8 on
one L40S, vLLM's V1 scheduler, max_num_seqs 128) on 127.0.0.1 and runs the seeds' whole
method in simulated time: 100 sequential warm-up requests, then 10, 20, ..., 70 req/s for 60 s
each with 30 s rests, then the analysis. At the default speed-up of 10 that takes about two
minutes. The report says the numbers are simulated and at what speed-up.

With --url it does the same against a real server in real time (about 14 minutes for the
default plan).

Examples:
  inferscale run                                   # the embedded simulator, ./inferscale-out/
  inferscale run --url http://vllm.default:8000 --peak-rps 300
  inferscale run --profile h100-llama-3.1-8b --rates 20,40,80,120,160 --out h100/

Output: run.json, thresholds.json and report.html in --out.
Exit codes: 0 done; 1 done, but the analysis could not derive thresholds or the run was
partial; 2 usage error or unreachable server; 3 a failure after the measurement (it is kept).")]
pub(crate) struct RunArgs {
    /// The server's base URL (default: start the embedded simulator).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// The served model (default: the server's first).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// First wait up to this long for the server's /health to answer 200 (a server still
    /// loading its model answers 503); without it, a server that is not ready is an error.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "url")]
    pub(crate) wait_ready: Option<Duration>,
    /// The output folder.
    #[arg(long, value_name = "DIR", default_value = "inferscale-out")]
    pub(crate) out: std::path::PathBuf,
    /// The embedded simulator's profile (see `inferscale sim --list`).
    #[arg(long, value_name = "NAME", conflicts_with = "url")]
    pub(crate) profile: Option<String>,
    /// Simulated seconds per wall second (default: 10 for the embedded simulator, 1 with --url).
    #[arg(long, value_name = "K")]
    pub(crate) speedup: Option<f64>,
    /// Offered rates of the steps, req/s (default: 10,20,...,70).
    #[arg(long, value_name = "R,R,...", value_delimiter = ',')]
    pub(crate) rates: Option<Vec<f64>>,
    /// How long each step sends (default: 60s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) step: Option<Duration>,
    /// Pause after each step (default: 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) rest: Option<Duration>,
    /// Sequential warm-up requests first.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(crate) warmup: u32,
    /// Do not stream (the seeds' k6 did not; no TTFT then).
    #[arg(long)]
    pub(crate) no_stream: bool,
    /// The latency SLO a request must meet to count as goodput, any of ttft=, tpot=, e2e=
    /// (ttft=500ms,tpot=50ms,e2e=5s); see `inferscale load --help` for the definitions.
    #[arg(long, value_name = "BOUNDS")]
    pub(crate) slo: Option<String>,
    /// Send this many single-token probe requests per second beside the plan, outside its
    /// in-flight cap and on their own connections: each step reports their time to first
    /// token, the stall a newcomer meets (vllm bench serve's probe stream).
    #[arg(long, value_name = "R")]
    pub(crate) probe_rate: Option<f64>,
    /// What judges a step sustained: queue (the method's: the server kept up, its queue
    /// flat) or goodput:PERCENT (at least that share of the step's requests within the run's
    /// --slo; `goodput` alone is 95). The knee is the highest rate sustained.
    #[arg(long, value_name = "KNEE", default_value = "queue")]
    pub(crate) knee: String,
    /// max_tokens (N or a distribution, as in `inferscale load`).
    #[arg(long, value_name = "LEN")]
    pub(crate) max_tokens: Option<String>,
    /// Synthetic prompts of this many tokens (N or a distribution, as --max-tokens): with
    /// --shape, each prompt's unique part.
    #[arg(long, value_name = "LEN")]
    pub(crate) prompt_tokens: Option<String>,
    /// Prompts that share prefixes, so the server's prefix cache is exercised and each
    /// step reports its hit rate (the server's count beside what the prompts imply):
    /// system-prompt:POOL,TOKENS (one of POOL system prompts first), few-shot:TOKENS (one
    /// preamble for all) or multi-turn:TURNS or multi-turn:TURNS,USERS (conversations whose turns carry the
    /// history; 16 users at once by default). --prompt-tokens is each unique part [default:
    /// 128].
    #[arg(long, value_name = "SHAPE")]
    pub(crate) shape: Option<String>,
    /// Replay a Mooncake-format trace (JSON lines: timestamp ms, input_length,
    /// output_length, hash_ids of 512-token blocks; AIPerf's session_id and delay too): its
    /// schedule replaces the rates, its prompts are regenerated so that equal block ids give
    /// equal text, and each step reports the hit rate they imply beside the server's.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rates", "shape"])]
    pub(crate) trace: Option<std::path::PathBuf>,
    /// When a trace's later turns of a conversation are sent: timestamp (at their own time,
    /// answered or not) or think-time (when the turn before has ended, plus its recorded
    /// delay, or else the gap between the two timestamps). run.json records it.
    #[arg(long, value_name = "RULE", requires = "trace")]
    pub(crate) dispatch: Option<String>,
    /// Replay the trace at these speeds, one step each (2x: twice as fast; 1x,2x,4x for
    /// stepped load from one trace) [default: 1x].
    #[arg(long, value_name = "X,X,...", value_delimiter = ',', value_parser = parse_speed, requires = "trace")]
    pub(crate) speed: Option<Vec<f64>>,
    /// The embedded simulator without prefix caching (vLLM's --no-enable-prefix-caching):
    /// beside a run with it, shows what the cache is worth to a --shape or --trace workload.
    #[arg(long, conflicts_with = "url")]
    pub(crate) no_prefix_caching: bool,
    /// Send the load from N local worker processes, each `inferscale load --segment I/N`
    /// from one shared start, and merge their parts (OUT/parts/) into run.json: the path a
    /// load split across machines takes, on one.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) workers: u32,
    /// The peak traffic to plan replicas for, req/s.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub(crate) peak_rps: Option<f64>,
    /// The cluster's names, for the manifests written into OUT/manifests.
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// Credentials for --url.
    #[command(flatten)]
    pub(crate) auth: AuthArgs,
}

/// The exposition format to assume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// From the Content-Type, else from the text (OpenMetrics ends with `# EOF`).
    Auto,
    /// The Prometheus text format (0.0.4 / 1.0.0).
    Prometheus,
    /// OpenMetrics 1.0 text.
    Openmetrics,
}

/// `inferscale scrape`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale scrape http://127.0.0.1:8000              # a vLLM server (path defaults to /metrics)
  inferscale scrape http://10.0.0.7:8000 http://10.0.0.8:8000 --interval 10s
                                                        # two pods: rates and windowed p95 over 10 s
  inferscale scrape http://node:9400/metrics --json     # a DCGM exporter, as JSON
  curl -s http://127.0.0.1:8000/metrics | inferscale scrape -
  inferscale scrape dump.txt --format openmetrics --strict
                                                        # validate; exit 1 with line and column if invalid

Missing values are shown as '-', never as zero. Each target that cannot be read is reported on
one line and the command exits 2; the others are still shown.")]
pub(crate) struct ScrapeArgs {
    /// URLs (http://host:port[/path]; /metrics when no path), files, or - for standard input.
    #[arg(required = true, value_name = "TARGET")]
    pub(crate) targets: Vec<String>,

    /// Scrape twice this long apart and report rates and windowed percentiles instead of totals.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) interval: Option<Duration>,

    /// Print JSON (documented in docs/formats.md) instead of tables.
    #[arg(long)]
    pub(crate) json: bool,

    /// The exposition format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub(crate) format: FormatArg,

    /// Only validate: check each target strictly against OpenMetrics 1.0 and print the verdict.
    #[arg(long)]
    pub(crate) strict: bool,

    /// Give up on a URL after this long (connection and body together).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// Body cap, token, TLS.
    #[command(flatten)]
    pub(crate) access: ScrapeAccessArgs,
}

/// `inferscale query`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale query 'sum(vllm:num_requests_waiting) or vector(0)' --target http://127.0.0.1:8000
  inferscale query 'histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))' \\
      --target 'http://10.0.0.5:8000/metrics#pod=vllm-0' --target 'http://10.0.0.6:8000/metrics#pod=vllm-1' \\
      --label namespace=llm --for 2m --json
  inferscale query --file out/scaledobject.yaml --file out/prometheusrule.yaml \\
      --target http://127.0.0.1:8000 --label namespace=llm --for 90s
  inferscale query --file vllm-dashboard.json --var model_name=my-model --target http://127.0.0.1:8000

Every target is scraped every --every for --for, as Prometheus would scrape it (its Accept
header, `up`, staleness, labels instance and job=\"inferscale\" plus those given); then each
expression is evaluated once, at the end, with Prometheus' semantics (5-minute lookback, rate
extrapolation). A window of at least two scrape intervals longer than an expression's range
selectors gives rate() the samples it needs. Labels after `#` in a target apply to it alone.

--file takes every query of a ScaledObject, PrometheusRule, rule file or Grafana dashboard (YAML
or JSON): try a ScaledObject before deploying it. Grafana's $__rate_interval, $__interval and
$__range are 1m unless --var sets them; other dashboard variables need --var.

--json prints one object per expression, in order, as Prometheus' /api/v1/query answers, with
the expression added as \"query\".")]
pub(crate) struct QueryArgs {
    /// PromQL expressions (each is checked before anything is scraped).
    #[arg(value_name = "EXPR", required_unless_present = "files")]
    pub(crate) exprs: Vec<String>,

    /// Also every query in this file (repeatable): a ScaledObject, PrometheusRule, rule file
    /// or Grafana dashboard.
    #[arg(long = "file", value_name = "PATH")]
    pub(crate) files: Vec<std::path::PathBuf>,

    /// A dashboard variable `name=value` for the queries of --file (repeatable), e.g.
    /// model_name=my-model or __rate_interval=2m.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub(crate) vars: Vec<String>,

    /// A /metrics URL to scrape (repeatable); `URL#k=v,k=v` adds labels to that target.
    #[arg(long = "target", required = true, value_name = "URL")]
    pub(crate) targets: Vec<String>,

    /// How long to scrape before evaluating.
    #[arg(long = "for", value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(crate) window: Duration,

    /// The scrape interval.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) every: Duration,

    /// A label `k=v` added to every target's series (repeatable), e.g. namespace=llm.
    #[arg(long = "label", value_name = "K=V")]
    pub(crate) labels: Vec<String>,

    /// Print Prometheus' /api/v1/query JSON (one object per expression) instead of tables.
    #[arg(long)]
    pub(crate) json: bool,

    /// Give up on one scrape after this long.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// Body cap, token, TLS.
    #[command(flatten)]
    pub(crate) access: ScrapeAccessArgs,
}

/// `inferscale monitor`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale sim & inferscale monitor                    # the simulator on :8000, no flags needed
  inferscale monitor --url 'http://10.0.0.5:8000#pod=vllm-0' --url 'http://10.0.0.6:8000#pod=vllm-1' \\
      --dcgm-url http://10.0.0.5:9400 --rules inferscale-out/manifests/prometheusrule.yaml --namespace llm
  inferscale monitor --prometheus http://127.0.0.1:9090 --namespace llm --selector 'model_name=\"ministral\"'
  inferscale monitor --context eks-prod --namespace llm --service vllm   # a Service's pods
  inferscale monitor --once --for 15s                    # one frame as text, for scripts
  inferscale monitor --json --duration 10m > monitor.jsonl   # a JSON line per refresh

Tier 1 (service): queue, running, req/s, 5xx error rate, TTFT / TPOT / end-to-end p50-p95-p99
over --window, with sparklines. Tier 2 (engine): KV-cache usage, preemptions/s, prompt and
generated tokens/s, tokens per step. Tier 3 (GPU, DCGM): utilisation, memory-copy utilisation,
framebuffer used/total, power, temperature, single-bit ECC. Then one row per replica, and the
alert rules (those `inferscale generate` writes, or any PrometheusRule or rule file) with their
state: inactive, pending (and when it fires), firing (and for how long), per series, evaluated
as Prometheus evaluates them. A value the source lacks is shown as '-', never as 0.

With --url the pods are scraped every --refresh, as Prometheus scrapes them (their series get
the labels namespace=--namespace, job=--job, pod and instance, so the generated rules match);
a pod that stops answering is shown DOWN with the reason, and comes back when it answers. With
--prometheus the same PromQL is asked of its HTTP API (the rules' states are first replayed
over their `for`, so an alert already firing shows as firing).

Keys: q / Esc / Ctrl-C quit · p or space pause · Tab or 1, 2, 3: overview, replicas, alerts.")]
pub(crate) struct MonitorArgs {
    /// A pod's metrics URL (repeatable; /metrics when no path); `URL#k=v,k=v` sets that
    /// target's labels (pod=NAME names the replica). Default: http://127.0.0.1:8000, where
    /// `inferscale sim` listens.
    #[arg(long = "url", value_name = "URL", conflicts_with = "prometheus")]
    pub(crate) urls: Vec<String>,

    /// Scrape the ready pods of this Service in --namespace (NAME or NAME:PORT, the port a
    /// number or the name of the Service's port; default 8000), found through its
    /// EndpointSlices and followed as pods come and go. Needs the Kubernetes API (the flags
    /// below, else in a pod its service account, else the default kubeconfig).
    #[arg(long, value_name = "NAME[:PORT]", conflicts_with_all = ["prometheus", "urls"])]
    pub(crate) service: Option<String>,

    /// The Kubernetes API, for --service.
    #[command(flatten)]
    pub(crate) kube: KubeArgs,

    /// A DCGM exporter's metrics URL (repeatable), for the GPU tier.
    #[arg(long = "dcgm-url", value_name = "URL", conflicts_with = "prometheus")]
    pub(crate) dcgm_urls: Vec<String>,

    /// Read everything from this Prometheus (its HTTP API) instead of scraping the pods.
    #[arg(long, value_name = "URL")]
    pub(crate) prometheus: Option<String>,

    /// The alert rules: a PrometheusRule or a plain rule file. Default:
    /// inferscale-out/manifests/prometheusrule.yaml when it exists.
    #[arg(long, value_name = "PATH")]
    pub(crate) rules: Option<std::path::PathBuf>,

    /// The namespace label of the deployment's series (set on the pods' series when
    /// scraping them; selected on when reading a Prometheus).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub(crate) namespace: String,

    /// The job label of the pods' targets (the Service's name, as the Prometheus operator
    /// sets it); the VLLMTargetDown rule and the replicas' `up` select on it.
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub(crate) job: String,

    /// More label matchers for the engine's series, PromQL syntax without braces
    /// (model_name="m").
    #[arg(long, value_name = "MATCHERS")]
    pub(crate) selector: Option<String>,

    /// Label matchers for the GPU exporter's series, PromQL syntax without braces.
    #[arg(long, value_name = "MATCHERS")]
    pub(crate) dcgm_selector: Option<String>,

    /// The label that names a replica.
    #[arg(long, value_name = "NAME", default_value = "pod")]
    pub(crate) replica_label: String,

    /// The engine the pods run, whose metric names are read (default: the one the first
    /// --url's /metrics shows; vllm with --prometheus). What it does not serve (llama.cpp
    /// has no latency histograms) shows as missing.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub(crate) engine: Option<EngineArg>,

    /// The window of rates and percentiles.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub(crate) window: Duration,

    /// How often to read and redraw (and, for the pods, to scrape).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) refresh: Duration,

    /// Print one frame as text and exit (after reading for --for).
    #[arg(long)]
    pub(crate) once: bool,

    /// With --once: how long to read before printing (rates need two scrapes at least).
    #[arg(long = "for", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) collect: Duration,

    /// With --once: the view to print (overview, replicas, alerts).
    #[arg(long, value_enum, default_value_t = ViewArg::Overview)]
    pub(crate) view: ViewArg,

    /// With --once: the frame's width in columns (default: the terminal's, or 120).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(40..=1000))]
    pub(crate) width: Option<u16>,

    /// Print each refresh as one JSON line instead of drawing (with --once: one object).
    #[arg(long)]
    pub(crate) json: bool,

    /// Stop after this long (live or --json).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,

    /// Give up on one scrape or query after this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// Body cap, token, TLS.
    #[command(flatten)]
    pub(crate) access: ScrapeAccessArgs,
}

/// A monitor view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ViewArg {
    /// The three tiers, replicas and alerts.
    Overview,
    /// The replicas.
    Replicas,
    /// The alert rules and their instances.
    Alerts,
}

/// `inferscale check`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale check --run-dir inferscale-out                      # the files of an inferscale run
  inferscale check --url http://vllm.llm:8000 --dcgm-url http://node:9400 \\
      --prometheus http://prometheus:9090 --namespace llm --manifests k8s/ --run-dir inferscale-out
  inferscale check --run-dir inferscale-out --format junit > readiness.xml   # for CI
  inferscale check --manifests k8s/ --skip 2,3 --fail-on warn
  inferscale check --context eks-prod --namespace llm --run-dir inferscale-out   # the live cluster

The checks, by stable id (the seeds' eleven, then three an SRE adds):
   1 metrics-exposed              --url's /metrics serves the required vLLM families; warns on
                                  dashboards and rules still on deprecated names
   2 prometheus-scrapes           --prometheus has the pods (job=--job, namespace=--namespace) up
   3 dcgm-exporter                --dcgm-url (or Prometheus) serves DCGM_FI_DEV_GPU_UTIL
   4 dashboards                   Grafana dashboards cover the three tiers, on served names
   5 alerts                       the five alerts present, valid (promtool check rules when
                                  installed), and loaded and healthy in --prometheus
   6 scaledobject                 a ScaledObject valid against KEDA's CRD and webhook rules
   7 do-not-disrupt               karpenter.sh/do-not-disrupt: \"true\" on the pod template
   8 saturation-measured          thresholds.json from a load test that found the saturation
   9 warmup-gates-readiness       the readiness probe waits for the warm-up
  10 vllm-memory                  gpu_memory_utilization <= 0.9 (0.85 advised) and max_model_len
                                  set below the model's maximum (from the manifests and the
                                  live server)
  11 scale-cycle                  a completed scale-out -> scale-in: rehearsal.json, or
                                  observed in --prometheus over --observe
  12 queries-read-served-metrics  every alert and panel reads metrics --url serves
  13 max-replicas-carry-peak      maxReplicaCount >= the replicas thresholds.json's peak needs
  14 triggers-one-series          each Prometheus trigger returns exactly one series

A check whose input is not given is skipped. Manifests are every YAML and JSON file under
--manifests (default: --run-dir's manifests/), or, with --kubeconfig, --context or --kube-api,
the live objects of --namespace (then a ScaledObject must also be Ready and its HPA able to
scale), recognised by what they hold: ScaledObjects,
PrometheusRules and rule files, Grafana dashboards, Deployments, patches of them, JSON patches
of their args, Jobs. Exit 1 when a check fails (or warns, with --fail-on warn).")]
pub(crate) struct CheckArgs {
    /// The vLLM server or Service (its API base URL; /metrics and /v1/models are read).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,

    /// A DCGM exporter's metrics URL.
    #[arg(long, value_name = "URL")]
    pub(crate) dcgm_url: Option<String>,

    /// The Prometheus that scrapes the deployment (its HTTP API).
    #[arg(long, value_name = "URL")]
    pub(crate) prometheus: Option<String>,

    /// A folder of manifests (default: RUN_DIR/manifests).
    #[arg(long, value_name = "DIR")]
    pub(crate) manifests: Option<std::path::PathBuf>,

    /// An `inferscale run` output folder (thresholds.json, rehearsal.json, manifests/).
    /// Default: ./inferscale-out when it exists.
    #[arg(long, value_name = "DIR")]
    pub(crate) run_dir: Option<std::path::PathBuf>,

    /// The namespace label of the deployment's series.
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub(crate) namespace: String,

    /// The job label of the vLLM pods' targets (the Service's name).
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub(crate) job: String,

    /// The engine the deployment runs (default: the one --url's /metrics shows, else the one
    /// the manifests read, else thresholds.json's, else vllm). Checks expect its names; files
    /// or a server speaking another engine's fail by name.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub(crate) engine: Option<EngineArg>,

    /// The vLLM container's name in the pod template.
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub(crate) container: String,

    /// How far back to look in Prometheus for a scale-out -> scale-in cycle (check 11).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub(crate) observe: Duration,

    /// Checks to skip, by id or name (repeatable, or comma-separated).
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub(crate) skip: Vec<String>,

    /// What makes the exit code 1: a failed check, or a warning too.
    #[arg(long, value_enum, default_value_t = FailOnArg::Fail)]
    pub(crate) fail_on: FailOnArg,

    /// The output: a table, JSON, or JUnit XML.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    pub(crate) format: CheckFormat,

    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,

    /// Give up on one read after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// A file holding --url's API key (vLLM's --api-key), for /v1/models. Default: the
    /// OPENAI_API_KEY environment variable, when set; never on the command line.
    #[arg(long, value_name = "PATH")]
    pub(crate) api_key_file: Option<std::path::PathBuf>,

    /// Body cap, token, TLS for the metrics endpoints and Prometheus.
    #[command(flatten)]
    pub(crate) access: ScrapeAccessArgs,

    /// A live cluster to read instead of --manifests: the Deployments, ScaledObjects (and
    /// their HPAs' status), PrometheusRules and dashboard ConfigMaps of --namespace, and the
    /// NodePools. Read only when one of these flags is given.
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
}

/// `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FailOnArg {
    /// A failed check.
    Fail,
    /// A failed check or a warning.
    Warn,
}

/// `--format` of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CheckFormat {
    /// A table.
    Human,
    /// JSON.
    Json,
    /// JUnit XML.
    Junit,
}

/// `inferscale fidelity`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale fidelity testdata/perf/calibration_cases.clean.csv
  inferscale fidelity cases.csv --json > fidelity.json
  inferscale fidelity cases.csv --model-config my-model/config.json

Optional columns describe the workload more exactly: arrivals (poisson | constant), timeout_s,
prompt_pool (N distinct prompts sent in turn: each one sent again is a prefix-cache hit),
shared_prefix_tokens and shared_prefix_groups (a system prompt per group),
generated_output_len (tokens the server generated when output_len is the client's count),
input_len_std. Where a case leaves them empty and its source is a load generator whose
behaviour is known (inference-perf as inference-sim/training ran it: Poisson arrivals, a 300 s
timeout, 100 prompts sent in turn, ignore_eos with the profile's max_tokens; k6's
constant-arrival-rate in the Amazon EKS guide), these facts fill them; the report lists each
applied, and --no-harness-facts turns them off.

Each row is one measured metric under a setup (columns id, source, engine, engine_version, gpu,
num_gpus, tp, model, weights_dtype, kv_dtype, input_len, output_len, load_type (rate |
concurrency | offline | sequential), load_value, duration_s, max_num_seqs,
max_num_batched_tokens, max_model_len, gpu_memory_utilization, enforce_eager, metric, value,
unit, confidence, notes; empty fields take vLLM's defaults for the GPU). Rows that share a setup
are simulated once. Metrics: throughput_rps, output_tps, ttft_/e2e_/itl_/tpot_ mean, p50, p90,
p95, p99 _ms, queue_depth_max, prefill_batch_latency, decode_step_latency (ms),
first_request_ms, model_load_time (s). The error is |predicted - measured| / measured; a case
that cannot be predicted is listed as skipped with the reason.")]
pub(crate) struct FidelityArgs {
    /// The cases (CSV).
    #[arg(value_name = "CASES.csv")]
    pub(crate) cases: std::path::PathBuf,

    /// Print JSON: {"cases", "per_metric", "per_family", "per_gpu", "per_gpu_family", "skipped",
    /// "harness_facts"}.
    #[arg(long)]
    pub(crate) json: bool,

    /// Print every case, not only the summaries.
    #[arg(long)]
    pub(crate) all: bool,

    /// How `rate` cases that do not say (column `arrivals`) space their requests.
    #[arg(long, value_enum, default_value_t = ArrivalsArg::Poisson)]
    pub(crate) arrivals: ArrivalsArg,

    /// The client's timeout for cases that do not say (column `timeout_s`); the server
    /// aborts what takes longer, and it is not counted. Default: none.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,

    /// Fit the model's physics (bandwidth and compute efficiency scales, KV-read efficiency,
    /// step overheads, frontend latency, all-reduce latency) to the cases, and print the
    /// parameters and the errors at them.
    #[arg(long)]
    pub(crate) calibrate: bool,

    /// Predict with these physics instead of the engine's: a JSON object of the parameters
    /// --calibrate prints (its "fit"."physics"), to judge a fit on cases it did not see.
    #[arg(long, value_name = "FILE", conflicts_with = "calibrate")]
    pub(crate) physics: Option<std::path::PathBuf>,

    /// With --calibrate: fit without this GPU's cases, then report the error on them alone
    /// (a leave-one-GPU-out check). `all`: each GPU in turn.
    #[arg(long, value_name = "GPU|all", requires = "calibrate")]
    pub(crate) leave_out: Option<String>,

    /// A model the cases name that is not built in: its Hugging Face config.json, as FILE
    /// (named by its `_name_or_path`, else its folder) or NAME=FILE. Repeatable.
    #[arg(long, value_name = "[NAME=]FILE")]
    pub(crate) model_config: Vec<String>,

    /// A GPU the cases name that is not built in, described in a JSON file (the fields of
    /// the built-in table; found by its `name`). Repeatable.
    #[arg(long, value_name = "FILE")]
    pub(crate) gpu_spec: Vec<std::path::PathBuf>,

    /// Do not fill empty workload columns from the known load generators' facts (see
    /// below): predict from what the file says alone.
    #[arg(long)]
    pub(crate) no_harness_facts: bool,
}

/// Arrival spacing of an open-loop load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ArrivalsArg {
    /// Exponential gaps (vllm bench serve's default; inference-perf's timer).
    Poisson,
    /// Even gaps (k6's constant-arrival-rate).
    Constant,
}

/// `inferscale predict`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale predict --gpu L40S --model Llama-3.1-8B --input 512 --output 256 --rps 10
  inferscale predict --gpu H100 --model Llama-3.1-70B --tp 4 --input 1024 --output 256 --concurrency 64
  inferscale predict --gpu H200 --model Qwen/Qwen3-32B-FP8 --input 1024 --output 1024 \\
      --concurrency 4,8,16,32,64,128 --requests 640
  inferscale predict --gpu H200 --model gpt-oss-120b --input 2000 --output 500 --offline 1000
  inferscale predict --gpu L40S --model Llama-3.1-8B --input 512 --output 256 --rps 300 --target-p95-e2e 3s
  inferscale predict --gpu L40S,H100,H200 --price L40S=1.86 --price H100=3.93 --price H200=4.98 \\
      --model Llama-3.1-8B --input 512 --output 256 --rps 300 --target-p95-e2e 3s
  inferscale predict --gpu H100 --model-config ./my-model/config.json --input 800 --output 200 --rps 5
  inferscale predict --gpu L40S --model Ministral-3-8B --shape multi-turn:6 --input 384 --output 48 \
      --rps 30
  inferscale predict --gpu H100 --model Llama-3.1-8B --trace chat-sessions.jsonl

The engine model (vLLM V1's scheduler over a paged KV cache with prefix caching, step times
from the GPU and the model; docs/performance-model.md) runs the workload in virtual time, in
well under a second. Output: throughput (req/s, output tok/s), TTFT, ITL, TPOT and end-to-end
latency (mean, p50, p90, p95, p99), queue depth, KV blocks, preemptions, and the highest rate
one replica sustains. With --target-p95-e2e it finds the highest rate one replica holds within
the SLO and the replicas --rps needs; with several GPUs (and --price), replicas, GPU-hours and
dollars per million output tokens side by side.")]
pub(crate) struct PredictArgs {
    /// GPU of every rank, or several separated by commas to compare (see inferscale sim --list).
    #[arg(
        long,
        value_name = "GPU[,GPU...]",
        value_delimiter = ',',
        required_unless_present = "gpu_spec"
    )]
    pub(crate) gpu: Vec<String>,

    /// A GPU described in a JSON file (the fields of the built-in table).
    #[arg(long, value_name = "FILE", conflicts_with = "gpu")]
    pub(crate) gpu_spec: Option<std::path::PathBuf>,

    /// The model: a built-in name or Hugging Face id (see inferscale sim --list).
    #[arg(long, value_name = "MODEL", required_unless_present = "model_config")]
    pub(crate) model: Option<String>,

    /// The model's Hugging Face config.json (any architecture: dense, MoE, MLA, sliding
    /// windows), as FILE or NAME=FILE.
    #[arg(long, value_name = "[NAME=]FILE", conflicts_with = "model")]
    pub(crate) model_config: Option<String>,

    /// --tensor-parallel-size.
    #[arg(long, value_name = "N")]
    pub(crate) tp: Option<u32>,

    /// Weights: bf16, fp8, int4 (AWQ/GPTQ), mxfp4, nvfp4 (default: the checkpoint's).
    #[arg(long, value_name = "DTYPE")]
    pub(crate) dtype: Option<String>,

    /// KV cache: auto (16-bit) or fp8.
    #[arg(long, value_name = "DTYPE", value_parser = ["auto", "fp8"])]
    pub(crate) kv_cache_dtype: Option<String>,

    /// --max-num-seqs (default: vLLM's for the GPU).
    #[arg(long, value_name = "N")]
    pub(crate) max_num_seqs: Option<u32>,

    /// --max-num-batched-tokens (default: vLLM's for the GPU).
    #[arg(long, value_name = "N")]
    pub(crate) max_num_batched_tokens: Option<u32>,

    /// --max-model-len (default: the model's, at most 32768).
    #[arg(long, value_name = "N")]
    pub(crate) max_model_len: Option<u32>,

    /// --gpu-memory-utilization.
    #[arg(long, value_name = "FRACTION")]
    pub(crate) gpu_memory_utilization: Option<f64>,

    /// --enforce-eager (no CUDA graphs).
    #[arg(long)]
    pub(crate) enforce_eager: bool,

    /// --no-enable-prefix-caching.
    #[arg(long)]
    pub(crate) no_prefix_caching: bool,

    /// Prompt tokens: whole, or a published mean such as 217.4 (a mean with --input-std).
    #[arg(long, value_name = "TOKENS", default_value_t = 512.0)]
    pub(crate) input: f64,

    /// Standard deviation of the prompt tokens (normal, clamped to ±4σ).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) input_std: Option<f64>,

    /// Output tokens per request, generated in full as with ignore_eos (whole, or a mean).
    #[arg(long, value_name = "TOKENS", default_value_t = 256.0)]
    pub(crate) output: f64,

    /// Open loop at this rate, req/s.
    #[arg(long, value_name = "R", value_parser = parse_rate, group = "load")]
    pub(crate) rps: Option<f64>,

    /// Closed loop with this many clients; several (4,8,16,...) sweep them, as vendors
    /// publish (`vllm bench serve --max-concurrency`).
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',', group = "load")]
    pub(crate) concurrency: Vec<u32>,

    /// Closed loop: stop after this many requests in all instead of --duration
    /// (`vllm bench serve --num-prompts`).
    #[arg(long, value_name = "N", conflicts_with_all = ["rps", "offline", "sequential"])]
    pub(crate) requests: Option<u64>,

    /// All at once: this many requests (a throughput benchmark).
    #[arg(long, value_name = "N", group = "load")]
    pub(crate) offline: Option<u32>,

    /// One request at a time, this many.
    #[arg(long, value_name = "N", group = "load")]
    pub(crate) sequential: Option<u32>,

    /// Arrival spacing for --rps.
    #[arg(long, value_enum, default_value_t = ArrivalsArg::Poisson)]
    pub(crate) arrivals: ArrivalsArg,

    /// How long requests are sent (open and closed loop).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub(crate) duration: Duration,

    /// The client gives up after this long (the server aborts the request).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,

    /// N distinct prompts sent in turn (a dataset of N prompts): repeats hit the prefix cache.
    #[arg(long, value_name = "N", conflicts_with = "shared_prefix")]
    pub(crate) prompt_pool: Option<u32>,

    /// TOKENSxGROUPS: every prompt starts with one of GROUPS system prompts of TOKENS tokens.
    #[arg(long, value_name = "TOKENSxGROUPS")]
    pub(crate) shared_prefix: Option<String>,

    /// Prompts that share prefixes, as `load --shape` sends them (system-prompt:POOL,TOKENS,
    /// few-shot:TOKENS, multi-turn:TURNS,USERS); --input is each prompt's unique part,
    /// --output each answer.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["prompt_pool", "shared_prefix", "input_std"])]
    pub(crate) shape: Option<String>,

    /// The prompts and answers of a request trace in Mooncake's JSONL (as `load --trace`
    /// replays it: its hash_ids' blocks shared), sent in turn at the load given [default
    /// load: the trace's mean rate, Poisson, for its length].
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt_pool", "shared_prefix", "input_std", "shape"])]
    pub(crate) trace: Option<std::path::PathBuf>,

    /// Start cold (the first requests pay CUDA/JIT warm-up and clock ramp).
    #[arg(long)]
    pub(crate) cold: bool,

    /// With --rps: the p95 end-to-end latency to hold; prints the replicas --rps needs.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "rps")]
    pub(crate) target_p95_e2e: Option<Duration>,

    /// GPU=USD_PER_HOUR (repeatable): cost per GPU-hour, for the comparison.
    #[arg(long, value_name = "GPU=USD")]
    pub(crate) price: Vec<String>,

    /// Also find the highest rate one replica sustains (a few more runs).
    #[arg(long)]
    pub(crate) saturation: bool,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `inferscale scaler`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale scaler                                      # gRPC on 127.0.0.1:6000, HTTP on :6001
  inferscale scaler --listen 0.0.0.0:6000 --http-listen 0.0.0.0:6001   # in a pod
  inferscale scaler --tls-cert tls.crt --tls-key tls.key
  inferscale scaler --context eks-prod                   # from a laptop, through a kubeconfig
  inferscale scaler --kube-api http://127.0.0.1:8001     # outside a cluster, via kubectl proxy

What each ScaledObject asks for is in its trigger's metadata (KEDA sends it with every call):
  triggers:
  - type: external
    metadata:
      scalerAddress: inferscale-scaler.keda:6000
      service: vllm                # pods from the Service's EndpointSlices...
      port: \"8000\"                 # ...on this port (a number or a port name)
      # targets: http://10.0.0.5:8000,http://10.0.0.6:8000   # ...or listed base URLs
      metric: desired_replicas     # queue_depth, running, in_flight, arrival_rate,
                                   # kv_cache_usage, ttft_p95, queue_time_p95, e2e_p95,
                                   # desired_replicas
      target: \"100\"                # per replica (for desired_replicas: of its signal)
      signal: in_flight            # desired_replicas' signal (default queue_depth)
      queueTarget: \"27\"            # ...and a queue booster per replica
      horizon: 330s                # ...and the signal predicted this far ahead
      trendWindow: 2m              # ...by a line through this much of it (default 5m)
      latencyTarget: 10s           # desired_replicas' guardrail (latencyMetric: e2e_p95)
      latencyMaxRatio: \"1.5\"       # ...asking for at most 1.5x the pods at once
      window: 60s                  # percentiles over this window
      activationTarget: \"0\"

The same keys as query parameters give the JSON of KEDA's metrics-api trigger:
  curl '127.0.0.1:6001/api/v1/value?targets=http://127.0.0.1:8000&metric=queue_depth&target=5'

Some pods failing: the value comes from the rest (inferscale_scaler_pods{state=\"failed\"} on
/metrics says how many). No pods, or none answering: an error, so KEDA's fallback engages.")]
pub(crate) struct ScalerArgs {
    /// The gRPC address KEDA dials (its trigger's scalerAddress).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6000")]
    pub(crate) listen: String,

    /// The HTTP address: /metrics (the scaler's own), /healthz, /api/v1/value.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6001")]
    pub(crate) http_listen: String,

    /// Serve gRPC over TLS with this PEM certificate chain (with --tls-key); KEDA's trigger
    /// then sets enableTLS.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub(crate) tls_cert: Option<std::path::PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,

    /// Give up on one pod's scrape after this long (a trigger's `timeout` overrides it).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub(crate) scrape_timeout: Duration,

    /// Reuse an answer for this long, so KEDA's poll and the HPA's fetch do not scrape twice.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) cache: Duration,

    /// How often StreamIsActive (trigger type external-push) re-checks; it sends changes only.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(crate) push_every: Duration,

    /// The Kubernetes API for `service` triggers.
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
}

/// Which Kubernetes API, and as whom: flags, else a kubeconfig, else the pod's service
/// account. Shared by `scaler`, `check` and `monitor`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Kubernetes")]
pub(crate) struct KubeArgs {
    /// A kubeconfig file (default: $KUBECONFIG, else ~/.kube/config). Its user may be a
    /// token, a client certificate or an exec plugin (`aws eks get-token`), as kubectl runs
    /// it. Without --kubeconfig, --context or --kube-api: in a pod, its service account; else
    /// the default kubeconfig when there is one.
    #[arg(long, value_name = "PATH", conflicts_with = "kube_api")]
    pub(crate) kubeconfig: Option<std::path::PathBuf>,

    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME", conflicts_with = "kube_api")]
    pub(crate) context: Option<String>,

    /// A Kubernetes API URL instead of a kubeconfig (`http://127.0.0.1:8001` through
    /// `kubectl proxy`).
    #[arg(long, value_name = "URL")]
    pub(crate) kube_api: Option<String>,

    /// A file holding the bearer token for --kube-api (never on the command line).
    #[arg(long, value_name = "PATH", requires = "kube_api")]
    pub(crate) kube_token_file: Option<std::path::PathBuf>,

    /// A PEM CA bundle that signed --kube-api's certificate.
    #[arg(long, value_name = "PATH", requires = "kube_api")]
    pub(crate) kube_ca_file: Option<std::path::PathBuf>,
}

impl KubeArgs {
    /// Whether any flag names an API.
    pub(crate) fn named(&self) -> bool {
        self.kubeconfig.is_some() || self.context.is_some() || self.kube_api.is_some()
    }

    /// The flags as the kube crate takes them.
    pub(crate) fn access(&self) -> inferscale_kube::Access {
        inferscale_kube::Access {
            api: self.kube_api.clone(),
            token_file: self.kube_token_file.clone(),
            ca_file: self.kube_ca_file.clone(),
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

/// `inferscale sim`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale sim                                         # the seeds' deployment on 127.0.0.1:8000
  inferscale sim --profile h100-llama-3.1-8b --speedup 10 --dcgm-listen 127.0.0.1:9400
  inferscale sim --gpu A100-80GB --model Qwen2.5-32B --tensor-parallel-size 2
  inferscale sim --replicas 4 --listen 127.0.0.1:8100   # four engines on ports 8100-8103
  inferscale sim --profile instant                       # no model delay (client benchmarks)
  inferscale sim --fault-500-rate 0.01 --fault-cut-rate 0.02 --fault-slowdown 3@120s
  inferscale sim --list                                  # profiles, GPUs and models
  inferscale sim --engine llamacpp --max-num-seqs 4      # llama-server's /metrics, 4 slots

With --speedup K the engine's clock runs K times faster than the wall clock; everything it
reports (metrics, latencies) is in simulated seconds. Flags given with --profile override it.")]
pub(crate) struct SimArgs {
    /// A named setup (see --list); its settings can be overridden by the flags below.
    #[arg(long, value_name = "NAME")]
    pub(crate) profile: Option<String>,

    /// Print the profiles, GPUs and models and exit.
    #[arg(long)]
    pub(crate) list: bool,

    /// Where to serve the API and /metrics (the first replica's port when --replicas > 1).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    pub(crate) listen: String,

    /// Also serve DCGM-exporter metrics here (one port per replica, consecutive).
    #[arg(long, value_name = "ADDR")]
    pub(crate) dcgm_listen: Option<String>,

    /// Independent engines to serve, on consecutive ports.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) replicas: u16,

    /// The model name clients send and metrics carry (default: the model's Hugging Face id).
    #[arg(long, value_name = "NAME")]
    pub(crate) served_model_name: Option<String>,

    /// GPU of every rank (L40S, H100, H200, A100-80GB, ...; see --list).
    #[arg(long, value_name = "GPU")]
    pub(crate) gpu: Option<String>,

    /// A GPU described in a JSON file (the fields of the built-in table).
    #[arg(long, value_name = "FILE", conflicts_with = "gpu")]
    pub(crate) gpu_spec: Option<std::path::PathBuf>,

    /// The model (Llama-3.1-8B, Qwen2.5-7B, Ministral-3-8B, ... or a Hugging Face id; see --list).
    #[arg(long, value_name = "MODEL")]
    pub(crate) model: Option<String>,

    /// A model described in a JSON file (the fields of the built-in table).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub(crate) model_spec: Option<std::path::PathBuf>,

    /// The model's Hugging Face config.json (any architecture: dense, MoE, MLA, sliding
    /// windows), as FILE or NAME=FILE.
    #[arg(long, value_name = "[NAME=]FILE", conflicts_with_all = ["model", "model_spec"])]
    pub(crate) model_config: Option<String>,

    /// Weight quantisation: fp8, awq/gptq (4-bit integer), mxfp4, nvfp4, or none (default:
    /// the model's native dtype).
    #[arg(long, value_name = "METHOD")]
    pub(crate) quantization: Option<String>,

    /// vLLM's --no-enable-prefix-caching: every prompt is computed in full, however many
    /// times it was seen.
    #[arg(long)]
    pub(crate) no_enable_prefix_caching: bool,

    /// vLLM's --enable-auto-tool-choice: serve `tool_choice: "auto"` (the default when a
    /// request gives `tools`; without this flag it is refused with vLLM's message). Needs
    /// --tool-call-parser.
    #[arg(long, requires = "tool_call_parser")]
    pub(crate) enable_auto_tool_choice: bool,

    /// vLLM's --tool-call-parser (hermes, llama3_json, mistral, ...): accepted for
    /// compatibility; the simulator's calls are what hermes reads.
    #[arg(long, value_name = "NAME", requires = "enable_auto_tool_choice")]
    pub(crate) tool_call_parser: Option<String>,

    /// KV-cache dtype: auto (16-bit) or fp8.
    #[arg(long, value_name = "DTYPE", value_parser = ["auto", "fp8"])]
    pub(crate) kv_cache_dtype: Option<String>,

    /// --tensor-parallel-size.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub(crate) tensor_parallel_size: Option<u32>,

    /// --max-num-seqs: requests in a batch at most.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_num_seqs: Option<u32>,

    /// --max-num-batched-tokens: token budget of one step.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_num_batched_tokens: Option<u32>,

    /// --max-model-len: prompt plus output tokens at most.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(16..))]
    pub(crate) max_model_len: Option<u32>,

    /// --gpu-memory-utilization: the fraction of GPU memory vLLM takes (weights, activations, KV cache).
    #[arg(long, value_name = "F")]
    pub(crate) gpu_memory_utilization: Option<f64>,

    /// --enforce-eager: no CUDA graphs (every op dispatched from Python).
    #[arg(long)]
    pub(crate) enforce_eager: bool,

    /// Run the engine's clock this many times faster than the wall clock.
    #[arg(long, value_name = "K", default_value_t = 1.0)]
    pub(crate) speedup: f64,

    /// Seed for everything random (output lengths, token text, faults).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) seed: u64,

    /// Also serve the metric names vLLM removed (gpu_cache_usage_perc, time_per_output_token_seconds, ...).
    #[arg(long)]
    pub(crate) show_deprecated_metrics: bool,

    /// Whose /metrics to serve: vllm (vLLM 0.33's families), or llamacpp (llama-server
    /// --metrics: its 15 unlabelled families, no histograms; --max-num-seqs stands for its
    /// slots, -np). The OpenAI routes are the same.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = SimEngineArg::Vllm)]
    pub(crate) engine: SimEngineArg,

    /// Refuse request bodies larger than this (413).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    pub(crate) max_body: usize,

    /// The Hostname label of the DCGM metrics (with --replicas > 1, each replica is a node of
    /// its own: NAME-0, NAME-1, …).
    #[arg(long, value_name = "NAME", default_value = "inferscale-sim")]
    pub(crate) hostname: String,

    /// Write one JSON line per request here (wall-clock arrival time, path, status).
    #[arg(long, value_name = "FILE")]
    pub(crate) access_log: Option<std::path::PathBuf>,

    /// Require the API key in this file on /v1/* (vLLM's --api-key: `Authorization: Bearer
    /// KEY`, else 401). Default: the VLLM_API_KEY environment variable, as vLLM reads it. Never
    /// on the command line.
    #[arg(long, value_name = "PATH")]
    pub(crate) api_key_file: Option<std::path::PathBuf>,

    /// Fraction of requests answered with HTTP 500.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub(crate) fault_500_rate: f64,

    /// Fraction of responses cut off mid-way.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub(crate) fault_cut_rate: f64,

    /// Fraction of requests stalled before the first byte (for --fault-stall).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub(crate) fault_stall_rate: f64,

    /// How long a stall lasts (simulated).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub(crate) fault_stall: Duration,

    /// Fraction of streams that get a malformed event (after which they end).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub(crate) fault_malformed_rate: f64,

    /// Steps X times slower from simulated time T on, e.g. 3@120s.
    #[arg(long, value_name = "X@T")]
    pub(crate) fault_slowdown: Option<String>,
}

/// The endpoint to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApiArg {
    /// POST /v1/completions.
    Completions,
    /// POST /v1/chat/completions.
    Chat,
}

/// `inferscale warmup`.
#[derive(Debug, Args)]
#[command(after_help = "\
Sends requests one after another (each when the previous has finished), as the seeds' k6
warm-up job does: 100 non-streaming completions of a fixed prompt with max_tokens 100.
The first requests pay one-time costs (CUDA graphs, kernel autotuning, clocks ramping up);
the report compares the first with the steady latency.

Examples:
  inferscale warmup --url http://127.0.0.1:8000
  inferscale warmup --url http://vllm:8000 --requests 20 --json")]
pub(crate) struct WarmupArgs {
    /// The server's base URL.
    #[arg(long, value_name = "URL")]
    pub(crate) url: String,
    /// The served model (default: the server's first).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// Requests to send.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) requests: u32,
    /// max_tokens of each request.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_tokens: u32,
    /// The prompt (default: the seeds' warm-up prompt).
    #[arg(long, value_name = "TEXT")]
    pub(crate) prompt: Option<String>,
    /// The endpoint.
    #[arg(long, value_enum, default_value_t = ApiArg::Completions)]
    pub(crate) api: ApiArg,
    /// Stream the responses (the seeds' warm-up did not).
    #[arg(long)]
    pub(crate) stream: bool,
    /// Give up on a request after this long.
    #[arg(long, value_name = "DURATION", default_value = "240s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// For a simulator running K times faster: report latencies in its time.
    #[arg(long, value_name = "K", default_value_t = 1.0)]
    pub(crate) speedup: f64,
    /// First wait up to this long for the server's /health to answer 200 (a pod's model
    /// still loading).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) wait_ready: Option<Duration>,
    /// After a successful warm-up, create this file (a readiness probe can test for it).
    #[arg(long, value_name = "PATH")]
    pub(crate) done_file: Option<std::path::PathBuf>,
    /// Keep running after the warm-up (as a Kubernetes sidecar must) until terminated.
    #[arg(long)]
    pub(crate) hold: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Credentials for the server.
    #[command(flatten)]
    pub(crate) auth: AuthArgs,
}

/// `inferscale load`.
#[derive(Debug, Args)]
#[command(after_help = "\
The default plan is the seeds': 10, 20, ..., 70 req/s, 60 s per step, 30 s of rest between
steps, constant arrivals, max_tokens 100, the random-first-word prompt, at most 500 requests in
flight (more are dropped and counted, as k6 drops iterations past maxVUs). Latencies are
measured from each request's intended send time. The server's /metrics is scraped every
second (of its time) to see its queue.

Examples:
  inferscale load --url http://127.0.0.1:8000
  inferscale load --url http://127.0.0.1:8000 --rates 5,10 --step 30s --rest 10s --threshold 'p95(e2e)<5s'
  inferscale load --url http://127.0.0.1:8000 --speedup 20        # a simulator running 20x fast
  inferscale load --url http://vllm:8000 --no-stream --no-connection-reuse   # exactly like the seeds' k6
  inferscale load --plan plan.yaml --out run.json --requests-out requests.jsonl
  inferscale load --url http://vllm:8000 --shape system-prompt:4,1500 --prompt-tokens 200
  inferscale load --url http://vllm:8000 --trace conversation_trace.jsonl --speed 0.5x,1x,2x --dispatch think-time

Exit codes: 0 done; 1 a --threshold was breached; 2 usage error or unreachable server;
3 the run happened but its results could not be written.
Ctrl-C stops sending, waits --grace for requests in flight, and writes the partial result.")]
pub(crate) struct LoadArgs {
    /// The server's base URL.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// The served model (default: the server's first, from /v1/models).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// First wait up to this long for the server's /health to answer 200 (a server still
    /// loading its model answers 503); without it, a server that is not ready is an error.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) wait_ready: Option<Duration>,
    /// Everything below declared in one YAML or TOML file (flags given here win).
    #[arg(long, value_name = "FILE")]
    pub(crate) plan: Option<std::path::PathBuf>,
    /// Offered rates of the steps, req/s.
    #[arg(long, value_name = "R,R,...", value_delimiter = ',')]
    pub(crate) rates: Option<Vec<f64>>,
    /// Closed-loop steps instead of rates: this many requests in flight at all times, each
    /// sent as soon as one ends (what `vllm bench serve --max-concurrency` and GuideLLM's
    /// concurrent profile do).
    #[arg(
        long,
        value_name = "N,N,...",
        value_delimiter = ',',
        conflicts_with = "rates"
    )]
    pub(crate) concurrency: Option<Vec<u32>>,
    /// How long each step sends.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) step: Option<Duration>,
    /// Pause after each step (its requests finish meanwhile).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) rest: Option<Duration>,
    /// Arrival process: constant, poisson, or gamma:SHAPE (bursty below 1).
    #[arg(long, value_name = "KIND")]
    pub(crate) arrival: Option<String>,
    /// Requests in flight at most; further ones are dropped and counted.
    #[arg(long, value_name = "N")]
    pub(crate) max_in_flight: Option<usize>,
    /// The endpoint.
    #[arg(long, value_enum)]
    pub(crate) api: Option<ApiArg>,
    /// Stream responses (measures TTFT, TPOT and ITL; the default).
    #[arg(long, overrides_with = "no_stream")]
    pub(crate) stream: bool,
    /// Do not stream (the seeds' k6 did not; no TTFT then).
    #[arg(long)]
    pub(crate) no_stream: bool,
    /// max_tokens: N, or a distribution (uniform:A,B, normal:MEAN,STD, lognormal:MEDIAN,SIGMA).
    #[arg(long, value_name = "LEN")]
    pub(crate) max_tokens: Option<String>,
    /// A fixed prompt for every request.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["prompt_tokens", "dataset"])]
    pub(crate) prompt: Option<String>,
    /// Synthetic prompts of this many tokens (N or a distribution, as --max-tokens).
    #[arg(long, value_name = "LEN", conflicts_with = "dataset")]
    pub(crate) prompt_tokens: Option<String>,
    /// Prompts from a JSONL file ({"prompt": ...} or {"messages": [...]}) or ShareGPT JSON.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["shape", "trace"])]
    pub(crate) dataset: Option<std::path::PathBuf>,
    /// Prompts that share prefixes, so the server's prefix cache is exercised and each
    /// step reports its hit rate (the server's count beside what the prompts imply):
    /// system-prompt:POOL,TOKENS (one of POOL system prompts first), few-shot:TOKENS (one
    /// preamble for all) or multi-turn:TURNS or multi-turn:TURNS,USERS (conversations whose turns carry the
    /// history; 16 users at once by default). --prompt-tokens is each unique part [default:
    /// 128].
    #[arg(long, value_name = "SHAPE")]
    pub(crate) shape: Option<String>,
    /// Replay a Mooncake-format trace (JSON lines: timestamp ms, input_length,
    /// output_length, hash_ids of 512-token blocks; AIPerf's session_id and delay too): its
    /// schedule replaces the rates, its prompts are regenerated so that equal block ids give
    /// equal text, and each step reports the hit rate they imply beside the server's.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rates", "concurrency", "shape", "prompt", "prompt_tokens"])]
    pub(crate) trace: Option<std::path::PathBuf>,
    /// When a trace's later turns of a conversation are sent: timestamp (at their own time,
    /// answered or not) or think-time (when the turn before has ended, plus its recorded
    /// delay, or else the gap between the two timestamps). run.json records it.
    #[arg(long, value_name = "RULE", requires = "trace")]
    pub(crate) dispatch: Option<String>,
    /// Replay the trace at these speeds, one step each (2x: twice as fast; 1x,2x,4x for
    /// stepped load from one trace) [default: 1x].
    #[arg(long, value_name = "X,X,...", value_delimiter = ',', value_parser = parse_speed, requires = "trace")]
    pub(crate) speed: Option<Vec<f64>>,

    /// Sampling temperature.
    #[arg(long, value_name = "T")]
    pub(crate) temperature: Option<f64>,
    /// Ask the server to ignore end-of-sequence (every answer max_tokens long).
    #[arg(long)]
    pub(crate) ignore_eos: bool,
    /// Give up on a request this long after its intended send time.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,
    /// Open a new connection for every request (as the seeds' k6 did).
    #[arg(long)]
    pub(crate) no_connection_reuse: bool,
    /// Where the server's metrics are (default: URL/metrics).
    #[arg(long, value_name = "URL")]
    pub(crate) metrics_url: Option<String>,
    /// Do not scrape the server's metrics.
    #[arg(long, conflicts_with = "metrics_url")]
    pub(crate) no_metrics: bool,
    /// Send only worker I's share of the plan, of N workers (0-based: 0/4 … 3/4): the I-th of
    /// every N requests of each step, at their intended times, so the N workers together send
    /// the single-client schedule. Its run.json carries the step histograms that `inferscale
    /// merge` adds.
    #[arg(long, value_name = "I/N")]
    pub(crate) segment: Option<String>,
    /// Start the schedule at this instant, RFC 3339 (2026-12-02T15:00:00Z) or Unix seconds:
    /// give every worker of a split run the same. A worker that comes after it starts at once
    /// and records how late it was.
    #[arg(long, value_name = "TIME")]
    pub(crate) start_at: Option<String>,
    /// When done, also print the part to stdout, base64 between BEGIN/END lines, so that
    /// `kubectl logs` carries it out of a pod; `inferscale merge -` reads the logs (the load
    /// Job of `generate --load-job` uses it).
    #[arg(long, requires = "segment")]
    pub(crate) emit_part: bool,
    /// For a simulator running K times faster: rates x K, durations / K, results in its time.
    #[arg(long, value_name = "K")]
    pub(crate) speedup: Option<f64>,
    /// Seed of the random choices (prompts, Poisson arrivals).
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// Sequential warm-up requests before the plan.
    #[arg(long, value_name = "N")]
    pub(crate) warmup: Option<u32>,
    /// Write the result here.
    #[arg(long, value_name = "FILE", default_value = "run.json")]
    pub(crate) out: std::path::PathBuf,
    /// Also write every request as a JSON line here.
    #[arg(long, value_name = "FILE")]
    pub(crate) requests_out: Option<std::path::PathBuf>,
    /// A pass/fail criterion, k6-style: 'p95(e2e)<5s', 'error_rate<1%', 'drop_rate<0.1%'.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub(crate) thresholds: Vec<String>,
    /// The latency SLO a request must meet to count as goodput, any of ttft=, tpot=, e2e=
    /// (ttft=500ms,tpot=50ms,e2e=5s): each step reports its good requests, their share and
    /// rate. TTFT: intended send to first token (a non-streaming request's whole answer);
    /// TPOT: (e2e - TTFT) / (output tokens - 1); e2e: intended send to the answer's end.
    #[arg(long, value_name = "BOUNDS")]
    pub(crate) slo: Option<String>,
    /// Send this many single-token probe requests per second beside the plan, outside its
    /// in-flight cap and on their own connections: each step reports their time to first
    /// token, the stall a newcomer meets (vllm bench serve's probe stream).
    #[arg(long, value_name = "R")]
    pub(crate) probe_rate: Option<f64>,
    /// After Ctrl-C, how long requests in flight may finish [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) grace: Option<Duration>,
    /// Print the result as JSON (run.json's content) instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Credentials for the server.
    #[command(flatten)]
    pub(crate) auth: AuthArgs,
}

/// `inferscale rehearse`.
#[derive(Debug, Args)]
#[command(after_help = "\
Replays traffic against simulated replicas (each one the engine `sim` serves) in virtual time,
under the loops a cluster runs: Prometheus scraping every replica, KEDA polling and serving
the ScaledObject's triggers (their own PromQL, evaluated on the scraped series), the HPA's
15 s sync with the object's behavior, pods waiting for a Karpenter GPU node, pulling the image
and loading the model before they are Ready, draining on scale-in, and empty nodes
consolidated. A day of traffic takes seconds.

Traffic: --trace FILE (CSV time_s,rps, each rate held until the next row; or a request trace
in Mooncake's JSONL, the one `load --trace` replays, as its arrival rate per 10 s) or --pattern, a
list of segments: hold:60@10m, ramp:0..60@10m, drop:0@20m, diurnal:20..500@24h.
Delays: a duration (90s), a uniform range (60s..120s) or a normal (240s±30s, or 240s+-30s).

Examples:
  inferscale rehearse --scaledobject manifests/scaledobject.yaml --pattern 'hold:60@10m,drop:0@20m'
  inferscale rehearse --scaledobject so.yaml --rules manifests/prometheusrule.yaml \\
      --trace day.csv --timeline-out timeline.csv --html-out rehearsal.html --json
  inferscale rehearse --scaledobject a.yaml --compare b.yaml c.yaml --pattern 'ramp:0..200@30m'
  inferscale rehearse --thresholds inferscale-out/thresholds.json --compare-signals \\
      --pattern 'diurnal:20..500@24h'
  inferscale rehearse --scaledobject so.yaml --thresholds t.json --shape multi-turn:6 \\
      --prompt-tokens 384 --pattern 'hold:100@30m' --routing prefix-aware

Prompts: unique by default; the shape or request trace the thresholds were measured with
(thresholds.json's workload.prompts); a request --trace's own; or --shape. Each replica's
prefix cache finds what the prompts share, so how the Service routes matters (--routing).

Exit codes: 0 rehearsed, and the scale-out -> scale-in cycle completed (or was not needed);
1 rehearsed, but the cycle did not complete; 2 a ScaledObject, rule file or trace refused
(the field or line is named) or a bad flag.")]
pub(crate) struct RehearseArgs {
    /// The ScaledObject to rehearse (ours or any).
    #[arg(long, value_name = "FILE", required_unless_present = "compare_signals")]
    pub(crate) scaledobject: Option<std::path::PathBuf>,
    /// Other ScaledObjects under the same traffic, side by side.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) compare: Vec<std::path::PathBuf>,
    /// Also rehearse the built-in signals (queue depth, running requests, KV usage, GPU
    /// utilisation, p95 e2e latency, p95 queue time), each as a ScaledObject derived from
    /// --thresholds.
    #[arg(long, requires = "thresholds")]
    pub(crate) compare_signals: bool,
    /// thresholds.json (for --compare-signals, and the SLO).
    #[arg(long, value_name = "FILE")]
    pub(crate) thresholds: Option<std::path::PathBuf>,
    /// A PrometheusRule (or plain rule file) whose alerts are evaluated on the same series.
    #[arg(long, value_name = "FILE")]
    pub(crate) rules: Option<std::path::PathBuf>,
    /// Traffic as CSV time_s,rps, or a request trace in Mooncake's JSONL (its arrival rate
    /// per 10 s, ending with the trace).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "pattern",
        required_unless_present = "pattern"
    )]
    pub(crate) trace: Option<std::path::PathBuf>,
    /// Traffic as a pattern, e.g. 'ramp:0..60@10m,hold:60@10m,drop:0@20m'.
    #[arg(long, value_name = "SPEC")]
    pub(crate) pattern: Option<String>,
    /// How long to simulate (default: the traffic's end plus 30 minutes).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Hold the traffic's first rate this long before it starts, and judge only what comes
    /// after (as for a deployment that had been running); times in the output are the
    /// rehearsal's, warm-in included.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) warm_in: Option<Duration>,
    /// The replicas.
    #[command(flatten)]
    pub(crate) replica: ReplicaArgs,
    /// The clients.
    #[command(flatten)]
    pub(crate) clients: ClientArgs,
    /// What the prompts share.
    #[command(flatten)]
    pub(crate) sharing: SharingArgs,
    /// The model_name label the replicas' metrics carry (default: thresholds' model, else the
    /// profile's model id).
    #[arg(long, value_name = "NAME")]
    pub(crate) model_name: Option<String>,
    /// Prompt tokens of every request, or with --shape each prompt's unique part
    /// [default: the thresholds' measured mean, else 34; with --shape 128].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) prompt_tokens: Option<u32>,
    /// max_tokens of every request, generated in full [default: the thresholds' measured
    /// mean output, else 100].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) max_tokens: Option<u32>,
    /// Replicas at the start (ready).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub(crate) initial_replicas: u32,
    /// Karpenter's delay from a Pending pod to a Ready GPU node.
    #[arg(long, value_name = "DELAY", default_value = crate::job::rehearse::NODE_PROVISIONING)]
    pub(crate) node_provisioning: String,
    /// The image pull on a node that has not pulled it.
    #[arg(long, value_name = "DELAY", default_value = crate::job::rehearse::IMAGE_PULL)]
    pub(crate) image_pull: String,
    /// Weights, profiling, compile and graph capture (default: the profile's cold start).
    #[arg(long, value_name = "DELAY")]
    pub(crate) model_load: Option<String>,
    /// Warm-up before the readiness probe passes.
    #[arg(long, value_name = "DELAY", default_value = "0s")]
    pub(crate) warmup: String,
    /// GPUs per node (pods per node = this / the profile's tensor-parallel size) [default:
    /// the profile's tensor-parallel size, one replica a node]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) gpus_per_node: Option<u32>,
    /// Karpenter's consolidateAfter: how long a node stays empty before it goes.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub(crate) consolidate_after: Duration,
    /// Nodes carry karpenter.sh/do-not-disrupt: never consolidated.
    #[arg(long)]
    pub(crate) do_not_disrupt: bool,
    /// A Karpenter NodePool (e.g. the generated karpenter-nodepool.yaml) whose
    /// consolidateAfter, consolidation policy and do-not-disrupt annotation the nodes follow
    /// (instead of --consolidate-after and --do-not-disrupt).
    #[arg(long, value_name = "FILE")]
    pub(crate) nodepool: Option<std::path::PathBuf>,
    /// How the Service spreads requests over ready pods.
    #[arg(long, value_enum, default_value_t = RoutingArg::Random)]
    pub(crate) routing: RoutingArg,
    /// Prometheus' scrape interval.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub(crate) scrape_interval: Duration,
    /// The rules' evaluation interval (a rule group's own interval wins).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(crate) rule_interval: Duration,
    /// The end-to-end latency a request must finish within (default: the thresholds' --slo
    /// e2e bound, else their p95 e2e scale-out guardrail, else 5s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) slo_e2e: Option<Duration>,
    /// The seed of every random choice (arrivals, routing, delays, controller phases).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,
    /// Write the timeline (one row per 15 s) as CSV.
    #[arg(long, value_name = "FILE")]
    pub(crate) timeline_out: Option<std::path::PathBuf>,
    /// Write an HTML page (replicas, queue, latency vs SLO, alerts, scale events).
    #[arg(long, value_name = "FILE")]
    pub(crate) html_out: Option<std::path::PathBuf>,
    /// Print the summary as JSON instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `inferscale tune`.
#[derive(Debug, Args)]
#[command(after_help = "\
Searches the scaling policy in the rehearsal (the HPA, KEDA, Prometheus and Karpenter over
simulated replicas, in virtual time) and keeps the cheapest that holds: the SLO met by
--attainment of requests outside the named start-up transients on every trace, and no flap
at a steady load.

  1. The replica's capacity at the SLO: the highest steady rate one replica serves within it.
  2. The traffic suite, in multiples of the measured capacity C: steady 2.5x, 1.5x and 0.6x
     (45 min each), a ramp 0.5x -> 3x -> 0.5x, a day's cosine 0.3x -> 3x compressed into 2 h,
     a step 0.5x -> 2.5x -> 0.5x and a 2-minute spike to 3x; or your --trace files. Held-out
     traces (steady 1.2x, a step to 1.8x, bursts to 2x) are never tuned on and are reported
     apart.
  3. Per trace, the perfect-foresight schedule: the fewest replicas that hold the SLO at each
     instant, each started one start-up ahead. Its GPU-hours are the floor.
  4. The seeds' configuration (queue depth primary) on the suite, for comparison; then
     requests in flight per pod from the highest utilisation down until a policy holds; the
     arrival rate; and cost trims (a scale-down window of one start-up, nodes consolidated at
     once, no queue booster), each kept only if it still holds and costs less.
A step faster than a replica starts cannot be met by scaling out: tune names it, the warm
replicas that would absorb it and their cost a day, and the share of its requests that miss.

Examples:
  inferscale tune --thresholds inferscale-out/thresholds.json --out tuned/
  inferscale generate --thresholds tuned/thresholds.json --out k8s/
  inferscale tune --thresholds t.json --slo-e2e 8s --attainment 99.5 --trace day.csv peak.csv
  inferscale tune --thresholds t.json --profile h100-llama-3.1-70b-tp4 --json > tune.json
  inferscale tune --thresholds t.json --shape system-prompt:8,2000 --prompt-tokens 300 --gateway

Writes into --out: thresholds.json (the input with the chosen policy as `scaling`, which
generate writes the ScaledObject from), tune.json (every rehearsal), tune.html (the page).
Exit codes: 0 a policy held; 1 none held (the closest is said); 2 bad input.")]
pub(crate) struct TuneArgs {
    /// thresholds.json (capacity, latency, queue threshold; the replica calibrated from the
    /// run).
    #[arg(long, value_name = "FILE")]
    pub(crate) thresholds: std::path::PathBuf,
    /// The end-to-end latency a request must finish within [default: the run's --slo e2e
    /// bound, else the thresholds' p95 e2e guardrail].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) slo_e2e: Option<Duration>,
    /// The share of requests, percent, that must meet the SLO outside the named transients.
    #[arg(long, value_name = "PERCENT", default_value_t = 99.0)]
    pub(crate) attainment: f64,
    /// Tune on these traces (CSV time_s,rps, or request traces in Mooncake's JSONL: their
    /// arrival rate per 10 s) instead of the built-in suite.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) trace: Vec<std::path::PathBuf>,
    /// Report these traces apart, never tuning on them [default with the built-in suite: its
    /// held-out traces].
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) held_out: Vec<std::path::PathBuf>,
    /// No held-out traces.
    #[arg(long, conflicts_with = "held_out")]
    pub(crate) no_held_out: bool,
    /// The replicas.
    #[command(flatten)]
    pub(crate) replica: ReplicaArgs,
    /// The clients.
    #[command(flatten)]
    pub(crate) clients: ClientArgs,
    /// The seed of every random choice; every candidate meets the same arrivals.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,
    /// What the prompts share.
    #[command(flatten)]
    pub(crate) sharing: SharingArgs,
    /// With --shape, each prompt's unique part, tokens [default: 128].
    #[arg(long, value_name = "N", requires = "shape", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) prompt_tokens: Option<u32>,
    /// The output folder.
    #[arg(long, value_name = "DIR", default_value = "inferscale-tune")]
    pub(crate) out: std::path::PathBuf,
    /// Print the result as JSON instead of the tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// The cluster the policy is for (its names, replica bounds, cold start).
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
}

/// What the rehearsed prompts share, for the replicas' prefix caches (`rehearse`, `tune`).
#[derive(Debug, Args)]
pub(crate) struct SharingArgs {
    /// Prompts that share prefixes, as `load --shape` sends them: system-prompt:POOL,TOKENS,
    /// few-shot:TOKENS or multi-turn:TURNS,USERS [default: the shape or request trace the
    /// thresholds were measured with (a request --trace's own prompts for that trace), else
    /// unique prompts].
    #[arg(long, value_name = "SPEC")]
    pub(crate) shape: Option<String>,
    /// Send unique prompts (no prefix-cache hits), whatever the thresholds were measured
    /// with.
    #[arg(long, conflicts_with = "shape")]
    pub(crate) unique_prompts: bool,
}

/// How a Service spreads requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RoutingArg {
    /// Uniformly at random (kube-proxy's iptables mode, the default).
    Random,
    /// In turn (IPVS rr).
    RoundRobin,
    /// To the pod with the fewest outstanding requests (a load-aware gateway).
    LeastOutstanding,
    /// To the pod whose prefix cache holds the most of the prompt, unless it is 16 requests
    /// behind the least loaded (an inference gateway such as llm-d's router).
    PrefixAware,
}
