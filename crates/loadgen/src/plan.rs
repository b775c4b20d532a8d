//! The load plan as a type: what a plan file says, what flags say, and how the two become one
//! [`LoadConfig`].
//!
//! A [`Plan`] has every setting optional. Layers stack — defaults, then a plan file, then the
//! command line — with [`Plan::over`]: a setting given by the upper layer wins, and the load's
//! *shape* (rates, concurrency levels or explicit stages) is replaced as a whole, never mixed.
//! [`Plan::resolve`] checks every value, naming the field, and fills in the defaults.
//! Credentials are not part of a plan: they come from the environment or files and are passed
//! to `resolve` beside it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::Auth;
use crate::prompt::{Api, Length, PromptSource, RequestSpec};
use crate::run::LoadConfig;
use crate::schedule::{Arrival, Stage};
use crate::target::{Target, UrlError};
use crate::threshold::Threshold;
use crate::trace::{Dispatch, Shape};
use crate::transport::ClientConfig;

/// The highest offered rate a plan takes, req/s (a million; one client holds ~20,000).
pub const MAX_RATE: f64 = 1e6;

/// The default levels: the seeds' 10, 20, …, 70 req/s.
pub const DEFAULT_RATES: [f64; 7] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0];
/// The default step length (the seeds' 60 s).
pub const DEFAULT_STEP: Duration = Duration::from_secs(60);
/// The default rest between steps (the seeds' 30 s).
pub const DEFAULT_REST: Duration = Duration::from_secs(30);
/// How long requests still running at the end may take to finish.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// A duration in a plan: seconds, or text like `60s`, `1m30s`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum DurationValue {
    /// Seconds.
    Seconds(f64),
    /// Text.
    Text(String),
}

impl From<Duration> for DurationValue {
    fn from(d: Duration) -> Self {
        DurationValue::Seconds(d.as_secs_f64())
    }
}

/// A token length in a plan: a number, or text like `uniform:10,20`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum LengthValue {
    /// Tokens.
    Tokens(u32),
    /// Text.
    Text(String),
}

/// One explicit stage.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagePlan {
    /// Requests per second (open loop)…
    #[serde(default)]
    pub rate: Option<f64>,
    /// …or requests in flight (closed loop).
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// Ramp to this rate by the stage's end.
    #[serde(default)]
    pub end_rate: Option<f64>,
    /// How long.
    pub duration: DurationValue,
    /// The rest after it.
    #[serde(default)]
    pub rest: Option<DurationValue>,
}

