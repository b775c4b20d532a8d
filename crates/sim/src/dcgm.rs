//! A DCGM-exporter endpoint whose readings follow the engine: utilisation from the time the
//! GPU spent in steps, framebuffer use from vLLM's up-front allocation, power between idle and
//! the board limit, clocks from the warm-up state, temperature with a thermal lag.

use std::borrow::Cow;

use inferscale_catalog::dcgm::{DEFAULT_FIELDS, ECC_FIELDS, FieldKind, Reading as Field};
use inferscale_engine::EngineConfig;
use inferscale_engine::hardware::GpuSpec;
use inferscale_promtext::{Exposition, FloatStyle, Format, MetricType, WriteOptions, write};

use crate::replica::Snapshot;

/// What the exporter remembers between collections.
#[derive(Debug, Clone, Default)]
pub(crate) struct DcgmState {
    last_now: f64,
    last_busy: f64,
    last_memory_bound: f64,
    last_bytes: f64,
    last_flops: f64,
    last_generation_tokens: u64,
    energy_mj: f64,
    temperature: Option<f64>,
    reading: Reading,
}

/// One collection's readings (the same for every rank of a tensor-parallel engine).
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    util: f64,
    mem_copy_util: f64,
    tensor_active: f64,
    dram_active: f64,
    power_w: f64,
    sm_clock: f64,
    pcie_tx: f64,
    pcie_rx: f64,
}

/// The exporter's default collection interval is 30 s; readings are averages over the time
/// since the previous scrape, but at least this long, so back-to-back scrapes stay stable.
const MIN_WINDOW_S: f64 = 1.0;

impl DcgmState {
    /// Updates the readings from a new engine snapshot.
    pub(crate) fn collect(&mut self, snap: &Snapshot, gpu: &GpuSpec) {
        let s = &snap.stats;
        let dt = snap.now - self.last_now;
        if dt >= MIN_WINDOW_S || self.last_now == 0.0 {
            let dt = dt.max(1e-9);
            let busy = ((s.gpu_busy_s - self.last_busy) / dt).clamp(0.0, 1.0);
            let mem_bound = ((s.gpu_memory_bound_s - self.last_memory_bound) / dt).clamp(0.0, 1.0);
            let bytes_rate = (s.bytes - self.last_bytes) / dt;
            let flops_rate = (s.flops - self.last_flops) / dt;
            let dram = (bytes_rate / (gpu.mem_bandwidth_gbps * 1e9)).clamp(0.0, 1.0);
            let tensor = (flops_rate / (gpu.bf16_tflops * 1e12)).clamp(0.0, 1.0);
            let tokens_rate = (s.generation_tokens - self.last_generation_tokens) as f64 / dt;
            // Decoding streams memory and draws less than compute-bound prefill.
            let compute_share = (busy - mem_bound).max(0.0);
            let power = gpu.idle_w
                + (gpu.tdp_w - gpu.idle_w) * (0.75 * mem_bound + 0.95 * compute_share).min(1.0);
            self.energy_mj += power * dt * 1000.0;
            // First-order thermal lag towards 30 °C at idle and 80 °C at the power limit.
            let target = 30.0 + 50.0 * (power / gpu.tdp_w);
            let k = 1.0 - (-dt / 60.0).exp();
            let t = self.temperature.unwrap_or(30.0);
            self.temperature = Some(t + (target - t) * k);
            self.reading = Reading {
                util: busy * 100.0,
                mem_copy_util: dram * 100.0,
                tensor_active: tensor,
                dram_active: dram,
                power_w: power,
                sm_clock: if busy > 0.0 {
                    gpu.sm_clock_mhz * snap.clock_fraction
                } else {
                    gpu.sm_clock_idle_mhz
                },
                pcie_tx: 20_000.0 + tokens_rate * 8.0,
                pcie_rx: 30_000.0 + tokens_rate * 64.0,
            };
            self.last_now = snap.now;
            self.last_busy = s.gpu_busy_s;
            self.last_memory_bound = s.gpu_memory_bound_s;
            self.last_bytes = s.bytes;
            self.last_flops = s.flops;
            self.last_generation_tokens = s.generation_tokens;
        }
    }

