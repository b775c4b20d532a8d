//! PromQL as a type.
//!
//! - [`Query`]: a parsed PromQL expression (the parser is the `promql-parser` crate, the
//!   field's Rust implementation of Prometheus' grammar) that keeps its source text.
//! - [`Store`]: series in memory, filled by scrapes with Prometheus' labelling and staleness.
//! - [`Evaluator`]: instant queries over a store with Prometheus' semantics, for the subset
//!   inferscale's manifests, the seeds and vLLM's dashboards use and a good deal more (see
//!   [`eval`] for the rules and the known differences from Prometheus 3).
//! - [`api_json`]: a result as Prometheus' `/api/v1/query` answers it.
//!
//! ```
//! use inferscale_promql::{Evaluator, Labels, Query, Store, Value};
//!
//! let mut store = Store::new();
//! for (t, v) in [(0, 0.0), (15_000, 30.0), (30_000, 60.0), (45_000, 90.0), (60_000, 120.0)] {
//!     store.push(Labels::new([("__name__", "requests_total"), ("pod", "a")]), t, v).unwrap();
//! }
//! let q = Query::parse("sum by (pod) (rate(requests_total[1m]))").unwrap();
//! let Value::Vector(v) = Evaluator::new(&store).eval(&q, 60_000).unwrap() else { panic!() };
//! assert_eq!(v[0].labels.get("pod"), "a");
//! assert!((v[0].value - 2.0).abs() < 1e-12);
//! ```

pub mod eval;
pub mod store;

use std::fmt;

pub use eval::{EvalError, Evaluator, Memo, Sample, Value};
pub use promql_parser::parser::Expr;
pub use store::{Labels, Point, ScrapeWrite, Series, Store, StoreError};

/// A parsed PromQL expression and the text it came from.
#[derive(Debug, Clone)]
pub struct Query {
    text: String,
    expr: Expr,
}

/// Why a query did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid PromQL {query:?}: {message}")]
pub struct ParseError {
    /// The query as given.
    pub query: String,
    /// The parser's account.
    pub message: String,
}

impl Query {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Query, ParseError> {
        match promql_parser::parser::parse(text) {
            Ok(expr) => Ok(Query {
                text: text.to_owned(),
                expr,
            }),
            Err(message) => Err(ParseError {
                query: text.to_owned(),
                message,
            }),
        }
    }

    /// The text as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The syntax tree.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// Whether the query's result is, by its form, at most one series (what KEDA's
    /// Prometheus scaler needs): an aggregation without grouping labels (or by `le` under
    /// `histogram_quantile`), a number, `vector(…)`, or operators and functions that keep one
    /// series one. A bare selector or a grouped aggregation may return several; this says
    /// "not proven", not "several".
    pub fn at_most_one_series(&self) -> bool {
        one_series(&self.expr, false)
    }

    /// The metric names the query selects, in order of appearance, each once.
    pub fn metric_names(&self) -> Vec<String> {
        fn walk(e: &Expr, out: &mut Vec<String>) {
            use promql_parser::parser::Expr as E;
            let mut push = |n: &Option<String>| {
                if let Some(n) = n
                    && !out.contains(n)
                {
                    out.push(n.clone());
                }
            };
            match e {
                E::VectorSelector(vs) => push(&vs.name),
                E::MatrixSelector(ms) => push(&ms.vs.name),
                E::Aggregate(a) => {
                    walk(&a.expr, out);
                    if let Some(p) = &a.param {
                        walk(p, out);
                    }
                }
                E::Unary(u) => walk(&u.expr, out),
                E::Binary(b) => {
                    walk(&b.lhs, out);
                    walk(&b.rhs, out);
                }
                E::Paren(p) => walk(&p.expr, out),
                E::Subquery(s) => walk(&s.expr, out),
                E::Call(c) => c.args.args.iter().for_each(|a| walk(a, out)),
                E::NumberLiteral(_) | E::StringLiteral(_) | E::Extension(_) => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.expr, &mut out);
        out
    }
}

impl PartialEq for Query {
    fn eq(&self, other: &Self) -> bool {
        self.expr == other.expr
    }
}

/// The query's canonical text (as `promtool` would format it on one line).
impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)
    }
}

