//! The plan of a load run as `run.json` records it: how requests arrive, in which stages, and
//! what they ask. The load generator executes these; the analysis reads them back.

use inferscale_rng::Rng;
use serde::{Deserialize, Serialize};

/// How arrivals are spaced within a stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced, as k6's `constant-arrival-rate` (the first at the stage start).
    #[default]
    Constant,
    /// Exponential gaps (a Poisson process).
    Poisson,
    /// Gamma-distributed gaps with this shape: 1 is Poisson, below 1 burstier, above 1 more
    /// regular (`vllm bench serve`'s "burstiness").
    Gamma {
        /// The shape parameter (> 0).
        shape: f64,
    },
}

/// One stage of an open-loop plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Requests per second at the start of the stage.
    pub rate: f64,
    /// Requests per second at the end (a linear ramp when it differs from `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_rate: Option<f64>,
    /// Seconds of sending.
    pub duration_s: f64,
    /// Seconds of pause after the stage (its requests finish meanwhile).
    #[serde(default)]
    pub rest_s: f64,
    /// Closed loop instead: this many requests in flight at all times, each sent as soon as
    /// one ends (`rate` is then 0 and ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl Stage {
    /// A constant-rate stage.
    pub fn constant(rate: f64, duration_s: f64, rest_s: f64) -> Self {
        Stage {
            rate,
            end_rate: None,
            duration_s,
            rest_s,
            concurrency: None,
        }
    }

    /// A closed-loop stage: `concurrency` requests in flight throughout.
    pub fn closed(concurrency: u32, duration_s: f64, rest_s: f64) -> Self {
        Stage {
            rate: 0.0,
            end_rate: None,
            duration_s,
            rest_s,
            concurrency: Some(concurrency),
        }
    }

    /// Expected requests in the stage (for a closed-loop stage, the ones it starts with).
    pub fn expected_requests(&self) -> f64 {
        match self.concurrency {
            Some(c) => f64::from(c),
            None => (self.rate + self.end_rate.unwrap_or(self.rate)) / 2.0 * self.duration_s,
        }
    }
}

/// Which endpoint requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/completions`.
    #[default]
    Completions,
    /// `POST /v1/chat/completions`.
    Chat,
}

impl Api {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }
}

/// A distribution of token counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Length {
    /// Always this many.
    Fixed {
        /// Tokens.
        tokens: u32,
    },
    /// Uniform between the bounds (inclusive).
    Uniform {
        /// Smallest.
        min: u32,
        /// Largest.
        max: u32,
    },
    /// Normal, clamped to at least 1.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Log-normal with this median and log standard deviation.
    LogNormal {
        /// Median.
        median: f64,
        /// Standard deviation of the log.
        sigma: f64,
    },
}

/// A length that is none of the forms [`Length::parse`] reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid length {input:?} (expected N, uniform:A,B, normal:MEAN,STD or lognormal:MEDIAN,SIGMA)"
)]
pub struct LengthError {
    /// What was given.
    pub input: String,
}

impl Length {
    /// Draws one length (at least 1).
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let v = match *self {
            Length::Fixed { tokens } => f64::from(tokens),
            Length::Uniform { min, max } => {
                f64::from(min) + (rng.next_f64() * f64::from(max.saturating_sub(min) + 1)).floor()
            }
            Length::Normal { mean, std } => mean + std * rng.normal(),
            Length::LogNormal { median, sigma } => (median.ln() + sigma * rng.normal()).exp(),
        };
        v.round().clamp(1.0, 1e7) as u32
    }

    /// Parses `N`, `uniform:A,B`, `normal:MEAN,STD` or `lognormal:MEDIAN,SIGMA`.
    pub fn parse(s: &str) -> Result<Length, LengthError> {
        let bad = || LengthError {
            input: s.to_owned(),
        };
        if let Ok(n) = s.parse::<u32>() {
            return if n > 0 {
                Ok(Length::Fixed { tokens: n })
            } else {
                Err(bad())
            };
        }
        let (kind, args) = s.split_once(':').ok_or_else(bad)?;
        let nums: Vec<f64> = args
            .split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let [a, b] = nums[..] else { return Err(bad()) };
        if !(a.is_finite() && b.is_finite() && a > 0.0 && b >= 0.0) {
            return Err(bad());
        }
        match kind {
            "uniform" if b >= a => Ok(Length::Uniform {
                min: a as u32,
                max: b as u32,
            }),
            "normal" => Ok(Length::Normal { mean: a, std: b }),
            "lognormal" => Ok(Length::LogNormal {
                median: a,
                sigma: b,
            }),
            _ => Err(bad()),
        }
    }
}

/// Where prompts come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PromptSource {
    /// The same text every time.
    Fixed {
        /// The prompt.
        text: String,
    },
    /// The seeds' prompt with a random first word out of 15.
    Seeds,
    /// Generated text of about this many tokens (one common short word per token).
    Synthetic {
        /// Prompt length in tokens.
        length: Length,
    },
    /// Prompts (and, when given, output lengths) from a dataset file.
    Dataset {
        /// The file.
        path: String,
    },
}

/// Everything about the requests of a run except when they are sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSpec {
    /// The endpoint.
    #[serde(default)]
    pub api: Api,
    /// The served model name.
    pub model: String,
    /// The prompts.
    pub prompt: PromptSource,
    /// `max_tokens`: fixed or drawn per request (a dataset's own lengths win when it has them).
    pub max_tokens: Length,
    /// Sampling temperature.
    pub temperature: f64,
    /// Stream the responses.
    pub stream: bool,
    /// vLLM's `ignore_eos`.
    #[serde(default)]
    pub ignore_eos: bool,
}
