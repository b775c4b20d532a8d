//! Instant-query evaluation over a [`Store`], with Prometheus 2.x semantics.
//!
//! What "Prometheus' semantics" means here, precisely (checked against a real Prometheus on
//! identical data by `tests/prometheus.rs`):
//! - An instant selector takes each series' newest sample in `[t - lookback, t]` (5 minutes by
//!   default); a staleness marker there hides the series.
//! - A range selector `[r]` takes the samples in `[t - r, t]`, staleness markers left out.
//! - `rate`, `increase` and `delta` extrapolate to the window's edges as Prometheus does: all
//!   the way when the first (last) sample is within 1.1 average intervals of the edge, half an
//!   interval otherwise, never below a counter's zero point; counter resets are corrected.
//! - Arithmetic and `bool` comparisons drop the metric name, filtering comparisons keep it;
//!   functions drop it except `last_over_time`, `label_replace`, `label_join` and the sorts.
//! - Vector matching: one-to-one unless `group_left`/`group_right`, on all labels but the name
//!   unless `on(…)`/`ignoring(…)`; a match group that is not unique is an error, as there.
//! - `histogram_quantile` interpolates linearly inside the bucket that holds the rank, needs a
//!   `+Inf` bucket, returns NaN with no observations, and forces the buckets monotonic.
//!
//! Prometheus 3 changed two of these: its windows are left-open (`(t - r, t]`) and its rate
//! applies the counter's zero point after the 1.1-interval rule. The difference shows only when
//! a sample falls exactly on a window's start, or a counter starts within the window.

use foldhash::HashSetExt;
use std::borrow::Cow;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::token::{self, TokenType};
use promql_parser::parser::{
    AggregateExpr, AtModifier, BinaryExpr, Call, Expr, LabelModifier, Offset,
    VectorMatchCardinality, VectorSelector,
};

use crate::Query;
use crate::store::{Labels, NAME, Point, Series, Store, is_stale};

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its labels.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
}

/// What an expression evaluates to.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number.
    Scalar(f64),
    /// An instant vector (no particular order).
    Vector(Vec<Sample>),
    /// A range vector: each series' samples in the window.
    Matrix(Vec<Series>),
    /// A string literal.
    String(String),
}

impl Value {
    /// `scalar`, `vector`, `matrix` or `string`, as Prometheus' API names them.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "scalar",
            Value::Vector(_) => "vector",
            Value::Matrix(_) => "matrix",
            Value::String(_) => "string",
        }
    }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A function or construct this evaluator does not implement.
    #[error("{what} is not supported by inferscale's evaluator")]
    Unsupported {
        /// What.
        what: String,
    },
    /// An operand of the wrong type (the parser lets a few through).
    #[error("{context}: expected {expected}, got {got}")]
    Type {
        /// Where.
        context: String,
        /// What was needed.
        expected: &'static str,
        /// What it was.
        got: &'static str,
    },
    /// Prometheus' matching errors, worded as Prometheus words them.
    #[error("{0}")]
    Matching(String),
    /// Two elements of a result with one label set.
    #[error("vector cannot contain metrics with the same labelset ({labels})")]
    DuplicateLabels {
        /// The label set.
        labels: Labels,
    },
}

/// Evaluates queries at instants over a store.
#[derive(Debug, Clone, Copy)]
pub struct Evaluator<'s> {
    store: &'s Store,
    lookback_ms: i64,
    subquery_step_ms: i64,
    memo: Option<&'s Memo>,
}

/// A subquery's inner values at past instants, kept from one evaluation to the next, for a
/// caller that evaluates the same queries again and again as time moves on (a rehearsal's
/// triggers every 15 s: `predict_linear(x[5m:15s], …)` then evaluates `x` once a step instead
/// of twenty times). Sound only over a store whose samples arrive in time order: an instant
/// before the evaluation's is kept, and nothing stored later can change what it read.
#[derive(Debug, Default)]
pub struct Memo {
    inner: std::cell::RefCell<foldhash::HashMap<String, std::collections::BTreeMap<i64, Value>>>,
}

/// Milliseconds since the epoch of a system time (negative before 1970).
pub fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// How many of `points` (in time order) are before `t`, or at it with `inclusive`: searched
/// from the newest, where queries at the present look (a series holds an hour of samples; a
/// window, its last few).
fn count_before(points: &[Point], t: i64, inclusive: bool) -> usize {
    let before = |p: &Point| p.t < t || (inclusive && p.t == t);
    let mut i = points.len();
    for _ in 0..16 {
        match points.get(i.wrapping_sub(1)) {
            Some(p) if !before(p) => i -= 1,
            _ => return i,
        }
    }
    points[..i].partition_point(before)
}

fn dur_ms(d: &Duration) -> i64 {
    d.as_millis() as i64
}

fn offset_ms(o: &Option<Offset>) -> i64 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => dur_ms(d),
        Some(Offset::Neg(d)) => -dur_ms(d),
    }
}

struct Ctx<'s> {
    ev: Evaluator<'s>,
    /// The query's own time (what `@ start()` and `@ end()` mean for an instant query).
    query_t: i64,
}

impl<'s> Evaluator<'s> {
    /// An evaluator with Prometheus' defaults: 5-minute lookback, 1-minute subquery step.
    pub fn new(store: &'s Store) -> Self {
        Evaluator {
            store,
            lookback_ms: 300_000,
            subquery_step_ms: 60_000,
            memo: None,
        }
    }

    /// Keeps subqueries' inner values at instants before each evaluation's in `memo`, and
    /// reads them from there (see [`Memo`]).
    pub fn memo(mut self, memo: &'s Memo) -> Self {
        self.memo = Some(memo);
        self
    }

    /// Another lookback (Prometheus' `--query.lookback-delta`).
    pub fn lookback(mut self, d: Duration) -> Self {
        self.lookback_ms = dur_ms(&d).max(1);
        self
    }

    /// Evaluates `q` at `t` (ms since the epoch), as `/api/v1/query?time=t` would.
    pub fn eval(&self, q: &Query, t: i64) -> Result<Value, EvalError> {
        Ctx {
            ev: *self,
            query_t: t,
        }
        .eval(q.expr(), t)
    }
}

fn type_err(context: &str, expected: &'static str, got: &Value) -> EvalError {
    EvalError::Type {
        context: context.to_owned(),
        expected,
        got: got.kind(),
    }
}

fn unsupported(what: impl Into<String>) -> EvalError {
    EvalError::Unsupported { what: what.into() }
}

