//! When requests are sent: arrival processes, stages with rests, and the plan they make,
//! computed ahead of the run so sending never waits on arithmetic.
//!
//! Open-loop schedules fix every request's *intended* send time in advance; the load
//! generator measures latency from that time, so a slow server (or a slow client) cannot hide
//! its queueing (no coordinated omission). A closed-loop stage plans only its first
//! `concurrency` requests, at its start; each next one depends on a completion and is sent by
//! the driver (the sequential warm-up is a closed loop of one).

pub use inferscale_results::plan::{Arrival, Stage};
use inferscale_rng::Rng;

/// One planned request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// Seconds from the start of the run.
    pub at: f64,
    /// The stage it belongs to.
    pub stage: usize,
    /// One of a closed-loop stage's initial requests: when it ends, the next is sent at once.
    pub closed: bool,
}

/// Where a stage sits on the run's timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageWindow {
    /// Start of sending, seconds from the run start.
    pub start: f64,
    /// End of sending.
    pub end: f64,
    /// End of the rest that follows.
    pub rest_end: f64,
}

/// Why a schedule is not valid. Stages are numbered from 1, as a plan file lists them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// A gamma arrival process needs a positive shape.
    #[error("the gamma shape must be positive, not {shape}")]
    GammaShape {
        /// What was given.
        shape: f64,
    },
    /// A negative or non-finite rate.
    #[error("stage {stage}: the {what} must be a non-negative number, not {value}")]
    Rate {
        /// 1-based.
        stage: usize,
        /// `rate` or `end rate`.
        what: &'static str,
        /// What was given.
        value: f64,
    },
    /// A stage must last.
    #[error("stage {stage}: the duration must be positive, not {seconds}")]
    Duration {
        /// 1-based.
        stage: usize,
        /// What was given.
        seconds: f64,
    },
    /// A negative rest.
    #[error("stage {stage}: the rest must be a non-negative number of seconds, not {seconds}")]
    Rest {
        /// 1-based.
        stage: usize,
        /// What was given.
        seconds: f64,
    },
    /// A closed-loop concurrency out of range.
    #[error("stage {stage}: the concurrency must be between 1 and 100000, not {concurrency}")]
    Concurrency {
        /// 1-based.
        stage: usize,
        /// What was given.
        concurrency: u32,
    },
    /// More requests than one run should send.
    #[error("stage {stage}: {requests:.0} requests is more than one run should send")]
    TooManyRequests {
        /// 1-based.
        stage: usize,
        /// Expected requests of the stage.
        requests: f64,
    },
}

/// The intended send times of every request of `stages`, in order, and each stage's window.
///
/// ```
/// use inferscale_workload::schedule::{plan, Arrival, Stage};
/// let (reqs, windows) = plan(&[Stage::constant(10.0, 2.0, 1.0), Stage::constant(20.0, 1.0, 0.0)], Arrival::Constant, 0).unwrap();
/// assert_eq!(reqs.len(), 40);
/// assert_eq!(reqs[1].at, 0.1);
/// assert_eq!(windows[1].start, 3.0);
/// assert_eq!(reqs[20].at, 3.0);
/// ```
pub fn plan(
    stages: &[Stage],
    arrival: Arrival,
    seed: u64,
) -> Result<(Vec<Planned>, Vec<StageWindow>), ScheduleError> {
    if let Arrival::Gamma { shape } = arrival
        && !(shape.is_finite() && shape > 0.0)
    {
        return Err(ScheduleError::GammaShape { shape });
    }
    let mut rng = Rng::new(seed ^ 0x5C4E_D01E);
    let mut out = Vec::new();
    let mut windows = Vec::new();
    let mut t0 = 0.0;
    for (i, s) in stages.iter().enumerate() {
        let r1 = s.end_rate.unwrap_or(s.rate);
        for (what, v) in [("rate", s.rate), ("end rate", r1)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ScheduleError::Rate {
                    stage: i + 1,
                    what,
                    value: v,
                });
            }
        }
        if !(s.duration_s.is_finite() && s.duration_s > 0.0) {
            return Err(ScheduleError::Duration {
                stage: i + 1,
                seconds: s.duration_s,
            });
        }
        if !(s.rest_s.is_finite() && s.rest_s >= 0.0) {
            return Err(ScheduleError::Rest {
                stage: i + 1,
                seconds: s.rest_s,
            });
        }
        if let Some(c) = s.concurrency {
            if !(1..=100_000).contains(&c) {
                return Err(ScheduleError::Concurrency {
                    stage: i + 1,
                    concurrency: c,
                });
            }
            out.extend((0..c).map(|_| Planned {
                at: t0,
                stage: i,
                closed: true,
            }));
            windows.push(StageWindow {
                start: t0,
                end: t0 + s.duration_s,
                rest_end: t0 + s.duration_s + s.rest_s,
            });
            t0 += s.duration_s + s.rest_s;
            continue;
        }
        if s.expected_requests() > 50_000_000.0 {
            return Err(ScheduleError::TooManyRequests {
                stage: i + 1,
                requests: s.expected_requests(),
            });
        }
        // Work in "arrival units": the cumulative rate Λ(t) = r0 t + (r1 − r0) t² / (2T), and
        // place arrival k at Λ⁻¹(u_k), with u_k = k for constant arrivals and a renewal
        // process of unit mean otherwise.
        let lambda_total = (s.rate + r1) / 2.0 * s.duration_s;
        let mut u = 0.0;
        loop {
            if u >= lambda_total - 1e-9 {
                break;
            }
            let t = inverse_cumulative(s.rate, r1, s.duration_s, u);
            out.push(Planned {
                at: t0 + t,
                stage: i,
                closed: false,
            });
            u += match arrival {
                Arrival::Constant => 1.0,
                Arrival::Poisson => -(1.0 - rng.next_f64()).ln(),
                Arrival::Gamma { shape } => gamma(&mut rng, shape) / shape,
            };
        }
        windows.push(StageWindow {
            start: t0,
            end: t0 + s.duration_s,
            rest_end: t0 + s.duration_s + s.rest_s,
        });
        t0 += s.duration_s + s.rest_s;
    }
    Ok((out, windows))
}

