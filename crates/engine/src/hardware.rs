//! GPU specifications: the datasheet numbers the cost model runs on, plus the few measured
//! efficiencies that turn peak figures into achievable ones.
//!
//! Sources: NVIDIA datasheets as collected in the project's reference `perf/gpus.csv` (dense
//! tensor throughput is half the sparse figure NVIDIA quotes), memory sizes as `nvidia-smi`
//! reports them, and clocks/idle power from the cards' published specifications. Values marked
//! "approximate" in the table are recalled rather than read from a datasheet; they only affect
//! the simulated DCGM readings (clocks, idle power), never timing.

use serde::{Deserialize, Serialize};

use crate::model::WeightDtype;

/// One GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Short name used on the command line (`L40S`, `H100`, …).
    pub name: String,
    /// What the DCGM exporter reports as `modelName`.
    pub product_name: String,
    /// Device memory as the driver reports it, MiB.
    pub memory_mib: f64,
    /// Peak memory bandwidth, GB/s.
    pub mem_bandwidth_gbps: f64,
    /// Dense BF16 tensor throughput, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOP/s (`None`: no FP8 tensor cores; FP8 weights then run
    /// as weight-only kernels at the BF16 rate).
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 tensor throughput, TFLOP/s (Blackwell: NVFP4 and MXFP4 weights run on it;
    /// `None`: 4-bit weights are dequantised and run at the 16-bit rate).
    #[serde(default)]
    pub fp4_tflops: Option<f64>,
    /// CUDA compute capability (8.0 A100, 8.6 A10G, 8.9 L4/L40S, 9.0 Hopper, 10.0 B200):
    /// which quantised kernels vLLM has for it (`None`: not stated, taken as able).
    #[serde(default)]
    pub compute_capability: Option<f64>,
    /// Fraction of peak bandwidth a large streaming read achieves. Decode measured on vLLM
    /// lands at 55–77 % of the weight-read roofline (reference `perf/README.md` §0); GDDR
    /// parts sit at the low end.
    pub mem_efficiency: f64,
    /// Fraction of peak tensor throughput the model's GEMMs achieve. Fitted
    /// (docs/performance-model.md) on vLLM 0.15 measurements: 0.816, near cuBLAS's large-GEMM
    /// efficiency on Hopper; the reference's prefill MFU of 0.35–0.45 counts attention and
    /// overheads that this model adds apart.
    pub compute_efficiency: f64,
    /// All-reduce bus bandwidth between GPUs of one node, GB/s (NVLink or PCIe, achieved).
    pub interconnect_gbps: f64,
    /// Latency of one small all-reduce, microseconds.
    pub allreduce_latency_us: f64,
    /// Board power limit, W.
    pub tdp_w: f64,
    /// Power at idle, W (approximate).
    pub idle_w: f64,
    /// Maximum SM clock, MHz.
    pub sm_clock_mhz: f64,
    /// SM clock at idle, MHz (approximate).
    pub sm_clock_idle_mhz: f64,
    /// Memory clock, MHz.
    pub mem_clock_mhz: f64,
}

