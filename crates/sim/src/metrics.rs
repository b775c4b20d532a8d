//! `GET /metrics`: the engine's statistics in exactly the shape vLLM 0.33 serves them (same
//! families and order, HELP text, label names, bucket layouts, `_created` companions and
//! number format), written through `promtext`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex, PoisonError};

use inferscale_catalog::vllm::{
    self, CACHE_CONFIG_INFO, DEPRECATED_FAMILIES, FAMILIES, MetricKind, RUNTIME_FAMILIES, Value,
    VllmFamily, created_name, extra_label_values,
};
use inferscale_engine::stats::{Hist, Stats};
use inferscale_promtext::{Exposition, Format, MetricType, WriteOptions, write};

/// HTTP statistics, as prometheus-fastapi-instrumentator keeps them.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpStats {
    /// Requests by `(handler, method, status class)`.
    pub(crate) requests: BTreeMap<(String, String, String), f64>,
    /// Request sizes by handler: `(count, sum)`.
    pub(crate) request_size: BTreeMap<String, (f64, f64)>,
    /// Response sizes by handler: `(count, sum)`.
    pub(crate) response_size: BTreeMap<String, (f64, f64)>,
    /// Durations over all handlers (fine buckets).
    pub(crate) duration_highr: Option<Hist>,
    /// Durations by `(handler, method)` (coarse buckets).
    pub(crate) duration: BTreeMap<(String, String), Hist>,
}

/// The fine buckets of `http_request_duration_highr_seconds`.
const HIGHR: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    7.5, 10.0, 30.0, 60.0,
];
/// The coarse buckets of `http_request_duration_seconds`.
const COARSE: &[f64] = &[0.1, 0.5, 1.0];

fn hist_with(bounds: &[f64]) -> Hist {
    Hist::with_bounds(bounds.to_vec())
}

impl HttpStats {
    /// Records one handled request (handlers vLLM excludes are not passed in).
    pub(crate) fn record(
        &mut self,
        handler: &str,
        method: &str,
        status: u16,
        req_bytes: f64,
        resp_bytes: f64,
        seconds: f64,
    ) {
        let class = format!("{}xx", status / 100);
        *self
            .requests
            .entry((handler.to_owned(), method.to_owned(), class))
            .or_insert(0.0) += 1.0;
        let r = self
            .request_size
            .entry(handler.to_owned())
            .or_insert((0.0, 0.0));
        r.0 += 1.0;
        r.1 += req_bytes;
        let r = self
            .response_size
            .entry(handler.to_owned())
            .or_insert((0.0, 0.0));
        r.0 += 1.0;
        r.1 += resp_bytes;
        self.duration_highr
            .get_or_insert_with(|| hist_with(HIGHR))
            .observe(seconds);
        self.duration
            .entry((handler.to_owned(), method.to_owned()))
            .or_insert_with(|| hist_with(COARSE))
            .observe(seconds);
    }
}

/// What the renderer needs besides the engine's statistics.
pub(crate) struct Context<'a> {
    /// `model_name` label.
    pub(crate) model_name: &'a str,
    /// Unix time the families were created (the server's start).
    pub(crate) created: f64,
    /// `gpu_memory_utilization` as configured.
    pub(crate) gpu_memory_utilization: f64,
    /// KV cache dtype label (`auto`, `fp8`).
    pub(crate) cache_dtype: &'a str,
    /// Whether prefix caching is on.
    pub(crate) prefix_caching: bool,
    /// Also serve the pre-0.11 names.
    pub(crate) show_deprecated: bool,
    /// The simulator process's own numbers for `process_*`.
    pub(crate) process: ProcessInfo,
}

/// Numbers about the serving process, for the `process_*` families.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessInfo {
    /// Virtual memory, bytes.
    pub(crate) virtual_bytes: f64,
    /// Resident memory, bytes.
    pub(crate) resident_bytes: f64,
    /// Start time, Unix seconds.
    pub(crate) start_time: f64,
    /// CPU seconds used.
    pub(crate) cpu_seconds: f64,
    /// Open file descriptors.
    pub(crate) open_fds: f64,
    /// The descriptor limit.
    pub(crate) max_fds: f64,
}