/// Every load setting, each optional (a plan file's schema; docs/formats.md lists it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The server's base URL.
    pub url: Option<String>,
    /// The model (default: the server's only one).
    pub model: Option<String>,
    /// Open-loop levels, req/s.
    pub rates: Option<Vec<f64>>,
    /// Closed-loop levels, requests in flight.
    pub concurrency: Option<Vec<u32>>,
    /// Each level's length.
    pub step: Option<DurationValue>,
    /// The rest between levels.
    pub rest: Option<DurationValue>,
    /// Explicit stages instead of levels.
    pub stages: Option<Vec<StagePlan>>,
    /// `constant`, `poisson` or `gamma:SHAPE`.
    pub arrival: Option<String>,
    /// Requests in flight at most; more are dropped, as k6 drops past its VUs.
    pub max_in_flight: Option<usize>,
    /// `completions` or `chat`.
    pub api: Option<String>,
    /// Stream the responses.
    pub stream: Option<bool>,
    /// `max_tokens` per request.
    pub max_tokens: Option<LengthValue>,
    /// A fixed prompt.
    pub prompt: Option<String>,
    /// Synthetic prompts of this length.
    pub prompt_tokens: Option<LengthValue>,
    /// Prompts from a JSONL or ShareGPT file.
    pub dataset: Option<PathBuf>,
    /// Prompts that share prefixes: `system-prompt:POOL,TOKENS`, `few-shot:TOKENS` or
    /// `multi-turn:TURNS[,USERS]` (`prompt_tokens` is each unique part).
    pub shape: Option<String>,
    /// A Mooncake-format trace to replay (its schedule replaces `rates` and `stages`).
    pub trace: Option<PathBuf>,
    /// How a trace's later turns are sent: `timestamp` or `think-time`.
    pub dispatch: Option<String>,
    /// The trace's replays, one step each, at these speeds (default: 1).
    pub speed: Option<Vec<f64>>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Ask the server to ignore end-of-sequence tokens.
    pub ignore_eos: Option<bool>,
    /// One request's deadline.
    pub timeout: Option<DurationValue>,
    /// Reuse connections.
    pub connection_reuse: Option<bool>,
    /// Sample the server's metrics during the load (default true).
    pub metrics: Option<bool>,
    /// Where the metrics are (default: the URL's `/metrics`).
    pub metrics_url: Option<String>,
    /// Simulated seconds per wall second of the target.
    pub speedup: Option<f64>,
    /// The random seed.
    pub seed: Option<u64>,
    /// Sequential warm-up requests first.
    pub warmup: Option<u32>,
    /// k6-style pass/fail criteria.
    pub thresholds: Option<Vec<String>>,
    /// How long running requests may finish after the last step.
    pub grace: Option<DurationValue>,
    /// First wait up to this long for the server's `/health` to answer 200.
    pub wait_ready: Option<DurationValue>,
    /// The latency SLO each step's goodput counts against: `ttft=500ms,tpot=50ms,e2e=5s`.
    pub slo: Option<String>,
    /// Single-token probe requests per second beside the plan.
    pub probe_rate: Option<f64>,
}

/// Why a plan cannot run. Each names the field (as the plan file spells it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// No URL anywhere.
    #[error("--url is required (or `url:` in the plan)")]
    MissingUrl,
    /// A URL that does not parse.
    #[error("{field}")]
    Url {
        /// `url` or `metrics_url`.
        field: &'static str,
        /// Why.
        #[source]
        source: UrlError,
    },
    /// A value out of its range or of the wrong form.
    #[error("{}: {reason}", spelled(field))]
    Invalid {
        /// The field.
        field: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// A threshold expression that does not parse.
    #[error(transparent)]
    Threshold(#[from] crate::threshold::ParseError),
}

/// A top-level setting as both a plan file and the command line spell it (`max_in_flight`
/// / `--max-in-flight`); a nested one (`stages[0].duration`) as the file does.
fn spelled(field: &str) -> String {
    if field.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        format!("{field} (--{})", field.replace('_', "-"))
    } else {
        field.to_owned()
    }
}

/// A number as a message shows it: `1e300`, not three hundred digits.
fn short(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e6 || v.abs() < 1e-4) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> PlanError {
    PlanError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl DurationValue {
    /// The duration, or why not.
    pub fn get(&self, field: &str) -> Result<Duration, PlanError> {
        match self {
            DurationValue::Seconds(s) if s.is_finite() && *s >= 0.0 && *s < 1e12 => {
                Ok(Duration::from_secs_f64(*s))
            }
            DurationValue::Seconds(s) => Err(invalid(field, format!("{s} is not a duration"))),
            DurationValue::Text(t) => inferscale_catalog::units::parse_duration(t)
                .map_err(|e| invalid(field, e.to_string())),
        }
    }
}

impl LengthValue {
    /// The length, or why not.
    pub fn get(&self, field: &str) -> Result<Length, PlanError> {
        match self {
            LengthValue::Tokens(n) if *n > 0 => Ok(Length::Fixed { tokens: *n }),
            LengthValue::Tokens(_) => Err(invalid(field, "must be at least 1")),
            LengthValue::Text(t) => Length::parse(t).map_err(|e| invalid(field, e.to_string())),
        }
    }
}

/// `constant`, `poisson` or `gamma:SHAPE`.
pub fn parse_arrival(s: &str) -> Result<Arrival, PlanError> {
    match s {
        "constant" => Ok(Arrival::Constant),
        "poisson" => Ok(Arrival::Poisson),
        g => match g.strip_prefix("gamma:").and_then(|x| x.parse::<f64>().ok()) {
            Some(shape) if shape.is_finite() && shape > 0.0 => Ok(Arrival::Gamma { shape }),
            _ => Err(invalid(
                "arrival",
                format!("{s:?} is not constant, poisson or gamma:SHAPE with SHAPE > 0"),
            )),
        },
    }
}

/// One stage per level, each `step` long, with `rest` between them (none after the last).
fn stepped<T>(
    levels: &[T],
    step: Duration,
    rest: Duration,
    stage: impl Fn(&T, f64, f64) -> Stage,
) -> Vec<Stage> {
    let n = levels.len();
    levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let r = if i + 1 < n { rest.as_secs_f64() } else { 0.0 };
            stage(l, step.as_secs_f64(), r)
        })
        .collect()
}

