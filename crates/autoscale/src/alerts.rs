//! Alerting rules evaluated as Prometheus' rule manager evaluates them
//! (`rules/alerting.go`), so that a rehearsal in virtual time and `inferscale monitor` in
//! wall time show the states Prometheus would.
//!
//! Each rule's expression is evaluated at an instant; every series of the result is one
//! alert *instance*, identified by the series' labels (without `__name__`) with the rule's
//! own labels and `alertname` added. An instance that appears is *pending* from that
//! instant (`activeAt`); one still present `for` seconds later *fires*; one that is no longer
//! in the result resolves at once (or, when the rule has `keep_firing_for`, after it has
//! been missing that long), and a pending one is simply dropped. A scalar result is one
//! instance without labels, as Prometheus' `EngineQueryFunc` makes it. An evaluation that
//! fails leaves every instance as it was (and is reported), as Prometheus does.
//!
//! ```
//! use inferscale_autoscale::alerts::{AlertRule, Alerts, Change};
//! use inferscale_promql::{Labels, Query, Sample, Value};
//!
//! let rule = AlertRule::new("HighQueueDepth", Query::parse("queue > 50").unwrap(), 120.0);
//! let mut alerts = Alerts::new(vec![rule]);
//! let over = || Ok::<_, String>(Value::Vector(vec![Sample {
//!     labels: Labels::new([("pod", "vllm-0")]),
//!     value: 60.0,
//! }]));
//! assert_eq!(alerts.eval(0, 1000.0, over())[0].change, Change::Pending);
//! assert!(alerts.eval(0, 1060.0, over()).is_empty());
//! assert_eq!(alerts.eval(0, 1120.0, over())[0].change, Change::Firing);
//! let quiet = Ok::<_, String>(Value::Vector(Vec::new()));
//! assert_eq!(alerts.eval(0, 1135.0, quiet)[0].change, Change::Resolved);
//! ```

use std::fmt;

use inferscale_manifests::objects::{self, PrometheusRule, RuleFile};
use inferscale_promql::{Labels, Query, Value};
use serde::Serialize;

/// One alerting rule of a PrometheusRule or rule file.
#[derive(Debug, Clone)]
pub struct AlertRule {
    /// `alert`.
    pub name: String,
    /// `expr`.
    pub query: Query,
    /// `for`, seconds (0: fires at the first evaluation that returns the instance).
    pub for_s: f64,
    /// `keep_firing_for`, seconds (0: resolves as soon as the instance is gone).
    pub keep_firing_for_s: f64,
    /// `labels` (e.g. `severity`), added to every instance; they win over the series' own.
    pub labels: Vec<(String, String)>,
}

impl AlertRule {
    /// A rule with no labels and no `keep_firing_for`.
    pub fn new(name: impl Into<String>, query: Query, for_s: f64) -> AlertRule {
        AlertRule {
            name: name.into(),
            query,
            for_s,
            keep_firing_for_s: 0.0,
            labels: Vec::new(),
        }
    }

    /// The value of the rule label `name` (`severity`), if it has one.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The alerting rules of a file, and the first group's own evaluation interval.
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// The alerting rules, in file order (recording rules are skipped).
    pub rules: Vec<AlertRule>,
    /// The first group's `interval`, seconds, when one is set.
    pub interval_s: Option<f64>,
    /// Whether the file was a PrometheusRule object (else a plain rule file).
    pub object: bool,
}

/// Why a rule file could not be read: the field (`spec.groups[0].rules[1].expr`, empty for
/// the document) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct RuleError {
    /// The field's path.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn seconds(text: &str, path: String) -> Result<f64, RuleError> {
    inferscale_catalog::units::parse_duration(text)
        .map(|d| d.as_secs_f64())
        .map_err(|e| RuleError {
            path,
            message: e.to_string(),
        })
}