/// One worker's share of a schedule split across `count` workers (k6's execution segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// 0-based: this worker.
    pub index: u32,
    /// Workers in all.
    pub count: u32,
}

/// A `--segment` that is not one: the text, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// Not `I/N` with two whole numbers.
    #[error(
        "--segment {0:?}: expected I/N, a 0-based worker index below the worker count (0/4 … 3/4)"
    )]
    Shape(String),
    /// Too many workers, or none.
    #[error("--segment {0:?}: between 1 and 1024 workers, not {1}")]
    Count(String, u32),
    /// An index at or past the count.
    #[error("--segment {0:?}: the index is 0-based, so below {1}")]
    Index(String, u32),
}

impl Segment {
    /// The whole schedule, one worker.
    pub const WHOLE: Segment = Segment { index: 0, count: 1 };

    /// Parses `I/N` (`I` 0-based, below `N`; `N` from 1 to 1024).
    ///
    /// # Errors
    ///
    /// Naming the text and what was expected.
    pub fn parse(s: &str) -> Result<Segment, SegmentError> {
        let bad = || SegmentError::Shape(s.to_owned());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if !(1..=1024).contains(&count) {
            return Err(SegmentError::Count(s.to_owned(), count));
        }
        if index >= count {
            return Err(SegmentError::Index(s.to_owned(), count));
        }
        Ok(Segment { index, count })
    }

