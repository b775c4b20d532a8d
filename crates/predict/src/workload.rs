//! What is sent: request lengths, how they arrive, for how long, and what the client does
//! with a slow one.

use inferscale_engine::{PromptCycle, Rng};
use serde::Serialize;

/// A length distribution, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Dist {
    /// Always this many.
    Fixed {
        /// Tokens.
        n: u32,
    },
    /// Uniform between the two, inclusive.
    Uniform {
        /// Fewest.
        lo: u32,
        /// Most.
        hi: u32,
    },
    /// A fractional mean, as published figures are (217.4 tokens): the two whole lengths
    /// either side, in the proportion that keeps the mean.
    Mean {
        /// Tokens, at least 1.
        mean: f64,
    },
    /// Normal, rounded, clamped to `[min, max]`.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
        /// Fewest.
        min: u32,
        /// Most.
        max: u32,
    },
}

impl Dist {
    /// `mean` tokens: [`Dist::Fixed`] when it is whole, [`Dist::Mean`] otherwise.
    pub fn of_mean(mean: f64) -> Dist {
        if mean.fract() == 0.0 && mean >= 1.0 && mean <= f64::from(u32::MAX) {
            Dist::Fixed { n: mean as u32 }
        } else {
            Dist::Mean {
                mean: mean.max(1.0),
            }
        }
    }

    /// `mean` tokens with a standard deviation (`std` ≤ 0: [`Dist::of_mean`]): normal,
    /// clamped to ±4σ and to at least one token.
    pub fn with_std(mean: f64, std: Option<f64>) -> Dist {
        match std.filter(|s| *s > 0.0) {
            Some(sd) => Dist::Normal {
                mean,
                std: sd,
                min: (mean - 4.0 * sd).max(1.0) as u32,
                max: (mean + 4.0 * sd).ceil() as u32,
            },
            None => Dist::of_mean(mean),
        }
    }

    /// One draw.
    pub fn draw(&self, rng: &mut Rng) -> u32 {
        match *self {
            Dist::Fixed { n } => n,
            Dist::Uniform { lo, hi } => {
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                lo + (rng.next_f64() * f64::from(hi - lo + 1)).floor() as u32
            }
            Dist::Mean { mean } => {
                let lo = mean.floor();
                let up = rng.next_f64() < mean - lo;
                (lo as u32 + u32::from(up)).max(1)
            }
            Dist::Normal {
                mean,
                std,
                min,
                max,
            } => (mean + std * rng.normal())
                .round()
                .clamp(f64::from(min.min(max)), f64::from(max.max(min))) as u32,
        }
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Fixed { n } => f64::from(n),
            Dist::Uniform { lo, hi } => (f64::from(lo) + f64::from(hi)) / 2.0,
            Dist::Mean { mean } | Dist::Normal { mean, .. } => mean,
        }
    }

    /// The largest value it can give.
    pub fn max(&self) -> u32 {
        match *self {
            Dist::Fixed { n } => n,
            Dist::Uniform { lo, hi } => lo.max(hi),
            Dist::Mean { mean } => mean.ceil().max(1.0) as u32,
            Dist::Normal { min, max, .. } => max.max(min),
        }
    }
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Load {
    /// Open loop at a rate (req/s): evenly spaced (k6's constant-arrival-rate,
    /// inference-perf's constant) or Poisson (`vllm bench serve`'s default).
    Rate {
        /// Requests per second.
        rps: f64,
        /// Exponential gaps instead of even ones.
        poisson: bool,
    },
    /// Closed loop: this many clients, each sending its next request when the last ends.
    Concurrency {
        /// Clients.
        clients: u32,
    },
    /// Every request submitted at once (`vllm bench throughput`, a static batch).
    Offline {
        /// Requests.
        requests: u32,
    },
    /// One client, one request at a time.
    Sequential,
}

/// What prompts share, so that vLLM's prefix cache can skip their prefill.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SharedPrefix {
    /// Every prompt starts with one of `groups` system prompts of `tokens` tokens.
    System {
        /// Distinct prefixes.
        groups: u32,
        /// Tokens of each (part of every prompt's length).
        tokens: u32,
    },
    /// A fixed set of `prompts` prompts sent in turn (request `n` sends prompt `n mod
    /// prompts`), as benchmark datasets with a few hundred prompts do: a prompt sent again
    /// finds all of itself cached.
    Pool {
        /// Distinct prompts.
        prompts: u32,
    },
}

/// A whole workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// Prompt lengths.
    pub input: Dist,
    /// Output lengths (`max_tokens`, generated in full: `ignore_eos`).
    pub output: Dist,
    /// How requests arrive.
    pub load: Load,
    /// How long requests are sent (open and closed loop), seconds.
    pub duration_s: f64,
    /// Stop after this many requests instead (sequential and closed loop; the open loop
    /// sends `rps × duration`).
    pub requests: Option<u64>,
    /// The client gives up on a request after this long (the server aborts it); its numbers
    /// are not counted.
    pub timeout_s: Option<f64>,
    /// Shared prompt prefixes.
    pub prefix: Option<SharedPrefix>,
    /// The prompts sent in turn instead of drawn lengths (a workload shape's, a request
    /// trace's), with what their blocks share; `prefix`, `input` and `output` then describe
    /// nothing sent.
    #[serde(skip)]
    pub prompts: Option<PromptCycle>,
    /// Those prompts in words (`shared-prefix prompts (multi-turn:6)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharing: Option<String>,
    /// Whether the server was warmed up first (a benchmark's usual case); `false` makes the
    /// first requests pay the first-use costs.
    pub warm: bool,
    /// Seed of the lengths and arrivals.
    pub seed: u64,
}

impl Workload {
    /// Fixed lengths at a constant rate, warm, for `duration_s`.
    pub fn fixed(input: u32, output: u32, load: Load, duration_s: f64) -> Workload {
        Workload {
            input: Dist::Fixed { n: input },
            output: Dist::Fixed { n: output },
            load,
            duration_s,
            requests: None,
            timeout_s: None,
            prefix: None,
            prompts: None,
            sharing: None,
            warm: true,
            seed: 1,
        }
    }
}
