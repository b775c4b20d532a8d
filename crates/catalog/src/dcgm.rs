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
}

/// The default counters, in the CSV's order.
pub static DEFAULT_FIELDS: &[DcgmField] = &[
    DcgmField {
        name: "DCGM_FI_DEV_SM_CLOCK",
        kind: FieldKind::Gauge,
        help: "SM clock frequency (in MHz).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEM_CLOCK",
        kind: FieldKind::Gauge,
        help: "Memory clock frequency (in MHz).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEMORY_TEMP",
        kind: FieldKind::Gauge,
        help: "Memory temperature (in C).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_GPU_TEMP",
        kind: FieldKind::Gauge,
        help: "GPU temperature (in C).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_POWER_USAGE",
        kind: FieldKind::Gauge,
        help: "Power draw (in W).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        kind: FieldKind::Counter,
        help: "Total energy consumption since boot (in mJ).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        kind: FieldKind::Counter,
        help: "Total number of PCIe retries.",
    },
    DcgmField {
        name: "DCGM_FI_DEV_GPU_UTIL",
        kind: FieldKind::Gauge,
        help: "GPU utilization (in %).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        kind: FieldKind::Gauge,
        help: "Memory utilization (in %).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_ENC_UTIL",
        kind: FieldKind::Gauge,
        help: "Encoder utilization (in %).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_DEC_UTIL",
        kind: FieldKind::Gauge,
        help: "Decoder utilization (in %).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_XID_ERRORS",
        kind: FieldKind::Gauge,
        help: "Value of the last XID error encountered.",
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_FREE",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory free (in MiB).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_USED",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory used (in MiB).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_FB_RESERVED",
        kind: FieldKind::Gauge,
        help: "Framebuffer memory reserved (in MiB).",
    },
    DcgmField {
        name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        kind: FieldKind::Counter,
        help: "Total number of NVLink bandwidth counters for all lanes.",
    },
    DcgmField {
        name: "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        kind: FieldKind::Gauge,
        help: "vGPU License status",
    },
    DcgmField {
        name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        kind: FieldKind::Counter,
        help: "Number of remapped rows for uncorrectable errors",
    },
    DcgmField {
        name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        kind: FieldKind::Counter,
        help: "Number of remapped rows for correctable errors",
    },
    DcgmField {
        name: "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        kind: FieldKind::Gauge,
        help: "Whether remapping of rows has failed",
    },
    DcgmField {
        name: "DCGM_FI_DRIVER_VERSION",
        kind: FieldKind::Label,
        help: "Driver Version",
    },
    DcgmField {
        name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of time the graphics engine is active.",
    },
    DcgmField {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of cycles the tensor (HMMA) pipe is active.",
    },
    DcgmField {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        kind: FieldKind::Gauge,
        help: "Ratio of cycles the device memory interface is active sending or receiving data.",
    },
    DcgmField {
        name: "DCGM_FI_PROF_PCIE_TX_BYTES",
        kind: FieldKind::Gauge,
        help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    },
    DcgmField {
        name: "DCGM_FI_PROF_PCIE_RX_BYTES",
        kind: FieldKind::Gauge,
        help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
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
    },
    DcgmField {
        name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        kind: FieldKind::Counter,
        help: "Total number of double-bit volatile ECC errors.",
    },
];