/// What a plan resolves to.
#[derive(Debug, Clone)]
pub struct ResolvedPlan {
    /// The server.
    pub url: Target,
    /// The model as asked for (`None`: discover it).
    pub model: Option<String>,
    /// The load.
    pub config: LoadConfig,
    /// The dataset, when prompts come from one.
    pub dataset: Option<PathBuf>,
    /// Warm-up requests.
    pub warmup: u32,
    /// Pass/fail criteria.
    pub thresholds: Vec<Threshold>,
    /// How long to wait for the server's `/health` first (`None`: not at all).
    pub wait_ready: Option<Duration>,
    /// The SLO each step's goodput counts against.
    pub slo: Option<inferscale_results::slo::Slo>,
}

impl ResolvedPlan {
    /// The same plan against another server (one whose address was not known when the plan
    /// was resolved, such as a simulator started afterwards): the metrics move with it
    /// unless they were given apart.
    pub fn at(mut self, url: Target) -> ResolvedPlan {
        let derived = self.url.with_path("/metrics");
        if let Some(m) = &mut self.config.metrics
            && *m == derived
        {
            *m = url.with_path("/metrics");
        }
        self.config.client.target = url.clone();
        self.url = url;
        self
    }
}

impl Plan {
    /// What the run measures beside the plan: the probe stream's rate (`None`: off) and the
    /// SLO goodput counts against, checked.
    fn measures(&self) -> Result<(Option<f64>, Option<inferscale_results::slo::Slo>), PlanError> {
        let probe_rate = match self.probe_rate {
            Some(r) if !(r.is_finite() && (0.0..=100.0).contains(&r)) => {
                return Err(invalid(
                    "probe_rate",
                    format!("{r}: expected probes per second, 0 to 100"),
                ));
            }
            Some(r) if r > 0.0 => Some(r),
            _ => None,
        };
        let slo = self
            .slo
            .as_deref()
            .map(inferscale_results::slo::Slo::parse)
            .transpose()
            .map_err(|e| invalid("slo", e.why))?;
        Ok((probe_rate, slo))
    }

