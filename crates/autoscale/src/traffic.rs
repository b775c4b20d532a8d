//! The offered load of a rehearsal: a rate over time, as a trace or a pattern, and the
//! seeded Poisson arrivals it implies.
//!
//! A trace is CSV `time_s,rps` (a header line is optional; `#` starts a comment), each rate
//! held until the next row's time and the last one until the end. A pattern is a list of
//! segments, each `kind:rates@duration`:
//!
//! - `hold:60@10m` (also `step:` and `drop:`): 60 req/s for ten minutes;
//! - `ramp:0..60@10m`: from 0 to 60 req/s, linearly;
//! - `diurnal:20..500@24h`: a day: the low rate at the start and the end, the high one
//!   half-way, along a cosine.

use inferscale_rng::Rng;

/// The highest rate a rehearsal takes, req/s.
pub const MAX_RPS: f64 = 100_000.0;

/// One piece of the rate: linear from `r0` to `r1` over `[start, end)`, or a half cosine
/// wave for a diurnal segment.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    start: f64,
    end: f64,
    r0: f64,
    r1: f64,
    diurnal: bool,
}

impl Segment {
    fn rate(&self, t: f64) -> f64 {
        let len = (self.end - self.start).max(1e-9);
        let x = ((t - self.start) / len).clamp(0.0, 1.0);
        if self.diurnal {
            let w = (1.0 - (2.0 * std::f64::consts::PI * x).cos()) / 2.0;
            self.r0 + (self.r1 - self.r0) * w
        } else {
            self.r0 + (self.r1 - self.r0) * x
        }
    }

    fn peak(&self) -> f64 {
        self.r0.max(self.r1)
    }

    /// A bound on how fast the rate changes (req/s per second).
    fn slope(&self) -> f64 {
        let len = (self.end - self.start).max(1e-9);
        let k = if self.diurnal {
            std::f64::consts::PI
        } else {
            1.0
        };
        (self.r1 - self.r0).abs() * k / len
    }
}

/// A trace or pattern that cannot be read: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{where_}: {message}")]
pub struct TrafficError {
    /// `line 4` of a trace, or `segment 2 ("ramp:0..x@1m")` of a pattern.
    pub where_: String,
    /// What was expected.
    pub message: String,
}

/// The offered rate over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    segments: Vec<Segment>,
}

/// One piece of a pattern: how the rate moves over its `seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Piece {
    /// A constant rate (a hold, or a step or drop to it), req/s.
    Hold {
        /// The rate.
        rps: f64,
        /// How long.
        seconds: f64,
    },
    /// A straight line from one rate to another.
    Ramp {
        /// The rate at the start.
        from: f64,
        /// The rate at the end.
        to: f64,
        /// How long.
        seconds: f64,
    },
    /// A day's shape: a cosine from `low` up to `high` at the middle and back to `low`.
    Diurnal {
        /// The rate at the start and the end.
        low: f64,
        /// The rate at the middle.
        high: f64,
        /// How long.
        seconds: f64,
    },
}

impl Piece {
    /// A constant `rps` for `seconds`.
    pub fn hold(rps: f64, seconds: f64) -> Piece {
        Piece::Hold { rps, seconds }
    }

    /// A line from `from` to `to` req/s over `seconds`.
    pub fn ramp(from: f64, to: f64, seconds: f64) -> Piece {
        Piece::Ramp { from, to, seconds }
    }

    fn seconds(&self) -> f64 {
        match *self {
            Piece::Hold { seconds, .. }
            | Piece::Ramp { seconds, .. }
            | Piece::Diurnal { seconds, .. } => seconds,
        }
    }
}

/// A rate in req/s, or `fail` with why not.
fn rate(s: &str, fail: impl Fn(String) -> TrafficError) -> Result<f64, TrafficError> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| fail(format!("{s:?} is not a rate (req/s)")))?;
    if !(0.0..=MAX_RPS).contains(&v) {
        return Err(fail(format!("{v} req/s is outside 0..={MAX_RPS}")));
    }
    Ok(v)
}