impl GpuSpec {
    /// Device memory in bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_mib * 1024.0 * 1024.0
    }

    /// Whether the vLLM batch defaults of large GPUs apply (≥ 70 GiB and not an A100:
    /// `max_num_seqs` 1024, `max_num_batched_tokens` 8192; otherwise 256 and 2048).
    pub fn large_batch_defaults(&self) -> bool {
        self.memory_mib >= 70.0 * 1024.0 && !self.name.to_ascii_uppercase().contains("A100")
    }

    /// Whether vLLM has kernels for weights stored as `dtype` on this GPU, and how they run:
    /// `Ok(true)` on the format's own tensor cores, `Ok(false)` weight-only (dequantised in
    /// Marlin's kernels and multiplied at the 16-bit rate, which vLLM does from compute
    /// capability 8.0).
    ///
    /// # Errors
    ///
    /// A quantised dtype on a GPU older than compute capability 8.0.
    pub fn runs(&self, dtype: WeightDtype) -> Result<bool, UnsupportedDtype> {
        let native = match dtype {
            WeightDtype::Bf16 => return Ok(true),
            WeightDtype::Fp8 => self.fp8_tflops.is_some(),
            WeightDtype::Nvfp4 | WeightDtype::Mxfp4 => self.fp4_tflops.is_some(),
            WeightDtype::Int4 => false,
        };
        match self.compute_capability {
            Some(cc) if !native && cc < 8.0 => Err(UnsupportedDtype {
                dtype,
                gpu: self.name.clone(),
                compute_capability: cc,
            }),
            _ => Ok(native),
        }
    }

    /// Whether its memory is GDDR rather than HBM: every GDDR part NVIDIA sells streams under
    /// 1 TB/s (L4 300, A10G 600, L40S 864 GB/s) and every HBM part over 1.5 TB/s.
    pub fn gddr(&self) -> bool {
        self.mem_bandwidth_gbps < 1000.0
    }

    /// vLLM's default `(max_num_seqs, max_num_batched_tokens)` on this GPU.
    pub fn batch_defaults(&self) -> (u32, u32) {
        if self.large_batch_defaults() {
            (1024, 8192)
        } else {
            (256, 2048)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn gpu(
    name: &str,
    product: &str,
    memory_mib: f64,
    bw: f64,
    bf16: f64,
    fp8: Option<f64>,
    mem_eff: f64,
    interconnect: (f64, f64),
    power: (f64, f64),
    clocks: (f64, f64, f64),
) -> GpuSpec {
    GpuSpec {
        name: name.to_owned(),
        product_name: product.to_owned(),
        memory_mib,
        mem_bandwidth_gbps: bw,
        bf16_tflops: bf16,
        fp8_tflops: fp8,
        fp4_tflops: None,
        compute_capability: capability(name),
        mem_efficiency: if bw < 1000.0 {
            mem_eff
        } else {
            mem_eff * HBM_MEM_SCALE
        },
        compute_efficiency: COMPUTE_EFFICIENCY,
        interconnect_gbps: interconnect.0,
        allreduce_latency_us: interconnect.1 * ALLREDUCE_LATENCY_SCALE,
        tdp_w: power.0,
        idle_w: power.1,
        sm_clock_mhz: clocks.0,
        sm_clock_idle_mhz: clocks.1,
        mem_clock_mhz: clocks.2,
    }
}

/// Weights a GPU has no vLLM kernels for.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsupportedDtype {
    /// The weights.
    pub dtype: WeightDtype,
    /// The GPU's name.
    pub gpu: String,
    /// Its compute capability.
    pub compute_capability: f64,
}

impl std::fmt::Display for UnsupportedDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cores = match self.dtype {
            WeightDtype::Fp8 => "FP8 (8.9+)",
            WeightDtype::Int4 => "no",
            _ => "FP4 (Blackwell, 10.0+)",
        };
        write!(
            f,
            "{} weights on {} (compute capability {}): vLLM runs them on {cores} tensor cores \
             or, weight-only, in Marlin kernels from compute capability 8.0; this GPU has neither",
            self.dtype.name(),
            self.gpu,
            self.compute_capability
        )
    }
}

impl std::error::Error for UnsupportedDtype {}

/// The compute capability of a built-in GPU (NVIDIA's CUDA GPUs table).
fn capability(name: &str) -> Option<f64> {
    Some(match name {
        "A100-40GB" | "A100-80GB" => 8.0,
        "A10G" => 8.6,
        "L4" | "L40S" => 8.9,
        "H100" | "H100-PCIe" | "H100-NVL" | "H200" => 9.0,
        "B200" | "GB200" => 10.0,
        "B300" => 10.3,
        _ => return None,
    })
}

/// The GEMMs' share of peak tensor throughput, every GPU (fitted; see the field's doc).
pub const COMPUTE_EFFICIENCY: f64 = 0.886;

/// The fitted scale of the HBM parts' streaming efficiencies in the table below: vLLM's
/// decode on them reaches this share of what a large streaming read does (GDDR parts keep
/// their values; docs/performance-model.md).
pub const HBM_MEM_SCALE: f64 = 0.885;

/// The fitted scale of the interconnects' nominal small all-reduce latencies below (vLLM's
/// custom all-reduce beats NCCL's small-message latency; docs/performance-model.md).
pub const ALLREDUCE_LATENCY_SCALE: f64 = 0.60;

/// PCIe Gen4 x16 all-reduce: ~22 GB/s bus bandwidth, ~25 µs per small all-reduce.
const PCIE4: (f64, f64) = (22.0, 25.0);
/// PCIe Gen5 x16.
const PCIE5: (f64, f64) = (45.0, 20.0);

