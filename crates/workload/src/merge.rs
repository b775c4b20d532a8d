//! One `run.json` from the parts of a split run (`inferscale load --segment I/N`), as if one
//! client had sent everything.
//!
//! The parts' histograms are added bucket by bucket, so the merged percentiles are those of
//! one histogram of every request. Outcome counts, tokens and rates are summed. The
//! timelines are added second by second; a shared `--start-at` aligns them. The server's
//! view (queue, KV cache, its own histograms) is taken once, from the first part that
//! scraped it. Each worker's health stays visible: late starts, client-limited steps, and
//! missing parts.

use std::collections::BTreeMap;

use inferscale_results::run::CacheStep;
use inferscale_results::run::{
    ClientStep, Latencies, Requests, RunReport, Stalls, StepHistograms, StepReport,
    ThresholdResult, TimelinePoint, Tokens,
};
use inferscale_results::slo::Goodput;
use serde::{Deserialize, Serialize};

use crate::record::Hdr;
use crate::threshold::Threshold;

/// One worker's health, as the merged report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerHealth {
    /// 0-based worker index.
    pub index: u32,
    /// The part's file (`null`: missing).
    pub file: Option<String>,
    /// Seconds it started after the shared start.
    pub late_s: f64,
    /// Steps (0-based) in which it, not the server, limited the measurement.
    pub client_limited_steps: Vec<usize>,
    /// Its worst step's schedule-lag p99, seconds.
    pub lag_p99_max_s: Option<f64>,
}

/// Why parts cannot be merged. Each names the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no parts to merge")]
    Empty,
    /// A part without `"segment"`.
    #[error(
        "{file}: not a part of a split run (no \"segment\"; run `inferscale load --segment I/N`)"
    )]
    NotAPart {
        /// The file.
        file: String,
    },
    /// Another `run.json` version.
    #[error("{file}: run.json version {found}, this merge reads {expected}")]
    Version {
        /// The file.
        file: String,
        /// Its version.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// Parts of different runs.
    #[error("{file}: {what} differs from {first}'s: these are parts of different runs")]
    Mismatch {
        /// The file.
        file: String,
        /// The first part's file.
        first: String,
        /// What differs.
        what: &'static str,
    },
    /// Two parts claim one segment.
    #[error("{file} and {other} are both segment {index}/{count}")]
    Overlap {
        /// The file.
        file: String,
        /// The other.
        other: String,
        /// The segment.
        index: u32,
        /// Workers.
        count: u32,
    },
    /// A part that lacks what the merge needs.
    #[error("{file}: {why}")]
    Truncated {
        /// The file.
        file: String,
        /// What is missing.
        why: String,
    },
    /// Parts missing (and `--allow-missing` not given).
    #[error("segments {missing:?} of {count} are missing (--allow-missing merges the rest)")]
    Missing {
        /// Their indices.
        missing: Vec<u32>,
        /// Workers.
        count: u32,
    },
}

/// What [`merge`] made.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The merged run, with no `"segment"`.
    pub report: RunReport,
    /// Every worker, the missing ones included.
    pub workers: Vec<WorkerHealth>,
    /// Indices of the missing parts (empty unless `allow_missing`).
    pub missing: Vec<u32>,
}