impl ProcessInfo {
    /// Reads this process's numbers from `/proc` (zeros where unavailable).
    pub(crate) fn current(start_time: f64) -> ProcessInfo {
        let mut p = ProcessInfo {
            start_time,
            max_fds: 1024.0,
            ..ProcessInfo::default()
        };
        if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
            let mut it = statm
                .split_whitespace()
                .map(|x| x.parse::<f64>().unwrap_or(0.0) * 4096.0);
            p.virtual_bytes = it.next().unwrap_or(0.0);
            p.resident_bytes = it.next().unwrap_or(0.0);
        }
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the command name (which may contain spaces) start at ')'.
            if let Some(rest) = stat.rsplit_once(')').map(|x| x.1) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
                p.cpu_seconds = (ticks(11) + ticks(12)) / 100.0;
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            p.open_fds = dir.count() as f64;
        }
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits")
            && let Some(line) = limits.lines().find(|l| l.starts_with("Max open files"))
        {
            p.max_fds = line
                .split_whitespace()
                .nth(3)
                .and_then(|x| x.parse().ok())
                .unwrap_or(1024.0);
        }
        p
    }
}

type Labels<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

fn sorted(mut l: Labels<'_>) -> Labels<'_> {
    l.sort_by(|a, b| a.0.cmp(&b.0));
    l
}

struct Out<'a> {
    exp: Exposition<'a>,
    created: f64,
}

impl<'a> Out<'a> {
    fn family(&mut self, name: impl Into<Cow<'a, str>>, kind: MetricType, help: &'a str) {
        self.exp
            .push_family(name, kind, Some(Cow::Borrowed(help)), None);
    }

    fn sample(&mut self, name: impl Into<Cow<'a, str>>, labels: Labels<'a>, v: f64) {
        self.exp.push_sample(name, sorted(labels), v, None);
    }

    fn hist(&mut self, base: &str, labels: &Labels<'a>, h: &Hist) {
        let bucket = interned(&format!("{base}_bucket"));
        let mut acc = 0;
        for (&le, c) in h.bounds.iter().chain([&f64::INFINITY]).zip(&h.counts) {
            acc += c;
            let mut l = labels.clone();
            l.push((Cow::Borrowed("le"), Cow::Borrowed(le_label(le))));
            self.sample(bucket, l, acc as f64);
        }
        self.sample(format!("{base}_count"), labels.clone(), h.count as f64);
        self.sample(format!("{base}_sum"), labels.clone(), h.sum);
    }

    /// A `_created` gauge family for `name`, one sample per label set.
    fn created(&mut self, name: &str, counter: bool, help: &'a str, label_sets: &[Labels<'a>]) {
        let n = created_name(name, counter);
        self.family(n.clone(), MetricType::Gauge, help);
        for l in label_sets {
            self.sample(n.clone(), l.clone(), self.created);
        }
    }
}

/// Text that the exposition repeats on every scrape (bucket series names, `le` values),
/// made once per process: a histogram writes one sample per bucket, and formatting each
/// bound anew was a tenth of an offline scrape. Bounded by the distinct names and bounds
/// the catalog's families have.
static INTERNED: LazyLock<Mutex<HashMap<String, &'static str>>> = LazyLock::new(Default::default);

fn interned(s: &str) -> &'static str {
    let mut m = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&v) = m.get(s) {
        return v;
    }
    let v: &'static str = Box::leak(s.to_owned().into_boxed_str());
    m.insert(s.to_owned(), v);
    v
}

/// A bucket bound as vLLM writes its `le` label (Python's float repr).
fn le_label(le: f64) -> &'static str {
    static LE: LazyLock<Mutex<HashMap<u64, &'static str>>> = LazyLock::new(Default::default);
    let mut m = LE.lock().unwrap_or_else(PoisonError::into_inner);
    m.entry(le.to_bits()).or_insert_with(|| {
        Box::leak(
            inferscale_promtext::format_float(le, inferscale_promtext::FloatStyle::Python)
                .into_boxed_str(),
        )
    })
}

