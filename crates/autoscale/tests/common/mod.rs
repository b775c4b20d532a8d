//! What the rehearsal tests share: the simulator's exporters, the seeds' setup, and reading
//! a ScaledObject.

#![allow(dead_code)]

use inferscale_autoscale::cluster::{ClusterSpec, Delay};
use inferscale_autoscale::keda::KedaSpec;
use inferscale_autoscale::rehearse::{Client, Setup};
use inferscale_engine::fleet::Routing;
use inferscale_engine::{EngineConfig, RequestSpec, profile};
use inferscale_sim::FleetExporters;

pub(crate) fn eks() -> EngineConfig {
    profile("aws-eks-ministral-8b-l40s").unwrap_or_else(|| unreachable!("a built-in profile"))
}

pub(crate) fn sim(cfg: &EngineConfig) -> FleetExporters {
    FleetExporters::new(cfg, "mistralai/Ministral-3-8B-Instruct-2512")
}

/// The seeds' deployment: one L40S per node, a minute for Karpenter, a minute to pull.
pub(crate) fn setup(duration_s: f64) -> Setup {
    let engine = eks();
    Setup {
        request: RequestSpec {
            prompt_tokens: 34,
            max_tokens: 100,
            ignore_eos: true,
        },
        prompts: None,
        routing: Routing::Random,
        initial_replicas: 1,
        duration_s,
        seed: 1,
        slo_e2e_s: 5.0,
        scrape_interval_s: 15.0,
        hpa_sync_s: 15.0,
        rule_interval_s: 30.0,
        step_s: 15.0,
        cluster: ClusterSpec {
            gpus_per_node: 1,
            gpus_per_pod: 1,
            node_provisioning: Delay::Normal(60.0, 15.0),
            image_pull: Delay::Fixed(60.0),
            model_load: Delay::Fixed(engine.load_time_s()),
            warmup: Delay::Fixed(0.0),
            consolidate_after_s: 300.0,
            do_not_disrupt: false,
            initial_nodes: 1,
        },
        rules: Vec::new(),
        client: Client::PATIENT,
        transients: Vec::new(),
        judge_from_s: 0.0,
        engine,
    }
}

pub(crate) fn keda(path: &str) -> KedaSpec {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let so = inferscale_manifests::objects::load(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    KedaSpec::from_object(&so).unwrap_or_else(|e| panic!("{path}: {e}"))
}
