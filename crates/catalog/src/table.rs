//! The text view of a [`Snapshot`]: the three tiers as `inferscale scrape` prints them.

use std::fmt::Write as _;
use std::time::Duration;

use crate::names::NameStatus;
use crate::signal::{Signal, Tier};
use crate::snapshot::Snapshot;
use crate::units::{format_duration, format_seconds};

fn status_key(s: NameStatus) -> &'static str {
    match s {
        NameStatus::Current => "current",
        NameStatus::Deprecated => "deprecated",
        NameStatus::Unverified => "unverified",
    }
}

const MISSING: &str = "-";

fn fmt_count(v: Option<f64>) -> String {
    match v {
        None => MISSING.to_owned(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{}", x as i64),
        Some(x) => format!("{x:.2}"),
    }
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING.to_owned(), |x| format!("{x:.2}/s"))
}

fn fmt_secs(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING.to_owned(), format_seconds)
}

fn fmt_pct(v: Option<f64>, fraction: bool) -> String {
    v.map_or_else(
        || MISSING.to_owned(),
        |x| format!("{:.1}%", if fraction { x * 100.0 } else { x }),
    )
}

/// A note naming the metric a signal was read from, when that is worth knowing.
fn source_note(snap: &Snapshot, signal: Signal) -> String {
    let notes: Vec<String> = snap
        .sources(signal)
        .iter()
        .filter(|n| n.status != NameStatus::Current)
        .map(|n| format!("{} ({})", n.name, status_key(n.status)))
        .collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!("  [{}]", notes.join(", "))
    }
}

fn row(out: &mut String, label: &str, value: &str, note: &str) {
    let _ = writeln!(out, "    {label:<22} {value}{note}");
}

fn counter_cell(snap: &Snapshot, signal: Signal) -> String {
    if snap.window_seconds.is_some() {
        fmt_rate(snap.rate(signal))
    } else {
        fmt_count(snap.value(signal))
    }
}

/// Appends the tables of one snapshot under `title`; `format` names the exposition format.
pub fn render(out: &mut String, title: &str, format: Option<&str>, snap: &Snapshot) {
    let engines = if snap.engines.is_empty() {
        "no known engine".to_owned()
    } else {
        snap.engines
            .iter()
            .map(|e| e.key())
            .collect::<Vec<_>>()
            .join("+")
    };
    let _ = write!(
        out,
        "{title}\n  {engines} · {} families · {} samples",
        snap.families, snap.samples
    );
    if let Some(f) = format {
        let _ = write!(out, " · {f}");
    }
    if let Some(w) = snap.window_seconds {
        let _ = write!(
            out,
            " · window {}",
            format_duration(Duration::from_secs_f64(w))
        );
    }
    out.push('\n');
    if let Some(names) = snap.gateway.names {
        let g = &snap.gateway;
        let _ = writeln!(
            out,
            "  Gateway: an endpoint picker, {} · {} EPP families",
            names.title(),
            g.families
        );
        for (label, v) in [
            (
                "held in flow control",
                g.queue_held.map(|v| format!("{v:.0}")),
            ),
            (
                "pool saturation",
                g.saturation.map(|v| format!("{v:.2} (1.0 gates)")),
            ),
            ("running", g.running.map(|v| format!("{v:.0}"))),
            ("average queue", g.average_queue.map(|v| format!("{v:.1}"))),
            (
                "average KV cache",
                g.average_kv_cache.map(|v| format!("{:.0} %", v * 100.0)),
            ),
            ("ready endpoints", g.ready.map(|v| format!("{v:.0}"))),
            (
                "tokens in flight",
                g.inflight_tokens.map(|v| format!("{v:.0}")),
            ),
            (
                "mean TTFT",
                g.ttft_mean_s
                    .map(|v| format!("{:.0} ms (since start)", v * 1000.0)),
            ),
            (
                "mean NTPOT",
                g.ntpot_mean_s
                    .map(|v| format!("{:.1} ms (since start)", v * 1000.0)),
            ),
        ] {
            let _ = writeln!(out, "    {label:<22} {}", v.unwrap_or_else(|| "-".into()));
        }
    }
    for tier in [Tier::Service, Tier::Engine, Tier::Gpu] {
        let _ = writeln!(out, "  {}", tier.title());
        match tier {
            Tier::Service => render_service(out, snap),
            Tier::Engine => render_engine(out, snap),
            Tier::Gpu => render_gpu(out, snap),
        }
    }
    out.push('\n');
}

