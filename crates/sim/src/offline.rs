//! The simulator's two metric endpoints without a server: what `/metrics` and the DCGM
//! exporter would serve for an engine at a moment of virtual time. A virtual-time driver
//! ([`inferscale_engine::fleet`]) uses it to record series as a Prometheus scraping the
//! simulator would, without HTTP or wall time.

use inferscale_autoscale::rehearse::{Exporters, Job};
use inferscale_engine::fleet::Replica;
use inferscale_engine::{Engine, EngineConfig};
use inferscale_promtext::Exposition;

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
        metrics::render(engine.stats(), &self.context(), &HttpStats::default())
    }

    /// The families of `speaks`' `/metrics` that `keep` accepts (by family name), as an
    /// exposition (llama.cpp's from the same statistics).
    pub fn exposition(
        &self,
        speaks: crate::Speaks,
        engine: &Engine,
        keep: &dyn Fn(&str) -> bool,
    ) -> Exposition<'_> {
        match speaks {
            crate::Speaks::Vllm => self.vllm_exposition(engine, keep),
            crate::Speaks::LlamaCpp => metrics::llamacpp_exposition(engine.stats(), keep),
        }
    }

    /// The families of vLLM's `/metrics` that `keep` accepts (by family name), as an
    /// exposition: what a scrape of [`Exporter::vllm`] would store, without writing and
    /// parsing the text (the rehearsal scrapes every replica every 15 s for a day).
    pub fn vllm_exposition(&self, engine: &Engine, keep: &dyn Fn(&str) -> bool) -> Exposition<'_> {
        metrics::exposition(engine.stats(), &self.context(), &HttpStats::default(), keep)
    }

    fn context(&self) -> metrics::Context<'_> {
        metrics::Context {
            model_name: &self.model_name,
            created: self.created_unix,
            gpu_memory_utilization: self.cfg.gpu_memory_utilization,
            prefix_caching: self.cfg.prefix_caching,
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
        }
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

/// The exporters of every replica of a fleet in virtual time, by the fleet's replica ids:
/// what a rehearsal's Prometheus scrapes.
#[derive(Debug, Clone)]
pub struct FleetExporters {
    cfg: EngineConfig,
    model_name: String,
    speaks: crate::Speaks,
    by_replica: std::collections::HashMap<usize, Exporter>,
}

impl FleetExporters {
    /// Exporters for replicas configured as `cfg`, serving `model_name`.
    pub fn new(cfg: &EngineConfig, model_name: &str) -> Self {
        FleetExporters {
            cfg: cfg.clone(),
            model_name: model_name.to_owned(),
            speaks: crate::Speaks::Vllm,
            by_replica: std::collections::HashMap::new(),
        }
    }

    /// The same exporters, serving `speaks`' families.
    pub fn speaking(mut self, speaks: crate::Speaks) -> Self {
        self.speaks = speaks;
        self
    }

    /// Forgets replica `id` (it left).
    pub fn remove(&mut self, id: usize) {
        self.by_replica.remove(&id);
    }
}

/// A replica's engine families that `keep` accepts and, when `keep` accepts any `DCGM_`
/// family, its GPU exporter's, at virtual time `now`.
impl Exporters for FleetExporters {
    fn collect(
        &mut self,
        replica: &Replica,
        now: f64,
        keep: &dyn Fn(&str) -> bool,
        out: &mut dyn FnMut(Job, &Exposition<'_>),
    ) {
        let (cfg, model, id) = (&self.cfg, &self.model_name, replica.id);
        let engine = &replica.engine;
        let e = self
            .by_replica
            .entry(id)
            .or_insert_with(|| Exporter::new(cfg, model, 0.0, id));
        out(Job::Engine, &e.exposition(self.speaks, engine, keep));
        if inferscale_catalog::dcgm::DEFAULT_FIELDS
            .iter()
            .chain(inferscale_catalog::dcgm::ECC_FIELDS)
            .any(|f| keep(f.name))
        {
            let text = e.dcgm(engine, now);
            if let Ok(exp) = inferscale_promtext::parse(text.as_bytes()) {
                out(Job::Gpu, &exp);
            }
        }
    }
}
