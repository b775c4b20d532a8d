//! Prompts with cache structure: a replayed trace (Mooncake's JSONL) and the shared-prefix
//! shapes (`--shape`), both as [`Turn`]s — a prompt made of [`Span`]s whose identities say
//! which of them a server could have cached — and the prefix-cache hit rate that structure
//! implies.
//!
//! **Mooncake's format**, one JSON object a line: `timestamp` (milliseconds), `input_length`,
//! `output_length`, and `hash_ids`, one id per 512-token block of the prompt, equal ids
//! meaning equal blocks (the last block may be partial). AIPerf's extension is read too: a
//! `session_id` groups a conversation's turns, and `delay` (milliseconds) is the think time
//! before a turn. Other fields are ignored.
//!
//! **Regeneration**: a span's text is one common short word per token, chosen by a hash of
//! the span's identity and the word's position, words joined by single spaces; a span's
//! identity is chained from the spans before it, as an engine's block hashes are, so equal
//! texts mean equal beginnings. Under the simulator's documented token rule each word is one
//! token, so the simulator's cache sees exactly the structure the trace describes; a real
//! tokenizer makes most of these words one token too, so a real engine sees nearly it.
//!
//! **The implied hit rate** is what an engine with an unbounded prefix cache would find:
//! each prompt's leading spans already seen in an earlier prompt, rounded down to whole
//! engine blocks (16 tokens, vLLM's default) and short of the whole prompt by at least one
//! token (an engine always computes the last). A bounded cache evicts, and a request sent
//! before the one it shares with was computed finds nothing: the measured rate can only be
//! lower, and comparing the two shows by how much.

use std::collections::HashSet;

use crate::schedule::{Planned, Stage, StageWindow};

pub use inferscale_results::plan::{Dispatch, Length, Shape};
use inferscale_rng::{Rng, mix};

/// Tokens per `hash_ids` block in Mooncake's traces.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// The engine's cache block (vLLM's default), which the implied hit rate rounds down to.
pub const ENGINE_BLOCK_TOKENS: u32 = 16;

/// The most requests one trace may hold.
pub const MAX_TRACE_REQUESTS: usize = 5_000_000;

/// A run of prompt tokens with one identity (chained: it covers the spans before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The identity.
    pub id: u64,
    /// Tokens.
    pub tokens: u32,
}

/// One request of a trace or a shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// When the trace sends it, seconds from the trace's first request (0 for a shape).
    pub at_s: f64,
    /// The conversation it belongs to (`None`: a request of its own).
    pub session: Option<u64>,
    /// Seconds the user thinks before sending it, when the trace records it.
    pub think_s: Option<f64>,
    /// Its name in the trace (`id`), when other requests name it as theirs to follow.
    pub id: Option<u64>,
    /// The requests it follows (`parent`, `parents`: an agent's branches and their join),
    /// by `id`; empty: the turn before it in its conversation, if any.
    pub after: Vec<u64>,
    /// `max_tokens`.
    pub output: u32,
    /// The prompt.
    pub spans: Vec<Span>,
}

impl Turn {
    /// Prompt tokens.
    pub fn prompt_tokens(&self) -> u32 {
        self.spans.iter().map(|s| s.tokens).sum()
    }

    /// Each full `block`-token block of the prompt, as an engine's prefix cache keys it: a
    /// hash of the block's content (the spans and the offsets in them it covers) chained
    /// onto the block before, so two prompts' blocks are equal exactly as far as their text
    /// is. A partial last block has none (an engine caches full blocks only).
    pub fn block_hashes(&self, block: u32) -> Vec<u64> {
        let block = block.max(1);
        let mut out = Vec::with_capacity((self.prompt_tokens() / block) as usize);
        let (mut h, mut filled) = (0x000B_10C4_u64, 0u32);
        for span in &self.spans {
            let mut from = 0;
            while from < span.tokens {
                let take = (block - filled).min(span.tokens - from);
                h = mix(&[h, span.id, u64::from(from), u64::from(take)]);
                filled += take;
                from += take;
                if filled == block {
                    out.push(h);
                    filled = 0;
                }
            }
        }
        out
    }