fn base_labels<'a>(fam: &VllmFamily, model: &'a str) -> Labels<'a> {
    let mut l: Labels<'a> = vec![(Cow::Borrowed("model_name"), Cow::Borrowed(model))];
    if fam.engine_label {
        l.push((Cow::Borrowed("engine"), Cow::Borrowed("0")));
    }
    l
}

/// The value of a scalar vLLM family for one value of its extra label (`None` for families
/// without one). Matched on what the catalog says the family reports, never on its name.
fn scalar(value: Value, extra: Option<&str>, s: &Stats) -> f64 {
    let u = |x: u64| x as f64;
    match value {
        Value::Running => f64::from(s.running),
        Value::Waiting => f64::from(s.waiting),
        Value::WaitingByReason => match extra {
            Some("capacity") => f64::from(s.waiting),
            _ => 0.0,
        },
        Value::SleepState => match extra {
            Some("awake") => 1.0,
            _ => 0.0,
        },
        Value::KvCacheUsage => s.kv_usage,
        Value::PrefixCacheQueries => u(s.prefix_cache_queries),
        Value::PrefixCacheHits => u(s.prefix_cache_hits),
        Value::Preemptions => u(s.preemptions),
        Value::PromptTokens => u(s.prompt_tokens),
        // Prompt tokens the engine computed, and those the prefix cache supplied.
        Value::PromptTokensBySource => match extra {
            Some("local_compute") => u(s.prompt_tokens.saturating_sub(s.prefix_cache_hits)),
            Some("local_cache_hit") => u(s.prefix_cache_hits),
            _ => 0.0,
        },
        Value::GenerationTokens => u(s.generation_tokens),
        Value::FinishedByReason => extra
            .and_then(|r| vllm::FINISH_REASONS.iter().position(|x| *x == r))
            .map_or(0.0, |i| u(s.success[i])),
        // A histogram family is never asked for a scalar; what is not modelled reads zero.
        Value::Histogram(_) | Value::NotModelled => 0.0,
    }
}

/// The engine's histogram a family reports (`None`: not modelled, served empty).
fn histogram(value: Value, s: &Stats) -> Option<&Hist> {
    match value {
        Value::Histogram(h) => Some(s.histogram(h)),
        _ => None,
    }
}

fn vllm_family<'a>(out: &mut Out<'a>, fam: &'a VllmFamily, ctx: &Context<'a>, s: &Stats) {
    let base = base_labels(fam, ctx.model_name);
    let extra = fam.extra_labels.first().copied();
    let values = extra_label_values(fam.name);
    let label_sets: Vec<Labels<'a>> = match (extra, values.is_empty()) {
        (Some(label), false) => values
            .iter()
            .map(|v| {
                let mut l = base.clone();
                l.push((Cow::Borrowed(label), Cow::Borrowed(*v)));
                l
            })
            .collect(),
        _ => vec![base.clone()],
    };
    match fam.kind {
        MetricKind::Gauge | MetricKind::Counter => {
            let kind = if fam.kind == MetricKind::Gauge {
                MetricType::Gauge
            } else {
                MetricType::Counter
            };
            out.family(fam.name, kind, fam.help);
            for (i, l) in label_sets.iter().enumerate() {
                let v = scalar(fam.value, values.get(i).copied(), s);
                out.sample(fam.name, l.clone(), v);
            }
            if kind == MetricType::Counter {
                out.created(fam.name, true, fam.help, &label_sets);
            }
        }
        MetricKind::Histogram => {
            out.family(fam.name, MetricType::Histogram, fam.help);
            let empty;
            let h = match histogram(fam.value, s) {
                Some(h) => h,
                None => {
                    empty = Hist::new(
                        fam.buckets
                            .unwrap_or(inferscale_catalog::buckets::BucketFamily::RequestLatency),
                        2048,
                    );
                    &empty
                }
            };
            out.hist(fam.name, &base, h);
            out.created(fam.name, false, fam.help, &label_sets);
        }
    }
}

