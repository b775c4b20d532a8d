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
    /// Prompts that share prefixes by construction (a pool of system prompts, multi-turn
    /// conversations), each request's unique part of `length` tokens.
    Shared {
        /// How the prompts share.
        shape: Shape,
        /// The unique part of each prompt (a user message), tokens.
        length: Length,
    },
    /// A replayed trace (Mooncake's JSONL: timestamps, lengths, `hash_ids`), its prompts
    /// regenerated so that equal block ids give equal text; the schedule is the trace's.
    Trace {
        /// The file.
        path: String,
        /// When a conversation's later turns are sent.
        dispatch: Dispatch,
        /// The replays, one step each: the trace's clock divided by each.
        speeds: Vec<f64>,
    },
}

impl PromptSource {
    /// In words, for a report: `seeds' prompt`, `trace t.jsonl (think-time dispatch, at
    /// 1×, 2×)`.
    pub fn describe(&self) -> String {
        match self {
            PromptSource::Fixed { .. } => "a fixed prompt".into(),
            PromptSource::Seeds => "the seeds' prompt".into(),
            PromptSource::Synthetic { .. } => "synthetic prompts".into(),
            PromptSource::Dataset { path } => format!("dataset {path}"),
            PromptSource::Shared { shape, .. } => format!("shared-prefix prompts ({shape})"),
            PromptSource::Trace {
                path,
                dispatch,
                speeds,
            } => format!(
                "trace {path} ({} dispatch, at {})",
                dispatch.name(),
                speeds
                    .iter()
                    .map(|s| format!("{s}×"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// How prompts share prefixes (`--shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shape {
    /// Each prompt starts with one of `pool` system prompts of `tokens` tokens, chosen
    /// uniformly (a pool of 1 is a few-shot preamble every request carries).
    SystemPrompt {
        /// System prompts in the pool.
        pool: u32,
        /// Tokens each.
        tokens: u32,
    },
    /// Conversations of `turns` turns, `users` of them under way at once: turn k's prompt is
    /// the k − 1 earlier user messages and answers, then a new user message. Arrivals go to
    /// the users in turn.
    MultiTurn {
        /// Turns per conversation.
        turns: u32,
        /// Conversations under way at once.
        users: u32,
    },
}

/// A `--shape` that is none of the forms [`Shape::parse`] reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid shape {input:?}: {why} (expected system-prompt:POOL,TOKENS or multi-turn:TURNS[,USERS])"
)]
pub struct ShapeError {
    /// What was given.
    pub input: String,
    /// What is wrong.
    pub why: String,
}

impl Shape {
    /// Conversations under way at once when `multi-turn:TURNS` gives no number.
    pub const DEFAULT_USERS: u32 = 16;

    /// Parses `system-prompt:POOL,TOKENS`, `few-shot:TOKENS` (a pool of one) or
    /// `multi-turn:TURNS[,USERS]`.
    pub fn parse(s: &str) -> Result<Shape, ShapeError> {
        let bad = |why: &str| ShapeError {
            input: s.to_owned(),
            why: why.to_owned(),
        };
        let (kind, args) = s.split_once(':').ok_or_else(|| bad("no parameters"))?;
        let nums = args
            .split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad("the parameters must be whole numbers"))?;
        if nums.contains(&0) {
            return Err(bad("every parameter must be at least 1"));
        }
        match (kind, &nums[..]) {
            ("system-prompt", &[pool, tokens]) if tokens <= 1_000_000 && pool <= 1_000_000 => {
                Ok(Shape::SystemPrompt { pool, tokens })
            }
            ("few-shot", &[tokens]) if tokens <= 1_000_000 => {
                Ok(Shape::SystemPrompt { pool: 1, tokens })
            }
            ("multi-turn", &[turns]) if turns <= 1000 => Ok(Shape::MultiTurn {
                turns,
                users: Self::DEFAULT_USERS,
            }),
            ("multi-turn", &[turns, users]) if turns <= 1000 && users <= 100_000 => {
                Ok(Shape::MultiTurn { turns, users })
            }
            ("system-prompt" | "few-shot" | "multi-turn", _) => {
                Err(bad("wrong number of parameters, or one too large"))
            }
            _ => Err(bad("unknown kind")),
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Shape::SystemPrompt { pool, tokens } => write!(f, "system-prompt:{pool},{tokens}"),
            Shape::MultiTurn { turns, users } => write!(f, "multi-turn:{turns},{users}"),
        }
    }
}

/// When a conversation's later turns are sent in a trace replay (`--dispatch`); published
/// replays show the choice alone moves the tail latency, so run.json records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// Every request at its trace timestamp (÷ the speed), whether or not the turn before it
    /// has been answered: open loop.
    #[default]
    Timestamp,
    /// A conversation's first turn at its timestamp; each later turn when the turn before it
    /// has ended, plus its recorded think time (the trace's `delay`, or else the gap between
    /// the two turns' timestamps): a user who reads the answer first.
    ThinkTime,
}

impl Dispatch {
    /// Parses `timestamp` or `think-time`.
    pub fn parse(s: &str) -> Option<Dispatch> {
        match s {
            "timestamp" => Some(Dispatch::Timestamp),
            "think-time" => Some(Dispatch::ThinkTime),
            _ => None,
        }
    }

    /// As the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Timestamp => "timestamp",
            Dispatch::ThinkTime => "think-time",
        }
    }
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