    /// The prompt's text (see the module documentation).
    pub fn text(&self) -> String {
        let mut s = String::with_capacity(self.prompt_tokens() as usize * 6);
        for span in &self.spans {
            for j in 0..span.tokens {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(WORDS[(mix(&[span.id, u64::from(j)]) % WORDS.len() as u64) as usize]);
            }
        }
        s
    }
}

/// The words regenerated text is made of: common, short (one token to most tokenizers,
/// and to the simulator's rule).
const WORDS: &[&str] = &[
    "the", "system", "runs", "a", "model", "on", "each", "node", "and", "scales", "with", "load",
    "so", "users", "get", "fast", "answers", "when", "traffic", "grows", "queue", "depth", "rises",
    "then", "falls", "again", "cache", "block", "token", "prompt", "reply", "turn",
];

/// Chains `id` onto `parent`.
fn chain(parent: u64, id: u64) -> u64 {
    mix(&[0x7ACE, parent, id])
}

/// The prefix cache an unbounded engine would have: the span identities seen so far.
#[derive(Debug, Default)]
pub struct Implied {
    seen: HashSet<u64>,
}

impl Implied {
    /// Tokens of `turn`'s prompt this cache holds (then remembers the whole prompt).
    pub fn hit(&mut self, turn: &Turn) -> u32 {
        let mut matched = 0u32;
        for s in &turn.spans {
            if !self.seen.contains(&s.id) {
                break;
            }
            matched += s.tokens;
        }
        self.seen.extend(turn.spans.iter().map(|s| s.id));
        let most = turn.prompt_tokens().saturating_sub(1);
        matched.min(most) / ENGINE_BLOCK_TOKENS * ENGINE_BLOCK_TOKENS
    }
}

/// The implied hits of `turns` in order (see [`Implied`]).
pub fn implied_hits(turns: &[Turn]) -> Vec<u32> {
    let mut cache = Implied::default();
    turns.iter().map(|t| cache.hit(t)).collect()
}

/// Why a trace cannot be replayed. Lines are 1-based.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A line that is not JSON.
    #[error("{name}:{line}: not valid JSON")]
    Json {
        /// The trace's name.
        name: String,
        /// 1-based.
        line: usize,
        /// Where it breaks.
        #[source]
        source: serde_json::Error,
    },
    /// A field with a value that cannot be meant.
    #[error("{name}:{line}: {why}")]
    Field {
        /// The trace's name.
        name: String,
        /// 1-based.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// No requests.
    #[error("{name}: no requests found (expected JSON lines with \"input_length\")")]
    Empty {
        /// The trace's name.
        name: String,
    },
    /// More than one run should send.
    #[error("{name}: more than {MAX_TRACE_REQUESTS} requests")]
    TooLong {
        /// The trace's name.
        name: String,
    },
}

/// What is wrong with a line's field, in words (made a [`TraceError::Field`] with the line).
#[derive(Debug)]
struct Why(String);

impl From<String> for Why {
    fn from(s: String) -> Why {
        Why(s)
    }
}

impl From<&str> for Why {
    fn from(s: &str) -> Why {
        Why(s.to_owned())
    }
}

fn number(v: &serde_json::Value, key: &str) -> Result<Option<f64>, Why> {
    match v.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(n) if n.is_finite() && n >= 0.0 => Ok(Some(n)),
            _ => Err(format!("\"{key}\" must be a non-negative number, not {x}").into()),
        },
    }
}

fn count(v: &serde_json::Value, key: &str, most: u64) -> Result<Option<u32>, Why> {
    match number(v, key)? {
        None => Ok(None),
        Some(n) if n.fract() == 0.0 && n >= 1.0 && n <= most as f64 => Ok(Some(n as u32)),
        Some(n) => {
            Err(format!("\"{key}\" must be a whole number from 1 to {most}, not {n}").into())
        }
    }
}