impl Traffic {
    /// `pieces` one after another from time 0, then no traffic.
    pub fn of(pieces: &[Piece]) -> Traffic {
        let mut segments = Vec::with_capacity(pieces.len() + 1);
        let mut t = 0.0;
        for p in pieces {
            let (r0, r1, diurnal) = match *p {
                Piece::Hold { rps, .. } => (rps, rps, false),
                Piece::Ramp { from, to, .. } => (from, to, false),
                Piece::Diurnal { low, high, .. } => (low, high, true),
            };
            let end = t + p.seconds();
            segments.push(Segment {
                start: t,
                end,
                r0,
                r1,
                diurnal,
            });
            t = end;
        }
        segments.push(Segment {
            start: t,
            end: f64::INFINITY,
            r0: 0.0,
            r1: 0.0,
            diurnal: false,
        });
        Traffic { segments }
    }

    /// Each `(time_s, rps)` point's rate held until the next point's time, the last one from
    /// its time on, and no traffic before the first. The times rise.
    pub fn steps(points: &[(f64, f64)]) -> Traffic {
        let mut segments = Vec::with_capacity(points.len() + 1);
        if points.first().is_none_or(|p| p.0 > 0.0) {
            segments.push(Segment {
                start: 0.0,
                end: points.first().map_or(f64::INFINITY, |p| p.0),
                r0: 0.0,
                r1: 0.0,
                diurnal: false,
            });
        }
        for (i, &(t, r)) in points.iter().enumerate() {
            let end = points.get(i + 1).map_or(f64::INFINITY, |n| n.0);
            segments.push(Segment {
                start: t,
                end,
                r0: r,
                r1: r,
                diurnal: false,
            });
        }
        Traffic { segments }
    }

    /// A constant rate from 0 on.
    pub fn constant(rps: f64) -> Traffic {
        Traffic {
            segments: vec![Segment {
                start: 0.0,
                end: f64::INFINITY,
                r0: rps,
                r1: rps,
                diurnal: false,
            }],
        }
    }