    /// Which of `planned` (a whole plan, in order) this worker sends: within each stage,
    /// the `k`-th request when `k mod count = index`. Open-loop arrivals keep their
    /// intended times, so the workers' shares interleave into the single-client schedule
    /// whatever the arrival process; a closed-loop stage's clients are dealt out the same way
    /// (as evenly as they go: shares differ by at most one).
    pub fn select(&self, planned: &[Planned]) -> Vec<usize> {
        let mut k = 0u64;
        let mut stage = usize::MAX;
        let mut out = Vec::with_capacity(planned.len() / self.count as usize + 1);
        for (i, p) in planned.iter().enumerate() {
            if p.stage != stage {
                stage = p.stage;
                k = 0;
            }
            if k % u64::from(self.count) == u64::from(self.index) {
                out.push(i);
            }
            k += 1;
        }
        out
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Λ⁻¹(u) for a linear ramp from `r0` to `r1` over `d` seconds.
fn inverse_cumulative(r0: f64, r1: f64, d: f64, u: f64) -> f64 {
    let a = (r1 - r0) / (2.0 * d);
    if a.abs() < 1e-12 {
        return if r0 > 0.0 { u / r0 } else { d };
    }
    // a t² + r0 t − u = 0, the root in [0, d].
    let disc = (r0 * r0 + 4.0 * a * u).max(0.0);
    ((-r0 + disc.sqrt()) / (2.0 * a)).clamp(0.0, d)
}

/// A Gamma(shape, 1) variate (Marsaglia–Tsang; boosted for shape < 1).
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u = rng.next_f64().max(f64::MIN_POSITIVE);
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = rng.next_f64();
        if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(reqs: &[Planned]) -> Vec<f64> {
        reqs.windows(2).map(|w| w[1].at - w[0].at).collect()
    }

    #[test]
    fn constant_arrivals_are_exact() {
        let (r, w) = plan(&[Stage::constant(50.0, 60.0, 30.0)], Arrival::Constant, 1).unwrap();
        assert_eq!(r.len(), 3000);
        assert!(gaps(&r).iter().all(|g| (g - 0.02).abs() < 1e-9));
        assert_eq!(
            w[0],
            StageWindow {
                start: 0.0,
                end: 60.0,
                rest_end: 90.0
            }
        );
    }

    #[test]
    fn poisson_and_gamma_have_the_right_mean_and_spread() {
        for (arrival, cv) in [
            (Arrival::Poisson, 1.0),
            (Arrival::Gamma { shape: 0.25 }, 2.0),
            (Arrival::Gamma { shape: 4.0 }, 0.5),
        ] {
            let (r, _) = plan(&[Stage::constant(100.0, 200.0, 0.0)], arrival, 7).unwrap();
            let n = r.len() as f64;
            assert!((n / 20_000.0 - 1.0).abs() < 0.05, "{arrival:?}: {n}");
            let g = gaps(&r);
            let mean = g.iter().sum::<f64>() / g.len() as f64;
            let sd = (g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
            assert!(
                (sd / mean / cv - 1.0).abs() < 0.1,
                "{arrival:?}: cv {}",
                sd / mean
            );
        }
    }

    #[test]
    fn closed_stages_plan_their_first_wave_only() {
        let (r, w) = plan(
            &[Stage::constant(2.0, 1.0, 1.0), Stage::closed(3, 5.0, 0.0)],
            Arrival::Constant,
            0,
        )
        .unwrap();
        assert_eq!(r.len(), 5);
        assert!(
            r[2..]
                .iter()
                .all(|p| p.closed && p.at == 2.0 && p.stage == 1)
        );
        assert_eq!(w[1].end, 7.0);
        assert!(plan(&[Stage::closed(0, 1.0, 0.0)], Arrival::Constant, 0).is_err());
    }

    #[test]
    fn ramps_are_linear() {
        let (r, _) = plan(
            &[Stage {
                rate: 0.0,
                end_rate: Some(100.0),
                duration_s: 10.0,
                rest_s: 0.0,
                concurrency: None,
            }],
            Arrival::Constant,
            0,
        )
        .unwrap();
        assert_eq!(r.len(), 500);
        // Half the requests of a linear ramp from zero arrive in the last 29 % of it (after
        // 10 s × √½).
        let late = r.iter().filter(|p| p.at >= 10.0 * 0.5f64.sqrt()).count();
        assert!((late as i64 - 250).abs() <= 1, "{late}");
    }

    #[test]
    fn bad_stages_are_refused() {
        assert!(plan(&[Stage::constant(-1.0, 1.0, 0.0)], Arrival::Constant, 0).is_err());
        assert!(plan(&[Stage::constant(1.0, 0.0, 0.0)], Arrival::Constant, 0).is_err());
        assert!(plan(&[Stage::constant(1.0, 1.0, -1.0)], Arrival::Constant, 0).is_err());
        assert!(
            plan(
                &[Stage::constant(1.0, 1.0, 0.0)],
                Arrival::Gamma { shape: 0.0 },
                0
            )
            .is_err()
        );
        assert!(plan(&[Stage::constant(1e9, 1e9, 0.0)], Arrival::Constant, 0).is_err());
    }

    #[test]
    fn segments_interleave_into_the_single_client_schedule() {
        let stages = [
            Stage::constant(37.0, 3.0, 1.0),
            Stage {
                rate: 5.0,
                end_rate: Some(60.0),
                duration_s: 4.0,
                rest_s: 0.5,
                concurrency: None,
            },
            Stage::closed(7, 2.0, 0.0),
            Stage::constant(11.0, 2.0, 0.0),
        ];
        for arrival in [
            Arrival::Constant,
            Arrival::Poisson,
            Arrival::Gamma { shape: 0.3 },
            Arrival::Gamma { shape: 5.0 },
        ] {
            let (whole, _) = plan(&stages, arrival, 42).unwrap();
            for n in [1u32, 2, 3, 4, 7, 13] {
                let mut union: Vec<usize> = Vec::new();
                let mut per_stage = vec![Vec::new(); stages.len()];
                for i in 0..n {
                    let mine = Segment { index: i, count: n }.select(&whole);
                    for (s, share) in per_stage.iter_mut().enumerate() {
                        share.push(mine.iter().filter(|&&j| whole[j].stage == s).count());
                    }
                    union.extend(mine);
                }
                union.sort_unstable();
                // Every request once, none twice: the union is the single-client plan.
                assert_eq!(
                    union,
                    (0..whole.len()).collect::<Vec<_>>(),
                    "{arrival:?} / {n}"
                );
                // Each stage is dealt out as evenly as it goes.
                for share in per_stage {
                    let (lo, hi) = (share.iter().min().unwrap(), share.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{arrival:?} / {n}: {share:?}");
                }
            }
        }
    }

    #[test]
    fn segment_specs_are_checked() {
        assert_eq!(Segment::parse("2/4"), Ok(Segment { index: 2, count: 4 }));
        assert_eq!(Segment::parse("0/1"), Ok(Segment::WHOLE));
        for bad in ["4/4", "1", "a/4", "0/0", "-1/4", "0/2000", "1/2/3"] {
            let e = Segment::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert_eq!(Segment { index: 3, count: 8 }.to_string(), "3/8");
    }
}
