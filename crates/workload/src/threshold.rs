//! k6-style pass/fail thresholds over a whole run: `p95(e2e)<5s`, `error_rate<1%`.

use crate::record::{Record, latencies, requests};
use inferscale_results::run::{Latencies, Percentiles, Requests, ThresholdResult};

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As written.
    pub expr: String,
    metric: Metric,
    op: Op,
    value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Metric {
    /// `agg(latency)`: agg ∈ p50/p90/p95/p99/max/mean/avg/med, latency ∈ ttft/tpot/itl/e2e.
    Latency { agg: Agg, which: Which },
    /// Failed over scheduled (dropped included in neither numerator nor denominator).
    ErrorRate,
    /// Dropped over scheduled.
    DropRate,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Agg {
    P50,
    P90,
    P95,
    P99,
    Max,
    Mean,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Which {
    Ttft,
    Tpot,
    Itl,
    E2e,
}

/// Why a `--threshold` expression cannot be read. Each names the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// No `<`, `<=`, `>` or `>=`.
    #[error("threshold {expr:?}: no comparison (<, <=, >, >=)")]
    NoComparison {
        /// As given.
        expr: String,
    },
    /// Something other than `agg(latency)`, `error_rate` or `drop_rate` on the left.
    #[error("threshold {expr:?}: expected agg(latency), error_rate or drop_rate on the left")]
    Left {
        /// As given.
        expr: String,
    },
    /// `p95(e2e` without its parenthesis.
    #[error("threshold {expr:?}: missing ')'")]
    Parenthesis {
        /// As given.
        expr: String,
    },
    /// An aggregate we do not compute.
    #[error("threshold {expr:?}: unknown aggregate {found:?} (p50, p90, p95, p99, max, mean)")]
    Aggregate {
        /// As given.
        expr: String,
        /// The aggregate.
        found: String,
    },
    /// A latency we do not measure.
    #[error("threshold {expr:?}: unknown latency {found:?} (ttft, tpot, itl, e2e)")]
    Latency {
        /// As given.
        expr: String,
        /// The latency.
        found: String,
    },
    /// The right-hand side is not a number with a unit.
    #[error("threshold {expr:?}: {found:?} is not a number (with an optional unit: ms, s, %)")]
    Value {
        /// As given.
        expr: String,
        /// The value part.
        found: String,
    },
    /// `p95(e2e)<5%`.
    #[error("threshold {expr:?}: a percentage only applies to error_rate and drop_rate")]
    Percentage {
        /// As given.
        expr: String,
    },
}

fn parse_value(s: &str, expr: &str) -> Result<(f64, bool), ParseError> {
    let bad = || ParseError::Value {
        expr: expr.to_owned(),
        found: s.to_owned(),
    };
    let s = s.trim();
    let (num, scale, pct) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3, false)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1e-6, false)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0, false)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0, false)
    } else if let Some(n) = s.strip_suffix('%') {
        (n, 0.01, true)
    } else {
        (s, 1.0, false)
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !v.is_finite() {
        return Err(bad());
    }
    Ok((v * scale, pct))
}

impl Threshold {
    /// Parses `p95(e2e)<5s`, `max(ttft)<=2s`, `error_rate<1%`, `drop_rate<0.1%`.
    pub fn parse(expr: &str) -> Result<Threshold, ParseError> {
        let owned = || expr.to_owned();
        let e = expr.replace(' ', "");
        let (pos, op, len) = ["<=", ">=", "<", ">"]
            .iter()
            .filter_map(|o| e.find(o).map(|p| (p, *o, o.len())))
            .min_by_key(|(p, _, _)| *p)
            .ok_or_else(|| ParseError::NoComparison { expr: owned() })?;
        let op = match op {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            _ => Op::Gt,
        };
        let (lhs, rhs) = (&e[..pos], &e[pos + len..]);
        let metric = match lhs {
            "error_rate" => Metric::ErrorRate,
            "drop_rate" => Metric::DropRate,
            _ => {
                let (agg, rest) = lhs
                    .split_once('(')
                    .ok_or_else(|| ParseError::Left { expr: owned() })?;
                let which = rest
                    .strip_suffix(')')
                    .ok_or_else(|| ParseError::Parenthesis { expr: owned() })?;
                let agg = match agg {
                    "p50" | "med" => Agg::P50,
                    "p90" => Agg::P90,
                    "p95" => Agg::P95,
                    "p99" => Agg::P99,
                    "max" => Agg::Max,
                    "mean" | "avg" => Agg::Mean,
                    other => {
                        return Err(ParseError::Aggregate {
                            expr: owned(),
                            found: other.to_owned(),
                        });
                    }
                };
                let which = match which {
                    "ttft" => Which::Ttft,
                    "tpot" => Which::Tpot,
                    "itl" => Which::Itl,
                    "e2e" => Which::E2e,
                    other => {
                        return Err(ParseError::Latency {
                            expr: owned(),
                            found: other.to_owned(),
                        });
                    }
                };
                Metric::Latency { agg, which }
            }
        };
        let (value, pct) = parse_value(rhs, expr)?;
        if pct != matches!(metric, Metric::ErrorRate | Metric::DropRate) && pct {
            return Err(ParseError::Percentage { expr: owned() });
        }
        Ok(Threshold {
            expr: expr.to_owned(),
            metric,
            op,
            value,
        })
    }