    /// This plan over `base`: each setting this one gives wins; the load's shape (rates,
    /// concurrency or stages) comes from this plan entirely when it gives any of them.
    pub fn over(self, base: Plan) -> Plan {
        let shape_here =
            self.rates.is_some() || self.concurrency.is_some() || self.stages.is_some();
        // The prompt's source is one choice too.
        let prompt_here = self.prompt.is_some()
            || self.prompt_tokens.is_some()
            || self.dataset.is_some()
            || self.shape.is_some()
            || self.trace.is_some();
        let (prompt, prompt_tokens, dataset, shape, trace) = if prompt_here {
            (
                self.prompt,
                self.prompt_tokens,
                self.dataset,
                self.shape,
                self.trace,
            )
        } else {
            (
                base.prompt,
                base.prompt_tokens,
                base.dataset,
                base.shape,
                base.trace,
            )
        };
        let (rates, concurrency, stages) = if shape_here {
            (self.rates, self.concurrency, self.stages)
        } else {
            (base.rates, base.concurrency, base.stages)
        };
        Plan {
            url: self.url.or(base.url),
            model: self.model.or(base.model),
            rates,
            concurrency,
            step: self.step.or(base.step),
            rest: self.rest.or(base.rest),
            stages,
            arrival: self.arrival.or(base.arrival),
            max_in_flight: self.max_in_flight.or(base.max_in_flight),
            api: self.api.or(base.api),
            stream: self.stream.or(base.stream),
            max_tokens: self.max_tokens.or(base.max_tokens),
            prompt,
            prompt_tokens,
            dataset,
            shape,
            trace,
            dispatch: self.dispatch.or(base.dispatch),
            speed: self.speed.or(base.speed),
            temperature: self.temperature.or(base.temperature),
            ignore_eos: self.ignore_eos.or(base.ignore_eos),
            timeout: self.timeout.or(base.timeout),
            connection_reuse: self.connection_reuse.or(base.connection_reuse),
            metrics: self.metrics.or(base.metrics),
            metrics_url: self.metrics_url.or(base.metrics_url),
            speedup: self.speedup.or(base.speedup),
            seed: self.seed.or(base.seed),
            warmup: self.warmup.or(base.warmup),
            thresholds: match (self.thresholds, base.thresholds) {
                (Some(mut a), Some(b)) => {
                    a.extend(b);
                    Some(a)
                }
                (a, b) => a.or(b),
            },
            grace: self.grace.or(base.grace),
            wait_ready: self.wait_ready.or(base.wait_ready),
            slo: self.slo.or(base.slo),
            probe_rate: self.probe_rate.or(base.probe_rate),
        }
    }

    /// Where the prompts come from: a trace, a dataset, a shape, a fixed prompt, synthetic
    /// lengths or the seeds' prompt, the first of them the plan gives.
    fn prompt_source(&self) -> Result<PromptSource, PlanError> {
        Ok(if let Some(p) = self.replayed()? {
            p
        } else if let Some(d) = &self.dataset {
            PromptSource::Dataset {
                path: d.display().to_string(),
            }
        } else if let Some(shape) = &self.shape {
            PromptSource::Shared {
                shape: Shape::parse(shape).map_err(|e| invalid("shape", e.to_string()))?,
                length: self
                    .prompt_tokens
                    .as_ref()
                    .map_or(Ok(Length::Fixed { tokens: 128 }), |l| {
                        l.get("prompt_tokens")
                    })?,
            }
        } else if let Some(t) = self.prompt.clone() {
            if t.trim().is_empty() {
                return Err(invalid(
                    "prompt",
                    "is empty: a server refuses an empty prompt (every request would fail)",
                ));
            }
            PromptSource::Fixed { text: t }
        } else if let Some(l) = &self.prompt_tokens {
            PromptSource::Synthetic {
                length: l.get("prompt_tokens")?,
            }
        } else {
            PromptSource::Seeds
        })
    }