    /// Reads a CSV trace.
    pub fn from_csv(text: &str) -> Result<Traffic, TrafficError> {
        let mut rows: Vec<(f64, f64)> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let at = || format!("line {}", n + 1);
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let cols: Vec<&str> = line.split(',').map(str::trim).collect();
            if rows.is_empty() && cols.first().is_some_and(|c| c.parse::<f64>().is_err()) {
                if cols != ["time_s", "rps"] {
                    return Err(TrafficError {
                        where_: at(),
                        message: format!("{line:?}: the header must be time_s,rps"),
                    });
                }
                continue;
            }
            if cols.len() != 2 {
                return Err(TrafficError {
                    where_: at(),
                    message: format!("{line:?}: expected two columns, time_s,rps"),
                });
            }
            let t: f64 = cols[0]
                .parse()
                .ok()
                .filter(|t: &f64| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| TrafficError {
                    where_: at(),
                    message: format!("time_s {:?} is not a time of 0 s or more", cols[0]),
                })?;
            let r = rate(cols[1], |m| TrafficError {
                where_: at(),
                message: format!("rps: {m}"),
            })?;
            if let Some(&(prev, _)) = rows.last()
                && t <= prev
            {
                return Err(TrafficError {
                    where_: at(),
                    message: format!("time_s {t} is not after the previous row's {prev}"),
                });
            }
            rows.push((t, r));
        }
        if rows.is_empty() {
            return Err(TrafficError {
                where_: "the trace".into(),
                message: "no rows (expected lines of time_s,rps)".into(),
            });
        }
        Ok(Traffic::steps(&rows))
    }

    /// Reads a pattern, with `duration` reading one duration in seconds.
    pub fn pattern<E: std::fmt::Display>(
        text: &str,
        duration: impl Fn(&str) -> Result<f64, E>,
    ) -> Result<Traffic, TrafficError> {
        let mut pieces = Vec::new();
        for (i, part) in text.split(',').enumerate() {
            let part = part.trim();
            let fail = |m: String| TrafficError {
                where_: format!("segment {} ({part:?})", i + 1),
                message: m,
            };
            let (kind, rest) = part
                .split_once(':')
                .ok_or_else(|| fail("expected kind:rates@duration, e.g. hold:60@10m".into()))?;
            let (rates, len) = rest
                .split_once('@')
                .ok_or_else(|| fail("expected rates@duration, e.g. 60@10m".into()))?;
            let len = duration(len.trim()).map_err(|e| fail(e.to_string()))?;
            if len <= 0.0 {
                return Err(fail("the duration must be more than 0".into()));
            }
            let piece = match kind.trim() {
                "hold" | "step" | "drop" => Piece::hold(rate(rates, fail)?, len),
                "ramp" | "diurnal" => {
                    let (a, b) = rates
                        .split_once("..")
                        .ok_or_else(|| fail(format!("{kind} takes FROM..TO rates")))?;
                    let (a, b) = (rate(a, fail)?, rate(b, fail)?);
                    if kind.trim() == "diurnal" {
                        Piece::Diurnal {
                            low: a,
                            high: b,
                            seconds: len,
                        }
                    } else {
                        Piece::ramp(a, b, len)
                    }
                }
                other => {
                    return Err(fail(format!(
                        "{other:?} is not hold, step, drop, ramp or diurnal"
                    )));
                }
            };
            pieces.push(piece);
        }
        Ok(Traffic::of(&pieces))
    }

    /// The instants where the rate rises at once (a trace's row, a step segment) by more
    /// than `ratio` (1.2: a fifth) and at least `min_rps`: `(time, before, after)`. A rise
    /// at time 0 is not one (whatever runs at the start is sized for it).
    pub fn jumps(&self, ratio: f64, min_rps: f64) -> Vec<(f64, f64, f64)> {
        self.segments
            .windows(2)
            .filter_map(|w| {
                let before = w[0].rate(w[0].end);
                let after = w[1].r0;
                (w[1].start > 0.0 && after > before * ratio && after - before >= min_rps)
                    .then_some((w[1].start, before, after))
            })
            .collect()
    }

    /// The instants where a gradual rise begins (a ramp or a day's shape after a hold, a
    /// fall or the end of another day): `(time, rate)`. A rise at time 0 is not one.
    pub fn rise_starts(&self) -> Vec<(f64, f64)> {
        self.segments
            .windows(2)
            .filter_map(|w| {
                let rising_before = !w[0].diurnal && w[0].r1 > w[0].r0;
                (w[1].start > 0.0 && w[1].r1 > w[1].r0 && !rising_before)
                    .then_some((w[1].start, w[1].r0))
            })
            .collect()
    }

    /// Whether the rate never changes (one held rate from 0 on).
    pub fn is_steady(&self) -> bool {
        let live: Vec<&Segment> = self
            .segments
            .iter()
            .filter(|s| s.end.is_finite() || s.r0 > 0.0)
            .collect();
        live.windows(2)
            .all(|w| w[0].r0 == w[0].r1 && w[0].r1 == w[1].r0 && w[1].r0 == w[1].r1)
            && live.first().is_some_and(|s| s.start == 0.0 && s.r0 == s.r1)
    }

    /// The same traffic `warm_s` seconds later, with its first rate held before it: a
    /// warm-in, after which the deployment is as if it had been running.
    pub fn warmed(&self, warm_s: f64) -> Traffic {
        let r0 = self.rate_at(0.0);
        let mut segments = vec![Segment {
            start: 0.0,
            end: warm_s,
            r0,
            r1: r0,
            diurnal: false,
        }];
        segments.extend(self.segments.iter().map(|s| Segment {
            start: s.start + warm_s,
            end: s.end + warm_s,
            ..*s
        }));
        Traffic { segments }
    }

    /// The same traffic with every rate multiplied by `k`.
    pub fn scaled(&self, k: f64) -> Traffic {
        Traffic {
            segments: self
                .segments
                .iter()
                .map(|s| Segment {
                    r0: (s.r0 * k).min(MAX_RPS),
                    r1: (s.r1 * k).min(MAX_RPS),
                    ..*s
                })
                .collect(),
        }
    }

    /// Where the trace or pattern's last change is (a pattern's end; a trace's last row).
    pub fn natural_end(&self) -> f64 {
        self.segments
            .iter()
            .rev()
            .find(|s| s.end.is_finite())
            .map_or(0.0, |s| s.end)
    }

    /// The rate at `t`.
    pub fn rate_at(&self, t: f64) -> f64 {
        self.segments
            .iter()
            .find(|s| t >= s.start && t < s.end)
            .map_or(0.0, |s| s.rate(t))
    }

    /// The highest rate before `end`.
    pub fn peak(&self, end: f64) -> f64 {
        self.segments
            .iter()
            .filter(|s| s.start < end)
            .map(Segment::peak)
            .fold(0.0, f64::max)
    }

    /// Expected arrivals in `[0, end)` (for sizing), by the trapezoid rule per second.
    pub fn expected(&self, end: f64) -> f64 {
        let mut n = 0.0;
        let mut t = 0.0;
        while t < end {
            let dt = (end - t).min(1.0);
            n += self.rate_at(t + dt / 2.0) * dt;
            t += dt;
        }
        n
    }

    /// Poisson arrival times in `[0, end)`, seeded: thinning of a homogeneous process at
    /// each segment's peak rate.
    pub fn arrivals(&self, end: f64, seed: u64) -> Arrivals<'_> {
        Arrivals {
            traffic: self,
            rng: Rng::new(seed),
            seg: 0,
            t: 0.0,
            end,
            known: None,
        }
    }
}

