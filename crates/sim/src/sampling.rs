//! What a request asks of its output beyond its length, served as vLLM serves it: `n`
//! parallel samples, `stop` strings, `logprobs`/`top_logprobs`, and tool calls (`tools` with
//! `tool_choice`).
//!
//! The simulator's output text is deterministic (a word per token, from the prompt, the seed
//! and the sample's index; see [`crate::tokens`]), so where a stop string first appears, and
//! how many tokens a tool call's JSON takes, are known before the request runs: the engine is
//! told to end the request there, and so the cost of what the client asked for is what the
//! engine simulates (a shorter output, a tool call's tokens, `n` sequences decoding over one
//! shared prompt).

use std::borrow::Cow;

use inferscale_engine::mix;
use serde_json::{Map, Value, json};

use crate::tokens::{count_text, pieces, token_text};

/// vLLM's default `--max-logprobs`.
pub(crate) const MAX_LOGPROBS: u64 = 20;

/// The most parallel samples one request may ask for (a bound on what one request can make
/// the server hold).
pub(crate) const MAX_N: u64 = 128;

/// The most stop strings, and the longest one, a request may give.
const MAX_STOPS: usize = 16;
const MAX_STOP_CHARS: usize = 256;

/// How a chat request's tools are to be used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolUse {
    /// No tool call (no tools, or `tool_choice: "none"`).
    None,
    /// `"auto"`: the model decides (here: it calls a tool unless the last message is a
    /// tool's result).
    Auto(Vec<Function>),
    /// `"required"`: at least one call.
    Required(Vec<Function>),
    /// A named function.
    Named(Function),
}

/// A function a request offers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) parameters: Value,
}

/// What the request asked of its output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sampling {
    /// Parallel samples.
    pub(crate) n: u32,
    /// Stop strings.
    pub(crate) stop: Vec<String>,
    /// Keep the stop string in the text.
    pub(crate) include_stop: bool,
    /// Log probabilities: `Some(k)` with the `k` most likely alternatives per token.
    pub(crate) logprobs: Option<u32>,
    /// Tool calls (chat only).
    pub(crate) tools: ToolUse,
}

/// A field that is wrong: the message and the field.
pub(crate) type Bad = (String, &'static str);

fn uint(obj: &Map<String, Value>, field: &'static str) -> Result<Option<u64>, Bad> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            (
                format!("`{field}` must be a non-negative integer, not {v}"),
                field,
            )
        }),
    }
}

fn flag(obj: &Map<String, Value>, field: &'static str) -> Result<bool, Bad> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err((format!("`{field}` must be a boolean, not {v}"), field)),
    }
}

fn too_many_logprobs(k: u64, field: &'static str) -> Bad {
    (
        format!(
            "Requested sample logprobs of {k}, which is greater than max allowed: {MAX_LOGPROBS}"
        ),
        field,
    )
}

/// Reads `n`, `stop`, `include_stop_str_in_output`, `logprobs`, `top_logprobs`, `tools` and
/// `tool_choice` as vLLM's OpenAI server validates them. `auto_tools`: the server was started
/// with `--enable-auto-tool-choice` and a `--tool-call-parser`.
pub(crate) fn parse(
    obj: &Map<String, Value>,
    chat: bool,
    auto_tools: bool,
) -> Result<Sampling, Bad> {
    let n = uint(obj, "n")?.unwrap_or(1);
    if n == 0 {
        return Err(("`n` must be at least 1".into(), "n"));
    }
    if n > MAX_N {
        return Err((
            format!("`n` must be at most {MAX_N} for the simulator, not {n}"),
            "n",
        ));
    }
    let stop = match obj.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str().map(str::to_owned).ok_or_else(|| {
                    (
                        format!("`stop` must be a string or a list of strings, not {s}"),
                        "stop",
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err((
                format!("`stop` must be a string or a list of strings, not {v}"),
                "stop",
            ));
        }
    };
    let stop: Vec<String> = stop.into_iter().filter(|s| !s.is_empty()).collect();
    if stop.len() > MAX_STOPS || stop.iter().any(|s| s.chars().count() > MAX_STOP_CHARS) {
        return Err((
            format!("at most {MAX_STOPS} stop strings of at most {MAX_STOP_CHARS} characters each"),
            "stop",
        ));
    }
    let include_stop = flag(obj, "include_stop_str_in_output")?;
    let logprobs = if chat {
        let on = flag(obj, "logprobs")?;
        let top = uint(obj, "top_logprobs")?;
        match (on, top) {
            (false, Some(k)) if k > 0 => {
                return Err((
                    "when using `top_logprobs`, `logprobs` must be set to true".into(),
                    "top_logprobs",
                ));
            }
            (_, Some(k)) if k > MAX_LOGPROBS => return Err(too_many_logprobs(k, "top_logprobs")),
            (true, k) => Some(k.unwrap_or(0) as u32),
            (false, _) => None,
        }
    } else {
        match obj.get("logprobs") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(k) if k > MAX_LOGPROBS => return Err(too_many_logprobs(k, "logprobs")),
                Some(k) => Some(k as u32),
                None => {
                    return Err((
                        format!("`logprobs` must be a non-negative integer, not {v}"),
                        "logprobs",
                    ));
                }
            },
        }
    };
    let tools = if chat {
        tool_use(obj, auto_tools)?
    } else {
        ToolUse::None
    };
    Ok(Sampling {
        n: n as u32,
        stop,
        include_stop,
        logprobs,
        tools,
    })
}