/// Reads the alerting rules of a PrometheusRule (`spec.groups`) or a plain rule file
/// (`groups`): each rule's name, expression (parsed), `for`, `keep_firing_for` and labels.
pub fn read_rules(text: &str) -> Result<RuleSet, RuleError> {
    let (file, prefix, object) = match objects::load::<PrometheusRule>(text) {
        Ok(r) if r.kind == "PrometheusRule" => (r.spec, "spec.groups", true),
        _ => (
            objects::load::<RuleFile>(text).map_err(|e| RuleError {
                path: e.path.clone(),
                message: e.to_string(),
            })?,
            "groups",
            false,
        ),
    };
    let mut rules = Vec::new();
    let mut interval_s = None;
    for (g, group) in file.groups.iter().enumerate() {
        if interval_s.is_none()
            && let Some(i) = &group.interval
        {
            interval_s = Some(seconds(i, format!("{prefix}[{g}].interval"))?);
        }
        for (r, rule) in group.rules.iter().enumerate() {
            let Some(name) = &rule.alert else { continue };
            let p = format!("{prefix}[{g}].rules[{r}]");
            let query = Query::parse(&rule.expr).map_err(|e| RuleError {
                path: format!("{p}.expr"),
                message: e.to_string(),
            })?;
            let for_s = match &rule.for_ {
                None => 0.0,
                Some(f) => seconds(f, format!("{p}.for"))?,
            };
            let keep_firing_for_s = match &rule.keep_firing_for {
                None => 0.0,
                Some(f) => seconds(f, format!("{p}.keep_firing_for"))?,
            };
            rules.push(AlertRule {
                name: name.clone(),
                query,
                for_s,
                keep_firing_for_s,
                labels: rule
                    .labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            });
        }
    }
    Ok(RuleSet {
        rules,
        interval_s,
        object,
    })
}

/// An active instance's state (resolved instances are gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Its condition holds, for less than `for` so far.
    Pending,
    /// Its condition has held for `for` (or it is kept firing by `keep_firing_for`).
    Firing,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Pending => "pending",
            State::Firing => "firing",
        })
    }
}

/// One active alert instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// The series' labels, the rule's labels and `alertname`.
    pub labels: Labels,
    /// Pending or firing.
    pub state: State,
    /// When its condition was first seen to hold (seconds, the caller's clock).
    pub active_at: f64,
    /// When it fired.
    pub fired_at: Option<f64>,
    /// The series' value at the last evaluation that returned it.
    pub value: f64,
    /// Since when it has been missing while kept firing by `keep_firing_for`.
    pub missing_since: Option<f64>,
}

/// What changed for one instance at an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// It appeared (pending).
    Pending,
    /// It fired.
    Firing,
    /// It resolved after firing.
    Resolved,
    /// It went away while pending (never fired).
    Dropped,
}

/// A change, for the rule at index `rule`.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The rule's index.
    pub rule: usize,
    /// The instance's labels.
    pub labels: Labels,
    /// What happened.
    pub change: Change,
    /// When the instance became active.
    pub active_at: f64,
    /// When (the evaluation's time).
    pub at: f64,
}

/// One rule's state.
#[derive(Debug, Clone, Default)]
pub struct RuleState {
    /// Its active instances, in the order they appeared.
    pub instances: Vec<Instance>,
    /// When it was last evaluated.
    pub evaluated_at: Option<f64>,
    /// Why its last evaluation failed (`None`: it succeeded).
    pub error: Option<String>,
}

impl RuleState {
    /// Whether any instance fires.
    pub fn firing(&self) -> bool {
        self.instances.iter().any(|i| i.state == State::Firing)
    }

    /// Whether any instance is pending.
    pub fn pending(&self) -> bool {
        self.instances.iter().any(|i| i.state == State::Pending)
    }
}

/// The rules and their instances.
#[derive(Debug, Clone)]
pub struct Alerts {
    rules: Vec<AlertRule>,
    states: Vec<RuleState>,
}

