//! The prompts the engine model is sent when they share prefixes — a `--shape`'s or a
//! request trace's — so that a rehearsal, the tuner and `predict` exercise the replicas'
//! prefix caches as `load` exercised the measured server's.
//!
//! A prompt becomes its lengths and its full 16-token blocks' chained hashes
//! ([`inferscale_loadgen::trace::Turn::block_hashes`]), which the engine's prefix cache keys
//! as the simulator's server keys the tokens it reads: the same sharing, without the text.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow};
use inferscale_analysis::Thresholds;
use inferscale_engine::kv::BLOCK_SIZE;
use inferscale_engine::{Prompt, PromptBlocks, PromptCycle, RequestSpec};
use inferscale_loadgen::trace::{Length, Shape, Turn};
use inferscale_results::plan::PromptSource;

use crate::input::{cap, read_text};

/// Prompts in one pass of a shape (a pass is sent again, keyed apart, when more are needed):
/// enough that a system-prompt pool or a round of conversations repeats many times within it.
const SHAPE_PASS: usize = 4096;

/// Prompts that share, and where they came from in words.
#[derive(Debug, Clone)]
pub(crate) struct Prompts {
    /// The prompts, sent in turn.
    pub(crate) cycle: PromptCycle,
    /// `shared-prefix prompts (multi-turn:6)`, `trace t.jsonl's prompts`.
    pub(crate) about: String,
}

/// `; SUBJECT found X % of prompt tokens`, when a prefix cache found any (else nothing): the
/// clause `predict` and `rehearse` end a line with.
pub(crate) fn found_clause(subject: &str, rate: Option<f64>) -> String {
    rate.filter(|r| *r > 0.0).map_or(String::new(), |r| {
        format!("; {subject} found {:.1} % of prompt tokens", r * 100.0)
    })
}

/// The engine's prompts for `turns`, in order, each answer `max_tokens` long as the turn says.
pub(crate) fn of_turns(turns: &[Turn]) -> Option<PromptCycle> {
    PromptCycle::new(
        turns
            .iter()
            .map(|t| {
                let hashes = t.block_hashes(BLOCK_SIZE);
                Prompt {
                    spec: RequestSpec {
                        prompt_tokens: t.prompt_tokens().max(1),
                        max_tokens: t.output.max(1),
                        ignore_eos: true,
                    },
                    blocks: if hashes.is_empty() {
                        PromptBlocks::Own
                    } else {
                        PromptBlocks::Hashes(hashes.into())
                    },
                }
            })
            .collect(),
    )
}

/// The most requests in one round of a multi-turn shape's conversations (turns × users)
/// that the engine model holds as one pass.
const MAX_ROUND: usize = 65_536;

/// One pass of `shape`: each unique part `length` tokens, each answer `output`. A
/// multi-turn shape whose round of conversations (turns × users) is over [`MAX_ROUND`]
/// requests is refused.
pub(crate) fn of_shape(
    shape: Shape,
    length: Length,
    output: Length,
    seed: u64,
) -> Result<PromptCycle> {
    let n = match shape {
        Shape::MultiTurn { turns, users } => {
            // Whole rounds of conversations, so that none is cut at a pass's end.
            let round = turns.max(1) as usize * users.max(1) as usize;
            if round > MAX_ROUND {
                return Err(anyhow!(
                    "--shape {shape}: {turns} turns × {users} users is {round} requests a round of conversations; the rehearsal and predict hold at most {MAX_ROUND} (fewer users or turns)"
                ));
            }
            SHAPE_PASS.div_ceil(round) * round
        }
        Shape::SystemPrompt { .. } => SHAPE_PASS,
    };
    let turns = inferscale_loadgen::trace::shaped(shape, n, length, output, seed);
    Ok(of_turns(&turns).unwrap_or_else(|| unreachable!("a shape's pass is never empty")))
}

/// A request trace's turns (Mooncake's JSONL).
pub(crate) fn read_turns(path: &Path) -> Result<Vec<Turn>> {
    let text = read_text(path, "the trace", cap::DATASET)?;
    Ok(inferscale_loadgen::trace::parse_mooncake(
        &text,
        &path.display().to_string(),
    )?)
}