/// Merges `parts` (file name, report). `thresholds` are judged on the merged data.
pub fn merge(
    parts: &[(String, RunReport)],
    allow_missing: bool,
    thresholds: &[Threshold],
) -> Result<Merged, MergeError> {
    let (first_file, first) = parts.first().ok_or(MergeError::Empty)?;
    let (count, by_index) = check_parts(first_file, first, parts)?;
    let missing: Vec<u32> = (0..count).filter(|i| !by_index.contains_key(i)).collect();
    if !missing.is_empty() && !allow_missing {
        return Err(MergeError::Missing { missing, count });
    }

    let n_steps = parts.iter().map(|(_, r)| r.steps.len()).max().unwrap_or(0);
    let mut steps = Vec::with_capacity(n_steps);
    let mut run_requests = Requests::default();
    let mut run_hdrs: [Hdr; 4] = [(); 4].map(|_| Hdr::default());
    for i in 0..n_steps {
        let of_step: Vec<(&String, &StepReport)> = parts
            .iter()
            .filter_map(|(f, r)| r.steps.get(i).map(|s| (f, s)))
            .collect();
        let step = merge_step(&of_step)?;
        add_requests(&mut run_requests, &step.requests);
        if let Some(h) = &step.histograms {
            for (acc, text) in run_hdrs.iter_mut().zip([&h.ttft, &h.tpot, &h.itl, &h.e2e]) {
                acc.add(&decode("the merged step", i, text)?);
            }
        }
        steps.push(step);
    }
    let run_latencies = Latencies {
        ttft: run_hdrs[0].percentiles(),
        tpot: run_hdrs[1].percentiles(),
        itl: run_hdrs[2].percentiles(),
        e2e: run_hdrs[3].percentiles(),
    };
    let threshold_results: Vec<ThresholdResult> = thresholds
        .iter()
        .map(|t| t.evaluate_on(&run_requests, &run_latencies))
        .collect();

    let scraped = parts
        .iter()
        .map(|(_, r)| r)
        .find(|r| r.target.metrics_url.is_some())
        .unwrap_or(first);
    let workers = worker_health(parts, count);
    let report = RunReport {
        version: first.version,
        tool: first.tool.clone(),
        started_at: parts
            .iter()
            .map(|(_, r)| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        interrupted: parts.iter().any(|(_, r)| r.interrupted),
        target: scraped.target.clone(),
        plan: first.plan.clone(),
        warmup: parts.iter().find_map(|(_, r)| r.warmup.clone()),
        steps,
        timeline: merge_timelines(parts, scraped),
        thresholds: threshold_results,
        client_cpu_s: parts.iter().map(|(_, r)| r.client_cpu_s).sum(),
        segment: None,
        slo: first.slo,
    };
    Ok(Merged {
        report,
        workers,
        missing,
    })
}
/// Checks that `parts` are parts of one run (`first`'s, from `first_file`): their version,
/// worker count, plan, model and steps agree, no segment is given twice, every step has
/// its histograms. Returns the worker count and which file holds each segment.
fn check_parts<'a>(
    first_file: &str,
    first: &RunReport,
    parts: &'a [(String, RunReport)],
) -> Result<(u32, BTreeMap<u32, &'a String>), MergeError> {
    let seg_of = |file: &str, r: &RunReport| {
        r.segment.clone().ok_or_else(|| MergeError::NotAPart {
            file: file.to_owned(),
        })
    };
    let count = seg_of(first_file, first)?.count;
    let mut by_index: BTreeMap<u32, &String> = BTreeMap::new();
    for (file, r) in parts {
        let seg = seg_of(file, r)?;
        if r.version != inferscale_results::run::RUN_VERSION {
            return Err(MergeError::Version {
                file: file.clone(),
                found: r.version,
                expected: inferscale_results::run::RUN_VERSION,
            });
        }
        let differs = |what| MergeError::Mismatch {
            file: file.clone(),
            first: first_file.to_owned(),
            what,
        };
        if seg.count != count {
            return Err(differs("the worker count"));
        }
        if seg.index >= seg.count {
            return Err(MergeError::Truncated {
                file: file.clone(),
                why: format!(
                    "segment {}/{}: the index is 0-based, so below the count",
                    seg.index, seg.count
                ),
            });
        }
        if r.plan != first.plan {
            return Err(differs("the plan"));
        }
        // Workers may reach one service by different addresses (zones, pods); the model
        // is what must agree.
        if r.target.model != first.target.model {
            return Err(differs("the served model"));
        }
        if r.steps.len() != first.steps.len() && !r.interrupted && !first.interrupted {
            return Err(differs("the number of steps"));
        }
        if let Some(other) = by_index.insert(seg.index, file) {
            return Err(MergeError::Overlap {
                file: file.clone(),
                other: other.clone(),
                index: seg.index,
                count,
            });
        }
        if let Some(s) = r.steps.iter().find(|s| s.histograms.is_none()) {
            return Err(MergeError::Truncated {
                file: file.clone(),
                why: format!("step {} has no histograms to add", s.index + 1),
            });
        }
    }
    Ok((count, by_index))
}