/// A name as a key: a string's or a whole number's (`what` says which field, for the
/// message).
fn name_key(x: &serde_json::Value, what: &str) -> Result<u64, Why> {
    match x {
        serde_json::Value::String(s) => Ok(mix(&[
            1,
            s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            }),
        ])),
        x => match x.as_u64() {
            Some(n) => Ok(mix(&[2, n])),
            None => Err(format!("\"{what}\" must be a string or a whole number, not {x}").into()),
        },
    }
}

/// The key of field `key`, when given.
fn key_of(v: &serde_json::Value, key: &str) -> Result<Option<u64>, Why> {
    match v.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => name_key(x, key).map(Some),
    }
}

/// The requests a line follows: `parent` (one name) or `parents` (a list of names).
fn parents_of(v: &serde_json::Value) -> Result<Vec<u64>, Why> {
    let mut out: Vec<u64> = key_of(v, "parent")?.into_iter().collect();
    match v.get("parents") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(a)) => {
            for x in a {
                out.push(name_key(x, "parents")?);
            }
        }
        Some(x) => return Err(format!("\"parents\" must be an array of names, not {x}").into()),
    }
    Ok(out)
}

/// One line of a trace.
fn turn_of(v: &serde_json::Value, line: usize) -> Result<Turn, Why> {
    let input = count(v, "input_length", 10_000_000)?
        .ok_or("\"input_length\" is missing (the prompt's tokens)")?;
    let output = count(v, "output_length", 10_000_000)?.unwrap_or(1);
    let ids = match v.get("hash_ids") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| x.as_u64().ok_or(x))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|x| Why(format!("\"hash_ids\" must hold whole numbers, not {x}")))?,
        Some(x) => return Err(format!("\"hash_ids\" must be an array, not {x}").into()),
    };
    let blocks = input.div_ceil(MOONCAKE_BLOCK_TOKENS) as usize;
    if ids.len() > blocks {
        return Err(format!(
            "\"hash_ids\" has {} blocks, but an input of {input} tokens fills {blocks} of {MOONCAKE_BLOCK_TOKENS}",
            ids.len()
        ).into());
    }
    let mut spans = Vec::with_capacity(blocks);
    let mut parent = 0;
    for b in 0..blocks {
        let tokens = (input - b as u32 * MOONCAKE_BLOCK_TOKENS).min(MOONCAKE_BLOCK_TOKENS);
        // Blocks past the listed ids are this request's own.
        let id = ids
            .get(b)
            .map_or_else(|| mix(&[3, line as u64, b as u64]), |&h| mix(&[4, h]));
        parent = chain(parent, id);
        spans.push(Span { id: parent, tokens });
    }
    Ok(Turn {
        at_s: number(v, "timestamp")?.unwrap_or(0.0) / 1000.0,
        session: key_of(v, "session_id")?,
        think_s: number(v, "delay")?.map(|d| d / 1000.0),
        id: key_of(v, "id")?,
        after: parents_of(v)?,
        output,
        spans,
    })
}

/// Reads a Mooncake-format trace (see the module documentation), in timestamp order (lines
/// with equal timestamps keep theirs), the first at 0.
pub fn parse_mooncake(text: &str, name: &str) -> Result<Vec<Turn>, TraceError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|source| TraceError::Json {
                name: name.to_owned(),
                line: i + 1,
                source,
            })?;
        let turn = turn_of(&v, i + 1).map_err(|Why(why)| TraceError::Field {
            name: name.to_owned(),
            line: i + 1,
            why,
        })?;
        out.push((i + 1, turn));
        if out.len() > MAX_TRACE_REQUESTS {
            return Err(TraceError::TooLong {
                name: name.to_owned(),
            });
        }
    }
    if out.is_empty() {
        return Err(TraceError::Empty {
            name: name.to_owned(),
        });
    }
    out.sort_by(|a, b| a.1.at_s.total_cmp(&b.1.at_s));
    check_branches(&out, name)?;
    let mut out: Vec<Turn> = out.into_iter().map(|(_, t)| t).collect();
    let first = out[0].at_s;
    out.iter_mut().for_each(|t| t.at_s -= first);
    Ok(out)
}