impl std::str::FromStr for Query {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Query::parse(s)
    }
}

/// See [`Query::at_most_one_series`]. `le_ok`: under `histogram_quantile`, where grouping by
/// `le` alone still gives one series.
fn one_series(e: &Expr, le_ok: bool) -> bool {
    use promql_parser::parser::{Expr as E, LabelModifier};
    match e {
        E::NumberLiteral(_) | E::StringLiteral(_) => true,
        E::Paren(p) => one_series(&p.expr, le_ok),
        E::Unary(u) => one_series(&u.expr, le_ok),
        E::Subquery(s) => one_series(&s.expr, le_ok),
        E::Aggregate(a) => {
            use promql_parser::parser::token;
            let op = a.op.id();
            if matches!(
                op,
                token::T_TOPK
                    | token::T_BOTTOMK
                    | token::T_COUNT_VALUES
                    | token::T_LIMITK
                    | token::T_LIMIT_RATIO
            ) {
                return false;
            }
            match &a.modifier {
                None => true,
                Some(LabelModifier::Include(l)) => {
                    l.labels.is_empty() || (le_ok && l.labels.iter().all(|n| n == "le"))
                }
                Some(LabelModifier::Exclude(_)) => false,
            }
        }
        E::Binary(b) => one_series(&b.lhs, le_ok) && one_series(&b.rhs, le_ok),
        E::Call(c) => {
            let args = &c.args.args;
            match c.func.name {
                "vector" | "scalar" | "time" | "pi" => true,
                "histogram_quantile" => args.get(1).is_some_and(|a| one_series(a, true)),
                "absent" | "absent_over_time" => true,
                "label_replace" | "label_join" => false,
                _ => args
                    .iter()
                    .filter(|a| !matches!(***a, E::NumberLiteral(_) | E::StringLiteral(_)))
                    .all(|a| one_series(a, le_ok)),
            }
        }
        E::VectorSelector(_) | E::MatrixSelector(_) | E::Extension(_) => false,
    }
}

/// A number as Prometheus' API writes it: shortest round-trip decimal, `NaN`, `+Inf`, `-Inf`.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// A number as Prometheus' API wrote it (the reverse of [`format_value`]).
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn labels_json(l: &Labels) -> serde_json::Value {
    serde_json::Value::Object(
        l.iter()
            .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
            .collect(),
    )
}

/// A result (or an error) as `/api/v1/query?time=t` answers it (`t` in ms).
pub fn api_json(result: &Result<Value, EvalError>, t: i64) -> serde_json::Value {
    use serde_json::json;
    let ts = t as f64 / 1000.0;
    let v = match result {
        Err(e) => {
            return json!({"status": "error", "errorType": "execution", "error": e.to_string()});
        }
        Ok(v) => v,
    };
    let result = match v {
        Value::Scalar(x) => json!([ts, format_value(*x)]),
        Value::String(s) => json!([ts, s]),
        Value::Vector(v) => v
            .iter()
            .map(|s| json!({"metric": labels_json(&s.labels), "value": [ts, format_value(s.value)]}))
            .collect(),
        Value::Matrix(m) => m
            .iter()
            .map(|s| {
                json!({
                    "metric": labels_json(&s.labels),
                    "values": s.points.iter().map(|p| json!([p.t as f64 / 1000.0, format_value(p.v)])).collect::<Vec<_>>(),
                })
            })
            .collect(),
    };
    json!({"status": "success", "data": {"resultType": v.kind(), "result": result}})
}

/// Why an `/api/v1/query` answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Prometheus answered `"status": "error"`.
    #[error("Prometheus refused the query ({kind}): {message}")]
    Refused {
        /// `errorType` (`bad_data`, `execution`, `timeout`, …).
        kind: String,
        /// `error`.
        message: String,
    },
    /// The answer is not shaped as the API documents it.
    #[error("not a Prometheus API answer: {0}")]
    Shape(String),
}