/// The one metric name a selector can match, when it names one.
fn fixed_name(vs: &VectorSelector) -> Option<&str> {
    vs.name.as_deref().or_else(|| {
        vs.matchers
            .matchers
            .iter()
            .find(|m| m.name == NAME && m.op == MatchOp::Equal)
            .map(|m| m.value.as_str())
    })
}

fn matches(vs: &VectorSelector, l: &Labels) -> bool {
    let one = |m: &Matcher| m.is_match(l.get(&m.name));
    if let Some(n) = &vs.name
        && l.get(NAME) != n
    {
        return false;
    }
    vs.matchers.matchers.iter().all(one)
        && (vs.matchers.or_matchers.is_empty()
            || vs.matchers.or_matchers.iter().any(|g| g.iter().all(one)))
}

/// Fails when two samples share a label set.
fn unique(v: Vec<Sample>) -> Result<Vec<Sample>, EvalError> {
    let mut seen = foldhash::HashSet::with_capacity(v.len());
    for s in &v {
        if !seen.insert(&s.labels) {
            return Err(EvalError::DuplicateLabels {
                labels: s.labels.clone(),
            });
        }
    }
    Ok(v)
}

/// One series of a matrix argument: borrowed from the store where it can be.
struct WindowSeries<'a> {
    labels: Cow<'a, Labels>,
    points: Cow<'a, [Point]>,
}

/// A matrix argument with its window.
struct Window<'a> {
    series: Vec<WindowSeries<'a>>,
    start: i64,
    end: i64,
    /// The series share one metric name, so they stay distinct without it (a function of
    /// them cannot return two samples with the same labels).
    one_name: bool,
}

impl Window<'_> {
    fn range_s(&self) -> f64 {
        (self.end - self.start) as f64 / 1000.0
    }
}

impl<'s> Ctx<'s> {
    fn ref_time(&self, t: i64, offset: &Option<Offset>, at: &Option<AtModifier>) -> i64 {
        let base = match at {
            Some(AtModifier::At(st)) => millis(*st),
            Some(AtModifier::Start | AtModifier::End) => self.query_t,
            None => t,
        };
        base - offset_ms(offset)
    }