    /// The exposition, one series per rank.
    pub(crate) fn render(
        &self,
        cfg: &EngineConfig,
        hostname: &str,
        seed: u64,
        replica: usize,
    ) -> String {
        let gpu = &cfg.gpu;
        let r = &self.reading;
        let total_mib = gpu.memory_mib;
        let reserved_mib = (total_mib * 0.007).round();
        // vLLM takes gpu_memory_utilization of the device up front, plus its CUDA context.
        let used_mib = if cfg.instant {
            0.0
        } else {
            (total_mib * cfg.gpu_memory_utilization + 512.0)
                .min(total_mib - reserved_mib)
                .round()
        };
        let free_mib = (total_mib - used_mib - reserved_mib).max(0.0);
        let temp = self.temperature.unwrap_or(30.0).round();
        let mut exp = Exposition::new(Format::PrometheusText);
        let ranks = cfg.tensor_parallel_size.max(1);
        for field in DEFAULT_FIELDS
            .iter()
            .chain(ECC_FIELDS)
            .filter(|f| f.kind != FieldKind::Label)
        {
            let kind = if field.kind == FieldKind::Counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            exp.push_family(field.name, kind, Some(Cow::Borrowed(field.help)), None);
            for rank in 0..ranks {
                let value = match field.reading {
                    Field::SmClock => r.sm_clock.round(),
                    Field::MemClock => gpu.mem_clock_mhz,
                    Field::MemoryTemperature => temp + 6.0,
                    Field::GpuTemperature => temp,
                    Field::Power => (r.power_w * 1000.0).round() / 1000.0,
                    Field::Energy => self.energy_mj.round(),
                    Field::GpuUtil => r.util.round(),
                    Field::MemCopyUtil => r.mem_copy_util.round(),
                    Field::FbFree => free_mib,
                    Field::FbUsed => used_mib,
                    Field::FbReserved => reserved_mib,
                    Field::GraphicsActive => (r.util / 100.0 * 1e6).round() / 1e6,
                    Field::TensorActive => (r.tensor_active * 1e6).round() / 1e6,
                    Field::DramActive => (r.dram_active * 1e6).round() / 1e6,
                    Field::PcieTx => r.pcie_tx.round(),
                    Field::PcieRx => r.pcie_rx.round(),
                    Field::Zero | Field::NotAMetric => 0.0,
                };
                let index = rank as usize;
                let uuid = {
                    let h = inferscale_engine::mix(&[seed, replica as u64, index as u64]);
                    format!(
                        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                        h >> 32,
                        (h >> 16) & 0xffff,
                        h & 0xffff,
                        (h >> 48) ^ 0x4000,
                        h & 0xffff_ffff_ffff
                    )
                };
                let labels: Vec<(Cow<'_, str>, Cow<'_, str>)> = vec![
                    (Cow::Borrowed("gpu"), Cow::Owned(index.to_string())),
                    (Cow::Borrowed("UUID"), Cow::Owned(uuid)),
                    (
                        Cow::Borrowed("pci_bus_id"),
                        Cow::Owned(format!("00000000:{:02X}:00.0", 0x18 + 0x11 * index)),
                    ),
                    (
                        Cow::Borrowed("device"),
                        Cow::Owned(format!("nvidia{index}")),
                    ),
                    (
                        Cow::Borrowed("modelName"),
                        Cow::Owned(gpu.product_name.clone()),
                    ),
                    (Cow::Borrowed("Hostname"), Cow::Owned(hostname.to_owned())),
                    (
                        Cow::Borrowed("DCGM_FI_DRIVER_VERSION"),
                        Cow::Borrowed("570.124.06"),
                    ),
                ];
                exp.push_sample(field.name, labels, value, None);
            }
        }
        write(
            &exp,
            WriteOptions {
                format: Format::PrometheusText,
                float_style: FloatStyle::Dcgm,
            },
        )
    }
}
