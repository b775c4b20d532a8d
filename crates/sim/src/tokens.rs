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
    fn text_is_deterministic() {
        let f = fingerprint("hello");
        assert_eq!(token_text(1, f, 3), token_text(1, f, 3));
        let a: Vec<_> = (0..20).map(|i| token_text(1, f, i)).collect();
        let b: Vec<_> = (0..20).map(|i| token_text(2, f, i)).collect();
        assert_ne!(a, b);
    }
}
