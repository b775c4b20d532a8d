//! Which replica a rehearsal runs, what its requests are, how its clients behave and how its
//! pods start: resolved once from the flags and the thresholds, for `rehearse`, `tune` and
//! `run`'s closing rehearsal.

use anyhow::{Result, anyhow, bail};
use inferscale_analysis::Thresholds;
use inferscale_autoscale::cluster::{ClusterSpec, Delay};
use inferscale_autoscale::rehearse::Client;
use inferscale_engine::{EngineConfig, RequestSpec};

use crate::cli::{ClientArg, ClientArgs, ReplicaArgs};

/// The default profile with no thresholds to go by: the seeds' deployment.
pub(crate) const DEFAULT_PROFILE: &str = "aws-eks-ministral-8b-l40s";

/// Karpenter's GPU node, from a Pending pod to a Ready node, seconds (the generated
/// NodePool's assumption).
pub(crate) const NODE_PROVISIONING_S: f64 = 180.0;
/// Pulling a vLLM image (about 10 GB) on a new node, seconds.
pub(crate) const IMAGE_PULL_S: f64 = 60.0;
/// A real server's start-up when nothing says otherwise, seconds.
pub(crate) const UNKNOWN_START_S: u32 = 300;

/// The replica a rehearsal runs, and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    /// Its engine.
    pub(crate) engine: EngineConfig,
    /// In words, for what is printed.
    pub(crate) about: String,
    /// The simulator profile it is, if it is one.
    pub(crate) profile: Option<String>,
}