fn runtime_family<'a>(
    out: &mut Out<'a>,
    name: &'a str,
    kind: &str,
    help: &'a str,
    ctx: &Context<'a>,
    http: &HttpStats,
) {
    let t = match kind {
        "counter" => MetricType::Counter,
        "histogram" => MetricType::Histogram,
        "summary" => MetricType::Summary,
        _ => MetricType::Gauge,
    };
    let l = |pairs: &[(&'a str, &str)]| -> Labels<'a> {
        pairs
            .iter()
            .map(|(k, v)| (Cow::Borrowed(*k), Cow::Owned((*v).to_owned())))
            .collect()
    };
    let p = &ctx.process;
    out.family(name, t, help);
    match name {
        "python_gc_objects_collected_total"
        | "python_gc_objects_uncollectable_total"
        | "python_gc_collections_total" => {
            for g in ["0", "1", "2"] {
                out.sample(name, l(&[("generation", g)]), 0.0);
            }
        }
        "python_info" => out.sample(
            name,
            l(&[
                ("implementation", "CPython"),
                ("major", "3"),
                ("minor", "12"),
                ("patchlevel", "0"),
                ("version", "3.12.0"),
            ]),
            1.0,
        ),
        "process_virtual_memory_bytes" => out.sample(name, vec![], p.virtual_bytes),
        "process_resident_memory_bytes" => out.sample(name, vec![], p.resident_bytes),
        "process_start_time_seconds" => out.sample(name, vec![], p.start_time),
        "process_cpu_seconds_total" => out.sample(name, vec![], p.cpu_seconds),
        "process_open_fds" => out.sample(name, vec![], p.open_fds),
        "process_max_fds" => out.sample(name, vec![], p.max_fds),
        "http_requests_total" => {
            let sets: Vec<Labels<'a>> = http
                .requests
                .keys()
                .map(|(h, m, st)| l(&[("handler", h), ("method", m), ("status", st)]))
                .collect();
            for (labels, v) in sets.iter().zip(http.requests.values()) {
                out.sample(name, labels.clone(), *v);
            }
            out.created(name, true, help, &sets);
        }
        "http_request_size_bytes" | "http_response_size_bytes" => {
            let map = if name == "http_request_size_bytes" {
                &http.request_size
            } else {
                &http.response_size
            };
            let mut sets = Vec::new();
            for (h, (count, sum)) in map {
                let labels = l(&[("handler", h)]);
                out.sample(format!("{name}_count"), labels.clone(), *count);
                out.sample(format!("{name}_sum"), labels.clone(), *sum);
                sets.push(labels);
            }
            out.created(name, false, help, &sets);
        }
        "http_request_duration_highr_seconds" => {
            let h = http
                .duration_highr
                .clone()
                .unwrap_or_else(|| hist_with(HIGHR));
            out.hist(name, &vec![], &h);
            out.created(name, false, help, &[vec![]]);
        }
        "http_request_duration_seconds" => {
            let mut sets = Vec::new();
            for ((h, m), hist) in &http.duration {
                let labels = l(&[("handler", h), ("method", m)]);
                out.hist(name, &labels, hist);
                sets.push(labels);
            }
            out.created(name, false, help, &sets);
        }
        _ => {}
    }
}

/// Renders the whole `/metrics` body.
pub(crate) fn render(s: &Stats, ctx: &Context<'_>, http: &HttpStats) -> String {
    write(
        &exposition(s, ctx, http, &|_| true),
        WriteOptions::new(Format::PrometheusText),
    )
}

/// The `/metrics` families `keep` accepts (by family name), as an exposition.
pub(crate) fn exposition<'a>(
    s: &Stats,
    ctx: &Context<'a>,
    http: &HttpStats,
    keep: &dyn Fn(&str) -> bool,
) -> Exposition<'a> {
    let mut out = Out {
        exp: Exposition::new(Format::PrometheusText),
        created: ctx.created,
    };
    let (before, after): (Vec<_>, Vec<_>) = RUNTIME_FAMILIES
        .iter()
        .partition(|(n, _, _)| !n.starts_with("http_"));
    for (name, kind, help) in before {
        if keep(name) {
            runtime_family(&mut out, name, kind, help, ctx, http);
        }
    }
    for fam in FAMILIES.iter().filter(|f| keep(f.name)) {
        vllm_family(&mut out, fam, ctx, s);
    }
    if ctx.show_deprecated {
        for (fam, _) in DEPRECATED_FAMILIES.iter().filter(|(f, _)| keep(f.name)) {
            vllm_family(&mut out, fam, ctx, s);
        }
    }
    if keep("vllm:cache_config_info") {
        let block = "16".to_owned();
        let blocks = s.num_gpu_blocks.to_string();
        let util = inferscale_promtext::format_float(
            ctx.gpu_memory_utilization,
            inferscale_promtext::FloatStyle::Python,
        );
        let labels: Labels<'_> = CACHE_CONFIG_INFO
            .iter()
            .map(|(k, v)| {
                let v: Cow<'_, str> = match *k {
                    "block_size" => Cow::Owned(block.clone()),
                    "num_gpu_blocks" => Cow::Owned(blocks.clone()),
                    "gpu_memory_utilization" => Cow::Owned(util.clone()),
                    "cache_dtype" => Cow::Owned(ctx.cache_dtype.to_owned()),
                    "enable_prefix_caching" => {
                        Cow::Borrowed(if ctx.prefix_caching { "True" } else { "False" })
                    }
                    _ => Cow::Borrowed(*v),
                };
                (Cow::Borrowed(*k), v)
            })
            .collect();
        out.family(
            "vllm:cache_config_info",
            MetricType::Gauge,
            "Information of the LLMEngine CacheConfig",
        );
        out.sample("vllm:cache_config_info", labels, 1.0);
    }
    for (name, kind, help) in after {
        if keep(name) {
            runtime_family(&mut out, name, kind, help, ctx, http);
        }
    }
    out.exp
}

