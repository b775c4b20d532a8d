//! Token counting and token text: deterministic stand-ins for a tokenizer.
//!
//! **Prompt tokens** are counted with a documented rule that approximates BPE tokenizers on
//! English text (about 1.3 tokens a word): every run of letters or digits of `n` characters
//! counts `ceil(n / 8)` tokens (common words are one token, long ones two or three), every run
//! of `m` other visible characters (punctuation, symbols) counts `ceil(m / 2)`, and whitespace
//! counts nothing. The seeds' prompt comes to 35 tokens. A chat request counts each message's content
//! plus 4 tokens for its role markers, plus 3 for the assistant's turn header. Token-id
//! prompts count their ids.
//!
//! **Output text** is one word per token, chosen from a fixed vocabulary by a hash of the
//! simulator's seed, the prompt and the token's position, so the same prompt always gets the
//! same answer from the same seed.

use inferscale_engine::mix;

/// Tokens in a text prompt (see the module documentation for the rule).
pub fn count_text(text: &str) -> u32 {
    let mut tokens: u64 = 0;
    let (mut word, mut punct) = (0u64, 0u64);
    for c in text.chars() {
        if c.is_alphanumeric() {
            tokens += punct.div_ceil(2);
            punct = 0;
            word += 1;
        } else {
            tokens += word.div_ceil(8);
            word = 0;
            if c.is_whitespace() {
                tokens += punct.div_ceil(2);
                punct = 0;
            } else {
                punct += 1;
            }
        }
    }
    tokens += word.div_ceil(8) + punct.div_ceil(2);
    tokens.min(u64::from(u32::MAX)) as u32
}

/// The tokens of `text` as consecutive spans of it, by the rule [`count_text`] counts (so
/// there are exactly that many): letters and digits in chunks of up to 8 characters, other
/// visible characters in pairs, whitespace joined to the token after it (as BPE vocabularies
/// hold " word"), and trailing whitespace to the last token. Concatenated they give `text`
/// back (unless it is only whitespace: then there are none).
pub(crate) fn pieces(text: &str) -> Vec<&str> {
    #[derive(PartialEq, Clone, Copy)]
    enum Run {
        Space,
        Word,
        Punct,
    }
    // Where each token's visible part ends; a piece runs from the previous end to its own.
    let mut ends = Vec::new();
    let (mut run, mut len) = (Run::Space, 0usize);
    for (i, c) in text.char_indices() {
        let kind = if c.is_alphanumeric() {
            Run::Word
        } else if c.is_whitespace() {
            Run::Space
        } else {
            Run::Punct
        };
        let cap = if kind == Run::Word { 8 } else { 2 };
        if kind != Run::Space && run == kind && len < cap {
            len += 1;
            continue;
        }
        if run != Run::Space {
            ends.push(i);
        }
        run = kind;
        len = usize::from(kind != Run::Space);
    }
    if run != Run::Space {
        ends.push(text.len());
    }
    if let Some(last) = ends.last_mut() {
        *last = text.len();
    }
    let mut from = 0;
    ends.into_iter()
        .map(|e| {
            let p = &text[from..e];
            from = e;
            p
        })
        .collect()
}