/// The engine of a named profile.
pub(crate) fn profile_engine(profile: &str) -> Result<EngineConfig> {
    inferscale_engine::profile(profile).ok_or_else(|| {
        anyhow!(
            "unknown profile {profile:?}; the profiles are: {}",
            inferscale_engine::PROFILES
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The simulator profile the thresholds were measured on, if any.
pub(crate) fn measured_profile(t: &Thresholds) -> Option<String> {
    t.source.simulated.as_ref().map(|s| s.profile.clone())
}

/// The replica: `--profile`, else the profile the thresholds were measured on, else (a real
/// server) the replica calibrated from the measurement, else the seeds' profile.
pub(crate) fn resolve(a: &ReplicaArgs, t: Option<&Thresholds>) -> Result<Replica> {
    let fitted = |t: &Thresholds| -> Result<Replica> {
        let fit = t.replica.as_ref().ok_or_else(|| {
            anyhow!(
                "the thresholds carry no replica calibrated from the run (written by inferscale 0.1 before the calibration): run `inferscale analyze` on the run.json again, or give --profile"
            )
        })?;
        Ok(Replica {
            engine: inferscale_autoscale::replica::engine(fit, &t.source.model),
            about: format!(
                "calibrated from the measurement of {} ({}: {:.1} ms a step + {:.3} ms per running request, at most {} running, {:.1} req/s)",
                t.source.url,
                t.source.model,
                fit.step_fixed_s * 1e3,
                fit.step_per_seq_s * 1e3,
                fit.max_concurrency,
                fit.capacity_rps
            ),
            profile: None,
        })
    };
    if let Some(p) = &a.profile {
        return Ok(Replica {
            engine: profile_engine(p)?,
            about: format!("the simulator profile {p}"),
            profile: Some(p.clone()),
        });
    }
    match t {
        Some(t) if a.measured_replica => fitted(t),
        None if a.measured_replica => bail!("--measured-replica needs --thresholds"),
        Some(t) => match measured_profile(t) {
            Some(p) => {
                let mut engine = profile_engine(&p)?;
                // As measured: `run --no-prefix-caching` rehearses replicas without it.
                let cached = t.source.simulated.as_ref().is_none_or(|s| s.prefix_caching);
                engine.prefix_caching &= cached;
                Ok(Replica {
                    engine,
                    about: format!(
                        "the simulator profile {p} (the one the thresholds were measured on{})",
                        if cached { "" } else { ", prefix caching off" }
                    ),
                    profile: Some(p),
                })
            }
            None => fitted(t),
        },
        None => Ok(Replica {
            engine: profile_engine(DEFAULT_PROFILE)?,
            about: format!("the simulator profile {DEFAULT_PROFILE}"),
            profile: Some(DEFAULT_PROFILE.into()),
        }),
    }
}

/// The requests: the flags', else the measured means (the calibrated replica's own), else
/// the seeds' 34-token prompt and 100 tokens out.
pub(crate) fn request(
    prompt: Option<u32>,
    max_tokens: Option<u32>,
    t: Option<&Thresholds>,
) -> RequestSpec {
    let fit = t.and_then(|t| t.replica.as_ref());
    RequestSpec {
        prompt_tokens: prompt
            .or(fit.map(|f| f.prompt_tokens))
            .or_else(|| {
                t.and_then(|t| t.workload.prompt_tokens_mean)
                    .map(|p| p.round().max(1.0) as u32)
            })
            .unwrap_or(34)
            .max(1),
        max_tokens: max_tokens
            .or(fit.map(|f| f.output_tokens))
            .or(t.and_then(|t| t.workload.max_tokens))
            .unwrap_or(100)
            .max(1),
        ignore_eos: true,
    }
}

/// How requests reach the replicas: through an inference gateway (llm-d's router, which
/// scores replicas by the prompt's prefix-cache hits against their load), else a Service
/// (kube-proxy's random choice).
pub(crate) fn routing(gateway: bool) -> inferscale_engine::fleet::Routing {
    if gateway {
        inferscale_engine::fleet::Routing::PrefixAware
    } else {
        inferscale_engine::fleet::Routing::Random
    }
}

/// The clients from the flags.
pub(crate) fn client(a: &ClientArgs) -> Client {
    let mut c = match a.client {
        ClientArg::OpenaiSdk => Client::OPENAI_SDK,
        ClientArg::Patient => Client::PATIENT,
    };
    if let Some(t) = a.client_timeout {
        c.timeout_s = Some(t.as_secs_f64());
    }
    if let Some(r) = a.client_retries {
        c.max_retries = r;
        if c.backoff_max_s == 0.0 {
            c.backoff_initial_s = Client::OPENAI_SDK.backoff_initial_s;
            c.backoff_max_s = Client::OPENAI_SDK.backoff_max_s;
            c.backoff_jitter = Client::OPENAI_SDK.backoff_jitter;
        }
    }
    c
}

/// A new replica's start-up on a new node, seconds: `--cold-start`, else for a simulated
/// profile a node's provisioning, the image pull and the profile's own load, else 5 minutes.
pub(crate) fn cold_start_s(flag: Option<std::time::Duration>, profile: Option<&str>) -> u32 {
    if let Some(d) = flag {
        return u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
    }
    match profile.and_then(inferscale_engine::profile) {
        Some(e) => {
            ((NODE_PROVISIONING_S + IMAGE_PULL_S + e.load_time_s()) / 10.0).ceil() as u32 * 10
        }
        None => UNKNOWN_START_S,
    }
}

/// Pods and nodes as the generated files assume them (`o`): a new node takes the NodePool's
/// provisioning, a replica the rest of the cold start after its node is up, an empty node
/// goes after the NodePool's `consolidateAfter`; one replica's GPUs per node.
pub(crate) fn cluster(
    t: &Thresholds,
    o: &inferscale_manifests::Options,
    engine: &EngineConfig,
    initial: u32,
) -> ClusterSpec {
    let gpus = o
        .nodes
        .gpus_per_replica
        .max(engine.tensor_parallel_size)
        .max(1);
    ClusterSpec {
        gpus_per_node: o.nodes.gpus_per_node.max(gpus),
        gpus_per_pod: gpus,
        node_provisioning: Delay::Fixed(f64::from(o.nodes.provisioning_s)),
        image_pull: Delay::Fixed(0.0),
        model_load: Delay::Fixed(f64::from(
            inferscale_manifests::karpenter::start_on_ready_node_s(o),
        )),
        warmup: Delay::Fixed(0.0),
        consolidate_after_s: f64::from(inferscale_manifests::karpenter::consolidate_after_s(t, o)),
        do_not_disrupt: false,
        initial_nodes: inferscale_manifests::karpenter::nodes_for(initial, o),
    }
}