    /// A trace's replay as the prompts' source, checked (`None` without a trace). Its
    /// schedule is the trace's: the load generator sets the steps when it reads the file.
    fn replayed(&self) -> Result<Option<PromptSource>, PlanError> {
        let Some(trace) = &self.trace else {
            for (field, given) in [
                ("dispatch", self.dispatch.is_some()),
                ("speed", self.speed.is_some()),
            ] {
                if given {
                    return Err(invalid(
                        field,
                        "applies to a trace replay only (give `trace`)",
                    ));
                }
            }
            return Ok(None);
        };
        for (field, given) in [
            ("rates", self.rates.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("stages", self.stages.is_some()),
            ("dataset", self.dataset.is_some()),
            ("shape", self.shape.is_some()),
            ("prompt", self.prompt.is_some()),
        ] {
            if given {
                return Err(invalid(
                    field,
                    "cannot go with a trace, which sets its own prompts and schedule (give `speed` for several steps)",
                ));
            }
        }
        let dispatch = match self.dispatch.as_deref() {
            None => Dispatch::default(),
            Some(d) => Dispatch::parse(d).ok_or_else(|| {
                invalid("dispatch", format!("{d:?} is not timestamp or think-time"))
            })?,
        };
        let speeds = self.speed.clone().unwrap_or_else(|| vec![1.0]);
        if speeds.is_empty() {
            return Err(invalid("speed", "needs at least one speed"));
        }
        if let Some(bad) = speeds
            .iter()
            .find(|s| !(s.is_finite() && **s > 0.0 && **s <= 1000.0))
        {
            return Err(invalid(
                "speed",
                format!("{bad}: expected a factor above 0 and at most 1000"),
            ));
        }
        Ok(Some(PromptSource::Trace {
            path: trace.display().to_string(),
            dispatch,
            speeds,
        }))
    }

    fn stages(&self, step: Duration, rest: Duration) -> Result<Vec<Stage>, PlanError> {
        let shapes = [
            self.rates.is_some(),
            self.concurrency.is_some(),
            self.stages.is_some(),
        ];
        if shapes.iter().filter(|x| **x).count() > 1 {
            return Err(invalid(
                "rates",
                "give one of `rates`, `concurrency` and `stages`, not several",
            ));
        }
        let stages = if let Some(c) = &self.concurrency {
            if c.is_empty() || c.contains(&0) {
                return Err(invalid(
                    "concurrency",
                    "needs at least one level, each at least 1",
                ));
            }
            stepped(c, step, rest, |level, d, r| Stage::closed(*level, d, r))
        } else if let Some(r) = &self.rates {
            if r.is_empty() {
                return Err(invalid("rates", "needs at least one rate"));
            }
            stepped(r, step, rest, |rate, d, rest| {
                Stage::constant(*rate, d, rest)
            })
        } else if let Some(s) = &self.stages {
            if s.is_empty() {
                return Err(invalid("stages", "needs at least one stage"));
            }
            s.iter()
                .enumerate()
                .map(|(i, s)| {
                    let (rate, concurrency) = match (s.rate, s.concurrency) {
                        (Some(r), None) => (r, None),
                        (None, Some(c)) => (0.0, Some(c)),
                        _ => {
                            return Err(invalid(
                                format!("stages[{i}]"),
                                "give either `rate` or `concurrency`",
                            ));
                        }
                    };
                    Ok(Stage {
                        rate,
                        concurrency,
                        end_rate: s.end_rate,
                        duration_s: s
                            .duration
                            .get(&format!("stages[{i}].duration"))?
                            .as_secs_f64(),
                        rest_s: s
                            .rest
                            .as_ref()
                            .map(|r| r.get(&format!("stages[{i}].rest")))
                            .transpose()?
                            .map_or(0.0, |d| d.as_secs_f64()),
                    })
                })
                .collect::<Result<_, _>>()?
        } else {
            stepped(&DEFAULT_RATES, step, rest, |rate, d, rest| {
                Stage::constant(*rate, d, rest)
            })
        };
        for (i, s) in stages.iter().enumerate() {
            if let Some(e) = s.end_rate
                && !(e.is_finite() && (0.0..=MAX_RATE).contains(&e))
            {
                return Err(invalid(
                    format!("stages[{i}].end_rate"),
                    format!(
                        "must be a number of requests per second from 0 to {MAX_RATE:e}, not {}",
                        short(e)
                    ),
                ));
            }
            if !(s.duration_s.is_finite() && s.duration_s > 0.0) {
                return Err(invalid(
                    format!("step {}", i + 1),
                    "the duration must be longer than zero (a step of 0 s sends nothing)",
                ));
            }
            if s.concurrency.is_none()
                && !(s.rate.is_finite() && s.rate > 0.0 && s.rate <= MAX_RATE)
            {
                return Err(invalid(
                    format!("step {}", i + 1),
                    format!(
                        "the rate must be a positive number of requests per second (at most {MAX_RATE:e}), not {}",
                        short(s.rate)
                    ),
                ));
            }
        }
        Ok(stages)
    }

    /// Checks every value and fills in the defaults; `auth` and `tls` are the client's
    /// credentials and TLS (never part of a plan).
    pub fn resolve(
        self,
        auth: Auth,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<ResolvedPlan, PlanError> {
        let url_text = self.url.clone().ok_or(PlanError::MissingUrl)?;
        let url = Target::parse(&url_text).map_err(|source| PlanError::Url {
            field: "url",
            source,
        })?;
        let step = self
            .step
            .as_ref()
            .map_or(Ok(DEFAULT_STEP), |s| s.get("step"))?;
        let rest = self
            .rest
            .as_ref()
            .map_or(Ok(DEFAULT_REST), |s| s.get("rest"))?;
        let stages = if self.trace.is_some() {
            // Placeholders, one per speed with the rest after it: the trace's own schedule
            // replaces them when the file is read (`run::trace_replay`).
            let n = self.speed.as_ref().map_or(1, Vec::len).max(1);
            vec![Stage::constant(1.0, 1.0, rest.as_secs_f64()); n]
        } else {
            self.stages(step, rest)?
        };
        let arrival = parse_arrival(self.arrival.as_deref().unwrap_or("constant"))?;
        let api = match self.api.as_deref() {
            None | Some("completions") => Api::Completions,
            Some("chat") => Api::Chat,
            Some(other) => {
                return Err(invalid(
                    "api",
                    format!("{other:?} is not completions or chat"),
                ));
            }
        };
        let max_tokens = self
            .max_tokens
            .as_ref()
            .map_or(Ok(Length::Fixed { tokens: 100 }), |v| v.get("max_tokens"))?;
        let prompt = self.prompt_source()?;
        let temperature = self.temperature.unwrap_or(0.7);
        if !(temperature.is_finite() && temperature >= 0.0) {
            return Err(invalid(
                "temperature",
                format!("must be a non-negative number, not {temperature}"),
            ));
        }
        let timeout = self
            .timeout
            .as_ref()
            .map_or(Ok(Duration::from_secs(240)), |t| t.get("timeout"))?;
        if timeout.is_zero() {
            return Err(invalid("timeout", "must be longer than zero"));
        }
        let speedup = self.speedup.unwrap_or(1.0);
        if !(speedup.is_finite() && speedup > 0.0 && speedup <= 10_000.0) {
            return Err(invalid(
                "speedup",
                format!("must be a number in (0, 10000], not {speedup}"),
            ));
        }
        let max_in_flight = self.max_in_flight.unwrap_or(500);
        if max_in_flight == 0 {
            return Err(invalid("max_in_flight", "must be at least 1"));
        }
        let metrics = if self.metrics == Some(false) {
            None
        } else {
            match &self.metrics_url {
                Some(m) => Some(Target::parse_metrics(m).map_err(|source| PlanError::Url {
                    field: "metrics_url",
                    source,
                })?),
                None => Some(url.with_path("/metrics")),
            }
        };
        let thresholds = self
            .thresholds
            .iter()
            .flatten()
            .map(|t| Threshold::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        let grace = self
            .grace
            .as_ref()
            .map_or(Ok(DEFAULT_GRACE), |g| g.get("grace"))?;
        let wait_ready = self
            .wait_ready
            .as_ref()
            .map(|w| w.get("wait_ready"))
            .transpose()?;
        let (probe_rate, slo) = self.measures()?;
        let config = LoadConfig {
            client: ClientConfig {
                target: url.clone(),
                reuse: self.connection_reuse != Some(false),
                timeout,
                max_body: 64 << 20,
                auth,
                tls,
            },
            requests: RequestSpec {
                api,
                model: self.model.clone().unwrap_or_default(),
                prompt,
                max_tokens,
                temperature,
                stream: self.stream.unwrap_or(true),
                ignore_eos: self.ignore_eos == Some(true),
            },
            stages,
            arrival,
            max_in_flight,
            speedup,
            seed: self.seed.unwrap_or(0),
            metrics,
            sample_interval_s: 1.0,
            grace,
            segment: crate::schedule::Segment::WHOLE,
            start_at: None,
            probe_rate_rps: probe_rate,
        };
        Ok(ResolvedPlan {
            url,
            model: self.model,
            config,
            dataset: self.dataset.or(self.trace),
            warmup: self.warmup.unwrap_or(0),
            thresholds,
            wait_ready,
            slo,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(p: Plan) -> Result<ResolvedPlan, PlanError> {
        p.resolve(Auth::none(), None)
    }

    #[test]
    fn the_defaults_are_the_seeds_plan() {
        let r = resolve(Plan {
            url: Some("http://127.0.0.1:8000".into()),
            ..Plan::default()
        })
        .unwrap();
        let rates: Vec<f64> = r.config.stages.iter().map(|s| s.rate).collect();
        assert_eq!(rates, DEFAULT_RATES);
        assert_eq!(r.config.stages[0].duration_s, 60.0);
        assert_eq!(r.config.stages[0].rest_s, 30.0);
        assert_eq!(r.config.stages[6].rest_s, 0.0);
        assert_eq!(r.config.grace, DEFAULT_GRACE);
    }

    #[test]
    fn flags_over_a_file_replace_the_shape_as_a_whole() {
        let file = Plan {
            url: Some("http://127.0.0.1:8000".into()),
            stages: Some(vec![StagePlan {
                rate: Some(5.0),
                concurrency: None,
                end_rate: None,
                duration: DurationValue::Text("10s".into()),
                rest: None,
            }]),
            temperature: Some(0.0),
            ..Plan::default()
        };
        let flags = Plan {
            rates: Some(vec![1.0, 2.0]),
            ..Plan::default()
        };
        let r = resolve(flags.over(file)).unwrap();
        assert_eq!(r.config.stages.len(), 2);
        assert_eq!(r.config.requests.temperature, 0.0);
    }

    #[test]
    fn bad_values_name_their_field() {
        let base = || Plan {
            url: Some("http://127.0.0.1:8000".into()),
            ..Plan::default()
        };
        let cases: Vec<(Plan, &str)> = vec![
            (
                Plan {
                    rates: Some(vec![10.0, -1.0]),
                    ..base()
                },
                "step 2",
            ),
            (
                Plan {
                    step: Some(DurationValue::Text("soon".into())),
                    ..base()
                },
                "step (--step): invalid duration",
            ),
            (
                Plan {
                    api: Some("grpc".into()),
                    ..base()
                },
                "api (--api): \"grpc\"",
            ),
            (
                Plan {
                    arrival: Some("gamma:0".into()),
                    ..base()
                },
                "arrival",
            ),
            (
                Plan {
                    max_in_flight: Some(0),
                    ..base()
                },
                "max_in_flight",
            ),
            (
                Plan {
                    speedup: Some(0.0),
                    ..base()
                },
                "speedup",
            ),
            (
                Plan {
                    url: None,
                    ..base()
                },
                "--url is required",
            ),
        ];
        for (p, needle) in cases {
            let e = resolve(p).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    #[test]
    fn a_plan_moved_to_another_server_takes_its_derived_metrics_along() {
        let moved = |metrics_url: Option<&str>| {
            resolve(Plan {
                url: Some("http://127.0.0.1:1".into()),
                metrics_url: metrics_url.map(Into::into),
                ..Plan::default()
            })
            .unwrap()
            .at(Target::parse("http://127.0.0.1:43059").unwrap())
        };
        let r = moved(None);
        assert_eq!(r.url.port, 43059);
        assert_eq!(r.config.client.target, r.url);
        let m = r.config.metrics.unwrap();
        assert_eq!((m.port, m.path_and_query.as_str()), (43059, "/metrics"));
        // Metrics given apart stay where they were given.
        let r = moved(Some("http://127.0.0.1:9400/metrics"));
        assert_eq!(r.config.metrics.unwrap().port, 9400);
    }
}