/// The identity of each prompt token, for the prefix cache: equal prompts (and equal
/// beginnings) give equal sequences. A completion prompt's tokens are its [`pieces`]; a
/// chat's are, per message, 4 markers around the role, then the content's pieces, then 3 for
/// the reply header (the count [`count_chat`] makes); token-id prompts are their ids.
pub(crate) enum PromptText<'a> {
    /// A completion's prompt.
    Text(&'a str),
    /// A chat's messages: (role, content).
    Chat(&'a [(String, String)]),
    /// Token ids.
    Ids(&'a [u64]),
}

fn piece_id(p: &str) -> u64 {
    fingerprint(p)
}

/// The prompt's token identities (see [`PromptText`]).
pub(crate) fn token_ids(p: &PromptText<'_>) -> Vec<u64> {
    match p {
        PromptText::Text(t) => pieces(t).into_iter().map(piece_id).collect(),
        PromptText::Ids(ids) => ids.to_vec(),
        PromptText::Chat(msgs) => {
            let mut out = Vec::new();
            for (role, content) in msgs.iter() {
                let r = fingerprint(role);
                out.extend([mix(&[1, r]), mix(&[2, r]), mix(&[3, r])]);
                out.extend(pieces(content).into_iter().map(piece_id));
                out.push(mix(&[4, r]));
            }
            out.extend([mix(&[5]), mix(&[6]), mix(&[7])]);
            out
        }
    }
}

/// The chained hash of each full block of `ids` (`block` tokens each), as vLLM's prefix
/// cache keys blocks: a block's hash covers its tokens and its parent's hash, so equal hashes
/// mean equal tokens from the start. `salt` (the request's `cache_salt`) goes into the first
/// block's, so that salted requests share blocks only with the same salt.
pub(crate) fn block_hashes(ids: &[u64], block: usize, salt: Option<&str>) -> Vec<u64> {
    let mut parent = salt.map_or(0x5eed, fingerprint);
    ids.chunks_exact(block.max(1))
        .map(|chunk| {
            let mut words = Vec::with_capacity(chunk.len() + 1);
            words.push(parent);
            words.extend_from_slice(chunk);
            parent = mix(&words);
            parent
        })
        .collect()
}

/// Tokens of a chat conversation: each message's content plus 4, plus 3 for the reply header.
pub fn count_chat<'a>(contents: impl IntoIterator<Item = &'a str>) -> u32 {
    let mut n: u64 = 3;
    for c in contents {
        n += u64::from(count_text(c)) + 4;
    }
    n.min(u64::from(u32::MAX)) as u32
}

/// A stable 64-bit fingerprint of a prompt, for choosing its answer's words.
pub(crate) fn fingerprint(text: &str) -> u64 {
    // FNV-1a: fast and stable across platforms and releases.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

const WORDS: &[&str] = &[
    "the",
    "cloud",
    "service",
    "scales",
    "with",
    "demand",
    "and",
    "containers",
    "run",
    "on",
    "nodes",
    "that",
    "an",
    "orchestrator",
    "schedules",
    "across",
    "a",
    "cluster",
    "so",
    "each",
    "workload",
    "gets",
    "compute",
    "memory",
    "when",
    "traffic",
    "grows",
    "replicas",
    "are",
    "added",
    "automatically",
    "while",
    "load",
    "balancers",
    "spread",
    "requests",
    "evenly",
    "to",
    "keep",
    "latency",
    "low",
    "storage",
    "is",
    "decoupled",
    "from",
    "instances",
    "which",
    "makes",
    "systems",
    "resilient",
    "elastic",
    "efficient",
    "in",
    "practice",
    "teams",
    "deploy",
    "images",
    "declaratively",
    "monitor",
    "health",
    "signals",
    "queue",
    "depth",
    "throughput",
    "capacity",
    "GPU",
    "inference",
    "model",
    "tokens",
    "per",
    "second",
    "batch",
    "cache",
    "kernel",
    "network",
    "region",
    "zone",
    "failover",
    "policy",
    "metrics",
    "alerts",
    "dashboards",
    "observability",
    "pipelines",
    "stateless",
    "stateful",
    "volumes",
    "secrets",
    "configuration",
    "rollouts",
    "canary",
    "blue",
    "green",
    "upgrades",
    "limits",
    "requests.",
    "isolation,",
    "portability,",
    "scalability.",
    "Kubernetes",
    "pods",
    "deployments",
    "services",
    "ingress",
    "autoscaling",
    "horizontal",
    "vertical",
    "nodes.",
    "clusters,",
];

/// The text of output token `index` (0-based) for a prompt fingerprint and seed: a word with
/// a leading space.
pub(crate) fn token_text(seed: u64, prompt: u64, index: u32) -> &'static str {
    let h = mix(&[seed, prompt, u64::from(index)]);
    WORDS[(h % WORDS.len() as u64) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_prompt_is_about_thirty_tokens() {
        let p = "Starting with the word \"cloud\", write a brief technical explanation about cloud computing \
                 concepts. Cover containerization, orchestration, and scalability in about 80 words.";
        let n = count_text(p);
        assert!((28..=45).contains(&n), "{n}");
        assert_eq!(count_text(""), 0);
        assert_eq!(n, 35);
        assert_eq!(count_text("abcd efgh"), 2);
        assert_eq!(count_text("containerization!"), 3);
        assert_eq!(count_text("a... b"), 4);
        assert_eq!(count_chat(["hi"]), 8);
    }

    #[test]
    fn pieces_are_the_counted_tokens_and_give_the_text_back() {
        for t in [
            "",
            "   ",
            "hello",
            " hello  world ",
            "containerization!",
            "a... b",
            "Starting with the word \"cloud\", write a brief technical explanation.",
            "naïve café — 3.14159 {\"k\": [1, 2]}\n",
            "abcdefghijklmnopqrstuvwxyz0123456789",
        ] {
            let p = pieces(t);
            assert_eq!(p.len() as u32, count_text(t), "{t:?}: {p:?}");
            if !p.is_empty() {
                assert_eq!(p.concat(), t);
            }
        }
        assert_eq!(pieces(" hello  world "), [" hello", "  world "]);
        assert_eq!(pieces("a... b"), ["a", "..", ".", " b"]);
    }

    #[test]
    fn equal_beginnings_share_block_hashes_and_salts_part_them() {
        let a = token_ids(&PromptText::Text(&"alpha beta gamma ".repeat(20)));
        let mut b_text = "alpha beta gamma ".repeat(20);
        b_text.push_str("delta epsilon");
        let b = token_ids(&PromptText::Text(&b_text));
        assert_eq!(a.len(), 60);
        let (ha, hb) = (block_hashes(&a, 16, None), block_hashes(&b, 16, None));
        assert_eq!(ha.len(), 3);
        assert_eq!(hb.len(), 3);
        assert_eq!(ha, hb);
        let c = token_ids(&PromptText::Text(&format!(
            "omega {}",
            "alpha beta gamma ".repeat(20)
        )));
        assert!(block_hashes(&c, 16, None).iter().all(|h| !ha.contains(h)));
        assert_ne!(block_hashes(&a, 16, Some("tenant-1")), ha);
        let chat = [
            ("system".to_owned(), "be brief".to_owned()),
            ("user".to_owned(), "hi".to_owned()),
        ];
        let ids = token_ids(&PromptText::Chat(&chat));
        assert_eq!(ids.len() as u32, count_chat(["be brief", "hi"]));
    }

    #[test]
    fn text_is_deterministic() {
        let f = fingerprint("hello");
        assert_eq!(token_text(1, f, 3), token_text(1, f, 3));
        let a: Vec<_> = (0..20).map(|i| token_text(1, f, i)).collect();
        let b: Vec<_> = (0..20).map(|i| token_text(2, f, i)).collect();
        assert_ne!(a, b);
    }
}