/// A result as Prometheus' `/api/v1/query` (or `/api/v1/query_range`) answered it: the
/// reverse of [`api_json`]. Liberal where harmless (extra fields, `warnings`, numbers written
/// as numbers); strict where it matters (the status, the result type, every value).
///
/// ```
/// use inferscale_promql::{from_api_json, Value};
/// let answer = serde_json::json!({"status": "success", "data": {"resultType": "vector",
///     "result": [{"metric": {"pod": "a"}, "value": [1700000000.5, "3"]}]}});
/// let Ok(Value::Vector(v)) = from_api_json(&answer) else { panic!() };
/// assert_eq!((v[0].labels.get("pod"), v[0].value), ("a", 3.0));
/// ```
pub fn from_api_json(answer: &serde_json::Value) -> Result<Value, ApiError> {
    let shape = |m: &str| ApiError::Shape(m.to_owned());
    match answer.get("status").and_then(|s| s.as_str()) {
        Some("success") => {}
        Some("error") => {
            let text = |k: &str| {
                answer
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            return Err(ApiError::Refused {
                kind: text("errorType"),
                message: text("error"),
            });
        }
        _ => return Err(shape("no \"status\" of success or error")),
    }
    let data = answer.get("data").ok_or_else(|| shape("no \"data\""))?;
    let result = data
        .get("result")
        .ok_or_else(|| shape("no \"data.result\""))?;
    let point = |p: &serde_json::Value| -> Result<(f64, f64), ApiError> {
        let pair = p
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| shape("a value is not a [time, \"value\"] pair"))?;
        let t = pair[0]
            .as_f64()
            .ok_or_else(|| shape("a value's time is not a number"))?;
        let v = match &pair[1] {
            serde_json::Value::String(s) => parse_value(s),
            n => n.as_f64(),
        }
        .ok_or_else(|| shape(&format!("{} is not a sample value", pair[1])))?;
        Ok((t, v))
    };
    let metric = |s: &serde_json::Value| -> Result<Labels, ApiError> {
        let m = s
            .get("metric")
            .and_then(|m| m.as_object())
            .ok_or_else(|| shape("a series has no \"metric\" object"))?;
        let mut l = Labels::default();
        for (k, v) in m {
            let v = v
                .as_str()
                .ok_or_else(|| shape(&format!("label {k} is not a string")))?;
            l.set(k.clone(), v.to_owned());
        }
        Ok(l)
    };
    let list = || {
        result
            .as_array()
            .ok_or_else(|| shape("\"data.result\" is not a list"))
    };
    match data.get("resultType").and_then(|t| t.as_str()) {
        Some("scalar") => Ok(Value::Scalar(point(result)?.1)),
        Some("string") => Ok(Value::String(
            result
                .get(1)
                .and_then(|s| s.as_str())
                .ok_or_else(|| shape("a string result is not [time, \"text\"]"))?
                .to_owned(),
        )),
        Some("vector") => Ok(Value::Vector(
            list()?
                .iter()
                .map(|s| {
                    Ok(Sample {
                        labels: metric(s)?,
                        value: point(
                            s.get("value")
                                .ok_or_else(|| shape("a sample has no \"value\""))?,
                        )?
                        .1,
                    })
                })
                .collect::<Result<_, ApiError>>()?,
        )),
        Some("matrix") => Ok(Value::Matrix(
            list()?
                .iter()
                .map(|s| {
                    let points = s
                        .get("values")
                        .and_then(|v| v.as_array())
                        .ok_or_else(|| shape("a series has no \"values\" list"))?
                        .iter()
                        .map(|p| {
                            point(p).map(|(t, v)| Point {
                                t: (t * 1000.0).round() as i64,
                                v,
                            })
                        })
                        .collect::<Result<_, ApiError>>()?;
                    Ok(Series {
                        labels: metric(s)?,
                        points,
                    })
                })
                .collect::<Result<_, ApiError>>()?,
        )),
        other => Err(shape(&format!("unknown resultType {other:?}"))),
    }
}

