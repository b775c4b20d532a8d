//! The DCGM exporter's default counters (`etc/default-counters.csv` at d5e5f510): the fields a
//! stock dcgm-exporter serves, their Prometheus types and HELP texts, and the labels it puts on
//! every GPU metric. The simulator's DCGM endpoint serves exactly these.

/// How a DCGM field is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// A gauge.
    Gauge,
    /// A counter (DCGM counters carry no `_total` suffix).
    Counter,
    /// Not a metric: turned into a label on every metric (the driver version).
    Label,
}

/// One default field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcgmField {
    /// The field name, which is also the metric name.
    pub name: &'static str,
    /// Gauge, counter or label.
    pub kind: FieldKind,
    /// The HELP text.
    pub help: &'static str,
    /// What it reads, for whoever derives GPU readings from engine activity (the
    /// simulator): matched exhaustively, so a renamed field keeps its value.
    pub reading: Reading,
}

/// What a DCGM field reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// SM clock, MHz.
    SmClock,
    /// Memory clock, MHz.
    MemClock,
    /// Memory temperature, °C.
    MemoryTemperature,
    /// GPU temperature, °C.
    GpuTemperature,
    /// Power draw, W.
    Power,
    /// Energy since boot, mJ.
    Energy,
    /// GPU utilisation, %.
    GpuUtil,
    /// Memory-copy utilisation, %.
    MemCopyUtil,
    /// Framebuffer free, MiB.
    FbFree,
    /// Framebuffer used, MiB.
    FbUsed,
    /// Framebuffer reserved, MiB.
    FbReserved,
    /// Graphics engine active, 0–1.
    GraphicsActive,
    /// Tensor pipes active, 0–1.
    TensorActive,
    /// DRAM active, 0–1.
    DramActive,
    /// PCIe bytes sent.
    PcieTx,
    /// PCIe bytes received.
    PcieRx,
    /// A healthy GPU's reading of an error or event counter (XID errors, ECC errors,
    /// remapped rows, PCIe replays), or of an engine the model does not use (encoder,
    /// decoder, NVLink, vGPU licence): zero.
    Zero,
    /// A label, not a metric (the driver version).
    NotAMetric,
}

/// The default counters, in the CSV's order.
pub static DEFAULT_FIELDS: &[DcgmField] = &[
    DcgmField {
        name: "DCGM_FI_DEV_SM_CLOCK",
        kind: FieldKind::Gauge,
        help: "SM clock frequency (in MHz).",
        reading: Reading::SmClock,
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEM_CLOCK",
        kind: FieldKind::Gauge,
        help: "Memory clock frequency (in MHz).",
        reading: Reading::MemClock,
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEMORY_TEMP",
        kind: FieldKind::Gauge,
        help: "Memory temperature (in C).",
        reading: Reading::MemoryTemperature,
    },
    DcgmField {
        name: "DCGM_FI_DEV_GPU_TEMP",
        kind: FieldKind::Gauge,
        help: "GPU temperature (in C).",
        reading: Reading::GpuTemperature,
    },
    DcgmField {
        name: "DCGM_FI_DEV_POWER_USAGE",
        kind: FieldKind::Gauge,
        help: "Power draw (in W).",
        reading: Reading::Power,
    },
    DcgmField {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        kind: FieldKind::Counter,
        help: "Total energy consumption since boot (in mJ).",
        reading: Reading::Energy,
    },
    DcgmField {
        name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        kind: FieldKind::Counter,
        help: "Total number of PCIe retries.",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_GPU_UTIL",
        kind: FieldKind::Gauge,
        help: "GPU utilization (in %).",
        reading: Reading::GpuUtil,
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        kind: FieldKind::Gauge,
        help: "Memory utilization (in %).",
        reading: Reading::MemCopyUtil,
    },
    DcgmField {
        name: "DCGM_FI_DEV_ENC_UTIL",
        kind: FieldKind::Gauge,
        help: "Encoder utilization (in %).",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_DEC_UTIL",
        kind: FieldKind::Gauge,
        help: "Decoder utilization (in %).",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_XID_ERRORS",
        kind: FieldKind::Gauge,
        help: "Value of the last XID error encountered.",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_FREE",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory free (in MiB).",
        reading: Reading::FbFree,
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_USED",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory used (in MiB).",
        reading: Reading::FbUsed,
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_RESERVED",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory reserved (in MiB).",
        reading: Reading::FbReserved,
    },
    DcgmField {
        name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        kind: FieldKind::Counter,
        help: "Total number of NVLink bandwidth counters for all lanes.",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        kind: FieldKind::Gauge,
        help: "vGPU License status",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        kind: FieldKind::Counter,
        help: "Number of remapped rows for uncorrectable errors",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        kind: FieldKind::Counter,
        help: "Number of remapped rows for correctable errors",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        kind: FieldKind::Gauge,
        help: "Whether remapping of rows has failed",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DRIVER_VERSION",
        kind: FieldKind::Label,
        help: "Driver Version",
        reading: Reading::NotAMetric,
    },
    DcgmField {
        name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of time the graphics engine is active.",
        reading: Reading::GraphicsActive,
    },
    DcgmField {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of cycles the tensor (HMMA) pipe is active.",
        reading: Reading::TensorActive,
    },
    DcgmField {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of cycles the device memory interface is active sending or receiving data.",
        reading: Reading::DramActive,
    },
    DcgmField {
        name: "DCGM_FI_PROF_PCIE_TX_BYTES",
        kind: FieldKind::Gauge,
        help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        reading: Reading::PcieTx,
    },
    DcgmField {
        name: "DCGM_FI_PROF_PCIE_RX_BYTES",
        kind: FieldKind::Gauge,
        help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        reading: Reading::PcieRx,
    },
];

/// The labels on every GPU metric, in the order the exporter renders them; `Hostname` is
/// `hostname` in builds after 4.5.3-4.8.2, and `container`, `namespace`, `pod` appear with the
/// Kubernetes mapping on.
pub const GPU_LABELS: &[&str] = &[
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "Hostname",
];

/// The field with this name, if it is a default one.
pub fn field(name: &str) -> Option<&'static DcgmField> {
    DEFAULT_FIELDS.iter().find(|f| f.name == name)
}

/// The volatile ECC counters, disabled in the default CSV but commonly enabled (the community
/// guide's Tier 3 watches single-bit errors); the simulator serves them after the defaults.
pub static ECC_FIELDS: &[DcgmField] = &[
    DcgmField {
        name: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        kind: FieldKind::Counter,
        help: "Total number of single-bit volatile ECC errors.",
        reading: Reading::Zero,
    },
    DcgmField {
        name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        kind: FieldKind::Counter,
        help: "Total number of double-bit volatile ECC errors.",
        reading: Reading::Zero,
    },
];