/// Checks an agentic trace's links (`(line, turn)` in timestamp order): names are unique,
/// and every request a line follows is named, and sent no later than it (so the links run
/// forward and cannot loop).
fn check_branches(turns: &[(usize, Turn)], name: &str) -> Result<(), TraceError> {
    if turns.iter().all(|(_, t)| t.after.is_empty()) {
        return Ok(());
    }
    let field = |line: usize, why: String| TraceError::Field {
        name: name.to_owned(),
        line,
        why,
    };
    let mut seen: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (line, t) in turns {
        if let Some(id) = t.id
            && let Some(first) = seen.get(&id)
        {
            return Err(field(
                *line,
                format!("\"id\" is line {first}'s too (a request's name must be its own)"),
            ));
        }
        if let Some(id) = t.id {
            seen.insert(id, *line);
        }
    }
    let mut earlier: std::collections::HashSet<u64> = std::collections::HashSet::new();
    for (line, t) in turns {
        for p in &t.after {
            if !earlier.contains(p) {
                return Err(field(
                    *line,
                    if seen.contains_key(p) {
                        "it follows a request sent after it (\"parent\" must name an earlier request)".to_owned()
                    } else {
                        "it follows a request no line names (\"parent\"/\"parents\" must be another line's \"id\")".to_owned()
                    },
                ));
            }
        }
        if let Some(id) = t.id {
            earlier.insert(id);
        }
    }
    Ok(())
}

/// The trace's length in its own clock: its last request's timestamp.
pub fn span_s(turns: &[Turn]) -> f64 {
    turns.last().map_or(0.0, |t| t.at_s)
}

/// Who waits for whom under `--dispatch think-time`: per request, those that follow it
/// (with the think time before each), and how many requests each waits for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Follow {
    /// Per request: `(follower, think time)`.
    pub next: Vec<Vec<(usize, f64)>>,
    /// Per request: how many must end before it is sent (0: at its own time).
    pub waits: Vec<u32>,
}

/// Who follows whom in `turns`: a request that names the ones it follows (`parent`,
/// `parents`: an agent's branches, and the join that waits for all of them) follows those;
/// any other request of a conversation follows the conversation's turn before it. The think
/// time is the recorded `delay`, or the gap from the latest of those it follows to its own
/// timestamp. A request that follows none is sent at its timestamp.
pub fn followers(turns: &[Turn]) -> Follow {
    let mut last: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let named: std::collections::HashMap<u64, usize> = turns
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.id.map(|id| (id, i)))
        .collect();
    let mut out = Follow {
        next: vec![Vec::new(); turns.len()],
        waits: vec![0; turns.len()],
    };
    for (i, t) in turns.iter().enumerate() {
        let before: Vec<usize> = if t.after.is_empty() {
            t.session
                .and_then(|s| last.get(&s).copied())
                .into_iter()
                .collect()
        } else {
            t.after
                .iter()
                .filter_map(|p| named.get(p).copied())
                .filter(|&p| p < i)
                .collect()
        };
        if let Some(s) = t.session {
            last.insert(s, i);
        }
        let Some(latest) = before.iter().map(|&p| turns[p].at_s).reduce(f64::max) else {
            continue;
        };
        let think = t.think_s.unwrap_or(t.at_s - latest).max(0.0);
        for p in &before {
            out.next[*p].push((i, think));
        }
        out.waits[i] = before.len() as u32;
    }
    out
}

/// A trace's replays, one stage each (see [`replay`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// One per speed: the trace's mean rate × the speed, over the trace's length ÷ the
    /// speed, then the rest.
    pub stages: Vec<Stage>,
    /// Every request of every replay, at its timestamp ÷ the speed from its stage's start.
    pub planned: Vec<Planned>,
    /// Each stage's window.
    pub windows: Vec<StageWindow>,
    /// With think-time dispatch, who follows whom across the planned requests (think times
    /// ÷ the speed); a request that waits for others is not sent at its own time. Empty
    /// with timestamp dispatch.
    pub follow: Follow,
}

