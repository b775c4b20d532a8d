//! The server's side of a merged run, asked of Prometheus (`inferscale merge --prometheus`).
//! Workers that sent through a Service run `--no-metrics`: each scrape of `/metrics` there
//! would reach another replica. Prometheus scraped every replica all along, so the merge asks
//! it, for each step's window, what the load's own scrapes would have recorded: queue depth,
//! running requests and KV-cache usage over the window (summed over replicas; KV averaged),
//! and over the window and its drain (until the step's slowest request ended) the
//! preemptions, finished requests and the server's e2e, TTFT and queue-time p95. The queries are the monitor's and the dashboards'
//! (`inferscale_manifests::promql`), current metric names first.

use anyhow::{Result, anyhow};
use inferscale_catalog::Signal;
use inferscale_loadgen::prometheus::Prometheus;
use inferscale_loadgen::record::gauge;
use inferscale_loadgen::report::{RunReport, ServerStep};
use inferscale_manifests::promql::{self as q, Sel};
use inferscale_promql::Value;

/// The values of a range answer's one series (summed or averaged already), by time (s).
fn points(answer: &serde_json::Value) -> Result<Vec<(f64, f64)>> {
    match inferscale_promql::from_api_json(answer).map_err(|e| anyhow!("{e}"))? {
        Value::Matrix(series) => Ok(series
            .into_iter()
            .next()
            .map(|s| {
                s.points
                    .into_iter()
                    .filter(|p| p.v.is_finite())
                    .map(|p| (p.t as f64 / 1000.0, p.v))
                    .collect()
            })
            .unwrap_or_default()),
        other => Err(anyhow!("a range query gave a {}", other.kind())),
    }
}

/// The one value of an instant answer (`None`: no series, or NaN).
fn value(answer: &serde_json::Value) -> Result<Option<f64>> {
    Ok(
        match inferscale_promql::from_api_json(answer).map_err(|e| anyhow!("{e}"))? {
            Value::Scalar(v) => Some(v),
            Value::Vector(v) => v.first().map(|s| s.value),
            other => return Err(anyhow!("an instant query gave a {}", other.kind())),
        }
        .filter(|v| v.is_finite()),
    )
}

/// The three gauges, as queries.
fn gauges(sel: &Sel) -> [String; 3] {
    [
        format!("sum({})", q::series(Signal::QueueDepth, sel)),
        format!("sum({})", q::series(Signal::Running, sel)),
        format!("avg({})", q::series(Signal::KvCacheUsage, sel)),
    ]
}

/// Each query's points from `a` to `b`, every `every` seconds.
async fn ranges(
    prom: &Prometheus,
    queries: &[String],
    a: f64,
    b: f64,
    every: f64,
) -> Result<Vec<Vec<(f64, f64)>>> {
    let mut out = Vec::with_capacity(queries.len());
    for text in queries {
        let ans = prom
            .query_range(text, a, b, every)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        out.push(points(&ans)?);
    }
    Ok(out)
}

/// Fills each step's `server` and the timeline's gauges of `run` from Prometheus. `t0` is
/// the run's start (seconds since the epoch); the plan's speed-up maps its times to wall
/// time. Returns how many steps Prometheus had data for.
pub(crate) async fn fill(
    prom: &Prometheus,
    sel: &Sel,
    run: &mut RunReport,
    t0: f64,
) -> Result<usize> {
    let k = run.plan.speedup.max(1e-9);
    let ctx = |what: &str| format!("--prometheus {}: {what}", prom.url());
    let gauge_queries = gauges(sel);
    let mut filled = 0;
    for step in &mut run.steps {
        let a = t0 + step.start_s / k;
        let b = a + step.duration_s / k;
        let series = ranges(prom, &gauge_queries, a, b, ((b - a) / 120.0).max(1.0))
            .await
            .map_err(|e| anyhow!("{}", ctx(&e.to_string())))?;
        // Counters and histograms over the step and its drain (until its slowest request
        // ended), as the load's own scrapes bracket it.
        let drained = b + step.latency_s.e2e.max.unwrap_or(0.0) / k;
        let secs = drained - a;
        let window = format!("{}ms", ((secs * 1000.0).round() as u64).max(1000));
        let instant = |text: String| async move {
            let ans = prom
                .query(&text, Some(drained))
                .await
                .map_err(|e| anyhow!("{e}"))?;
            value(&ans)
        };
        let preemptions = instant(format!(
            "sum({}) * {secs:.3}",
            q::rate(Signal::Preemptions, sel, &window)
        ))
        .await
        .map_err(|e| anyhow!("{}", ctx(&e.to_string())))?;
        let success = instant(format!(
            "sum({}) * {secs:.3}",
            q::rate(Signal::RequestsOk, sel, &window)
        ))
        .await
        .map_err(|e| anyhow!("{}", ctx(&e.to_string())))?;
        let mut p95 = Vec::new();
        for sig in [Signal::E2eLatency, Signal::Ttft, Signal::QueueTime] {
            p95.push(
                instant(q::quantile(0.95, sig, sel, &window, &[]))
                    .await
                    .map_err(|e| anyhow!("{}", ctx(&e.to_string())))?,
            );
        }
        let values = |i: usize| -> Vec<f64> { series[i].iter().map(|(_, v)| *v).collect() };
        if series[0].is_empty() && success.is_none() {
            step.server = None;
            continue;
        }
        filled += 1;
        step.server = Some(ServerStep {
            queue_depth: gauge(&values(0)),
            running: gauge(&values(1)),
            kv_cache_usage: gauge(&values(2)),
            preemptions,
            e2e_p95_s: p95[0],
            ttft_p95_s: p95[1],
            queue_time_p95_s: p95[2],
            success_delta: success,
            prefix_cache_hit_rate: None,
            samples: series[0].len() as u64,
        });
    }
    // The timeline: each second's last value at or before its end.
    if let Some(last) = run.timeline.last() {
        let end = t0 + (last.t_s + 1.0) / k;
        let every = ((end - t0) / 10_000.0).max(1.0 / k).max(0.001);
        let series = ranges(prom, &gauge_queries, t0, end, every)
            .await
            .map_err(|e| anyhow!("{}", ctx(&e.to_string())))?;
        let at = |s: &[(f64, f64)], t: f64| {
            s.iter()
                .take_while(|(pt, _)| *pt <= t + 1e-6)
                .last()
                .map(|(_, v)| *v)
        };
        for p in &mut run.timeline {
            let t = t0 + (p.t_s + 1.0) / k;
            p.queue_depth = at(&series[0], t);
            p.running = at(&series[1], t);
            p.kv_cache_usage = at(&series[2], t);
        }
    }
    Ok(filled)
}

/// The run's start: the workers' shared `--start-at` when they had one, else the earliest
/// `started_at`.
pub(crate) fn start_of(parts: &[(String, RunReport)]) -> Option<f64> {
    parts
        .iter()
        .filter_map(|(_, r)| {
            r.segment
                .as_ref()
                .and_then(|s| s.start_at.as_deref())
                .or(Some(r.started_at.as_str()))
                .and_then(inferscale_loadgen::run::parse_rfc3339)
        })
        .min_by(f64::total_cmp)
}