fn render_histogram(out: &mut String, snap: &Snapshot, signal: Signal) {
    let h = snap.histogram(signal);
    let value = match &h {
        None => MISSING.to_owned(),
        Some(h) => {
            let q = |p| snap.quantile(signal, p);
            let mean = Some(h.mean()).filter(|m| !m.is_nan());
            format!(
                "p50 {}  p95 {}  p99 {}  mean {}  n={}",
                fmt_secs(q(0.5)),
                fmt_secs(q(0.95)),
                fmt_secs(q(0.99)),
                fmt_secs(mean),
                fmt_count(Some(h.observations()).filter(|n| !n.is_nan()))
            )
        }
    };
    row(out, signal.label(), &value, &source_note(snap, signal));
}

fn render_service(out: &mut String, snap: &Snapshot) {
    for s in [Signal::QueueDepth, Signal::Running] {
        row(
            out,
            s.label(),
            &fmt_count(snap.value(s)),
            &source_note(snap, s),
        );
    }
    let requests = format!(
        "ok {}  aborted {}  errored {}  error rate {}",
        counter_cell(snap, Signal::RequestsOk),
        counter_cell(snap, Signal::RequestsAborted),
        counter_cell(snap, Signal::RequestsErrored),
        fmt_pct(snap.error_rate(), true),
    );
    row(
        out,
        "requests",
        &requests,
        &source_note(snap, Signal::RequestsOk),
    );
    for s in [
        Signal::Ttft,
        Signal::Tpot,
        Signal::Itl,
        Signal::E2eLatency,
        Signal::QueueTime,
    ] {
        render_histogram(out, snap, s);
    }
}

fn render_engine(out: &mut String, snap: &Snapshot) {
    let kv = match snap.value(Signal::KvCacheUsage) {
        None => MISSING.to_owned(),
        Some(mean) => format!(
            "{} (max {})",
            fmt_pct(Some(mean), true),
            fmt_pct(snap.max(Signal::KvCacheUsage), true)
        ),
    };
    row(
        out,
        Signal::KvCacheUsage.label(),
        &kv,
        &source_note(snap, Signal::KvCacheUsage),
    );
    for s in [
        Signal::Preemptions,
        Signal::PromptTokens,
        Signal::GenerationTokens,
    ] {
        row(
            out,
            s.label(),
            &counter_cell(snap, s),
            &source_note(snap, s),
        );
    }
    let it = snap
        .histogram(Signal::IterationTokens)
        .map_or(MISSING.to_owned(), |h| {
            let q = |p| snap.quantile(Signal::IterationTokens, p);
            format!(
                "p50 {}  p95 {}  mean {}",
                fmt_count(q(0.5).map(f64::round)),
                fmt_count(q(0.95).map(f64::round)),
                fmt_count(Some((h.mean() * 10.0).round() / 10.0).filter(|m| !m.is_nan()))
            )
        });
    row(out, Signal::IterationTokens.label(), &it, "");
}

fn render_gpu(out: &mut String, snap: &Snapshot) {
    if snap.gpus.is_empty() {
        row(out, "GPUs", MISSING, "");
        return;
    }
    let summary = format!(
        "{} GPUs  util {}  mem-copy {}  FB used {} MiB  free {} MiB  power {} W  temp max {} °C  ECC SBE {}",
        snap.gpus.len(),
        fmt_pct(snap.value(Signal::GpuUtil), false),
        fmt_pct(snap.value(Signal::MemCopyUtil), false),
        fmt_count(snap.value(Signal::FbUsed)),
        fmt_count(snap.value(Signal::FbFree)),
        fmt_count(snap.value(Signal::Power).map(f64::round)),
        fmt_count(snap.value(Signal::GpuTemp)),
        counter_cell(snap, Signal::EccSbeVolatile),
    );
    row(out, "all", &summary, &source_note(snap, Signal::GpuUtil));
    let _ = writeln!(
        out,
        "    {:<6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>5}  model / host",
        "gpu", "util%", "memcopy%", "FB used", "FB free", "power", "temp", "SM MHz", "ECC",
    );
    for g in &snap.gpus {
        let v = |s: Signal| g.values.get(&s).copied();
        let ident = [g.model.as_deref(), g.host.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" @ ");
        let _ = writeln!(
            out,
            "    {:<6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>5}  {}",
            g.index,
            fmt_count(v(Signal::GpuUtil)),
            fmt_count(v(Signal::MemCopyUtil)),
            fmt_count(v(Signal::FbUsed)),
            fmt_count(v(Signal::FbFree)),
            fmt_count(v(Signal::Power).map(f64::round)),
            fmt_count(v(Signal::GpuTemp)),
            fmt_count(v(Signal::SmClock)),
            fmt_count(v(Signal::EccSbeVolatile)),
            ident
        );
    }
}