/// The prompts a run was measured with (its plan's `prompt`), when they shared: a shape's
/// pass, or the trace's requests (read again from where the run read them).
pub(crate) fn of_source(
    source: &PromptSource,
    output: Length,
    seed: u64,
) -> Result<Option<Prompts>> {
    Ok(match source {
        PromptSource::Shared { shape, length } => Some(Prompts {
            cycle: of_shape(*shape, *length, output, seed)?,
            about: source.describe(),
        }),
        PromptSource::Trace { path, .. } => {
            let turns = read_turns(Path::new(path)).with_context(|| {
                format!(
                    "the run was measured with the request trace {path}, whose prompts the \
                     rehearsal sends again; give --shape, or --unique-prompts to send unique ones"
                )
            })?;
            of_turns(&turns).map(|cycle| Prompts {
                cycle,
                about: format!("trace {path}'s prompts"),
            })
        }
        _ => None,
    })
}

/// The prompts of a rehearsal or a tuning: `--shape` (each unique part `prompt_tokens`,
/// 128 by default as `load` sends), else none with `--unique-prompts`, else those the
/// thresholds were measured with; `None`: unique prompts.
pub(crate) fn chosen(
    shape: Option<&str>,
    unique: bool,
    prompt_tokens: Option<u32>,
    output: u32,
    t: Option<&Thresholds>,
    seed: u64,
) -> Result<Option<Prompts>> {
    let output = Length::Fixed { tokens: output };
    if let Some(spec) = shape {
        let shape = Shape::parse(spec).map_err(|e| anyhow!("--shape {spec:?}: {e}"))?;
        let length = Length::Fixed {
            tokens: prompt_tokens.unwrap_or(128),
        };
        return Ok(Some(Prompts {
            cycle: of_shape(shape, length, output, seed)?,
            about: PromptSource::Shared { shape, length }.describe(),
        }));
    }
    if unique {
        return Ok(None);
    }
    match t.and_then(|t| t.workload.prompts.as_ref()) {
        Some(source) => of_source(source, output, seed),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inferscale_engine::fleet::{Fleet, Routing, drive};

    /// The rehearsal's replica finds in its prefix cache what the shape's prompts imply, as
    /// the simulator's server does over HTTP: the same structure without the text.
    #[test]
    fn a_shapes_prompts_hit_the_engines_cache_as_their_structure_implies() {
        let shape = Shape::parse("multi-turn:6").unwrap_or_else(|e| unreachable!("{e}"));
        let (length, output) = (Length::Fixed { tokens: 384 }, Length::Fixed { tokens: 48 });
        let turns = inferscale_loadgen::trace::shaped(shape, 1536, length, output, 1);
        let hits: u64 = inferscale_loadgen::trace::implied_hits(&turns)
            .iter()
            .map(|h| u64::from(*h))
            .sum();
        let prompt: u64 = turns.iter().map(|t| u64::from(t.prompt_tokens())).sum();
        let implied = hits as f64 / prompt as f64;
        let mut cycle = of_shape(shape, length, output, 1).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(cycle.len(), 4128, "whole rounds of 16 users × 6 turns");
        let engine = inferscale_engine::profile("aws-eks-ministral-8b-l40s")
            .unwrap_or_else(|| unreachable!());
        let mut fleet =
            Fleet::new(engine, 1, Routing::Random).unwrap_or_else(|e| unreachable!("{e}"));
        fleet.set_token_events(false);
        // 10 req/s, well under the replica's capacity: every turn finds its predecessor done.
        let arrivals: Vec<_> = (0..1536)
            .map(|i| (f64::from(i) / 10.0, cycle.next_prompt()))
            .collect();
        drive(&mut fleet, arrivals, 400.0, &mut [], |_| {});
        let s = fleet.replicas()[0].engine.stats();
        let measured = s.prefix_cache_hits as f64 / s.prefix_cache_queries as f64;
        assert!(
            implied > 0.6,
            "multi-turn:6 implies most of a prompt: {implied}"
        );
        assert!(
            (measured - implied).abs() < 0.05,
            "measured {measured:.3} against implied {implied:.3}"
        );
    }
}
