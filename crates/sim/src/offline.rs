//! The simulator's two metric endpoints without a server: what `/metrics` and the DCGM
//! exporter would serve for an engine at a moment of virtual time. A virtual-time driver
//! ([`inferscale_engine::fleet`]) uses it to record series as a Prometheus scraping the
//! simulator would, without HTTP or wall time.

use inferscale_engine::{Engine, EngineConfig};

use crate::dcgm::DcgmState;
use crate::metrics::{self, HttpStats, ProcessInfo};
use crate::replica::Snapshot;

/// One replica's exporters, with the state the DCGM exporter keeps between collections.
#[derive(Debug, Clone)]
pub struct Exporter {
    cfg: EngineConfig,
    model_name: String,
    created_unix: f64,
    hostname: String,
    replica: usize,
    dcgm: DcgmState,
}

impl Exporter {
    /// The exporters of replica `replica` (its GPU's `gpu` label) of an engine configured as
    /// `cfg`, serving `model_name`, started at `created_unix` (the `_created` samples).
    pub fn new(cfg: &EngineConfig, model_name: &str, created_unix: f64, replica: usize) -> Self {
        Exporter {
            cfg: cfg.clone(),
            model_name: model_name.to_owned(),
            created_unix,
            hostname: format!("inferscale-sim-{replica}"),
            replica,
            dcgm: DcgmState::default(),
        }
    }

    /// vLLM's `/metrics` body for `engine` now (the process and HTTP families at rest).
    pub fn vllm(&self, engine: &Engine) -> String {
        let ctx = metrics::Context {
            model_name: &self.model_name,
            created: self.created_unix,
            gpu_memory_utilization: self.cfg.gpu_memory_utilization,
            cache_dtype: if self.cfg.kv_dtype_bytes < 2.0 {
                "fp8"
            } else {
                "auto"
            },
            show_deprecated: false,
            process: ProcessInfo {
                start_time: self.created_unix,
                max_fds: 1024.0,
                ..ProcessInfo::default()
            },
        };
        metrics::render(engine.stats(), &ctx, &HttpStats::default())
    }

    /// The DCGM exporter's body for `engine` at virtual time `now` (readings averaged since
    /// the previous call, as the exporter averages over its collection interval).
    pub fn dcgm(&mut self, engine: &Engine, now: f64) -> String {
        let snap = Snapshot {
            stats: engine.stats().clone(),
            clock_fraction: engine.clock_fraction(),
            now,
        };
        self.dcgm.collect(&snap, &self.cfg.gpu);
        self.dcgm
            .render(&self.cfg, &self.hostname, self.cfg.seed, self.replica)
    }
}