/// llama.cpp's `/metrics` families that `keep` accepts, from the same engine statistics:
/// what `sim --engine llamacpp` serves and a rehearsal of a llama.cpp deployment scrapes.
/// Its seconds are summed over requests, as llama.cpp sums each slot's timings; its
/// throughput gauges are averages over the whole run (llama.cpp's reset at each scrape,
/// which a rehearsal's scrapes would race); busy slots per step are the tokens generated
/// per step, one per decoding slot.
pub(crate) fn llamacpp_exposition<'a>(s: &Stats, keep: &dyn Fn(&str) -> bool) -> Exposition<'a> {
    use inferscale_catalog::llamacpp::{FAMILIES, Value as L};
    let mut out = Out {
        exp: Exposition::new(Format::PrometheusText),
        created: 0.0,
    };
    let per = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
    let prompt = s.prompt_tokens.saturating_sub(s.prefix_cache_hits) as f64;
    for fam in FAMILIES.iter().filter(|f| keep(f.name)) {
        let v = match fam.value {
            L::PromptTokens => prompt,
            L::PromptTokensCached => s.prefix_cache_hits as f64,
            L::PromptSeconds => s.prefill_time.sum,
            L::GeneratedTokens => s.generation_tokens as f64,
            L::GeneratedSeconds => s.decode_time.sum,
            L::Decodes => s.steps as f64,
            L::PromptThroughput => per(prompt, s.prefill_time.sum),
            L::GenerationThroughput => per(s.generation_tokens as f64, s.decode_time.sum),
            L::Processing => f64::from(s.running),
            L::Deferred => f64::from(s.waiting),
            L::BusySlotsPerDecode => per(s.generation_tokens as f64, s.steps as f64),
            L::NotModelled => 0.0,
        };
        let kind = match fam.kind {
            MetricKind::Counter => MetricType::Counter,
            _ => MetricType::Gauge,
        };
        out.family(fam.name, kind, fam.help);
        out.sample(fam.name, Vec::new(), v);
    }
    out.exp
}