fn tool_use(obj: &Map<String, Value>, auto_tools: bool) -> Result<ToolUse, Bad> {
    let tools: Vec<Function> = match obj.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let f = t.get("function").filter(|f| f.is_object());
                let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
                let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
                match (kind, name) {
                    ("function", Some(name)) if !name.is_empty() => Ok(Function {
                        name: name.to_owned(),
                        parameters: f
                            .and_then(|f| f.get("parameters"))
                            .cloned()
                            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                    }),
                    _ => Err((
                        format!("`tools[{i}]` must be {{\"type\": \"function\", \"function\": {{\"name\": ..., \"parameters\": ...}}}}"),
                        "tools",
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(v) => return Err((format!("`tools` must be a list of tools, not {v}"), "tools")),
    };
    let choice = match obj.get("tool_choice") {
        None | Some(Value::Null) if tools.is_empty() => return Ok(ToolUse::None),
        None | Some(Value::Null) => Value::String("auto".into()),
        Some(v) => v.clone(),
    };
    if choice == "none" {
        return Ok(ToolUse::None);
    }
    if tools.is_empty() {
        return Err((
            "When using `tool_choice`, `tools` must be set.".into(),
            "tool_choice",
        ));
    }
    match &choice {
        Value::String(s) if s == "auto" => {
            if !auto_tools {
                return Err((
                    "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"
                        .into(),
                    "tool_choice",
                ));
            }
            Ok(ToolUse::Auto(tools))
        }
        Value::String(s) if s == "required" => Ok(ToolUse::Required(tools)),
        Value::Object(o) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    (
                        "`tool_choice` must be {\"type\": \"function\", \"function\": {\"name\": ...}}".to_owned(),
                        "tool_choice",
                    )
                })?;
            tools
                .into_iter()
                .find(|t| t.name == name)
                .map(ToolUse::Named)
                .ok_or_else(|| {
                    (
                        format!("The tool specified in `tool_choice` ({name:?}) does not match any of the specified `tools`"),
                        "tool_choice",
                    )
                })
        }
        other => Err((
            format!(
                "Invalid value for `tool_choice`: {other}! Only named tools, \"none\", \"auto\" or \"required\" are supported."
            ),
            "tool_choice",
        )),
    }
}

/// A tool call one choice makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// `chatcmpl-tool-…`.
    pub(crate) id: String,
    /// The function.
    pub(crate) name: String,
    /// Its arguments, as JSON text.
    pub(crate) arguments: String,
    /// `finish_reason` when it completes: `tool_calls`, or `stop` for a named function.
    pub(crate) finish: &'static str,
    /// `content` beside it: `""` (named, required) or `null` (auto).
    pub(crate) content_null: bool,
    /// Tokens before the arguments (the name and the parser's wrapping), streamed first.
    pub(crate) head_tokens: u32,
}

/// One choice's output, decided in advance where the request's parameters decide it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Its index among the request's choices.
    pub(crate) index: u32,
    /// What picks its words.
    pub(crate) fingerprint: u64,
    /// The text of each output token, when it is not the free words (a stop string cut it,
    /// or it is a tool call).
    pub(crate) fixed: Option<Vec<String>>,
    /// Output tokens at which it ends (a stop string's or a tool call's end).
    pub(crate) end: Option<u32>,
    /// The stop string that ended it.
    pub(crate) stop_reason: Option<String>,
    /// Its tool call.
    pub(crate) call: Option<Call>,
}