    /// Evaluates over every record of the run (latencies in server time).
    pub fn evaluate(&self, records: &[Record], speedup: f64) -> ThresholdResult {
        let q = requests(records);
        let l = matches!(self.metric, Metric::Latency { .. })
            .then(|| latencies(records, speedup))
            .unwrap_or_default();
        self.evaluate_on(&q, &l)
    }

    /// Evaluates over a run's outcome counts and latencies (what `inferscale merge` has: the
    /// parts' counts summed and their histograms added).
    pub fn evaluate_on(&self, q: &Requests, l: &Latencies) -> ThresholdResult {
        let value = match self.metric {
            Metric::ErrorRate => {
                let sent = q.ok + q.failed.total;
                (sent > 0).then(|| q.failed.total as f64 / sent as f64)
            }
            Metric::DropRate => (q.scheduled > 0).then(|| q.dropped as f64 / q.scheduled as f64),
            Metric::Latency { agg, which } => {
                let p: Percentiles = match which {
                    Which::Ttft => l.ttft,
                    Which::Tpot => l.tpot,
                    Which::Itl => l.itl,
                    Which::E2e => l.e2e,
                };
                match agg {
                    Agg::P50 => p.p50,
                    Agg::P90 => p.p90,
                    Agg::P95 => p.p95,
                    Agg::P99 => p.p99,
                    Agg::Max => p.max,
                    Agg::Mean => p.mean,
                }
            }
        };
        let ok = value.is_some_and(|v| match self.op {
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
        });
        ThresholdResult {
            expr: self.expr.clone(),
            value,
            ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Outcome, TokenSource};

    fn rec(e2e: f64, outcome: Outcome) -> Record {
        Record {
            index: 0,
            step: 0,
            intended_s: 0.0,
            sent_s: Some(0.0),
            events_s: vec![],
            end_s: Some(e2e),
            outcome,
            output_tokens: Some(10),
            prompt_tokens: None,
            token_source: Some(TokenSource::Usage),
            error: None,
        }
    }

    #[test]
    fn parse_and_evaluate() {
        let rs: Vec<Record> = (0..100)
            .map(|i| {
                rec(
                    f64::from(i) / 10.0,
                    if i < 2 { Outcome::Timeout } else { Outcome::Ok },
                )
            })
            .collect();
        assert!(
            Threshold::parse("p95(e2e)<10s")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
        assert!(
            !Threshold::parse("p95(e2e) < 5s")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
        assert!(
            !Threshold::parse("p95(e2e)<5s")
                .unwrap()
                .evaluate(&rs, 2.0)
                .ok
        );
        let r = Threshold::parse("error_rate<1%")
            .unwrap()
            .evaluate(&rs, 1.0);
        assert_eq!((r.value, r.ok), (Some(0.02), false));
        assert!(
            Threshold::parse("error_rate<=2%")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
        assert!(
            Threshold::parse("max(e2e)<10s")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
        assert!(
            Threshold::parse("max(e2e)>9800ms")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
        // No streaming, no TTFT: a threshold on it fails rather than passing vacuously.
        assert!(
            !Threshold::parse("p95(ttft)<1s")
                .unwrap()
                .evaluate(&rs, 1.0)
                .ok
        );
    }

    #[test]
    fn bad_thresholds_say_why() {
        for (e, needle) in [
            ("p95(e2e)", "no comparison"),
            ("p97(e2e)<1s", "unknown aggregate"),
            ("p95(latency)<1s", "unknown latency"),
            ("p95(e2e)<fast", "not a number"),
            ("p95(e2e)<5%", "percentage"),
            ("throughput>1", "expected agg(latency)"),
        ] {
            assert!(
                Threshold::parse(e)
                    .unwrap_err()
                    .to_string()
                    .contains(needle),
                "{e}"
            );
        }
    }
}