/// Each worker's health, from its part (a missing part leaves its worker's file empty).
fn worker_health(parts: &[(String, RunReport)], count: u32) -> Vec<WorkerHealth> {
    let mut workers: Vec<WorkerHealth> = (0..count)
        .map(|index| WorkerHealth {
            index,
            file: None,
            late_s: 0.0,
            client_limited_steps: Vec::new(),
            lag_p99_max_s: None,
        })
        .collect();
    for (file, r) in parts {
        let seg = r.segment.as_ref().expect("checked above");
        let w = &mut workers[seg.index as usize];
        w.file = Some(file.clone());
        w.late_s = seg.late_s;
        w.client_limited_steps = r
            .steps
            .iter()
            .filter(|s| s.client.client_limited)
            .map(|s| s.index)
            .collect();
        w.lag_p99_max_s = r
            .steps
            .iter()
            .filter_map(|s| s.client.lag_p99_s)
            .max_by(f64::total_cmp);
    }
    workers
}

fn decode(file: &str, step: usize, text: &str) -> Result<Hdr, MergeError> {
    Hdr::decode(text).map_err(|e| MergeError::Truncated {
        file: file.to_owned(),
        why: format!("step {}: a histogram does not read: {e}", step + 1),
    })
}

fn add_requests(acc: &mut Requests, r: &Requests) {
    acc.scheduled += r.scheduled;
    acc.ok += r.ok;
    acc.dropped += r.dropped;
    acc.failed.total += r.failed.total;
    acc.failed.timeout += r.failed.timeout;
    acc.failed.connect_error += r.failed.connect_error;
    acc.failed.stream_error += r.failed.stream_error;
    for (code, n) in &r.failed.http_error {
        *acc.failed.http_error.entry(*code).or_insert(0) += n;
    }
}

/// The workers' stalls of one step: counts and time added, the longest kept; the steal is
/// the largest any worker's machine saw (workers may share one).
fn merge_stalls(all: impl Iterator<Item = Stalls>) -> Option<Stalls> {
    all.reduce(|a, b| Stalls {
        count: a.count + b.count,
        longest_s: a.longest_s.max(b.longest_s),
        total_s: a.total_s + b.total_s,
        steal_s: match (a.steal_s, b.steal_s) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        },
        cpu_waits: a.cpu_waits + b.cpu_waits,
        cpu_wait_longest_s: a.cpu_wait_longest_s.max(b.cpu_wait_longest_s),
    })
}