impl Plan {
    /// The text of output token `i` (0-based).
    pub(crate) fn piece(&self, seed: u64, i: u32) -> Cow<'_, str> {
        match &self.fixed {
            Some(p) => Cow::Borrowed(p.get(i as usize).map_or("", String::as_str)),
            None => Cow::Owned(format!(" {}", token_text(seed, self.fingerprint, i))),
        }
    }

    /// The whole text of the first `output` tokens.
    pub(crate) fn text(&self, seed: u64, output: u32) -> String {
        (0..output).map(|i| self.piece(seed, i)).collect()
    }
}

/// The fingerprint sample `index` of a prompt draws its words from (sample 0: the prompt's).
pub(crate) fn sample_fingerprint(prompt: u64, index: u32) -> u64 {
    if index == 0 {
        prompt
    } else {
        mix(&[prompt, u64::from(index)])
    }
}

/// Plans sample `index`: where a stop string ends it, or the tool call it makes.
/// `last_is_tool`: the conversation's last message is a tool's result (an `auto` model then
/// answers in words).
pub(crate) fn plan(
    s: &Sampling,
    seed: u64,
    prompt: u64,
    index: u32,
    max_tokens: u32,
    last_is_tool: bool,
) -> Plan {
    let fingerprint = sample_fingerprint(prompt, index);
    let mut p = Plan {
        index,
        fingerprint,
        fixed: None,
        end: None,
        stop_reason: None,
        call: None,
    };
    let call = match &s.tools {
        ToolUse::None => None,
        ToolUse::Auto(_) if last_is_tool => None,
        ToolUse::Auto(fs) => Some((&fs[pick(fs, seed, fingerprint)], "tool_calls", true)),
        ToolUse::Required(fs) => Some((&fs[pick(fs, seed, fingerprint)], "tool_calls", false)),
        ToolUse::Named(f) => Some((f, "stop", false)),
    };
    if let Some((f, finish, auto)) = call {
        let args = example(&f.parameters, seed, fingerprint, 0).to_string();
        // What the model generates: the arguments alone (named), a JSON list of calls
        // (required, as vLLM's guided decoding makes it), or the parser's wrapping (auto).
        let generated = match (&s.tools, auto) {
            (ToolUse::Named(_), _) => args.clone(),
            (_, true) => format!(
                "<tool_call>\n{{\"name\": {:?}, \"arguments\": {args}}}\n</tool_call>",
                f.name
            ),
            _ => format!("[{{\"name\": {:?}, \"parameters\": {args}}}]", f.name),
        };
        let arg_pieces: Vec<String> = pieces(&args).into_iter().map(str::to_owned).collect();
        let total = count_text(&generated).max(arg_pieces.len() as u32).max(1);
        let head = total - arg_pieces.len() as u32;
        let mut fixed = vec![String::new(); head as usize];
        fixed.extend(arg_pieces);
        p.end = Some(total);
        p.fixed = Some(fixed);
        p.call = Some(Call {
            id: format!("chatcmpl-tool-{:016x}", mix(&[seed, fingerprint, 0x7001])),
            name: f.name.clone(),
            arguments: args,
            finish,
            content_null: auto,
            head_tokens: head,
        });
        return p;
    }
    if s.stop.is_empty() {
        return p;
    }
    // The words until a stop string appears in the text (or max_tokens).
    let longest = s.stop.iter().map(String::len).max().unwrap_or(0);
    let mut text = String::new();
    let mut offsets = Vec::new();
    for i in 0..max_tokens {
        let before = text.len();
        offsets.push(before);
        text.push(' ');
        text.push_str(token_text(seed, fingerprint, i));
        let mut from = before.saturating_sub(longest);
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        let hit = s
            .stop
            .iter()
            .filter_map(|st| text[from..].find(st.as_str()).map(|at| (from + at, st)))
            .min_by_key(|(at, _)| *at);
        if let Some((at, st)) = hit {
            let keep = if s.include_stop { at + st.len() } else { at };
            offsets.push(text.len());
            let fixed = (0..=i as usize)
                .map(|j| {
                    let (a, b) = (offsets[j].min(keep), offsets[j + 1].min(keep));
                    text[a..b].to_owned()
                })
                .collect();
            p.fixed = Some(fixed);
            p.end = Some(i + 1);
            p.stop_reason = Some(st.clone());
            return p;
        }
    }
    p
}

