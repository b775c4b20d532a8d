//! The requests a driver sends when their prompts share blocks: a trace's or a workload
//! shape's, each with its lengths and what its prompt's full blocks hold.

use std::sync::Arc;

use crate::engine::{PromptBlocks, RequestSpec};
use inferscale_rng::mix;

/// One request as a driver sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// Its lengths.
    pub spec: RequestSpec,
    /// What its prompt's blocks hold.
    pub blocks: PromptBlocks,
}

impl From<RequestSpec> for Prompt {
    fn from(spec: RequestSpec) -> Prompt {
        Prompt {
            spec,
            blocks: PromptBlocks::Own,
        }
    }
}

/// A list of prompts sent in turn, over and over, for a driver that sends more requests than
/// the list holds (a rehearsal hours long of a trace minutes long).
///
/// Each pass after the first keys its shared blocks apart from the passes before: it is new
/// users with the same structure (the same system-prompt pool drawn again, conversations of
/// the same lengths), not the same users sending the same words again, which would find all of
/// themselves cached. What a pass shares within itself it shares again.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptCycle {
    list: Arc<[Prompt]>,
    next: u64,
}

impl PromptCycle {
    /// The cycle of `list`; `None` when it is empty.
    pub fn new(list: Vec<Prompt>) -> Option<PromptCycle> {
        (!list.is_empty()).then(|| PromptCycle {
            list: list.into(),
            next: 0,
        })
    }

    /// Prompts in one pass.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Never: an empty list has no cycle.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The mean prompt and output lengths of one pass, tokens.
    pub fn mean_lengths(&self) -> (f64, f64) {
        let n = self.list.len().max(1) as f64;
        let (p, o) = self.list.iter().fold((0u64, 0u64), |(p, o), x| {
            (
                p + u64::from(x.spec.prompt_tokens),
                o + u64::from(x.spec.max_tokens),
            )
        });
        (p as f64 / n, o as f64 / n)
    }

    /// The longest request of a pass: prompt and output tokens.
    pub fn longest(&self) -> u32 {
        self.list
            .iter()
            .map(|x| x.spec.prompt_tokens.saturating_add(x.spec.max_tokens))
            .max()
            .unwrap_or(0)
    }

    /// The next prompt (the first again after the last, keyed apart as a new pass).
    pub fn next_prompt(&mut self) -> Prompt {
        let n = self.list.len() as u64;
        let pass = self.next / n;
        let p = &self.list[(self.next % n) as usize];
        self.next += 1;
        if pass == 0 {
            return p.clone();
        }
        let blocks = match &p.blocks {
            PromptBlocks::Own => PromptBlocks::Own,
            PromptBlocks::Shared(s) => PromptBlocks::Shared(crate::engine::Prefix {
                key: mix(&[s.key, pass]),
                tokens: s.tokens,
            }),
            PromptBlocks::Hashes(h) => {
                PromptBlocks::Hashes(h.iter().map(|x| mix(&[*x, pass])).collect())
            }
        };
        Prompt {
            spec: p.spec,
            blocks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(p: u32) -> RequestSpec {
        RequestSpec {
            prompt_tokens: p,
            max_tokens: 10,
            ignore_eos: true,
        }
    }

    #[test]
    fn a_pass_repeats_its_own_sharing_but_not_the_pass_before() {
        let shared: Arc<[u64]> = vec![7, 8].into();
        let list = vec![
            Prompt {
                spec: spec(40),
                blocks: PromptBlocks::Hashes(shared.clone()),
            },
            Prompt {
                spec: spec(40),
                blocks: PromptBlocks::Hashes(shared),
            },
            Prompt::from(spec(20)),
        ];
        let mut c = PromptCycle::new(list).unwrap_or_else(|| unreachable!());
        assert_eq!(c.mean_lengths(), (100.0 / 3.0, 10.0));
        let first: Vec<Prompt> = (0..3).map(|_| c.next_prompt()).collect();
        let second: Vec<Prompt> = (0..3).map(|_| c.next_prompt()).collect();
        assert_eq!(first[0].blocks, first[1].blocks);
        assert_eq!(second[0].blocks, second[1].blocks, "shared within a pass");
        assert_ne!(
            first[0].blocks, second[0].blocks,
            "keyed apart across passes"
        );
        assert_eq!(second[2].blocks, PromptBlocks::Own);
        assert_eq!(second[0].spec, first[0].spec);
        assert!(PromptCycle::new(Vec::new()).is_none());
    }
}
