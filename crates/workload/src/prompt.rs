//! What each request asks: a fixed prompt, the seeds' random-first-word prompt, synthetic
//! prompts of a given token length, or prompts from a dataset file. Bodies are serialised
//! before the run starts, so sending one costs a reference-count increment.

use bytes::Bytes;
use inferscale_openai::{ChatMessage, ChatRequest, CompletionRequest, StreamOptions};
pub use inferscale_results::plan::{Api, Length, PromptSource, RequestSpec};
use inferscale_rng::Rng;

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

/// One prepared request.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The serialised JSON body.
    pub body: Bytes,
    /// `max_tokens` asked.
    pub max_tokens: u32,
    /// For a prompt with cache structure (a shape, a trace): its tokens, and those an
    /// unbounded prefix cache would hold when it is sent in order (`trace::Implied`).
    pub implied: Option<(u32, u32)>,
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

/// Why a dataset cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A ShareGPT file that is not JSON.
    #[error("{name}: not valid JSON")]
    Json {
        /// The dataset's name (its path).
        name: String,
        /// Where it breaks.
        #[source]
        source: serde_json::Error,
    },
    /// A JSONL line that is not JSON.
    #[error("{name}:{line}: not valid JSON")]
    LineJson {
        /// The dataset's name.
        name: String,
        /// 1-based.
        line: usize,
        /// Where it breaks.
        #[source]
        source: serde_json::Error,
    },
    /// A ShareGPT entry without conversations.
    #[error("{name}: entry {entry} has no \"conversations\" array (expected ShareGPT format)")]
    NotShareGpt {
        /// The dataset's name.
        name: String,
        /// 0-based.
        entry: usize,
    },
    /// A JSONL line with neither a prompt nor messages.
    #[error("{name}:{line}: expected a \"prompt\" string or a \"messages\" array")]
    NoPrompt {
        /// The dataset's name.
        name: String,
        /// 1-based.
        line: usize,
    },
    /// An entry a server would refuse: every request made from it would fail with a 400.
    #[error("{name}:{line}: {why}")]
    BadEntry {
        /// The dataset's name.
        name: String,
        /// 1-based line (JSONL) or entry (ShareGPT).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// Nothing usable in the file.
    #[error("{name}: no prompts found")]
    Empty {
        /// The dataset's name.
        name: String,
    },
    /// A request body could not be serialised (a bug: our types always serialise).
    #[error("cannot serialise a request")]
    Serialise(#[source] serde_json::Error),
    /// A trace that cannot be replayed.
    #[error(transparent)]
    Trace(crate::trace::TraceError),
    /// The plan names a dataset whose text was not passed in.
    #[error("{name}: the dataset was not read")]
    NotRead {
        /// The dataset's name.
        name: String,
    },
}

/// The largest `max_tokens` a dataset entry may ask for (no model's context is longer).
pub const MAX_OUTPUT_TOKENS: u32 = 10_000_000;

/// Loads JSONL (`{"prompt": …}` or `{"messages": […]}`, optional `max_tokens` or
/// `output_tokens` per line) or ShareGPT JSON (an array of `{"conversations": [{"from":
/// "human", "value": …}, {"from": "gpt", "value": …}]}`; the first human turn is the prompt and
/// the reply's length, at 1.3 tokens a word, the output length).
pub fn load_dataset(text: &str, name: &str) -> Result<Vec<(String, Option<u32>)>, DatasetError> {
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

fn entries(text: &str, name: &str) -> Result<Vec<Entry>, DatasetError> {
    let trimmed = text.trim_start();
    let mut out = Vec::new();
    if trimmed.starts_with('[') {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|source| DatasetError::Json {
                name: name.to_owned(),
                source,
            })?;
        for (i, item) in v.as_array().into_iter().flatten().enumerate() {
            let convs = item.get("conversations").and_then(|c| c.as_array());
            let Some(convs) = convs else {
                return Err(DatasetError::NotShareGpt {
                    name: name.to_owned(),
                    entry: i,
                });
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
            let p = human.and_then(|h| h.get("value")).and_then(|v| v.as_str());
            if human.is_some() && p.is_none_or(|p| p.trim().is_empty()) {
                return Err(DatasetError::BadEntry {
                    name: name.to_owned(),
                    line: i + 1,
                    why: "the human turn's \"value\" is missing or empty".into(),
                });
            }
            if let Some(p) = p {
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
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|source| DatasetError::LineJson {
                    name: name.to_owned(),
                    line: i + 1,
                    source,
                })?;
            let bad = |why: String| DatasetError::BadEntry {
                name: name.to_owned(),
                line: i + 1,
                why,
            };
            let mut output_tokens = None;
            for k in ["max_tokens", "output_tokens", "output_len"] {
                match v.get(k) {
                    None | Some(serde_json::Value::Null) => {}
                    Some(x) => match x.as_u64() {
                        Some(n) if (1..=u64::from(MAX_OUTPUT_TOKENS)).contains(&n) => {
                            output_tokens = output_tokens.or(Some(n as u32));
                        }
                        _ => {
                            return Err(bad(format!(
                                "\"{k}\" must be a whole number from 1 to {MAX_OUTPUT_TOKENS}, not {x}"
                            )));
                        }
                    },
                }
            }
            let messages = if let Some(p) = v.get("prompt") {
                match p.as_str() {
                    Some(p) if !p.trim().is_empty() => vec![ChatMessage {
                        role: "user".into(),
                        content: p.to_owned(),
                    }],
                    Some(_) => return Err(bad("\"prompt\" is empty".into())),
                    None => return Err(bad(format!("\"prompt\" must be a string, not {p}"))),
                }
            } else if let Some(ms) = v.get("messages") {
                let Some(ms) = ms.as_array().filter(|m| !m.is_empty()) else {
                    return Err(bad(format!(
                        "\"messages\" must be a non-empty array of {{role, content}} objects, not {ms}"
                    )));
                };
                let mut out = Vec::with_capacity(ms.len());
                for (j, m) in ms.iter().enumerate() {
                    let role = m.get("role").and_then(|r| r.as_str());
                    let content = m.get("content").and_then(|c| c.as_str());
                    match (role, content) {
                        (Some(r), Some(c)) if !r.is_empty() => out.push(ChatMessage {
                            role: r.to_owned(),
                            content: c.to_owned(),
                        }),
                        _ => {
                            return Err(bad(format!(
                                "messages[{j}] must have a string \"role\" and a string \"content\""
                            )));
                        }
                    }
                }
                if out.iter().all(|m| m.content.trim().is_empty()) {
                    return Err(bad("every message's \"content\" is empty".into()));
                }
                out
            } else {
                return Err(DatasetError::NoPrompt {
                    name: name.to_owned(),
                    line: i + 1,
                });
            };
            out.push(Entry {
                messages,
                output_tokens,
            });
        }
    }
    if out.is_empty() {
        return Err(DatasetError::Empty {
            name: name.to_owned(),
        });
    }
    Ok(out)
}

/// The turns of a source with cache structure: `n` shaped ones, or a trace's (read from
/// `text`); `None` for the others.
fn turns_of(
    spec: &RequestSpec,
    n: usize,
    seed: u64,
    text: Option<&str>,
) -> Result<Option<Vec<crate::trace::Turn>>, DatasetError> {
    match &spec.prompt {
        PromptSource::Shared { shape, length } => Ok(Some(crate::trace::shaped(
            *shape,
            n,
            *length,
            spec.max_tokens,
            seed,
        ))),
        PromptSource::Trace { path, .. } => {
            let text = text.ok_or_else(|| DatasetError::NotRead { name: path.clone() })?;
            crate::trace::parse_mooncake(text, path)
                .map(Some)
                .map_err(DatasetError::Trace)
        }
        _ => Ok(None),
    }
}

/// Prepares `n` request bodies (drawn with `seed`). A dataset is read from `dataset_text`
/// (the caller reads the file), cycling when it has fewer entries than requests.
pub fn prepare(
    spec: &RequestSpec,
    n: usize,
    seed: u64,
    dataset_text: Option<&str>,
) -> Result<Vec<Prepared>, DatasetError> {
    let mut rng = Rng::new(seed ^ 0x9E0_9A7);
    let dataset = match (&spec.prompt, dataset_text) {
        (PromptSource::Dataset { path }, Some(t)) => Some(entries(t, path)?),
        (PromptSource::Dataset { path }, None) => {
            return Err(DatasetError::NotRead { name: path.clone() });
        }
        _ => None,
    };
    let stream_options = spec.stream.then_some(StreamOptions {
        include_usage: true,
    });
    let turns = turns_of(spec, n, seed, dataset_text)?;
    let hits = turns.as_deref().map(crate::trace::implied_hits);
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
            (PromptSource::Shared { .. } | PromptSource::Trace { .. }, None) => {
                let Some(t) = turns.as_ref().and_then(|t| t.get(i % t.len())) else {
                    unreachable!("turns_of gives turns for these sources")
                };
                (
                    vec![ChatMessage {
                        role: "user".into(),
                        content: t.text(),
                    }],
                    Some(t.output),
                )
            }
            (PromptSource::Dataset { path }, None) => {
                return Err(DatasetError::NotRead { name: path.clone() });
            }
        };
        let implied = turns.as_ref().zip(hits.as_ref()).map(|(t, h)| {
            let j = i % t.len();
            // A trace replayed again (the next speed) starts with a cache that holds it.
            let hit = if i >= t.len() {
                t[j].prompt_tokens().saturating_sub(1) / crate::trace::ENGINE_BLOCK_TOKENS
                    * crate::trace::ENGINE_BLOCK_TOKENS
            } else {
                h[j]
            };
            (t[j].prompt_tokens(), hit)
        });
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
        .map_err(DatasetError::Serialise)?;
        out.push(Prepared {
            body: Bytes::from(body),
            max_tokens,
            implied,
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
                .to_string()
                .contains("bad.jsonl:1")
        );
        assert!(
            load_dataset("not json", "bad.jsonl")
                .unwrap_err()
                .to_string()
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
