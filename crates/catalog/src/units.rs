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

/// A text that is not a duration [`parse_duration`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    /// The text as given.
    pub text: String,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid duration {:?} (expected e.g. 500ms, 5s, 1m30s, 2h)",
            self.text
        )
    }
}

impl std::error::Error for DurationError {}

/// Parses `250ms`, `5s`, `1.5s`, `2m`, `1h`, `1m30s` (a bare number means seconds).
///
/// # Errors
///
/// When `s` is none of these, or is negative or beyond 10¹² s.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError { text: s.to_owned() };
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs).ok_or_else(bad);
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_end == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    secs_to_duration(total).ok_or_else(bad)
}

fn secs_to_duration(secs: f64) -> Option<Duration> {
    (0.0..1e12)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}
