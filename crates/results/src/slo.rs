//! A latency SLO and the goodput it defines: the requests that met it.
//!
//! The definitions, since the tools operators compare with do not agree on them (all times in
//! the server's time, from the request's intended send, as every latency in `run.json`):
//! - **TTFT** (time to first token): from the intended send to the first token-bearing
//!   event of the stream. A non-streaming request has no first token apart from its answer:
//!   its TTFT is its end-to-end latency (as the llm-d router counts it).
//! - **TPOT** (time per output token), per request: the time after the first token divided
//!   by the tokens after it, `(e2e − TTFT) / (output tokens − 1)`; a request of one token has
//!   none, and meets any TPOT bound. (vLLM's and GuideLLM's inter-token latency is this
//!   mean; `vllm bench serve` reports it as TPOT too.)
//! - **ITL** (inter-token latency): each gap between consecutive token-bearing events. It is
//!   a distribution over gaps, not over requests, so an SLO does not bound it here.
//! - **E2E**: from the intended send to the end of the answer.
//!
//! A request is **good** when it ended well (a complete, well-formed answer) and each bound
//! the SLO gives holds. A failed, timed-out or dropped request is not good. **Attainment** is
//! good over scheduled; the **goodput rate** is good requests per second of the step's
//! sending window.

use serde::{Deserialize, Serialize};

/// Bounds a request must meet, seconds; `None` bounds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Slo {
    /// Time to first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    /// Time per output token after the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<f64>,
    /// End to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_s: Option<f64>,
}

/// Why an SLO could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--slo {text:?}: {why}")]
pub struct SloError {
    /// What was given.
    pub text: String,
    /// What was wrong.
    pub why: String,
}

/// A duration in seconds from `500ms`, `2s`, `1.5s`, `1m` or a bare number of seconds.
fn seconds(v: &str) -> Option<f64> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('m') {
        (n, 60.0)
    } else {
        (v, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(|x| x * scale)
}

impl Slo {
    /// Reads `ttft=500ms,tpot=50ms,e2e=5s` (any of the three, in any order).
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let err = |why: String| SloError {
            text: text.to_owned(),
            why,
        };
        let mut slo = Slo::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err(format!("{part:?} is not NAME=DURATION")))?;
            let s = seconds(v)
                .ok_or_else(|| err(format!("{v:?} is not a duration above 0 (500ms, 2s, 1.5s)")))?;
            let slot = match k.trim().to_ascii_lowercase().as_str() {
                "ttft" => &mut slo.ttft_s,
                "tpot" => &mut slo.tpot_s,
                "e2e" => &mut slo.e2e_s,
                other => {
                    return Err(err(format!(
                        "{other:?} is not a bound: expected ttft, tpot or e2e"
                    )));
                }
            };
            if slot.replace(s).is_some() {
                return Err(err(format!("{} is given twice", k.trim())));
            }
        }
        if slo.is_empty() {
            return Err(err(
                "no bound given: expected ttft=…, tpot=… and/or e2e=…".into()
            ));
        }
        Ok(slo)
    }

    /// Whether it bounds nothing.
    pub fn is_empty(&self) -> bool {
        self.ttft_s.is_none() && self.tpot_s.is_none() && self.e2e_s.is_none()
    }

    /// Whether a request that ended well with these latencies (seconds; `ttft` `None` for a
    /// non-streaming request, `tpot` `None` for one of a single token) meets it.
    pub fn met(&self, ttft: Option<f64>, tpot: Option<f64>, e2e: f64) -> bool {
        let ttft = ttft.unwrap_or(e2e);
        self.ttft_s.is_none_or(|b| ttft <= b)
            && self.e2e_s.is_none_or(|b| e2e <= b)
            && match (self.tpot_s, tpot) {
                (Some(b), Some(t)) => t <= b,
                _ => true,
            }
    }
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |s: f64| {
            if s < 1.0 {
                format!("{}ms", (s * 1e6).round() / 1e3)
            } else {
                format!("{s}s")
            }
        };
        let parts: Vec<String> = [
            ("ttft", self.ttft_s),
            ("tpot", self.tpot_s),
            ("e2e", self.e2e_s),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", ms(v))))
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// One step's goodput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Goodput {
    /// Requests scheduled in the step.
    pub scheduled: u64,
    /// Of them, good.
    pub good: u64,
    /// `good / scheduled` (1 when none was scheduled).
    pub attainment: f64,
    /// Good requests per second of the step's sending window, req/s.
    pub rate_rps: f64,
}

impl Goodput {
    /// From counts over a window of `duration_s` (server time).
    pub fn of(scheduled: u64, good: u64, duration_s: f64) -> Goodput {
        Goodput {
            scheduled,
            good,
            attainment: if scheduled == 0 {
                1.0
            } else {
                good as f64 / scheduled as f64
            },
            rate_rps: good as f64 / duration_s.max(1e-9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_slo_reads_its_bounds_and_names_what_is_wrong() {
        let s = Slo::parse("ttft=500ms, e2e=5s,tpot=0.05").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.ttft_s, s.tpot_s, s.e2e_s),
            (Some(0.5), Some(0.05), Some(5.0))
        );
        assert_eq!(s.to_string(), "ttft=500ms,tpot=50ms,e2e=5s");
        for (bad, says) in [
            ("ttft", "is not NAME=DURATION"),
            ("ttft=fast", "is not a duration"),
            ("ttft=-1s", "is not a duration"),
            ("itl=50ms", "expected ttft, tpot or e2e"),
            ("e2e=1s,e2e=2s", "given twice"),
            ("", "no bound given"),
        ] {
            let e = Slo::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad} read"));
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_request_meets_every_bound_given() {
        let s = Slo::parse("ttft=1s,tpot=50ms").unwrap_or_else(|e| panic!("{e}"));
        assert!(s.met(Some(0.9), Some(0.05), 30.0), "no e2e bound");
        assert!(!s.met(Some(1.1), Some(0.01), 2.0));
        assert!(!s.met(Some(0.2), Some(0.06), 2.0));
        assert!(s.met(Some(0.2), None, 2.0), "one token: no TPOT");
        // Non-streaming: the TTFT is the whole answer.
        assert!(!s.met(None, Some(0.01), 1.5));
        assert_eq!(Goodput::of(10, 9, 2.0).rate_rps, 4.5);
        assert_eq!(Goodput::of(0, 0, 2.0).attainment, 1.0);
    }
}