/// The built-in GPUs.
// Long: a table: one GPU's published specifications per entry.
pub fn builtin_gpus() -> Vec<GpuSpec> {
    vec![
        gpu(
            "A10G",
            "NVIDIA A10G",
            23028.0,
            600.0,
            70.0,
            None,
            0.70,
            PCIE4,
            (300.0, 18.0),
            (1710.0, 210.0, 6251.0),
        ),
        gpu(
            "L4",
            "NVIDIA L4",
            23034.0,
            300.0,
            121.0,
            Some(242.5),
            0.70,
            PCIE4,
            (72.0, 16.0),
            (2040.0, 210.0, 6251.0),
        ),
        gpu(
            "L40S",
            "NVIDIA L40S",
            46068.0,
            864.0,
            362.0,
            Some(733.0),
            0.70,
            PCIE4,
            (350.0, 35.0),
            (2520.0, 210.0, 9001.0),
        ),
        gpu(
            "A100-40GB",
            "NVIDIA A100-SXM4-40GB",
            40960.0,
            1555.0,
            312.0,
            None,
            0.78,
            (230.0, 10.0),
            (400.0, 55.0),
            (1410.0, 210.0, 1215.0),
        ),
        gpu(
            "A100-80GB",
            "NVIDIA A100-SXM4-80GB",
            81920.0,
            2039.0,
            312.0,
            None,
            0.78,
            (230.0, 10.0),
            (400.0, 60.0),
            (1410.0, 210.0, 1593.0),
        ),
        gpu(
            "H100",
            "NVIDIA H100 80GB HBM3",
            81559.0,
            3350.0,
            989.0,
            Some(1979.0),
            0.80,
            (370.0, 8.0),
            (700.0, 70.0),
            (1980.0, 345.0, 2619.0),
        ),
        gpu(
            "H100-PCIe",
            "NVIDIA H100 PCIe",
            81559.0,
            2000.0,
            756.0,
            Some(1513.0),
            0.80,
            PCIE5,
            (350.0, 50.0),
            (1755.0, 345.0, 1593.0),
        ),
        gpu(
            "H200",
            "NVIDIA H200",
            143771.0,
            4800.0,
            989.0,
            Some(1979.0),
            0.80,
            (370.0, 8.0),
            (700.0, 75.0),
            (1980.0, 345.0, 3201.0),
        ),
        GpuSpec {
            fp4_tflops: Some(9000.0),
            ..gpu(
                "B200",
                "NVIDIA B200",
                183359.0,
                7700.0,
                2250.0,
                Some(4500.0),
                0.80,
                (740.0, 8.0),
                (1000.0, 140.0),
                (1965.0, 345.0, 3996.0),
            )
        },
        GpuSpec {
            fp4_tflops: Some(13500.0),
            ..gpu(
                "B300",
                "NVIDIA B300 SXM6 AC",
                275040.0,
                7700.0,
                2250.0,
                Some(4500.0),
                0.80,
                (740.0, 8.0),
                (1100.0, 150.0),
                (1965.0, 345.0, 3996.0),
            )
        },
        GpuSpec {
            fp4_tflops: Some(10000.0),
            ..gpu(
                "GB200",
                "NVIDIA GB200",
                189471.0,
                8000.0,
                2500.0,
                Some(5000.0),
                0.80,
                (740.0, 8.0),
                (1200.0, 150.0),
                (1965.0, 345.0, 3996.0),
            )
        },
        gpu(
            "H100-NVL",
            "NVIDIA H100 NVL",
            95830.0,
            3900.0,
            835.0,
            Some(1670.0),
            0.80,
            PCIE5,
            (400.0, 60.0),
            (1785.0, 345.0, 2619.0),
        ),
    ]
}

/// Finds a built-in GPU by name, ignoring case and accepting the ways people and tools
/// write it: common aliases (`h100-sxm`, `a100`, `a100-80`), the `NVIDIA` prefix, spaces
/// for dashes, and the name the driver reports (`NVIDIA H100 80GB HBM3`).
pub fn find_gpu(name: &str) -> Option<GpuSpec> {
    let trimmed = name.trim();
    let all = builtin_gpus();
    if let Some(g) = all
        .iter()
        .find(|g| g.product_name.eq_ignore_ascii_case(trimmed))
    {
        return Some(g.clone());
    }
    let upper = trimmed.to_ascii_uppercase().replace(['_', ' '], "-");
    let n = upper.strip_prefix("NVIDIA-").unwrap_or(&upper);
    let alias = match n {
        "H100-SXM" | "H100-SXM5" | "H100-80GB" | "H100-SXM5-80GB" | "H100-80GB-HBM3" => "H100",
        "H200-SXM" | "H200-141GB" | "H200-SXM-141GB" => "H200",
        "A100" | "A100-80" | "A100-SXM-80GB" | "A100-80GB-SXM" | "A100-SXM4-80GB" => "A100-80GB",
        "A100-40" | "A100-40GB-SXM" | "A100-SXM4-40GB" => "A100-40GB",
        "B200-HGX" | "HGX-B200" => "B200",
        "B300-HGX" | "B300-SXM" | "HGX-B300" | "B300-SXM6-AC" => "B300",
        "H100-SXM-PCIE" | "H100PCIE" | "H100-PCIE-80GB" => "H100-PCIe",
        "L40S-48GB" => "L40S",
        "L4-24GB" => "L4",
        "A10G-24GB" => "A10G",
        other => other,
    };
    all.into_iter().find(|g| g.name.eq_ignore_ascii_case(alias))
}