/// One step from the parts' same step.
fn merge_step(parts: &[(&String, &StepReport)]) -> Result<StepReport, MergeError> {
    let (_, first) = parts[0];
    let mut requests = Requests::default();
    let mut tokens = Tokens {
        source: "usage".into(),
        ..Tokens::default()
    };
    let [mut ttft, mut tpot, mut itl, mut e2e, mut lag] = [(); 5].map(|_| Hdr::default());
    let (mut sent_rps, mut achieved_rps, mut out_tps, mut cpu_s) = (0.0, 0.0, 0.0, 0.0);
    let mut reasons = Vec::new();
    for (file, s) in parts {
        add_requests(&mut requests, &s.requests);
        tokens.prompt += s.tokens.prompt;
        tokens.output += s.tokens.output;
        if s.tokens.source == "chunks" {
            tokens.source = "chunks".into();
        }
        let h = s.histograms.as_ref().expect("checked by merge");
        for (acc, text) in [
            (&mut ttft, &h.ttft),
            (&mut tpot, &h.tpot),
            (&mut itl, &h.itl),
            (&mut e2e, &h.e2e),
            (&mut lag, &h.lag),
        ] {
            acc.add(&decode(file, s.index, text)?);
        }
        sent_rps += s.sent_rps;
        achieved_rps += s.achieved_rps;
        out_tps += s.output_tokens_per_s;
        cpu_s += s.client.cpu_s;
        if let Some(r) = &s.client.reason {
            reasons.push(format!("{file}: {r}"));
        }
    }
    Ok(StepReport {
        index: first.index,
        target_rps: first.target_rps,
        target_end_rps: first.target_end_rps,
        concurrency: first.concurrency,
        start_s: first.start_s,
        duration_s: first.duration_s,
        sent_rps,
        achieved_rps,
        output_tokens_per_s: out_tps,
        requests,
        latency_s: Latencies {
            ttft: ttft.percentiles(),
            tpot: tpot.percentiles(),
            itl: itl.percentiles(),
            e2e: e2e.percentiles(),
        },
        tokens,
        server: parts.iter().find_map(|(_, s)| s.server.clone()),
        // The workers' prompts add up, when every one had a structure to count.
        cache: parts
            .iter()
            .map(|(_, s)| s.cache.map(|c| (c.prompt_tokens, c.implied_hit_tokens)))
            .try_fold((0, 0), |(n, h), x| x.map(|(a, b)| (n + a, h + b)))
            .map(|(n, h)| CacheStep::of(n, h)),
        client: ClientStep {
            lag_p50_s: lag.quantile(0.5),
            lag_p95_s: lag.quantile(0.95),
            lag_p99_s: lag.quantile(0.99),
            lag_max_s: lag.quantile(1.0),
            cpu_s,
            client_limited: !reasons.is_empty(),
            reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
            stalls: merge_stalls(parts.iter().filter_map(|(_, s)| s.client.stalls)),
        },
        histograms: Some(StepHistograms {
            ttft: ttft.encode(),
            tpot: tpot.encode(),
            itl: itl.encode(),
            e2e: e2e.encode(),
            lag: lag.encode(),
        }),
        // The workers' good requests add up, when every one counted them.
        goodput: parts
            .iter()
            .map(|(_, s)| s.goodput.map(|g| (g.scheduled, g.good)))
            .try_fold((0, 0), |(n, g), x| x.map(|(a, b)| (n + a, g + b)))
            .map(|(n, g)| Goodput::of(n, g, first.duration_s)),
        // One worker sent the probe stream.
        probe: parts.iter().find_map(|(_, s)| s.probe),
    })
}

/// The parts' timelines added second by second; the server's gauges from the part that
/// scraped.
fn merge_timelines(parts: &[(String, RunReport)], scraped: &RunReport) -> Vec<TimelinePoint> {
    let len = parts
        .iter()
        .map(|(_, r)| r.timeline.len())
        .max()
        .unwrap_or(0);
    let mut out: Vec<TimelinePoint> = (0..len)
        .map(|i| TimelinePoint {
            t_s: i as f64,
            ..TimelinePoint::default()
        })
        .collect();
    for (_, r) in parts {
        for (p, q) in out.iter_mut().zip(&r.timeline) {
            p.step = p.step.or(q.step);
            p.sent += q.sent;
            p.ok += q.ok;
            p.failed += q.failed;
            p.dropped += q.dropped;
            p.in_flight += q.in_flight;
        }
    }
    for (p, q) in out.iter_mut().zip(&scraped.timeline) {
        p.queue_depth = q.queue_depth;
        p.running = q.running;
        p.kv_cache_usage = q.kv_cache_usage;
    }
    out
}
