//! How durations and latencies are written, everywhere inferscale prints one.

use std::time::Duration;

/// A duration as operators write it: `250ms`, `5s`, `1m30s`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        return format!("{}ms", (secs * 1000.0).round() as u64);
    }
    if secs < 60.0 {
        let s = format!("{secs:.3}");
        return format!("{}s", s.trim_end_matches('0').trim_end_matches('.'));
    }
    let whole = secs.round() as u64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Prints seconds for a latency: `850µs`, `42.0ms`, `2.48s`.
pub fn format_seconds(secs: f64) -> String {
    if !secs.is_finite() {
        return format!("{secs}");
    }
    if secs < 1e-3 {
        format!("{:.0}µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.1}ms", secs * 1e3)
    } else {
        format!("{secs:.2}s")
    }
}