/// See [`Traffic::arrivals`].
pub struct Arrivals<'a> {
    traffic: &'a Traffic,
    rng: Rng,
    seg: usize,
    t: f64,
    end: f64,
    /// The last rate computed in a diurnal segment: `(t, rate)`. A candidate's verdict is
    /// decided by the rate's bounds around it (the rate moves at most `slope` per second)
    /// when they are clear of the draw, with a margin far above rounding; only a draw
    /// inside them takes a cosine. The decisions, and so the arrivals, are the ones the
    /// rate computed every time gives (a test holds this).
    known: Option<(f64, f64)>,
}

impl Arrivals<'_> {
    /// Whether a candidate at `t` is kept, given the draw `v·peak`.
    fn keep(&mut self, s: &Segment, t: f64, v: f64) -> bool {
        let peak = s.peak();
        let x = v * peak;
        if !s.diurnal {
            return x < s.rate(t);
        }
        if let Some((tk, rk)) = self.known {
            let band = s.slope() * (t - tk).abs() + 1e-9 * peak;
            if x < rk - band {
                return true;
            }
            if x > rk + band {
                return false;
            }
        }
        let r = s.rate(t);
        self.known = Some((t, r));
        x < r
    }
}

impl Iterator for Arrivals<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        loop {
            let s = *self.traffic.segments.get(self.seg)?;
            if self.t >= self.end {
                return None;
            }
            let peak = s.peak();
            if peak <= 0.0 {
                self.t = s.end;
                self.seg += 1;
                self.known = None;
                continue;
            }
            let u = self.rng.next_f64().max(1e-300);
            let next = self.t - u.ln() / peak;
            if next >= s.end {
                // Memoryless: restart the clock at the segment's end.
                self.t = s.end;
                self.seg += 1;
                self.known = None;
                continue;
            }
            self.t = next;
            if next >= self.end {
                return None;
            }
            let keep = s.r0 == s.r1 || {
                let v = self.rng.next_f64();
                self.keep(&s, next, v)
            };
            if keep {
                return Some(next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Result<f64, String> {
        let (n, mul) = if let Some(v) = s.strip_suffix('m') {
            (v, 60.0)
        } else if let Some(v) = s.strip_suffix('h') {
            (v, 3600.0)
        } else {
            (s.strip_suffix('s').unwrap_or(s), 1.0)
        };
        n.parse::<f64>()
            .map(|v| v * mul)
            .map_err(|_| format!("{s:?} is not a duration"))
    }

    #[test]
    fn a_trace_holds_each_rate_until_the_next_row() {
        let t = Traffic::from_csv("time_s,rps\n0,10\n60,20 # peak\n\n120,0\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (t.rate_at(30.0), t.rate_at(60.0), t.rate_at(500.0)),
            (10.0, 20.0, 0.0)
        );
        let n = t.arrivals(180.0, 7).count() as f64;
        assert!((n - 1800.0).abs() < 4.0 * 1800f64.sqrt(), "{n}");
    }

    #[test]
    fn malformed_traces_say_which_line() {
        for (bad, line) in [
            ("time_s,rps\n0,10\n5,x\n", "line 3"),
            ("0,10\n0,20\n", "line 2"),
            ("0,10,3\n", "line 1"),
            ("t,r\n0,1\n", "line 1"),
            ("0,-1\n", "line 1"),
            ("-5,1\n", "line 1"),
            ("0,1e9\n", "line 1"),
        ] {
            let e = Traffic::from_csv(bad).expect_err(bad);
            assert_eq!(e.where_, line, "{bad}: {e}");
        }
        assert!(Traffic::from_csv("time_s,rps\n").is_err());
    }

    #[test]
    fn typed_pieces_and_points_are_what_the_texts_say() {
        let text = Traffic::pattern("ramp:0..60@10m,step:90@5m,diurnal:10..50@1h", secs)
            .unwrap_or_else(|e| panic!("{e}"));
        let typed = Traffic::of(&[
            Piece::ramp(0.0, 60.0, 600.0),
            Piece::hold(90.0, 300.0),
            Piece::Diurnal {
                low: 10.0,
                high: 50.0,
                seconds: 3600.0,
            },
        ]);
        assert_eq!(text, typed);
        let csv = Traffic::from_csv("time_s,rps\n30,10\n60,20\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(csv, Traffic::steps(&[(30.0, 10.0), (60.0, 20.0)]));
        assert_eq!(csv.rate_at(10.0), 0.0);
        assert_eq!(
            Traffic::steps(&[(0.0, 5.0)]),
            Traffic::from_csv("0,5\n").unwrap_or_else(|e| panic!("{e}"))
        );
    }

    #[test]
    fn patterns_ramp_hold_and_follow_a_day() {
        let p = Traffic::pattern("ramp:0..60@10m,hold:60@10m,drop:0@20m", secs)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.rate_at(300.0), 30.0);
        assert_eq!(p.rate_at(900.0), 60.0);
        assert_eq!(p.rate_at(1500.0), 0.0);
        assert_eq!(p.natural_end(), 2400.0);
        let d = Traffic::pattern("diurnal:20..500@24h", secs).unwrap_or_else(|e| panic!("{e}"));
        assert!((d.rate_at(0.0) - 20.0).abs() < 1e-9);
        assert!((d.rate_at(43200.0) - 500.0).abs() < 1e-9);
        assert_eq!(d.peak(86400.0), 500.0);
        let n = p.arrivals(2400.0, 1).count() as f64;
        let want = p.expected(2400.0);
        assert!((n - want).abs() < 4.0 * want.sqrt(), "{n} vs {want}");
        for (bad, seg) in [
            ("hold:60", "segment 1"),
            ("hold:60@10m,wave:1@1m", "segment 2"),
            ("ramp:5@1m", "segment 1"),
            ("hold:1@0s", "segment 1"),
        ] {
            let e = Traffic::pattern(bad, secs).expect_err(bad);
            assert!(e.where_.starts_with(seg), "{bad}: {e}");
        }
    }

    /// The thinning with the rate computed for every candidate, as it was before the
    /// bounds shortcut: the arrivals must be the same, bit for bit.
    fn plain_arrivals(t: &Traffic, end: f64, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        let (mut seg, mut now, mut out) = (0, 0.0, Vec::new());
        while let Some(s) = t.segments.get(seg) {
            if now >= end {
                break;
            }
            let peak = s.peak();
            if peak <= 0.0 {
                (now, seg) = (s.end, seg + 1);
                continue;
            }
            let next = now - rng.next_f64().max(1e-300).ln() / peak;
            if next >= s.end {
                (now, seg) = (s.end, seg + 1);
                continue;
            }
            now = next;
            if next >= end {
                break;
            }
            if s.r0 == s.r1 || rng.next_f64() * peak < s.rate(next) {
                out.push(next);
            }
        }
        out
    }

    #[test]
    fn bounding_the_rate_keeps_every_arrival_the_plain_thinning_keeps() {
        for (pattern, end) in [
            ("diurnal:20..500@1h", 3600.0),
            (
                "diurnal:500..3@7m,hold:0@1m,diurnal:0..900@90s,ramp:900..10@5m",
                1000.0,
            ),
            (
                "diurnal:1..2@2s,diurnal:2..40000@3s,diurnal:40000..0@1s",
                6.0,
            ),
            ("ramp:0..300@10m,diurnal:300..301@10m", 1200.0),
        ] {
            let t = Traffic::pattern(pattern, secs).unwrap_or_else(|e| panic!("{e}"));
            for seed in [1, 7, 42] {
                let fast: Vec<f64> = t.arrivals(end, seed).collect();
                let plain = plain_arrivals(&t, end, seed);
                assert!(!plain.is_empty(), "{pattern}");
                assert_eq!(fast.len(), plain.len(), "{pattern} seed {seed}");
                assert!(
                    fast.iter()
                        .zip(&plain)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{pattern} seed {seed}"
                );
            }
        }
    }
}