/// `s` as a PromQL double-quoted string (a label matcher's value): `\\`, `"` and every
/// control character escaped, so that no value, however odd, can end the string or the
/// query early. The one escaping path for values that reach PromQL (and promtool's series
/// notation, which is PromQL's).
///
/// ```
/// assert_eq!(inferscale_promql::quote("a\"b\nc"), r#""a\"b\nc""#);
/// assert!(inferscale_promql::Query::parse(&format!("x{{m={}}}", inferscale_promql::quote("\"} or vector(1) #"))).is_ok());
/// ```
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    push_escaped(&mut out, s);
    out.push('"');
    out
}

/// Appends `s` escaped as inside a PromQL double-quoted string.
fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_form_of_a_query_says_whether_it_is_one_series() {
        let one = |q: &str| Query::parse(q).map(|q| q.at_most_one_series());
        for q in [
            "sum(x)",
            "sum(x) + sum(y) / 120",
            "histogram_quantile(0.95, sum by (le) (rate(h_bucket[2m])))",
            "(sum(predict_linear((sum(x))[5m:15s], 330)) and on() sum(count_over_time((sum(x))[5m:15s])) >= 16) or on() (sum(x))",
            "sum(a) or vector(0)",
            "max_over_time(sum(x)[1m:])",
        ] {
            assert_eq!(one(q), Ok(true), "{q}");
        }
        for q in [
            "x",
            "rate(x[1m])",
            "sum by (pod) (x)",
            "sum without (pod) (x)",
            "histogram_quantile(0.95, sum by (le, pod) (rate(h_bucket[2m])))",
            "topk(1, x)",
            "sum(x) + y",
        ] {
            assert_eq!(one(q), Ok(false), "{q}");
        }
    }

    use super::*;

    #[test]
    fn a_bad_query_is_refused_with_the_text() {
        let e = Query::parse("sum(rate(x[5m])").unwrap_err();
        assert_eq!(e.query, "sum(rate(x[5m])");
        assert!(!e.message.is_empty());
    }

    #[test]
    fn queries_round_trip_through_their_canonical_text() {
        for q in [
            "sum(vllm:num_requests_waiting) or vector(0)",
            "histogram_quantile(0.95, sum by (le) (rate(x_bucket{a=\"b\"}[1m])))",
            "(a and on () b > 0) or on () vector(0)",
        ] {
            let parsed = Query::parse(q).unwrap();
            let again = Query::parse(&parsed.to_string()).unwrap();
            assert_eq!(parsed, again, "{q} → {parsed}");
        }
    }

    #[test]
    fn api_answers_read_back_what_api_json_writes() {
        let mut store = Store::new();
        for (t, v) in [(0, 1.0), (15_000, 2.0), (30_000, f64::NAN)] {
            store
                .push(Labels::new([("__name__", "m"), ("pod", "a\"b")]), t, v)
                .unwrap();
        }
        let ev = Evaluator::new(&store);
        for q in ["m", "m[1m]", "scalar(m)", "sum(m)", "\"text\""] {
            let r = ev.eval(&Query::parse(q).unwrap(), 30_000);
            let back = from_api_json(&api_json(&r, 30_000)).unwrap();
            // NaN != NaN: compare as Prometheus would print them.
            assert_eq!(
                api_json(&Ok(back), 30_000).to_string(),
                api_json(&r, 30_000).to_string(),
                "{q}"
            );
        }
        let refused =
            serde_json::json!({"status": "error", "errorType": "bad_data", "error": "parse error"});
        assert_eq!(
            from_api_json(&refused).unwrap_err().to_string(),
            "Prometheus refused the query (bad_data): parse error"
        );
        let odd = serde_json::json!({"status": "success", "warnings": ["x"], "data": {"resultType": "vector",
            "result": [{"metric": {}, "value": [1, 2]}]}});
        assert!(matches!(from_api_json(&odd), Ok(Value::Vector(v)) if v[0].value == 2.0));
        let bad = serde_json::json!({"status": "success", "data": {"resultType": "vector",
            "result": [{"metric": {}, "value": [1, "abc"]}]}});
        assert!(
            from_api_json(&bad)
                .unwrap_err()
                .to_string()
                .contains("\"abc\"")
        );
    }

    #[test]
    fn values_format_as_the_api_does() {
        assert_eq!(format_value(0.1), "0.1");
        assert_eq!(format_value(1e-7), "0.0000001");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
    }
}