    fn select(&self, vs: &VectorSelector) -> Vec<&'s Series> {
        let store: &'s Store = self.ev.store;
        let all = store.series();
        // What a selector picks depends on its name and matchers only (not on its offset
        // or `@`), and the store keeps it until its series change.
        // Each part length-prefixed, so that no two selectors share a key.
        let mut key = String::new();
        let mut part = |p: &str| key.push_str(&format!("{}:{p}", p.len()));
        part(vs.name.as_deref().unwrap_or(""));
        for m in &vs.matchers.matchers {
            part(&m.to_string());
        }
        for g in &vs.matchers.or_matchers {
            part("or");
            for m in g {
                part(&m.to_string());
            }
        }
        let ids = store.selection(key, || match fixed_name(vs) {
            Some(n) => store
                .named_ids(n)
                .iter()
                .copied()
                .filter(|&i| matches(vs, &all[i].labels))
                .collect(),
            None => (0..all.len())
                .filter(|&i| matches(vs, &all[i].labels))
                .collect(),
        });
        ids.iter().map(|&i| &all[i]).collect()
    }

    fn instant(&self, vs: &VectorSelector, t: i64) -> Vec<Sample> {
        let rt = self.ref_time(t, &vs.offset, &vs.at);
        let lo = rt - self.ev.lookback_ms;
        self.select(vs)
            .into_iter()
            .filter_map(|s| {
                let i = count_before(&s.points, rt, true);
                let p = s.points.get(i.checked_sub(1)?)?;
                (p.t >= lo && !is_stale(p.v)).then(|| Sample {
                    labels: s.labels.clone(),
                    value: p.v,
                })
            })
            .collect()
    }

    fn range(&self, vs: &VectorSelector, range: &Duration, t: i64) -> Window<'s> {
        let end = self.ref_time(t, &vs.offset, &vs.at);
        let start = end - dur_ms(range);
        let one_name = fixed_name(vs).is_some();
        let series = self
            .select(vs)
            .into_iter()
            .filter_map(|s| {
                let b = count_before(&s.points, end, true);
                let a = count_before(&s.points[..b], start, false);
                let within = &s.points[a..b];
                let points = if within.iter().any(|p| is_stale(p.v)) {
                    Cow::Owned(within.iter().filter(|p| !is_stale(p.v)).copied().collect())
                } else {
                    Cow::Borrowed(within)
                };
                (!points.is_empty()).then_some(WindowSeries {
                    labels: Cow::Borrowed(&s.labels),
                    points,
                })
            })
            .collect();
        Window {
            series,
            start,
            end,
            one_name,
        }
    }

    /// A matrix-valued argument: a range selector or a subquery.
    fn window(&self, e: &Expr, t: i64) -> Result<Window<'s>, EvalError> {
        match e {
            Expr::MatrixSelector(ms) => Ok(self.range(&ms.vs, &ms.range, t)),
            Expr::Subquery(sq) => {
                let end = self.ref_time(t, &sq.offset, &sq.at);
                let start = end - dur_ms(&sq.range);
                let step = sq
                    .step
                    .as_ref()
                    .map_or(self.ev.subquery_step_ms, dur_ms)
                    .max(1);
                // Prometheus aligns a subquery's steps to multiples of the step.
                let mut ts = step * start.div_euclid(step);
                if ts < start {
                    ts += step;
                }
                let mut acc: foldhash::HashMap<Labels, Vec<Point>> = Default::default();
                // Keyed by the whole subquery (its range and step with it), so that what a
                // window no longer reaches can go; not where the inner reads the query's own
                // time (`@ start()`, `@ end()`).
                let key = self
                    .ev
                    .memo
                    .map(|_| e.to_string())
                    .filter(|k| !k.contains('@'));
                while ts <= end {
                    let value = match (self.ev.memo, &key) {
                        (Some(m), Some(k)) if ts < self.query_t => {
                            let kept = m.inner.borrow().get(k).and_then(|b| b.get(&ts)).cloned();
                            match kept {
                                Some(v) => v,
                                None => {
                                    let v = self.eval(&sq.expr, ts)?;
                                    m.inner
                                        .borrow_mut()
                                        .entry(k.clone())
                                        .or_default()
                                        .insert(ts, v.clone());
                                    v
                                }
                            }
                        }
                        _ => self.eval(&sq.expr, ts)?,
                    };
                    match value {
                        Value::Vector(v) => {
                            for s in v {
                                acc.entry(s.labels)
                                    .or_default()
                                    .push(Point { t: ts, v: s.value });
                            }
                        }
                        Value::Scalar(v) => acc
                            .entry(Labels::default())
                            .or_default()
                            .push(Point { t: ts, v }),
                        other => return Err(type_err("subquery", "instant vector", &other)),
                    }
                    ts += step;
                }
                if let (Some(m), Some(k)) = (self.ev.memo, &key)
                    && let Some(kept) = m.inner.borrow_mut().get_mut(k)
                {
                    *kept = kept.split_off(&start);
                }
                let series = acc
                    .into_iter()
                    .map(|(labels, points)| WindowSeries {
                        labels: Cow::Owned(labels),
                        points: Cow::Owned(points),
                    })
                    .collect();
                Ok(Window {
                    series,
                    start,
                    end,
                    one_name: false,
                })
            }
            Expr::Paren(p) => self.window(&p.expr, t),
            other => Err(EvalError::Type {
                context: "function argument".into(),
                expected: "range vector",
                got: match other {
                    Expr::NumberLiteral(_) => "scalar",
                    Expr::StringLiteral(_) => "string",
                    _ => "instant vector",
                },
            }),
        }
    }

    fn eval(&self, e: &Expr, t: i64) -> Result<Value, EvalError> {
        match e {
            Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
            Expr::StringLiteral(s) => Ok(Value::String(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr, t),
            Expr::Unary(u) => match self.eval(&u.expr, t)? {
                Value::Scalar(v) => Ok(Value::Scalar(-v)),
                Value::Vector(v) => Ok(Value::Vector(
                    v.into_iter()
                        .map(|s| Sample {
                            labels: s.labels.without_name(),
                            value: -s.value,
                        })
                        .collect(),
                )),
                other => Err(type_err("unary minus", "scalar or instant vector", &other)),
            },
            Expr::VectorSelector(vs) => Ok(Value::Vector(self.instant(vs, t))),
            Expr::MatrixSelector(_) | Expr::Subquery(_) => Ok(Value::Matrix(
                self.window(e, t)?
                    .series
                    .into_iter()
                    .map(|s| Series {
                        labels: s.labels.into_owned(),
                        points: s.points.into_owned(),
                    })
                    .collect(),
            )),
            Expr::Call(c) => self.call(c, t),
            Expr::Aggregate(a) => self.aggregate(a, t),
            Expr::Binary(b) => self.binary(b, t),
            Expr::Extension(_) => Err(unsupported("an extension expression")),
        }
    }

    fn vector(&self, e: &Expr, t: i64, context: &str) -> Result<Vec<Sample>, EvalError> {
        match self.eval(e, t)? {
            Value::Vector(v) => Ok(v),
            other => Err(type_err(context, "instant vector", &other)),
        }
    }

    fn scalar(&self, e: &Expr, t: i64, context: &str) -> Result<f64, EvalError> {
        match self.eval(e, t)? {
            Value::Scalar(v) => Ok(v),
            other => Err(type_err(context, "scalar", &other)),
        }
    }

    fn string(&self, e: &Expr, t: i64, context: &str) -> Result<String, EvalError> {
        match self.eval(e, t)? {
            Value::String(v) => Ok(v),
            other => Err(type_err(context, "string", &other)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Functions

/// Prometheus' `extrapolatedRate` (2.x): the change over the window, counter resets corrected,
/// extrapolated towards the window's edges.
fn extrapolated(points: &[Point], w: &Window, counter: bool, per_second: bool) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let (first, last) = (points[0], points[points.len() - 1]);
    let mut result = last.v - first.v;
    if counter {
        let mut prev = first.v;
        for p in &points[1..] {
            if p.v < prev {
                result += prev;
            }
            prev = p.v;
        }
    }
    let mut to_start = (first.t - w.start) as f64 / 1000.0;
    let to_end = (w.end - last.t) as f64 / 1000.0;
    let sampled = (last.t - first.t) as f64 / 1000.0;
    let average = sampled / (points.len() - 1) as f64;
    if counter && result > 0.0 && first.v >= 0.0 {
        let to_zero = sampled * (first.v / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    let threshold = average * 1.1;
    let mut interval = sampled;
    interval += if to_start < threshold {
        to_start
    } else {
        average / 2.0
    };
    interval += if to_end < threshold {
        to_end
    } else {
        average / 2.0
    };
    let mut v = result * (interval / sampled);
    if per_second {
        v /= w.range_s();
    }
    Some(v)
}

/// Prometheus' `instantValue`: the last two samples (`irate`, `idelta`).
fn instant_rate(points: &[Point], per_second: bool) -> Option<f64> {
    let [.., prev, last] = points else {
        return None;
    };
    let mut v = last.v - prev.v;
    if per_second && last.v < prev.v {
        v = last.v; // a counter reset
    }
    let dt = (last.t - prev.t) as f64 / 1000.0;
    if dt == 0.0 {
        return None;
    }
    if per_second {
        v /= dt;
    }
    Some(v)
}

/// Least-squares slope (per second) of `p` and its value at time `at` (milliseconds), as
/// Prometheus' `deriv` and `predict_linear` compute them; `None` below two points.
fn regression(p: &[Point], at: i64) -> Option<(f64, f64)> {
    if p.len() < 2 {
        return None;
    }
    let n = p.len() as f64;
    let (mut sx, mut sy, mut sxy, mut sxx) = (0.0, 0.0, 0.0, 0.0);
    for q in p {
        let x = (q.t - at) as f64 / 1000.0;
        sx += x;
        sy += q.v;
        sxy += x * q.v;
        sxx += x * x;
    }
    let cov = sxy - sx * sy / n;
    let var = sxx - sx * sx / n;
    let slope = cov / var;
    (var != 0.0).then(|| (slope, sy / n - slope * sx / n))
}

/// The running mean Prometheus keeps for `avg` and `avg_over_time` (2.x), which avoids the
/// overflow of a plain sum.
fn running_mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut mean = 0.0;
    let mut n = 0.0;
    for v in values {
        n += 1.0;
        if n == 1.0 {
            mean = v;
            continue;
        }
        if mean.is_infinite() {
            if v.is_infinite() && (mean > 0.0) == (v > 0.0) {
                continue;
            }
            if !v.is_infinite() && !v.is_nan() {
                continue;
            }
        }
        mean += v / n - mean / n;
    }
    (n > 0.0).then_some(mean)
}

/// Welford's variance, as Prometheus computes `stdvar`.
fn variance(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut mean, mut m2) = (0.0, 0.0, 0.0);
    for v in values {
        n += 1.0;
        let delta = v - mean;
        mean += delta / n;
        m2 += delta * (v - mean);
    }
    (n > 0.0).then(|| m2 / n)
}

/// Prometheus' `quantile` over plain values (linear between the closest ranks).
fn quantile(q: f64, mut values: Vec<f64>) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// Go's `strconv.ParseFloat` on an `le` value, for what exporters write.
fn parse_le(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Prometheus' `bucketQuantile` (2.x).
pub(crate) fn bucket_quantile(q: f64, mut buckets: Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    match buckets.last() {
        Some((ub, _)) if *ub == f64::INFINITY => {}
        _ => return f64::NAN,
    }
    // Coalesce buckets with one upper bound, then force the counts monotonic.
    let mut b: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for (ub, c) in buckets {
        match b.last_mut() {
            Some(last) if last.0 == ub => last.1 += c,
            _ => b.push((ub, c)),
        }
    }
    let mut max = f64::NEG_INFINITY;
    for x in &mut b {
        if x.1 > max {
            max = x.1;
        } else if x.1 < max {
            x.1 = max;
        }
    }
    if b.len() < 2 {
        return f64::NAN;
    }
    let observations = b[b.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let i = b[..b.len() - 1].partition_point(|x| x.1 < rank);
    if i == b.len() - 1 {
        return b[b.len() - 2].0;
    }
    if i == 0 && b[0].0 <= 0.0 {
        return b[0].0;
    }
    let (mut start, end, mut count) = (0.0, b[i].0, b[i].1);
    if i > 0 {
        start = b[i - 1].0;
        count -= b[i - 1].1;
        rank -= b[i - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// The labels `absent(sel)` gives its one sample: the selector's equality matchers.
fn absent_labels(e: &Expr) -> Labels {
    let vs = match e {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        _ => return Labels::default(),
    };
    let mut l = Labels::default();
    for m in &vs.matchers.matchers {
        if m.name == NAME {
            continue;
        }
        if m.op == MatchOp::Equal && !l.has(&m.name) {
            l.set(m.name.clone(), m.value.clone());
        } else {
            l.remove(&m.name);
        }
    }
    l
}

fn map_values(v: Vec<Sample>, f: impl Fn(f64) -> f64) -> Value {
    Value::Vector(
        v.into_iter()
            .map(|s| Sample {
                labels: s.labels.without_name(),
                value: f(s.value),
            })
            .collect(),
    )
}

impl<'s> Ctx<'s> {
    fn arg<'e>(&self, c: &'e Call, i: usize) -> Result<&'e Expr, EvalError> {
        c.args
            .args
            .get(i)
            .map(|b| b.as_ref())
            .ok_or_else(|| EvalError::Type {
                context: format!("{}() argument {}", c.func.name, i + 1),
                expected: "an argument",
                got: "nothing",
            })
    }

    fn over_window(
        &self,
        c: &Call,
        t: i64,
        keep_name: bool,
        f: impl Fn(&[Point], &Window) -> Option<f64>,
    ) -> Result<Value, EvalError> {
        let w = self.window(self.arg(c, 0)?, t)?;
        let out = w
            .series
            .iter()
            .filter_map(|s| {
                f(&s.points, &w).map(|value| Sample {
                    labels: if keep_name {
                        Labels::clone(&s.labels)
                    } else {
                        s.labels.without_name()
                    },
                    value,
                })
            })
            .collect();
        Ok(Value::Vector(if keep_name || w.one_name {
            out
        } else {
            unique(out)?
        }))
    }

    // Long: one match arm per PromQL function, each its argument checks and a call to its
    // implementation; the arms are the table of functions.
    fn call(&self, c: &Call, t: i64) -> Result<Value, EvalError> {
        let name = c.func.name;
        let ctx = format!("{name}()");
        let vals = |p: &[Point]| p.iter().map(|p| p.v).collect::<Vec<f64>>();
        match name {
            "rate" => self.over_window(c, t, false, |p, w| extrapolated(p, w, true, true)),
            "increase" => self.over_window(c, t, false, |p, w| extrapolated(p, w, true, false)),
            "delta" => self.over_window(c, t, false, |p, w| extrapolated(p, w, false, false)),
            "irate" => self.over_window(c, t, false, |p, _| instant_rate(p, true)),
            "idelta" => self.over_window(c, t, false, |p, _| instant_rate(p, false)),
            "deriv" => self.over_window(c, t, false, move |p, _| {
                regression(p, t).map(|(slope, _)| slope)
            }),
            "predict_linear" => {
                let ahead = self.scalar(self.arg(c, 1)?, t, &ctx)?;
                self.over_window(c, t, false, move |p, _| {
                    regression(p, t).map(|(slope, at)| at + slope * ahead)
                })
            }
            "sum_over_time" => {
                self.over_window(c, t, false, |p, _| Some(p.iter().map(|p| p.v).sum()))
            }
            "avg_over_time" => {
                self.over_window(c, t, false, |p, _| running_mean(p.iter().map(|p| p.v)))
            }
            "count_over_time" => self.over_window(c, t, false, |p, _| Some(p.len() as f64)),
            "present_over_time" => self.over_window(c, t, false, |_, _| Some(1.0)),
            "last_over_time" => self.over_window(c, t, true, |p, _| p.last().map(|p| p.v)),
            "max_over_time" | "min_over_time" => {
                let max = name == "max_over_time";
                self.over_window(c, t, false, move |p, _| {
                    let mut acc = p.first()?.v;
                    for x in &p[1..] {
                        if (max && x.v > acc) || (!max && x.v < acc) || acc.is_nan() {
                            acc = x.v;
                        }
                    }
                    Some(acc)
                })
            }
            "stddev_over_time" => self.over_window(c, t, false, |p, _| {
                variance(p.iter().map(|p| p.v)).map(f64::sqrt)
            }),
            "stdvar_over_time" => {
                self.over_window(c, t, false, |p, _| variance(p.iter().map(|p| p.v)))
            }
            "quantile_over_time" => {
                let q = self.scalar(self.arg(c, 0)?, t, &ctx)?;
                let w = self.window(self.arg(c, 1)?, t)?;
                let out = w
                    .series
                    .iter()
                    .map(|s| Sample {
                        labels: s.labels.without_name(),
                        value: quantile(q, vals(&s.points)),
                    })
                    .collect();
                Ok(Value::Vector(unique(out)?))
            }
            "changes" | "resets" => {
                let changes = name == "changes";
                self.over_window(c, t, false, move |p, _| {
                    let mut n = 0.0;
                    for pair in p.windows(2) {
                        let (a, b) = (pair[0].v, pair[1].v);
                        let hit = if changes {
                            !(a == b || (a.is_nan() && b.is_nan()))
                        } else {
                            b < a
                        };
                        if hit {
                            n += 1.0;
                        }
                    }
                    Some(n)
                })
            }
            "absent_over_time" => {
                let w = self.window(self.arg(c, 0)?, t)?;
                Ok(Value::Vector(if w.series.is_empty() {
                    vec![Sample {
                        labels: absent_labels(self.arg(c, 0)?),
                        value: 1.0,
                    }]
                } else {
                    Vec::new()
                }))
            }
            "absent" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                Ok(Value::Vector(if v.is_empty() {
                    vec![Sample {
                        labels: absent_labels(self.arg(c, 0)?),
                        value: 1.0,
                    }]
                } else {
                    Vec::new()
                }))
            }
            "histogram_quantile" => {
                let q = self.scalar(self.arg(c, 0)?, t, &ctx)?;
                let v = self.vector(self.arg(c, 1)?, t, &ctx)?;
                let mut groups: Vec<(Labels, Vec<(f64, f64)>)> = Vec::new();
                let mut index: foldhash::HashMap<Labels, usize> = Default::default();
                for s in v {
                    let Some(ub) = parse_le(s.labels.get("le")) else {
                        continue;
                    };
                    if !s.labels.has("le") {
                        continue;
                    }
                    let mut key = s.labels.without_name();
                    key.remove("le");
                    let i = *index.entry(key.clone()).or_insert_with(|| {
                        groups.push((key, Vec::new()));
                        groups.len() - 1
                    });
                    groups[i].1.push((ub, s.value));
                }
                Ok(Value::Vector(
                    groups
                        .into_iter()
                        .map(|(labels, b)| Sample {
                            labels,
                            value: bucket_quantile(q, b),
                        })
                        .collect(),
                ))
            }
            "vector" => Ok(Value::Vector(vec![Sample {
                labels: Labels::default(),
                value: self.scalar(self.arg(c, 0)?, t, &ctx)?,
            }])),
            "scalar" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                Ok(Value::Scalar(match v.as_slice() {
                    [one] => one.value,
                    _ => f64::NAN,
                }))
            }
            "time" => Ok(Value::Scalar(t as f64 / 1000.0)),
            "pi" => Ok(Value::Scalar(std::f64::consts::PI)),
            "clamp_min" | "clamp_max" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let b = self.scalar(self.arg(c, 1)?, t, &ctx)?;
                Ok(if name == "clamp_min" {
                    map_values(v, |x| x.max(b))
                } else {
                    map_values(v, |x| x.min(b))
                })
            }
            "clamp" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let lo = self.scalar(self.arg(c, 1)?, t, &ctx)?;
                let hi = self.scalar(self.arg(c, 2)?, t, &ctx)?;
                if hi < lo {
                    return Ok(Value::Vector(Vec::new()));
                }
                Ok(map_values(v, |x| x.max(lo).min(hi)))
            }
            "abs" | "ceil" | "floor" | "sqrt" | "exp" | "ln" | "log2" | "log10" | "sgn" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let f: fn(f64) -> f64 = match name {
                    "abs" => f64::abs,
                    "ceil" => f64::ceil,
                    "floor" => f64::floor,
                    "sqrt" => f64::sqrt,
                    "exp" => f64::exp,
                    "ln" => f64::ln,
                    "log2" => f64::log2,
                    "log10" => f64::log10,
                    _ => |x: f64| {
                        if x > 0.0 {
                            1.0
                        } else if x < 0.0 {
                            -1.0
                        } else {
                            x
                        }
                    },
                };
                Ok(map_values(v, f))
            }
            "round" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let to = match c.args.args.get(1) {
                    Some(e) => self.scalar(e, t, &ctx)?,
                    None => 1.0,
                };
                let inv = 1.0 / to;
                Ok(map_values(v, move |x| (x * inv + 0.5).floor() / inv))
            }
            "sort" | "sort_desc" => {
                let mut v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                v.sort_by(|a, b| a.value.total_cmp(&b.value));
                if name == "sort_desc" {
                    v.reverse();
                }
                Ok(Value::Vector(v))
            }
            "label_replace" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let dst = self.string(self.arg(c, 1)?, t, &ctx)?;
                let repl = self.string(self.arg(c, 2)?, t, &ctx)?;
                let src = self.string(self.arg(c, 3)?, t, &ctx)?;
                let re = self.string(self.arg(c, 4)?, t, &ctx)?;
                let re =
                    regex::Regex::new(&format!("^(?s:{re})$")).map_err(|e| EvalError::Type {
                        context: format!("label_replace() regex: {e}"),
                        expected: "a regular expression",
                        got: "string",
                    })?;
                let out = v
                    .into_iter()
                    .map(|mut s| {
                        if let Some(caps) = re.captures(s.labels.get(&src)) {
                            let mut value = String::new();
                            caps.expand(&repl, &mut value);
                            s.labels.set(dst.clone(), value);
                        }
                        s
                    })
                    .collect();
                Ok(Value::Vector(unique(out)?))
            }
            "label_join" => {
                let v = self.vector(self.arg(c, 0)?, t, &ctx)?;
                let dst = self.string(self.arg(c, 1)?, t, &ctx)?;
                let sep = self.string(self.arg(c, 2)?, t, &ctx)?;
                let mut src = Vec::new();
                for e in c.args.args.iter().skip(3) {
                    src.push(self.string(e, t, &ctx)?);
                }
                let out = v
                    .into_iter()
                    .map(|mut s| {
                        let joined: Vec<&str> = src.iter().map(|n| s.labels.get(n)).collect();
                        let joined = joined.join(&sep);
                        s.labels.set(dst.clone(), joined);
                        s
                    })
                    .collect();
                Ok(Value::Vector(unique(out)?))
            }
            other => Err(unsupported(format!("the function {other}()"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Aggregations

impl<'s> Ctx<'s> {
    fn aggregate(&self, a: &AggregateExpr, t: i64) -> Result<Value, EvalError> {
        let op = a.op.id();
        let opname = TokenType::new(op);
        let ctx = format!("{opname}()");
        let v = self.vector(&a.expr, t, &ctx)?;
        let key = |l: &Labels| -> Labels {
            match &a.modifier {
                None => Labels::default(),
                Some(LabelModifier::Include(ls)) => l.keep(&ls.labels),
                Some(LabelModifier::Exclude(ls)) => l.drop_names(&ls.labels).without_name(),
            }
        };
        // Two samples share a group when the labels the modifier keeps are equal (an absent
        // label reads empty, as in Prometheus). Samples are grouped by a hash of those
        // labels, checked against each group's first member, so that a group's labels are
        // built once, not once per sample.
        let kept = |l: &Labels, f: &mut dyn FnMut(&str, &str)| match &a.modifier {
            None => {}
            Some(LabelModifier::Include(ls)) => ls.labels.iter().for_each(|n| f(n, l.get(n))),
            Some(LabelModifier::Exclude(ls)) => l
                .iter()
                .filter(|(n, _)| *n != NAME && !ls.labels.iter().any(|k| k == n))
                .for_each(|(n, v)| f(n, v)),
        };
        let same = |x: &Labels, y: &Labels| -> bool {
            match &a.modifier {
                None => true,
                Some(LabelModifier::Include(ls)) => ls.labels.iter().all(|n| x.get(n) == y.get(n)),
                Some(LabelModifier::Exclude(ls)) => {
                    let out =
                        |(n, _): &(&str, &str)| *n != NAME && !ls.labels.iter().any(|k| k == n);
                    x.iter().filter(out).eq(y.iter().filter(out))
                }
            }
        };
        let state = foldhash::fast::FixedState::default();
        // The groups in the order they were first seen.
        let mut order: Vec<Vec<Sample>> = Vec::new();
        let mut index: foldhash::HashMap<u64, Vec<usize>> = Default::default();
        for s in v {
            let mut hs = state.build_hasher();
            kept(&s.labels, &mut |n, v| {
                hs.write(n.as_bytes());
                hs.write_u8(0xff);
                hs.write(v.as_bytes());
                hs.write_u8(0xff);
            });
            let slot = index.entry(hs.finish()).or_default();
            let found = slot
                .iter()
                .copied()
                .find(|&i| same(&order[i][0].labels, &s.labels));
            match found {
                Some(i) => order[i].push(s),
                None => {
                    slot.push(order.len());
                    order.push(vec![s]);
                }
            }
        }
        let order: Vec<(Labels, Vec<Sample>)> = order
            .into_iter()
            .map(|members| (key(&members[0].labels), members))
            .collect();
        let param = |ctx: &str| -> Result<f64, EvalError> {
            match &a.param {
                Some(p) => self.scalar(p, t, ctx),
                None => Err(EvalError::Type {
                    context: ctx.to_owned(),
                    expected: "a parameter",
                    got: "nothing",
                }),
            }
        };
        let mut out = Vec::with_capacity(order.len());
        match op {
            token::T_TOPK | token::T_BOTTOMK => {
                let k = param(&ctx)?;
                let top = op == token::T_TOPK;
                for (_, mut members) in order {
                    // NaN sorts last either way, as Prometheus' heaps leave it.
                    members.sort_by(|x, y| match (x.value.is_nan(), y.value.is_nan()) {
                        (true, false) => std::cmp::Ordering::Greater,
                        (false, true) => std::cmp::Ordering::Less,
                        _ if top => y.value.total_cmp(&x.value),
                        _ => x.value.total_cmp(&y.value),
                    });
                    let n = if k < 1.0 {
                        0
                    } else {
                        k.min(members.len() as f64) as usize
                    };
                    out.extend(members.into_iter().take(n));
                }
                return Ok(Value::Vector(out));
            }
            token::T_COUNT_VALUES | token::T_LIMITK | token::T_LIMIT_RATIO => {
                return Err(unsupported(format!("the aggregation {opname}")));
            }
            _ => {}
        }
        let q = if op == token::T_QUANTILE {
            Some(param(&ctx)?)
        } else {
            None
        };
        for (g, members) in order {
            let values = members.iter().map(|s| s.value);
            let value = match op {
                token::T_SUM => values.sum(),
                token::T_AVG => running_mean(values).unwrap_or(f64::NAN),
                token::T_COUNT => members.len() as f64,
                token::T_GROUP => 1.0,
                token::T_MAX | token::T_MIN => {
                    let max = op == token::T_MAX;
                    let mut acc = members[0].value;
                    for s in &members[1..] {
                        if (max && acc < s.value) || (!max && acc > s.value) || acc.is_nan() {
                            acc = s.value;
                        }
                    }
                    acc
                }
                token::T_STDDEV => variance(values).unwrap_or(f64::NAN).sqrt(),
                token::T_STDVAR => variance(values).unwrap_or(f64::NAN),
                token::T_QUANTILE => quantile(q.unwrap_or(f64::NAN), values.collect()),
                _ => return Err(unsupported(format!("the aggregation {opname}"))),
            };
            out.push(Sample { labels: g, value });
        }
        Ok(Value::Vector(out))
    }
}

// ---------------------------------------------------------------------------------------------
// Binary operators

fn is_comparison(op: u16) -> bool {
    matches!(
        op,
        token::T_EQLC | token::T_NEQ | token::T_GTR | token::T_LSS | token::T_GTE | token::T_LTE
    )
}

fn is_set(op: u16) -> bool {
    matches!(op, token::T_LAND | token::T_LOR | token::T_LUNLESS)
}

/// `lhs op rhs` on two numbers: the value and, for comparisons, whether it holds.
fn apply(op: u16, l: f64, r: f64) -> Result<(f64, bool), EvalError> {
    Ok(match op {
        token::T_ADD => (l + r, true),
        token::T_SUB => (l - r, true),
        token::T_MUL => (l * r, true),
        token::T_DIV => (l / r, true),
        token::T_MOD => (l % r, true),
        token::T_POW => (l.powf(r), true),
        token::T_ATAN2 => (l.atan2(r), true),
        token::T_EQLC => (l, l == r),
        token::T_NEQ => (l, l != r),
        token::T_GTR => (l, l > r),
        token::T_LSS => (l, l < r),
        token::T_GTE => (l, l >= r),
        token::T_LTE => (l, l <= r),
        other => {
            return Err(unsupported(format!(
                "the operator {}",
                TokenType::new(other)
            )));
        }
    })
}

/// How two vectors are matched.
struct Matching<'b> {
    on: bool,
    labels: &'b [String],
    card: &'b VectorMatchCardinality,
}

impl Matching<'_> {
    fn signature(&self, l: &Labels) -> Labels {
        if self.on {
            l.keep(self.labels)
        } else {
            l.drop_names(self.labels).without_name()
        }
    }
}

const ONE_TO_ONE: VectorMatchCardinality = VectorMatchCardinality::OneToOne;

impl<'s> Ctx<'s> {
    fn binary(&self, b: &BinaryExpr, t: i64) -> Result<Value, EvalError> {
        let op = b.op.id();
        let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
        let lhs = self.eval(&b.lhs, t)?;
        let rhs = self.eval(&b.rhs, t)?;
        let bool_of = |keep: bool| if keep { 1.0 } else { 0.0 };
        match (lhs, rhs) {
            (Value::Scalar(l), Value::Scalar(r)) => {
                let (v, keep) = apply(op, l, r)?;
                Ok(Value::Scalar(if is_comparison(op) {
                    bool_of(keep)
                } else {
                    v
                }))
            }
            (Value::Vector(v), Value::Scalar(s)) if !is_set(op) => {
                scalar_op(op, v, s, false, return_bool)
            }
            (Value::Scalar(s), Value::Vector(v)) if !is_set(op) => {
                scalar_op(op, v, s, true, return_bool)
            }
            (Value::Vector(l), Value::Vector(r)) => {
                let (on, labels): (bool, &[String]) =
                    match b.modifier.as_ref().and_then(|m| m.matching.as_ref()) {
                        Some(LabelModifier::Include(ls)) => (true, &ls.labels),
                        Some(LabelModifier::Exclude(ls)) => (false, &ls.labels),
                        None => (false, &[]),
                    };
                let card = b.modifier.as_ref().map_or(&ONE_TO_ONE, |m| &m.card);
                let m = Matching { on, labels, card };
                if is_set(op) {
                    return Ok(Value::Vector(set_op(op, l, r, &m)));
                }
                Ok(Value::Vector(vector_op(op, l, r, &m, return_bool)?))
            }
            (l, r) => Err(EvalError::Type {
                context: format!("operator {}", TokenType::new(op)),
                expected: if is_set(op) {
                    "two instant vectors"
                } else {
                    "scalars or instant vectors"
                },
                got: if matches!(l, Value::Vector(_) | Value::Scalar(_)) {
                    r.kind()
                } else {
                    l.kind()
                },
            }),
        }
    }
}

/// A vector and a scalar; `swap` when the scalar is on the left.
fn scalar_op(
    op: u16,
    v: Vec<Sample>,
    s: f64,
    swap: bool,
    return_bool: bool,
) -> Result<Value, EvalError> {
    let drop_name = !is_comparison(op) || return_bool;
    let mut out = Vec::with_capacity(v.len());
    for e in v {
        let (l, r) = if swap { (s, e.value) } else { (e.value, s) };
        let (mut value, keep) = apply(op, l, r)?;
        if is_comparison(op) && swap {
            value = r; // the vector's own value, whichever side it is on
        }
        if return_bool {
            value = if keep { 1.0 } else { 0.0 };
        } else if !keep {
            continue;
        }
        out.push(Sample {
            labels: if drop_name {
                e.labels.without_name()
            } else {
                e.labels
            },
            value,
        });
    }
    Ok(Value::Vector(out))
}

fn set_op(op: u16, l: Vec<Sample>, r: Vec<Sample>, m: &Matching<'_>) -> Vec<Sample> {
    let right: foldhash::HashSet<Labels> = r.iter().map(|s| m.signature(&s.labels)).collect();
    match op {
        token::T_LAND => l
            .into_iter()
            .filter(|s| right.contains(&m.signature(&s.labels)))
            .collect(),
        token::T_LUNLESS => l
            .into_iter()
            .filter(|s| !right.contains(&m.signature(&s.labels)))
            .collect(),
        _ => {
            let left: foldhash::HashSet<Labels> =
                l.iter().map(|s| m.signature(&s.labels)).collect();
            let mut out = l;
            out.extend(
                r.into_iter()
                    .filter(|s| !left.contains(&m.signature(&s.labels))),
            );
            out
        }
    }
}

fn vector_op(
    op: u16,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    m: &Matching<'_>,
    return_bool: bool,
) -> Result<Vec<Sample>, EvalError> {
    let one_to_many = matches!(m.card, VectorMatchCardinality::OneToMany(_));
    let include: &[String] = match m.card {
        VectorMatchCardinality::ManyToOne(ls) | VectorMatchCardinality::OneToMany(ls) => &ls.labels,
        _ => &[],
    };
    let (lhs, rhs) = if one_to_many { (rhs, lhs) } else { (lhs, rhs) };
    let mut right: foldhash::HashMap<Labels, Sample> = Default::default();
    for s in rhs {
        let sig = m.signature(&s.labels);
        if let Some(prev) = right.get(&sig) {
            return Err(EvalError::Matching(format!(
                "found duplicate series for the match group {sig} on the {} hand-side of the \
                 operation: [{}, {}];many-to-many matching not allowed: matching labels must be \
                 unique on one side",
                if one_to_many { "left" } else { "right" },
                prev.labels,
                s.labels
            )));
        }
        right.insert(sig, s);
    }
    let one_to_one = matches!(m.card, VectorMatchCardinality::OneToOne);
    let mut matched: foldhash::HashMap<Labels, foldhash::HashSet<Labels>> = Default::default();
    let mut out = Vec::new();
    for ls in lhs {
        let sig = m.signature(&ls.labels);
        let Some(rs) = right.get(&sig) else {
            continue;
        };
        let (vl, vr) = if one_to_many {
            (rs.value, ls.value)
        } else {
            (ls.value, rs.value)
        };
        let (mut value, keep) = apply(op, vl, vr)?;
        if return_bool {
            value = if keep { 1.0 } else { 0.0 };
        } else if !keep {
            continue;
        }
        let mut metric = ls.labels.clone();
        if !is_comparison(op) || return_bool {
            metric.remove(NAME);
        }
        if one_to_one {
            metric = if m.on {
                metric.keep(m.labels)
            } else {
                metric.drop_names(m.labels)
            };
        }
        for n in include {
            let v = rs.labels.get(n);
            metric.set(n.clone(), v.to_owned());
        }
        let seen = matched.entry(sig).or_default();
        if one_to_one {
            if !seen.is_empty() {
                return Err(EvalError::Matching(
                    "multiple matches for labels: many-to-one matching must be explicit \
                     (group_left/group_right)"
                        .into(),
                ));
            }
            seen.insert(Labels::default());
        } else if !seen.insert(metric.clone()) {
            return Err(EvalError::Matching(
                "multiple matches for labels: grouping labels must ensure unique matches".into(),
            ));
        }
        out.push(Sample {
            labels: metric,
            value,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_answers_as_the_plain_evaluator_while_samples_arrive() {
        let queries = [
            "predict_linear(sum(rate(c[1m]))[5m:15s], 300)",
            "count_over_time(sum(rate(c[1m]))[2m:15s]) >= 7",
            "(sum(predict_linear(sum(rate(c[1m]))[2m:15s], 60)) and on() sum(count_over_time(sum(rate(c[1m]))[2m:15s])) >= 7) or on() sum(rate(c[1m]))",
            "max_over_time(max_over_time(c[30s])[1m:10s])",
            "min_over_time(sum(c @ end())[1m:15s])",
        ];
        let queries: Vec<crate::Query> = queries
            .iter()
            .filter_map(|q| crate::Query::parse(q).ok())
            .collect();
        assert_eq!(queries.len(), 5);
        let mut st = Store::new();
        let memo = Memo::default();
        let mut total = [0.0, 0.0];
        for step in 0..160_i64 {
            let t = step * 15_000;
            for (pod, c) in total.iter_mut().enumerate() {
                // A rate that rises, holds and falls, different on each pod.
                *c += 15.0 * (1.0 + (step as f64 / 20.0).sin().abs() * (pod as f64 + 1.0));
                st.push(Labels::new([(NAME, "c"), ("pod", ["a", "b"][pod])]), t, *c)
                    .unwrap_or_else(|e| panic!("{e}"));
                // Asked between two scrapes of the same instant: the memo keeps nothing of
                // the present, which the second scrape changes.
                if pod == 0 {
                    for q in &queries {
                        let _ = Evaluator::new(&st).memo(&memo).eval(q, t);
                    }
                }
            }
            // A vector's series come in no particular order.
            let sorted = |v: Result<Value, EvalError>| match v {
                Ok(Value::Vector(mut v)) => {
                    v.sort_by_key(|s| format!("{:?}", s.labels));
                    Ok(Value::Vector(v))
                }
                other => other,
            };
            for q in &queries {
                let plain = sorted(Evaluator::new(&st).eval(q, t));
                let kept = sorted(Evaluator::new(&st).memo(&memo).eval(q, t));
                assert_eq!(plain, kept, "at {t} ms");
            }
        }
        // What the windows no longer reach has gone.
        let kept: usize = memo.inner.borrow().values().map(|b| b.len()).sum();
        assert!(kept <= 20 + 8 + 6, "{kept}");
    }

    #[test]
    fn aggregation_groups_by_the_kept_labels_in_first_seen_order() {
        let mut st = Store::new();
        for (pod, zone, v) in [
            ("a", "x", 1.0),
            ("b", "y", 2.0),
            ("c", "x", 4.0),
            ("d", "", 8.0),
        ] {
            let mut l = vec![(NAME, "m"), ("pod", pod), ("job", "j")];
            if !zone.is_empty() {
                l.push(("zone", zone));
            }
            st.push(Labels::new(l), 0, v)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let eval = |q: &str| -> Vec<(String, f64)> {
            let q = crate::Query::parse(q).unwrap_or_else(|e| panic!("{e}"));
            match Evaluator::new(&st).eval(&q, 0) {
                Ok(Value::Vector(v)) => v
                    .iter()
                    .map(|s| {
                        let l: Vec<String> =
                            s.labels.iter().map(|(n, v)| format!("{n}={v}")).collect();
                        (l.join(","), s.value)
                    })
                    .collect(),
                other => panic!("{other:?}"),
            }
        };
        // An absent label groups with itself (it reads empty), apart from the others.
        assert_eq!(
            eval("sum by (zone) (m)"),
            [
                ("zone=x".into(), 5.0),
                ("zone=y".into(), 2.0),
                (String::new(), 8.0)
            ]
        );
        assert_eq!(
            eval("max without (pod) (m)"),
            [
                ("job=j,zone=x".into(), 4.0),
                ("job=j,zone=y".into(), 2.0),
                ("job=j".into(), 8.0)
            ]
        );
        assert_eq!(eval("count (m)"), [(String::new(), 4.0)]);
        assert_eq!(eval("sum by (job, zone, job) (m)").len(), 3);
        assert_eq!(
            eval("count by (__name__) (m)"),
            [("__name__=m".into(), 4.0)]
        );
    }

    #[test]
    fn bucket_quantile_interpolates_in_the_rank_bucket() {
        let b = vec![(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (f64::INFINITY, 40.0)];
        // rank 20 of 40 lies halfway through (0.1, 0.5].
        assert!((bucket_quantile(0.5, b.clone()) - 0.3).abs() < 1e-12);
        // Beyond the last finite bucket: its upper bound.
        assert_eq!(bucket_quantile(1.0, b.clone()), 1.0);
        assert!(bucket_quantile(0.5, vec![(1.0, 0.0), (f64::INFINITY, 0.0)]).is_nan());
        assert!(
            bucket_quantile(0.5, vec![(1.0, 3.0)]).is_nan(),
            "no +Inf bucket"
        );
    }

    #[test]
    fn counting_from_the_newest_agrees_with_a_binary_search() {
        for n in [0usize, 1, 5, 16, 17, 40, 300] {
            // Every 10 ms, some instants doubled up to check ties at the boundary.
            let pts: Vec<Point> = (0..n)
                .map(|i| Point {
                    t: (i as i64) * 10,
                    v: 0.0,
                })
                .collect();
            for t in -5..(n as i64 * 10 + 5) {
                assert_eq!(
                    count_before(&pts, t, true),
                    pts.partition_point(|p| p.t <= t),
                    "{n} {t}"
                );
                assert_eq!(
                    count_before(&pts, t, false),
                    pts.partition_point(|p| p.t < t),
                    "{n} {t}"
                );
            }
        }
    }

    #[test]
    fn rate_extrapolates_like_prometheus() {
        // Samples every 10 s, 5 to 55 s into a 60 s window, counter +1/s.
        let pts: Vec<Point> = (0..6)
            .map(|i| Point {
                t: 5_000 + i * 10_000,
                v: 100.0 + (i as f64) * 10.0,
            })
            .collect();
        let w = Window {
            series: vec![],
            start: 0,
            end: 60_000,
            one_name: true,
        };
        // 50 s sampled, 5 s to each edge (< 1.1 × 10 s): extrapolated to the whole 60 s.
        let r = extrapolated(&pts, &w, true, true).unwrap();
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        // A reset (100 → 5) is corrected.
        let reset = [
            Point { t: 0, v: 90.0 },
            Point {
                t: 30_000,
                v: 100.0,
            },
            Point { t: 60_000, v: 5.0 },
        ];
        let inc = extrapolated(&reset, &w, true, false).unwrap();
        assert!((inc - 15.0).abs() < 1e-12, "{inc}");
    }
}