fn pick(fs: &[Function], seed: u64, fingerprint: u64) -> usize {
    (mix(&[seed, fingerprint, 0x7002]) % fs.len().max(1) as u64) as usize
}

/// A value that fits a JSON schema (its `type`, `properties`, `items`, `enum`, `const`, and
/// the first of `anyOf`/`oneOf`), deterministic in `seed` and `salt`.
pub(crate) fn example(schema: &Value, seed: u64, salt: u64, depth: u32) -> Value {
    let h = mix(&[seed, salt, u64::from(depth), 0x7003]);
    if depth > 8 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty())
    {
        return e[(h % e.len() as u64) as usize].clone();
    }
    if let Some(first) = ["anyOf", "oneOf", "allOf"].iter().find_map(|k| {
        schema
            .get(*k)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
    }) {
        return example(first, seed, salt, depth + 1);
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (i, (k, v)) in props.iter().enumerate() {
                    out.insert(
                        k.clone(),
                        example(v, seed, mix(&[salt, i as u64]), depth + 1),
                    );
                }
            }
            Value::Object(out)
        }
        "array" => {
            let items = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            Value::Array(vec![example(&items, seed, salt, depth + 1)])
        }
        "integer" => json!(h % 100),
        "number" => json!((h % 10_000) as f64 / 100.0),
        "boolean" => json!(h.is_multiple_of(2)),
        "null" => Value::Null,
        _ => json!(token_text(seed, salt, depth)),
    }
}

/// The log probability of output token `i` and its `k` most likely alternatives (the token
/// itself first, then `k` others with the mass left, halving): well-formed, deterministic.
pub(crate) fn logprobs(
    seed: u64,
    fingerprint: u64,
    i: u32,
    token: &str,
    k: u32,
) -> (f64, Vec<(String, f64)>) {
    let h = mix(&[seed, fingerprint, u64::from(i), 0x7004]);
    // The sampled token's probability: 0.35-0.99.
    let p = 0.35 + (h % 6400) as f64 / 10_000.0;
    let lp = p.ln();
    let mut top = vec![(token.to_owned(), lp)];
    let mut rest = 1.0 - p;
    let mut j = 0u64;
    while top.len() <= k as usize && j < 64 {
        let alt = format!(" {}", token_text(seed, h, j as u32));
        j += 1;
        if top.iter().any(|(t, _)| *t == alt) {
            continue;
        }
        rest /= 2.0;
        top.push((alt, rest.max(1e-12).ln()));
    }
    top.truncate(k.max(1) as usize);
    (lp, top)
}

/// A chat choice's logprobs entry for one token (`{token, logprob, bytes, top_logprobs}`).
pub(crate) fn chat_logprob(seed: u64, fingerprint: u64, i: u32, token: &str, k: u32) -> Value {
    let (lp, top) = logprobs(seed, fingerprint, i, token, k);
    let top: Vec<Value> = if k == 0 {
        Vec::new()
    } else {
        top.iter()
            .map(|(t, l)| json!({"token": t, "logprob": l, "bytes": t.as_bytes()}))
            .collect()
    };
    json!({"token": token, "logprob": lp, "bytes": token.as_bytes(), "top_logprobs": top})
}