/// Where a trace replay goes wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A speed that cannot be meant.
    #[error(
        "invalid speed {0}: expected a factor above 0 and at most 1000 (2 or 2x: twice as fast)"
    )]
    Speed(f64),
    /// No speeds.
    #[error("no speeds given (expected at least one, such as 1x)")]
    NoSpeeds,
}

/// Parses a speed: `2`, `2x` or `0.5x`.
pub fn parse_speed(s: &str) -> Option<f64> {
    let v: f64 = s.trim().trim_end_matches(['x', 'X']).parse().ok()?;
    (v.is_finite() && v > 0.0 && v <= 1000.0).then_some(v)
}

/// The replays of `turns` at each of `speeds` with `rest_s` seconds between them, sent as
/// `dispatch` says.
pub fn replay(
    turns: &[Turn],
    speeds: &[f64],
    rest_s: f64,
    dispatch: Dispatch,
) -> Result<Replay, ReplayError> {
    if speeds.is_empty() {
        return Err(ReplayError::NoSpeeds);
    }
    let n = turns.len();
    // The window ends one mean gap after the last request, as a constant-rate step's does.
    let length = match n {
        0 | 1 => 1.0,
        _ => span_s(turns) * n as f64 / (n - 1) as f64,
    }
    .max(1e-3);
    let links = match dispatch {
        Dispatch::Timestamp => Follow::default(),
        Dispatch::ThinkTime => followers(turns),
    };
    let mut out = Replay {
        stages: Vec::with_capacity(speeds.len()),
        planned: Vec::with_capacity(n * speeds.len()),
        windows: Vec::with_capacity(speeds.len()),
        follow: Follow::default(),
    };
    let mut t0 = 0.0;
    for (k, &speed) in speeds.iter().enumerate() {
        if !(speed.is_finite() && speed > 0.0 && speed <= 1000.0) {
            return Err(ReplayError::Speed(speed));
        }
        let duration = length / speed;
        out.stages
            .push(Stage::constant(n as f64 / duration, duration, rest_s));
        out.windows.push(StageWindow {
            start: t0,
            end: t0 + duration,
            rest_end: t0 + duration + rest_s,
        });
        let base = k * n;
        out.planned.extend(turns.iter().map(|t| Planned {
            at: t0 + t.at_s / speed,
            stage: k,
            closed: false,
        }));
        if dispatch == Dispatch::ThinkTime {
            out.follow.next.extend(links.next.iter().map(|f| {
                f.iter()
                    .map(|&(j, think)| (base + j, think / speed))
                    .collect::<Vec<_>>()
            }));
            out.follow.waits.extend_from_slice(&links.waits);
        }
        t0 += duration + rest_s;
    }
    Ok(out)
}

/// A trace's arrivals as a rate series: requests per second in each `bin_s`-second bin from
/// the first request, as `(start, rate)` rows (what a rehearsal replays: the arrivals'
/// shape, drawn again as a Poisson process within each bin), then 0 after the last bin.
pub fn rate_series(turns: &[Turn], bin_s: f64) -> Vec<(f64, f64)> {
    let bin_s = if bin_s.is_finite() && bin_s > 0.0 {
        bin_s
    } else {
        1.0
    };
    let bins = (span_s(turns) / bin_s).floor() as usize + 1;
    let mut counts = vec![0u64; bins];
    for t in turns {
        counts[((t.at_s / bin_s).floor() as usize).min(bins - 1)] += 1;
    }
    let mut rows: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| (i as f64 * bin_s, c as f64 / bin_s))
        .collect();
    // The traffic ends with the trace.
    rows.push((bins as f64 * bin_s, 0.0));
    rows
}