impl Alerts {
    /// The rules, none active.
    pub fn new(rules: Vec<AlertRule>) -> Alerts {
        let states = vec![RuleState::default(); rules.len()];
        Alerts { rules, states }
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[AlertRule] {
        &self.rules
    }

    /// Rule `i`'s state.
    ///
    /// # Panics
    ///
    /// When `i` is not a rule's index.
    pub fn state(&self, i: usize) -> &RuleState {
        &self.states[i]
    }

    /// Every rule with its state.
    pub fn iter(&self) -> impl Iterator<Item = (&AlertRule, &RuleState)> {
        self.rules.iter().zip(&self.states)
    }

    /// Evaluates every rule at `t` (seconds), each with `query` (the expression and `t`);
    /// the changes, rule by rule.
    pub fn step<E: fmt::Display>(
        &mut self,
        t: f64,
        mut query: impl FnMut(&Query) -> Result<Value, E>,
    ) -> Vec<Transition> {
        let mut out = Vec::new();
        for i in 0..self.rules.len() {
            let r = query(&self.rules[i].query);
            out.extend(self.eval(i, t, r));
        }
        out
    }

    /// Takes rule `i`'s result at `t` (seconds); the changes it made.
    ///
    /// # Panics
    ///
    /// When `i` is not a rule's index.
    pub fn eval<E: fmt::Display>(
        &mut self,
        i: usize,
        t: f64,
        result: Result<Value, E>,
    ) -> Vec<Transition> {
        let rule = &self.rules[i];
        let state = &mut self.states[i];
        state.evaluated_at = Some(t);
        let samples: Vec<(Labels, f64)> = match result {
            Err(e) => {
                state.error = Some(e.to_string());
                return Vec::new();
            }
            Ok(Value::Vector(v)) => v.into_iter().map(|s| (s.labels, s.value)).collect(),
            Ok(Value::Scalar(v)) => vec![(Labels::default(), v)],
            Ok(other) => {
                state.error = Some(format!(
                    "the expression returned a {}, not an instant vector",
                    other.kind()
                ));
                return Vec::new();
            }
        };
        let mut seen: Vec<(Labels, f64)> = Vec::with_capacity(samples.len());
        for (labels, value) in samples {
            let mut l = labels.without_name();
            for (k, v) in &rule.labels {
                l.set(k.clone(), v.clone());
            }
            l.set("alertname".to_owned(), rule.name.clone());
            if seen.iter().any(|(s, _)| *s == l) {
                state.error = Some(format!(
                    "two series have the labels {l} once the rule's labels are added"
                ));
                return Vec::new();
            }
            seen.push((l, value));
        }
        state.error = None;
        let mut out = Vec::new();
        let change = |labels: &Labels, change, active_at| Transition {
            rule: i,
            labels: labels.clone(),
            change,
            active_at,
            at: t,
        };
        for (labels, value) in seen.iter() {
            match state.instances.iter_mut().find(|a| a.labels == *labels) {
                Some(a) => {
                    a.value = *value;
                    a.missing_since = None;
                }
                None => {
                    out.push(change(labels, Change::Pending, t));
                    state.instances.push(Instance {
                        labels: labels.clone(),
                        state: State::Pending,
                        active_at: t,
                        fired_at: None,
                        value: *value,
                        missing_since: None,
                    });
                }
            }
        }
        let keep_for = rule.keep_firing_for_s;
        state.instances.retain_mut(|a| {
            if seen.iter().any(|(l, _)| *l == a.labels) {
                return true;
            }
            if a.state == State::Firing && keep_for > 0.0 {
                let since = *a.missing_since.get_or_insert(t);
                if t - since < keep_for {
                    return true;
                }
            }
            out.push(change(
                &a.labels,
                match a.state {
                    State::Pending => Change::Dropped,
                    State::Firing => Change::Resolved,
                },
                a.active_at,
            ));
            false
        });
        for a in &mut state.instances {
            if a.state == State::Pending && t - a.active_at >= rule.for_s {
                a.state = State::Firing;
                a.fired_at = Some(t);
                out.push(change(&a.labels, Change::Firing, a.active_at));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inferscale_promql::Sample;

    fn rule(for_s: f64) -> AlertRule {
        let mut r = AlertRule::new(
            "HighQueueDepth",
            Query::parse("q > 50").unwrap_or_else(|e| panic!("{e}")),
            for_s,
        );
        r.labels.push(("severity".into(), "warning".into()));
        r
    }

    fn vector(pods: &[(&str, f64)]) -> Result<Value, String> {
        Ok(Value::Vector(
            pods.iter()
                .map(|(p, v)| Sample {
                    labels: Labels::new([("__name__", "q"), ("pod", *p)]),
                    value: *v,
                })
                .collect(),
        ))
    }

    fn changes(t: &[Transition]) -> Vec<(String, Change)> {
        t.iter()
            .map(|t| (t.labels.get("pod").to_owned(), t.change))
            .collect()
    }

    #[test]
    fn each_series_is_its_own_instance_with_its_own_clock() {
        let mut a = Alerts::new(vec![rule(60.0)]);
        assert_eq!(
            changes(&a.eval(0, 0.0, vector(&[("a", 60.0)]))),
            [("a".into(), Change::Pending)]
        );
        assert_eq!(
            changes(&a.eval(0, 30.0, vector(&[("a", 61.0), ("b", 70.0)]))),
            [("b".into(), Change::Pending)]
        );
        // `a` has held for 60 s: it fires; `b` only for 30 s.
        assert_eq!(
            changes(&a.eval(0, 60.0, vector(&[("a", 62.0), ("b", 70.0)]))),
            [("a".into(), Change::Firing)]
        );
        let s = a.state(0);
        assert!(s.firing() && s.pending());
        assert_eq!(s.instances[0].value, 62.0);
        assert_eq!(s.instances[0].labels.get("alertname"), "HighQueueDepth");
        assert_eq!(s.instances[0].labels.get("severity"), "warning");
        assert!(!s.instances[0].labels.has("__name__"));
        // `b` goes away while pending (dropped), `a` while firing (resolved).
        assert_eq!(
            changes(&a.eval(0, 75.0, vector(&[]))),
            [
                ("a".into(), Change::Resolved),
                ("b".into(), Change::Dropped)
            ]
        );
        assert!(a.state(0).instances.is_empty());
        // Back again: a new instance, pending from now.
        let t = a.eval(0, 90.0, vector(&[("a", 60.0)]));
        assert_eq!(t[0].active_at, 90.0);
    }

    #[test]
    fn for_zero_fires_at_once_and_a_failed_evaluation_keeps_the_state() {
        let mut a = Alerts::new(vec![rule(0.0)]);
        assert_eq!(
            changes(&a.eval(0, 0.0, vector(&[("a", 60.0)]))),
            [("a".into(), Change::Pending), ("a".into(), Change::Firing)]
        );
        assert!(a.eval(0, 15.0, Err::<Value, &str>("boom")).is_empty());
        assert_eq!(a.state(0).error.as_deref(), Some("boom"));
        assert!(a.state(0).firing());
        a.eval(0, 30.0, vector(&[("a", 60.0)]));
        assert_eq!(a.state(0).error, None);
    }

    #[test]
    fn keep_firing_for_holds_a_firing_instance_that_went_missing() {
        let mut r = rule(0.0);
        r.keep_firing_for_s = 30.0;
        let mut a = Alerts::new(vec![r]);
        a.eval(0, 0.0, vector(&[("a", 60.0)]));
        assert!(a.eval(0, 15.0, vector(&[])).is_empty());
        assert!(a.eval(0, 30.0, vector(&[])).is_empty());
        assert!(a.state(0).firing());
        // Seen again: the clock restarts.
        a.eval(0, 40.0, vector(&[("a", 60.0)]));
        assert!(a.eval(0, 60.0, vector(&[])).is_empty());
        assert_eq!(
            changes(&a.eval(0, 90.0, vector(&[]))),
            [("a".into(), Change::Resolved)]
        );
    }

    #[test]
    fn a_scalar_is_one_instance_and_clashing_labels_are_an_error() {
        let mut a = Alerts::new(vec![rule(0.0)]);
        let t = a.eval(0, 0.0, Ok::<_, &str>(Value::Scalar(1.0)));
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].labels.get("alertname"), "HighQueueDepth");
        let mut b = Alerts::new(vec![rule(0.0)]);
        // Two series that differ only by their name collide once it is dropped.
        let clash = Ok::<_, &str>(Value::Vector(vec![
            Sample {
                labels: Labels::new([("__name__", "x"), ("pod", "a")]),
                value: 1.0,
            },
            Sample {
                labels: Labels::new([("__name__", "y"), ("pod", "a")]),
                value: 1.0,
            },
        ]));
        assert!(b.eval(0, 0.0, clash).is_empty());
        assert!(
            b.state(0)
                .error
                .as_deref()
                .is_some_and(|e| e.contains("same") || e.contains("labels")),
            "{:?}",
            b.state(0).error
        );
    }
}
