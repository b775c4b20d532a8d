//! What each request asks: a fixed prompt, the seeds' random-first-word prompt, synthetic
//! prompts of a given token length, or prompts from a dataset file. Bodies are serialised
//! before the run starts, so sending one costs a reference-count increment.

use bytes::Bytes;
use inferscale_engine::Rng;
use inferscale_openai::{ChatMessage, ChatRequest, CompletionRequest, StreamOptions};
use serde::{Deserialize, Serialize};

/// The seeds' fixed warm-up prompt.
pub const SEEDS_WARMUP_PROMPT: &str =
    "Write a brief technical explanation about cloud computing concepts.";

/// The 15 words the seeds' load-test prompt starts with (to defeat prefix caching).
pub const SEEDS_WORDS: [&str; 15] = [
    "cloud",
    "server",
    "network",
    "storage",
    "compute",
    "container",
    "cluster",
    "service",
    "database",
    "security",
    "platform",
    "system",
    "resource",
    "instance",
    "workload",
];

/// The seeds' load-test prompt for a first word.
pub fn seeds_prompt(word: &str) -> String {
    format!(
        "Starting with the word \"{word}\", write a brief technical explanation about cloud computing \
         concepts. Cover containerization, orchestration, and scalability in about 80 words."
    )
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
    pub fn parse(s: &str) -> Result<Length, String> {
        let bad = || {
            format!(
                "invalid length {s:?} (expected N, uniform:A,B, normal:MEAN,STD or lognormal:MEDIAN,SIGMA)"
            )
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

/// One prepared request.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The serialised JSON body.
    pub body: Bytes,
    /// `max_tokens` asked.
    pub max_tokens: u32,
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

const FILLER: &[&str] = &[
    "the", "system", "runs", "a", "model", "on", "each", "node", "and", "scales", "with", "load",
    "so", "users", "get", "fast", "answers", "when", "traffic", "grows", "queue", "depth", "rises",
    "then", "falls", "again",
];

/// About `tokens` tokens of text: one common short word per token.
fn synthetic_text(tokens: u32, rng: &mut Rng) -> String {
    let mut s = String::with_capacity(tokens as usize * 6);
    for i in 0..tokens {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(FILLER[(rng.next_u64() % FILLER.len() as u64) as usize]);
    }
    s
}

/// A dataset entry: a prompt (or conversation) and, when known, an output length.
#[derive(Debug, Clone)]
struct Entry {
    messages: Vec<ChatMessage>,
    output_tokens: Option<u32>,
}

/// Loads JSONL (`{"prompt": …}` or `{"messages": […]}`, optional `max_tokens` or
/// `output_tokens` per line) or ShareGPT JSON (an array of `{"conversations": [{"from":
/// "human", "value": …}, {"from": "gpt", "value": …}]}`; the first human turn is the prompt and
/// the reply's length, at 1.3 tokens a word, the output length).
pub fn load_dataset(text: &str, name: &str) -> Result<Vec<(String, Option<u32>)>, String> {
    entries(text, name).map(|v| {
        v.into_iter()
            .map(|e| {
                (
                    e.messages
                        .iter()
                        .map(|m| m.content.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    e.output_tokens,
                )
            })
            .collect()
    })
}

fn entries(text: &str, name: &str) -> Result<Vec<Entry>, String> {
    let trimmed = text.trim_start();
    let mut out = Vec::new();
    if trimmed.starts_with('[') {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("{name}: not valid JSON: {e}"))?;
        for (i, item) in v.as_array().into_iter().flatten().enumerate() {
            let convs = item.get("conversations").and_then(|c| c.as_array());
            let Some(convs) = convs else {
                return Err(format!(
                    "{name}: entry {i} has no \"conversations\" array (expected ShareGPT format)"
                ));
            };
            let human = convs.iter().find(|c| {
                matches!(
                    c.get("from").and_then(|f| f.as_str()),
                    Some("human" | "user")
                )
            });
            let gpt = convs.iter().find(|c| {
                matches!(
                    c.get("from").and_then(|f| f.as_str()),
                    Some("gpt" | "assistant")
                )
            });
            if let Some(p) = human.and_then(|h| h.get("value")).and_then(|v| v.as_str()) {
                let out_tokens = gpt
                    .and_then(|g| g.get("value"))
                    .and_then(|v| v.as_str())
                    .map(|r| {
                        ((r.split_whitespace().count() as f64) * 1.3)
                            .ceil()
                            .max(1.0) as u32
                    });
                out.push(Entry {
                    messages: vec![ChatMessage {
                        role: "user".into(),
                        content: p.to_owned(),
                    }],
                    output_tokens: out_tokens,
                });
            }
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| format!("{name}:{}: not valid JSON: {e}", i + 1))?;
            let output_tokens = ["max_tokens", "output_tokens", "output_len"]
                .iter()
                .find_map(|k| v.get(*k).and_then(|x| x.as_u64()))
                .map(|n| n.clamp(1, u64::from(u32::MAX)) as u32);
            let messages = if let Some(p) = v.get("prompt").and_then(|p| p.as_str()) {
                vec![ChatMessage {
                    role: "user".into(),
                    content: p.to_owned(),
                }]
            } else if let Some(ms) = v.get("messages").and_then(|m| m.as_array()) {
                ms.iter()
                    .filter_map(|m| {
                        Some(ChatMessage {
                            role: m.get("role")?.as_str()?.to_owned(),
                            content: m.get("content")?.as_str()?.to_owned(),
                        })
                    })
                    .collect()
            } else {
                return Err(format!(
                    "{name}:{}: expected a \"prompt\" string or a \"messages\" array",
                    i + 1
                ));
            };
            out.push(Entry {
                messages,
                output_tokens,
            });
        }
    }
    if out.is_empty() {
        return Err(format!("{name}: no prompts found"));
    }
    Ok(out)
}

/// Prepares `n` request bodies (drawn with `seed`). A dataset is read from `dataset_text`
/// (the caller reads the file), cycling when it has fewer entries than requests.
pub fn prepare(
    spec: &RequestSpec,
    n: usize,
    seed: u64,
    dataset_text: Option<&str>,
) -> Result<Vec<Prepared>, String> {
    let mut rng = Rng::new(seed ^ 0x9E0_9A7);
    let dataset = match (&spec.prompt, dataset_text) {
        (PromptSource::Dataset { path }, Some(t)) => Some(entries(t, path)?),
        (PromptSource::Dataset { path }, None) => {
            return Err(format!("{path}: the dataset was not read"));
        }
        _ => None,
    };
    let stream_options = spec.stream.then_some(StreamOptions {
        include_usage: true,
    });
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (messages, own_len) = match (&spec.prompt, &dataset) {
            (_, Some(d)) => {
                let e = &d[i % d.len()];
                (e.messages.clone(), e.output_tokens)
            }
            (PromptSource::Fixed { text }, None) => (
                vec![ChatMessage {
                    role: "user".into(),
                    content: text.clone(),
                }],
                None,
            ),
            (PromptSource::Seeds, None) => {
                let w = SEEDS_WORDS[(rng.next_u64() % 15) as usize];
                (
                    vec![ChatMessage {
                        role: "user".into(),
                        content: seeds_prompt(w),
                    }],
                    None,
                )
            }
            (PromptSource::Synthetic { length }, None) => {
                let t = length.sample(&mut rng);
                (
                    vec![ChatMessage {
                        role: "user".into(),
                        content: synthetic_text(t, &mut rng),
                    }],
                    None,
                )
            }
            (PromptSource::Dataset { .. }, None) => {
                return Err("the dataset was not read".to_owned());
            }
        };
        let max_tokens = own_len.unwrap_or_else(|| spec.max_tokens.sample(&mut rng));
        let ignore_eos = spec.ignore_eos.then_some(true);
        let body = match spec.api {
            Api::Completions => {
                let prompt = messages
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                serde_json::to_vec(&CompletionRequest {
                    model: &spec.model,
                    prompt: &prompt,
                    max_tokens,
                    temperature: spec.temperature,
                    stream: spec.stream,
                    stream_options,
                    ignore_eos,
                })
            }
            Api::Chat => serde_json::to_vec(&ChatRequest {
                model: &spec.model,
                messages,
                max_tokens,
                temperature: spec.temperature,
                stream: spec.stream,
                stream_options,
                ignore_eos,
            }),
        }
        .map_err(|e| format!("cannot serialise a request: {e}"))?;
        out.push(Prepared {
            body: Bytes::from(body),
            max_tokens,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prompt: PromptSource) -> RequestSpec {
        RequestSpec {
            api: Api::Completions,
            model: "m".into(),
            prompt,
            max_tokens: Length::Fixed { tokens: 100 },
            temperature: 0.7,
            stream: false,
            ignore_eos: false,
        }
    }

    #[test]
    fn the_seeds_prompt_varies_its_first_word() {
        let p = prepare(&spec(PromptSource::Seeds), 200, 1, None).unwrap();
        let distinct: std::collections::HashSet<_> = p.iter().map(|x| x.body.clone()).collect();
        assert_eq!(distinct.len(), 15);
        let v: serde_json::Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_tokens"], 100);
        assert_eq!(v["temperature"], 0.7);
        assert!(
            v["prompt"]
                .as_str()
                .unwrap()
                .starts_with("Starting with the word")
        );
    }

    #[test]
    fn synthetic_lengths_and_streaming_bodies() {
        let mut s = spec(PromptSource::Synthetic {
            length: Length::Fixed { tokens: 50 },
        });
        s.stream = true;
        s.api = Api::Chat;
        let p = prepare(&s, 3, 1, None).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(
            v["messages"][0]["content"]
                .as_str()
                .unwrap()
                .split(' ')
                .count(),
            50
        );
        assert_eq!(v["stream_options"]["include_usage"], true);
    }

    #[test]
    fn datasets_jsonl_and_sharegpt() {
        let jsonl = "{\"prompt\":\"a\",\"max_tokens\":7}\n\n{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}\n";
        let d = load_dataset(jsonl, "d.jsonl").unwrap();
        assert_eq!(d, vec![("a".into(), Some(7)), ("b".into(), None)]);
        let sharegpt = r#"[{"conversations":[{"from":"human","value":"hi there"},{"from":"gpt","value":"one two three"}]}]"#;
        assert_eq!(
            load_dataset(sharegpt, "s.json").unwrap(),
            vec![("hi there".into(), Some(4))]
        );
        assert!(
            load_dataset("{\"x\":1}", "bad.jsonl")
                .unwrap_err()
                .contains("bad.jsonl:1")
        );
        assert!(
            load_dataset("not json", "bad.jsonl")
                .unwrap_err()
                .contains("not valid JSON")
        );
        let p = prepare(
            &spec(PromptSource::Dataset {
                path: "d.jsonl".into(),
            }),
            5,
            0,
            Some(jsonl),
        )
        .unwrap();
        assert_eq!(p[0].max_tokens, 7);
        assert_eq!(p[2].max_tokens, 7, "cycles");
        assert_eq!(p[1].max_tokens, 100, "falls back to --max-tokens");
    }

    #[test]
    fn lengths_parse() {
        assert_eq!(Length::parse("100"), Ok(Length::Fixed { tokens: 100 }));
        assert_eq!(
            Length::parse("uniform:10,20"),
            Ok(Length::Uniform { min: 10, max: 20 })
        );
        assert!(Length::parse("0").is_err());
        assert!(Length::parse("uniform:20,10").is_err());
        assert!(Length::parse("gauss:1,2").is_err());
        let mut r = Rng::new(1);
        let l = Length::Uniform { min: 10, max: 20 };
        assert!(
            (0..1000)
                .map(|_| l.sample(&mut r))
                .all(|x| (10..=20).contains(&x))
        );
    }
}
