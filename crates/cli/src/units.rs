//! Parsing and printing of durations and sizes the way operators write them (`60s`, `1m30s`,
//! `500ms`, `64MiB`).

pub(crate) use inferscale_catalog::units::parse_duration;

pub(crate) use inferscale_loadgen::target::format_duration;

/// Parses a byte size: `1048576`, `512KiB`, `64MiB`, `1GiB` (also `KB`/`MB`/`GB` as powers of
/// ten).
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let bad = || format!("invalid size {s:?} (expected e.g. 65536, 512KiB, 64MiB)");
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..split].parse().map_err(|_| bad())?;
    let scale: u64 = match s[split..].trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(scale)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(bad)
}

pub(crate) use inferscale_catalog::units::format_seconds;

use inferscale_loadgen::plan::MAX_RATE;

/// Parses a request rate: a positive number of requests per second, at most [`MAX_RATE`].
pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= MAX_RATE => Ok(r),
        _ => Err(format!(
            "{s:?} is not a request rate (expected a number of req/s above 0 and at most {MAX_RATE:e})"
        )),
    }
}

/// A trace replay's speed (`2`, `2x`, `0.5x`), for clap.
pub(crate) fn parse_speed(s: &str) -> Result<f64, String> {
    inferscale_loadgen::trace::parse_speed(s).ok_or_else(|| {
        format!("{s:?} is not a speed (expected a factor above 0 and at most 1000, such as 2x)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "s", "5x", "-1s", "1e400", "5 s", "m5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("2KB"), Ok(2000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999999999GiB").is_err());
    }
}