/// A completion choice's logprobs for tokens `from..to` (`{text_offset, token_logprobs,
/// tokens, top_logprobs}`), the text before them being `offset` bytes long.
pub(crate) fn completion_logprobs(
    plan: &Plan,
    seed: u64,
    from: u32,
    to: u32,
    mut offset: usize,
    k: u32,
) -> Value {
    let (mut offsets, mut lps, mut tokens, mut tops) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in from..to {
        let t = plan.piece(seed, i);
        let (lp, top) = logprobs(seed, plan.fingerprint, i, &t, k);
        offsets.push(offset);
        offset += t.len();
        lps.push(lp);
        let top: Map<String, Value> = top.into_iter().map(|(t, l)| (t, json!(l))).collect();
        tops.push(Value::Object(top));
        tokens.push(t.into_owned());
    }
    json!({"text_offset": offsets, "token_logprobs": lps, "tokens": tokens, "top_logprobs": tops})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn parameters_are_read_as_vllm_reads_them() {
        let s = parse(
            &obj(json!({"n": 3, "stop": ["cloud", ""], "logprobs": 2})),
            false,
            false,
        )
        .unwrap();
        assert_eq!(
            (s.n, s.stop.clone(), s.logprobs),
            (3, vec!["cloud".to_owned()], Some(2))
        );
        let e = |v: Value, chat: bool| parse(&obj(v), chat, false).unwrap_err();
        assert_eq!(e(json!({"n": 0}), false).1, "n");
        assert!(
            e(json!({"logprobs": 21}), false)
                .0
                .contains("max allowed: 20")
        );
        assert!(
            e(json!({"top_logprobs": 3}), true)
                .0
                .contains("`logprobs` must be set to true")
        );
        assert_eq!(e(json!({"stop": 5}), false).1, "stop");
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        assert!(
            e(json!({"tools": tools}), true)
                .0
                .contains("--enable-auto-tool-choice")
        );
        assert!(e(json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "nope"}}}), true).0.contains("does not match"));
        assert!(
            e(json!({"tool_choice": "required"}), true)
                .0
                .contains("`tools` must be set")
        );
        let ok = parse(
            &obj(json!({"tools": tools, "tool_choice": "required"})),
            true,
            false,
        )
        .unwrap();
        assert!(matches!(ok.tools, ToolUse::Required(_)));
        let auto = parse(&obj(json!({"tools": tools})), true, true).unwrap();
        assert!(matches!(auto.tools, ToolUse::Auto(_)));
        let none = parse(
            &obj(json!({"tools": tools, "tool_choice": "none"})),
            true,
            false,
        )
        .unwrap();
        assert_eq!(none.tools, ToolUse::None);
    }

    #[test]
    fn a_stop_string_ends_the_text_before_it() {
        let free = Plan {
            index: 0,
            fingerprint: 42,
            fixed: None,
            end: None,
            stop_reason: None,
            call: None,
        };
        let text = free.text(7, 200);
        // A stop string that the free text holds: the third word.
        let word = text.split(' ').nth(3).unwrap().to_owned();
        let s = Sampling {
            n: 1,
            stop: vec![word.clone()],
            include_stop: false,
            logprobs: None,
            tools: ToolUse::None,
        };
        let p = plan(&s, 7, 42, 0, 200, false);
        let end = p.end.unwrap();
        assert!(end <= 3, "{end}");
        let cut = p.text(7, end);
        assert!(!cut.contains(&word));
        assert!(text.starts_with(&cut));
        assert_eq!(p.stop_reason.as_deref(), Some(word.as_str()));
        let kept = plan(
            &Sampling {
                include_stop: true,
                ..s
            },
            7,
            42,
            0,
            200,
            false,
        );
        assert!(kept.text(7, kept.end.unwrap()).ends_with(&word));
    }

    #[test]
    fn a_tool_call_fits_its_schema_and_costs_its_tokens() {
        let f = Function {
            name: "get_weather".into(),
            parameters: json!({"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"},
                "unit": {"enum": ["c", "f"]}, "tags": {"type": "array", "items": {"type": "string"}}}}),
        };
        let s = Sampling {
            n: 1,
            stop: Vec::new(),
            include_stop: false,
            logprobs: None,
            tools: ToolUse::Required(vec![f]),
        };
        let p = plan(&s, 1, 9, 0, 100, false);
        let c = p.call.clone().unwrap();
        let args: Value = serde_json::from_str(&c.arguments).unwrap();
        assert!(args["city"].is_string() && args["days"].is_u64() && args["tags"].is_array());
        assert!(["c", "f"].contains(&args["unit"].as_str().unwrap()));
        assert_eq!(c.finish, "tool_calls");
        let end = p.end.unwrap();
        assert_eq!(
            p.text(1, end),
            c.arguments,
            "the streamed pieces are the arguments"
        );
        assert!(end > c.head_tokens && end >= count_text(&c.arguments));
    }

    #[test]
    fn logprobs_are_well_formed() {
        for i in 0..50 {
            let (lp, top) = logprobs(1, 2, i, " cloud", 5);
            assert!(lp < 0.0);
            assert_eq!(top.len(), 5);
            assert_eq!(top[0], (" cloud".to_owned(), lp));
            assert!(
                top.windows(2)
                    .all(|w| w[0].1 >= w[1].1 || w[0].0 == " cloud")
            );
            let mass: f64 = top.iter().map(|(_, l)| l.exp()).sum();
            assert!(mass <= 1.0 + 1e-9, "{mass}");
        }
    }
}