/// `n` requests shaped as `shape` (see [`Shape`]), each unique part `length` long and each
/// answer `output` long, drawn with `seed`.
pub fn shaped(shape: Shape, n: usize, length: Length, output: Length, seed: u64) -> Vec<Turn> {
    let mut rng = Rng::new(seed ^ 0x5A_A7ED);
    match shape {
        Shape::SystemPrompt { pool, tokens } => (0..n)
            .map(|i| {
                let p = rng.next_u64() % u64::from(pool);
                let system = chain(0, mix(&[5, seed, p]));
                let own = chain(system, mix(&[6, seed, i as u64]));
                Turn {
                    at_s: 0.0,
                    session: None,
                    think_s: None,
                    id: None,
                    after: Vec::new(),
                    output: output.sample(&mut rng),
                    spans: vec![
                        Span { id: system, tokens },
                        Span {
                            id: own,
                            tokens: length.sample(&mut rng),
                        },
                    ],
                }
            })
            .collect(),
        Shape::MultiTurn { turns, users } => (0..n)
            .map(|i| {
                let (users, turns) = (users as usize, turns as usize);
                let round = i / users;
                let turn = round % turns;
                let conversation = (i % users + users * (round / turns)) as u64;
                // A conversation's lengths are its own draws, so every turn repeats the
                // earlier ones exactly.
                let mut own = Rng::new(mix(&[7, seed, conversation]));
                let mut spans = Vec::with_capacity(2 * turn + 1);
                let mut parent = 0;
                let mut answer = 0;
                for k in 0..=turn {
                    let user = length.sample(&mut own);
                    answer = output.sample(&mut own);
                    parent = chain(parent, mix(&[8, seed, conversation, k as u64]));
                    spans.push(Span {
                        id: parent,
                        tokens: user,
                    });
                    if k < turn {
                        parent = chain(parent, mix(&[9, seed, conversation, k as u64]));
                        spans.push(Span {
                            id: parent,
                            tokens: answer,
                        });
                    }
                }
                Turn {
                    at_s: 0.0,
                    session: Some(conversation),
                    think_s: None,
                    id: None,
                    after: Vec::new(),
                    output: answer,
                    spans,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_hashes_are_equal_exactly_as_far_as_the_prompts_agree() {
        let turn = |spans: &[(u64, u32)]| Turn {
            at_s: 0.0,
            session: None,
            think_s: None,
            id: None,
            after: Vec::new(),
            output: 1,
            spans: spans
                .iter()
                .map(|&(id, tokens)| Span { id, tokens })
                .collect(),
        };
        // A 40-token shared span, then each prompt's own.
        let a = turn(&[(1, 40), (2, 30)]).block_hashes(16);
        let b = turn(&[(1, 40), (3, 30)]).block_hashes(16);
        assert_eq!(a.len(), 4, "70 tokens: four full blocks");
        assert_eq!(a[..2], b[..2], "the first 32 tokens are the shared span's");
        assert_ne!(
            a[2], b[2],
            "block 3 mixes the shared span's end with each own part"
        );
        // The same tokens split differently are a different prompt to this rule only when
        // the spans differ: a repeat is equal throughout.
        assert_eq!(a, turn(&[(1, 40), (2, 30)]).block_hashes(16));
        assert!(turn(&[(1, 15)]).block_hashes(16).is_empty());
    }

    #[test]
    fn an_agents_branches_wait_for_their_parent_and_the_join_for_every_branch() {
        // A planner (p), three tools that each continue its context (t1..t3, sent 100 ms
        // after it ends), and a join (j) that waits for all three.
        let text = r#"{"id": "p", "timestamp": 0, "input_length": 1024, "hash_ids": [1, 2]}
{"id": "t1", "parent": "p", "timestamp": 900, "input_length": 1100, "hash_ids": [1, 2, 3], "delay": 100}
{"id": "t2", "parent": "p", "timestamp": 900, "input_length": 1100, "hash_ids": [1, 2, 4], "delay": 100}
{"id": "t3", "parent": "p", "timestamp": 950, "input_length": 1100, "hash_ids": [1, 2, 5], "delay": 100}
{"id": "j", "parents": ["t1", "t2", "t3"], "timestamp": 2000, "input_length": 1600, "hash_ids": [1, 2, 6, 7]}
{"timestamp": 2500, "input_length": 50}
"#;
        let t = parse_mooncake(text, "agent.jsonl").unwrap();
        let f = followers(&t);
        assert_eq!(f.next[0], vec![(1, 0.1), (2, 0.1), (3, 0.1)]);
        assert_eq!(f.waits, vec![0, 1, 1, 1, 3, 0]);
        // No delay: the gap from the latest parent's timestamp.
        assert_eq!(f.next[3], vec![(4, 1.05)]);
        assert_eq!(f.next[1], vec![(4, 1.05)]);
        let hits = implied_hits(&t);
        assert_eq!(hits[1], 1024, "a branch continues its parent's context");
        assert_eq!(hits[4], 1024, "the join shares the planner's part only");
        for (bad, says) in [
            (
                "{\"id\": 1, \"input_length\": 5}\n{\"id\": 1, \"parent\": 1, \"input_length\": 5}",
                "line 1's too",
            ),
            ("{\"parent\": \"x\", \"input_length\": 5}", "no line names"),
            (
                "{\"timestamp\": 0, \"parent\": 2, \"input_length\": 5}\n{\"id\": 2, \"timestamp\": 5, \"input_length\": 5}",
                "sent after it",
            ),
            ("{\"parents\": 3, \"input_length\": 5}", "array of names"),
        ] {
            let e = parse_mooncake(bad, "b.jsonl").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_trace_is_read_liberally_and_checked_strictly() {
        let text = r#"{"timestamp": 2000, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2], "extra": "ignored"}

{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 3], "session_id": "a"}
{"timestamp": 3500, "input_length": 700, "hash_ids": [1], "session_id": "a", "delay": 250}
"#;
        let t = parse_mooncake(text, "t.jsonl").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].at_s, 0.0);
        assert_eq!(t[1].at_s, 2.0);
        assert_eq!(t[0].prompt_tokens(), 600);
        assert_eq!(t[1].spans[1].tokens, 488, "the last block is partial");
        assert_eq!(t[2].output, 1, "no output_length: one token");
        assert_eq!(
            t[2].spans.len(),
            2,
            "blocks past the listed ids are the request's own"
        );
        assert_eq!(t[0].spans[0], t[1].spans[0]);
        assert_eq!(t[0].spans[0].id, t[2].spans[0].id);
        assert_ne!(t[0].spans[1].id, t[2].spans[1].id);
        let f = followers(&t);
        assert_eq!(
            f.next[0],
            vec![(2, 0.25)],
            "the recorded delay is the think time"
        );
        assert!(f.next[1].is_empty());
        assert_eq!(f.waits, vec![0, 0, 1]);
        for (bad, says) in [
            (r#"{"timestamp": 0}"#, "input_length"),
            (r#"{"input_length": 0}"#, "from 1"),
            (r#"{"input_length": 10, "hash_ids": [1, 2]}"#, "fills 1"),
            (
                r#"{"input_length": 10, "hash_ids": ["x"]}"#,
                "whole numbers",
            ),
            (r#"{"input_length": 10, "timestamp": -1}"#, "non-negative"),
            ("not json", "not valid JSON"),
        ] {
            let e = parse_mooncake(bad, "b.jsonl").unwrap_err().to_string();
            assert!(e.contains("b.jsonl:1") && e.contains(says), "{e}");
        }
        assert!(parse_mooncake("\n\n", "e").is_err());
    }

    #[test]
    fn equal_spans_give_equal_text_and_the_implied_cache_finds_them() {
        let t = parse_mooncake(
            "{\"input_length\": 1024, \"hash_ids\": [7, 8]}\n{\"input_length\": 1030, \"hash_ids\": [7, 8, 9]}\n{\"input_length\": 1024, \"hash_ids\": [6, 8]}\n",
            "t",
        )
        .unwrap();
        let (a, b) = (t[0].text(), t[1].text());
        assert_eq!(a.split(' ').count(), 1024, "one word a token");
        assert!(b.starts_with(&a) && b.len() > a.len());
        assert_eq!(
            implied_hits(&t),
            vec![0, 1024, 0],
            "a different first block shares nothing"
        );
        // An identical prompt hits all but its last block.
        let same = vec![t[0].clone(), t[0].clone()];
        assert_eq!(implied_hits(&same), vec![0, 1008]);
    }

    #[test]
    fn replays_scale_the_clock_and_think_time_waits_for_the_turn_before() {
        let t = parse_mooncake(
            "{\"timestamp\": 0, \"input_length\": 5, \"session_id\": 1}\n{\"timestamp\": 1000, \"input_length\": 5}\n{\"timestamp\": 4000, \"input_length\": 5, \"session_id\": 1}\n",
            "t",
        )
        .unwrap();
        let r = replay(&t, &[1.0, 2.0], 10.0, Dispatch::Timestamp).unwrap();
        assert_eq!(r.stages.len(), 2);
        assert_eq!(r.windows[0].end, 6.0, "one mean gap after the last");
        assert_eq!(r.windows[1].start, 16.0);
        assert_eq!(r.planned[5].at, 16.0 + 2.0);
        assert_eq!(r.stages[1].rate, 1.0);
        assert!(r.follow.next.is_empty());
        let r = replay(&t, &[2.0], 0.0, Dispatch::ThinkTime).unwrap();
        assert_eq!(r.follow.next, vec![vec![(2, 2.0)], vec![], vec![]]);
        assert_eq!(r.follow.waits, vec![0, 0, 1]);
        assert!(replay(&t, &[0.0], 0.0, Dispatch::Timestamp).is_err());
        assert!(replay(&t, &[], 0.0, Dispatch::Timestamp).is_err());
        assert_eq!(parse_speed("2x"), Some(2.0));
        assert_eq!(parse_speed("0.5"), Some(0.5));
        assert_eq!(parse_speed("0x"), None);
        assert_eq!(parse_speed("fast"), None);
    }

    #[test]
    fn a_trace_becomes_a_rate_series() {
        let t = parse_mooncake(
            "{\"timestamp\": 0, \"input_length\": 5}\n{\"timestamp\": 4000, \"input_length\": 5}\n{\"timestamp\": 9000, \"input_length\": 5}\n{\"timestamp\": 25000, \"input_length\": 5}\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            rate_series(&t, 10.0),
            vec![(0.0, 0.3), (10.0, 0.0), (20.0, 0.1), (30.0, 0.0)]
        );
    }

    #[test]
    fn shapes_share_what_they_say() {
        let fixed = |n| Length::Fixed { tokens: n };
        let sys = shaped(
            Shape::SystemPrompt {
                pool: 2,
                tokens: 320,
            },
            50,
            fixed(40),
            fixed(10),
            1,
        );
        let hits = implied_hits(&sys);
        assert_eq!(
            hits.iter().filter(|h| **h == 0).count(),
            2,
            "one miss per pooled prompt"
        );
        assert!(hits.iter().all(|h| [0, 320].contains(h)));
        let mt = shaped(
            Shape::MultiTurn { turns: 3, users: 4 },
            24,
            fixed(32),
            fixed(16),
            1,
        );
        // Request 4 is user 0's second turn: its first 32 + 16 tokens are turn one's prompt
        // and answer; only the prompt was seen.
        assert_eq!(mt[4].session, mt[0].session);
        assert_eq!(mt[4].prompt_tokens(), 32 + 16 + 32);
        assert!(mt[4].text().starts_with(&mt[0].text()));
        let hits = implied_hits(&mt);
        assert_eq!(hits[4], 32);
        assert_eq!(hits[8], 32 + 16 + 32, "turn three finds turn two's prompt");
        assert_ne!(
            mt[12].session, mt[0].session,
            "a new conversation after three turns"
        );
        assert_eq!(hits[12], 0);
    }
}
