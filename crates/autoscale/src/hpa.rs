//! The HPA controller's reconcile step (see the crate documentation).
//!
//! Conventions where Kubernetes leaves a choice to timing:
//! - An event or recommendation recorded at `t` is inside a look-back window of `w` seconds at
//!   `now` only when `t > now - w` (the controller's `After(cutoff)`); so with a 15 s sync, an
//!   event of the previous sync is outside a 15 s policy period. For the legacy path's
//!   stabilization a sample at exactly `now - w` still counts (`!Before(cutoff)`), as there.
//! - Metric values and targets are compared in milli-units, as Kubernetes compares
//!   Quantities (`MilliValue`, which rounds up).

/// How a policy limits change: by pods or by percent of the replicas at the period's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// At most `value` pods per period.
    Pods,
    /// At most `value` percent per period.
    Percent,
}

/// One scaling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Pods or Percent.
    pub kind: PolicyKind,
    /// The amount (> 0).
    pub value: u32,
    /// The look-back period, seconds (1 to 1800).
    pub period_s: u32,
}

/// Which policy wins when several apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The one that allows the most change (Kubernetes' default).
    Max,
    /// The one that allows the least change.
    Min,
    /// No change in this direction at all.
    Disabled,
}

/// `behavior.scaleUp` or `behavior.scaleDown`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// `stabilizationWindowSeconds`.
    pub stabilization_s: u32,
    /// `selectPolicy`.
    pub select: Select,
    /// At least one.
    pub policies: Vec<Policy>,
    /// A per-direction tolerance (HPAConfigurableTolerance), else the global one.
    pub tolerance: Option<f64>,
}

/// `spec.behavior`, with Kubernetes' defaults filled in for what is not given.
#[derive(Debug, Clone, PartialEq)]
pub struct Behavior {
    /// Scaling up.
    pub up: Rules,
    /// Scaling down.
    pub down: Rules,
}

impl Behavior {
    /// What the API server fills in: up by max(+4 pods, ×2) per 15 s with no window; down
    /// to the minimum at once after a 300 s window.
    pub fn kubernetes_default() -> Behavior {
        Behavior {
            up: Rules {
                stabilization_s: 0,
                select: Select::Max,
                policies: vec![
                    Policy {
                        kind: PolicyKind::Percent,
                        value: 100,
                        period_s: 15,
                    },
                    Policy {
                        kind: PolicyKind::Pods,
                        value: 4,
                        period_s: 15,
                    },
                ],
                tolerance: None,
            },
            down: Rules {
                stabilization_s: 300,
                select: Select::Max,
                policies: vec![Policy {
                    kind: PolicyKind::Percent,
                    value: 100,
                    period_s: 15,
                }],
                tolerance: None,
            },
        }
    }
}

/// A metric's target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// `AverageValue` (what KEDA writes by default): the value per replica.
    AverageValue(f64),
    /// `Value`: the value for the whole workload.
    Value(f64),
}

/// One metric as the controller read it this sync: the sum of the samples the metrics API
/// returned, or `None` when reading it failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// What the metric is compared with.
    pub target: Target,
    /// The value, or `None`: the metric could not be read.
    pub value: Option<f64>,
}

/// The workload's replica counts as the controller sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    /// `spec.replicas` of the scale target: what was asked for.
    pub spec: u32,
    /// `status.replicas`: the pods that exist (ready or not).
    pub status: u32,
    /// Pods Running and Ready.
    pub ready: u32,
}

/// What one reconcile decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Set `spec.replicas` to this (it may equal the current count).
    Desired(u32),
    /// `spec.replicas` is 0 and `minReplicas` is not: the HPA does nothing (KEDA's
    /// deactivation).
    Disabled,
    /// Every metric failed, or a failure would have allowed a scale-down: nothing changes.
    Failed,
}

/// The HPA's fixed configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// `minReplicas` (default 1).
    pub min: u32,
    /// `maxReplicas`.
    pub max: u32,
    /// `behavior` (`None`: the legacy path).
    pub behavior: Option<Behavior>,
    /// `--horizontal-pod-autoscaler-tolerance` (default 0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`, seconds (default 300): the
    /// legacy window, and the scale-down window when `behavior` leaves it unset.
    pub downscale_stabilization_s: u32,
}

impl Spec {
    /// An HPA between `min` and `max` with Kubernetes' defaults for the rest.
    pub fn new(min: u32, max: u32, behavior: Option<Behavior>) -> Spec {
        Spec {
            min,
            max,
            behavior,
            tolerance: 0.1,
            downscale_stabilization_s: 300,
        }
    }
}

/// One HPA: its spec and the controller's memory of it (recommendations, scale events).
#[derive(Debug, Clone)]
pub struct Hpa {
    /// The configuration.
    pub spec: Spec,
    recommendations: Vec<(f64, u32)>,
    up_events: Vec<(f64, u32)>,
    down_events: Vec<(f64, u32)>,
    seeded: bool,
}

/// `value` in milli-units, rounded up as `Quantity.MilliValue` does (after removing the
/// last bits of binary floating-point noise, so that 0.42 is 420, not 421).
fn milli(v: f64) -> f64 {
    ((v * 1000.0 * 1e6).round() / 1e6).ceil()
}

impl Hpa {
    /// A freshly created HPA (the first reconcile seeds its recommendation history).
    pub fn new(spec: Spec) -> Hpa {
        Hpa {
            spec,
            recommendations: Vec::new(),
            up_events: Vec::new(),
            down_events: Vec::new(),
            seeded: false,
        }
    }

    fn tolerances(&self) -> (f64, f64) {
        let g = self.spec.tolerance;
        match &self.spec.behavior {
            Some(b) => (b.down.tolerance.unwrap_or(g), b.up.tolerance.unwrap_or(g)),
            None => (g, g),
        }
    }

    /// One metric's proposal, or `None` when it could not be read.
    fn proposal(&self, r: &Reading, n: Replicas) -> Option<u32> {
        let v = milli(r.value?);
        let (down, up) = self.tolerances();
        let within = |ratio: f64| (1.0 - down..=1.0 + up).contains(&ratio);
        let count = |x: f64| x.ceil().clamp(0.0, f64::from(u32::MAX)) as u32;
        match r.target {
            Target::AverageValue(t) => {
                let t = milli(t).max(1.0);
                let ratio = v / (t * f64::from(n.status.max(1)));
                if n.status > 0 && within(ratio) {
                    Some(n.status)
                } else {
                    Some(count(v / t))
                }
            }
            Target::Value(t) => {
                let ratio = v / milli(t).max(1.0);
                if n.spec == 0 {
                    Some(count(ratio))
                } else if within(ratio) {
                    Some(n.spec)
                } else {
                    Some(count(ratio * f64::from(n.ready)))
                }
            }
        }
    }

    /// One reconcile at `now` (seconds): the replicas to set, given the counts and this
    /// sync's metric readings.
    pub fn reconcile(&mut self, now: f64, n: Replicas, metrics: &[Reading]) -> Decision {
        let current = n.spec;
        if !self.seeded {
            self.recommendations.push((now, current));
            self.seeded = true;
        }
        if current == 0 && self.spec.min != 0 {
            return Decision::Disabled;
        }
        let desired = if current > self.spec.max {
            self.spec.max
        } else if current < self.spec.min {
            self.spec.min
        } else {
            let proposals: Vec<Option<u32>> = metrics.iter().map(|m| self.proposal(m, n)).collect();
            let Some(best) = proposals.iter().flatten().copied().max() else {
                return Decision::Failed;
            };
            if proposals.iter().any(Option::is_none) && best < current {
                return Decision::Failed;
            }
            match self.spec.behavior.clone() {
                None => self.normalize_legacy(now, current, best),
                Some(b) => self.normalize(now, current, best, &b),
            }
        };
        if desired != current {
            let events = if desired > current {
                &mut self.up_events
            } else {
                &mut self.down_events
            };
            events.push((now, desired.abs_diff(current)));
            let keep = self.spec.behavior.as_ref().map_or(0, |b| {
                b.up.policies
                    .iter()
                    .chain(&b.down.policies)
                    .map(|p| p.period_s)
                    .max()
                    .unwrap_or(0)
            });
            let cut = now - f64::from(keep);
            self.up_events.retain(|e| e.0 > cut);
            self.down_events.retain(|e| e.0 > cut);
        }
        Decision::Desired(desired)
    }

    /// Records `d` at `now`, overwriting one sample older than `cut` if there is one.
    fn store(&mut self, now: f64, d: u32, cut: f64) {
        match self.recommendations.iter().position(|r| r.0 < cut) {
            Some(i) => self.recommendations[i] = (now, d),
            None => self.recommendations.push((now, d)),
        }
    }

    /// `behavior` unset: the max over the downscale window, then at most max(2×, 4).
    fn normalize_legacy(&mut self, now: f64, current: u32, d: u32) -> u32 {
        let cut = now - f64::from(self.spec.downscale_stabilization_s);
        let stabilized = self
            .recommendations
            .iter()
            .filter(|r| r.0 >= cut)
            .map(|r| r.1)
            .fold(d, u32::max);
        self.store(now, d, cut);
        let limit = (2 * u64::from(current)).max(4).min(u64::from(u32::MAX)) as u32;
        stabilized.clamp(self.spec.min, self.spec.max.min(limit).max(self.spec.min))
    }

    /// `behavior` set: the two stabilization windows, then the policies.
    fn normalize(&mut self, now: f64, current: u32, d: u32, b: &Behavior) -> u32 {
        let up_cut = now - f64::from(b.up.stabilization_s);
        let down_cut = now - f64::from(b.down.stabilization_s);
        let (mut up_rec, mut down_rec) = (d, d);
        for &(t, r) in &self.recommendations {
            if t > up_cut {
                up_rec = up_rec.min(r);
            }
            if t > down_cut {
                down_rec = down_rec.max(r);
            }
        }
        self.store(now, d, up_cut.min(down_cut));
        let r = current.max(up_rec).min(down_rec);
        if r > current {
            let limit = self.limit(now, current, &b.up, true).max(current);
            r.min(self.spec.max.min(limit))
        } else if r < current {
            let limit = self.limit(now, current, &b.down, false).min(current);
            r.max(self.spec.min.max(limit))
        } else {
            r
        }
    }

    /// The furthest the policies of one direction allow from `current` now.
    fn limit(&self, now: f64, current: u32, rules: &Rules, up: bool) -> u32 {
        if rules.select == Select::Disabled {
            return current;
        }
        let within = |events: &[(f64, u32)], period: u32| -> i64 {
            events
                .iter()
                .filter(|e| e.0 > now - f64::from(period))
                .map(|e| i64::from(e.1))
                .sum()
        };
        let proposals = rules.policies.iter().map(|p| {
            let start = i64::from(current) - within(&self.up_events, p.period_s)
                + within(&self.down_events, p.period_s);
            let start = start.max(0) as f64;
            let v = f64::from(p.value);
            let x = match (p.kind, up) {
                (PolicyKind::Pods, true) => start + v,
                (PolicyKind::Percent, true) => (start * (1.0 + v / 100.0)).ceil(),
                (PolicyKind::Pods, false) => start - v,
                (PolicyKind::Percent, false) => (start * (1.0 - v / 100.0)).trunc(),
            };
            x.clamp(0.0, f64::from(u32::MAX)) as u32
        });
        // The largest change: the highest for scaling up, the lowest for scaling down.
        let most = up == (rules.select == Select::Max);
        let chosen = if most {
            proposals.max()
        } else {
            proposals.min()
        };
        chosen.unwrap_or(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avg(value: f64, target: f64) -> Reading {
        Reading {
            target: Target::AverageValue(target),
            value: Some(value),
        }
    }

    fn all(n: u32) -> Replicas {
        Replicas {
            spec: n,
            status: n,
            ready: n,
        }
    }

    fn desired(d: Decision) -> u32 {
        match d {
            Decision::Desired(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_proposal_is_the_ratio_to_the_target_outside_the_tolerance() {
        // Kubernetes' documented formula: ceil(current × value / target). Per-pod 200m over a
        // 100m target doubles; 50m halves (after the scale-down window); 105m is within 10 %.
        let mut h = Hpa::new(Spec::new(1, 100, Some(Behavior::kubernetes_default())));
        assert_eq!(desired(h.reconcile(0.0, all(4), &[avg(4.0 * 0.2, 0.1)])), 8);
        let mut h = Hpa::new(Spec::new(1, 100, Some(Behavior::kubernetes_default())));
        assert_eq!(
            desired(h.reconcile(0.0, all(4), &[avg(4.0 * 0.105, 0.1)])),
            4
        );
        let mut h = Hpa::new(Spec::new(1, 100, Some(Behavior::kubernetes_default())));
        assert_eq!(
            desired(h.reconcile(0.0, all(4), &[avg(4.0 * 0.05, 0.1)])),
            4
        );
        // The window (seeded at creation with 4) holds while the seed is inside it (strictly
        // after `now - 300`), then the halving applies.
        assert_eq!(
            desired(h.reconcile(285.0, all(4), &[avg(4.0 * 0.05, 0.1)])),
            4
        );
        assert_eq!(
            desired(h.reconcile(300.0, all(4), &[avg(4.0 * 0.05, 0.1)])),
            2
        );
    }

    #[test]
    fn per_direction_tolerances_replace_the_global_one() {
        // HPAConfigurableTolerance: up 0 (any excess scales out), down 0.5 (a halving is
        // still "within").
        let mut b = Behavior::kubernetes_default();
        b.up.tolerance = Some(0.0);
        b.down.tolerance = Some(0.5);
        b.down.stabilization_s = 0;
        let mut h = Hpa::new(Spec::new(1, 100, Some(b.clone())));
        // 105m per pod over 100m: 5 % over, outside a 0 tolerance: ceil(4 × 1.05) = 5.
        assert_eq!(
            desired(h.reconcile(0.0, all(4), &[avg(4.0 * 0.105, 0.1)])),
            5
        );
        let mut h = Hpa::new(Spec::new(1, 100, Some(b)));
        // 50m per pod: a ratio of 0.5, inside [1 - 0.5, 1 + 0]: no change.
        assert_eq!(
            desired(h.reconcile(0.0, all(4), &[avg(4.0 * 0.05, 0.1)])),
            4
        );
        // 40m: outside, halved and more.
        assert_eq!(
            desired(h.reconcile(15.0, all(4), &[avg(4.0 * 0.04, 0.1)])),
            2
        );
    }

    #[test]
    fn the_scale_up_window_takes_the_lowest_recommendation_in_it() {
        // The seeds' scaleUp: a 30 s window, Pods 2 per 60 s. A proposal of 8 from one
        // replica is held back while the seeded recommendation (1) is inside the window, and
        // once past it the policy allows +2.
        let mut b = Behavior::kubernetes_default();
        b.up.stabilization_s = 30;
        b.up.policies = vec![Policy {
            kind: PolicyKind::Pods,
            value: 2,
            period_s: 60,
        }];
        let mut h = Hpa::new(Spec::new(1, 5, Some(b)));
        let high = [avg(8.0, 1.0)];
        assert_eq!(desired(h.reconcile(0.0, all(1), &high)), 1);
        assert_eq!(desired(h.reconcile(15.0, all(1), &high)), 1);
        // At 30 s the seed (t = 0) is no longer strictly after now - 30.
        assert_eq!(desired(h.reconcile(30.0, all(1), &high)), 3);
        // The 60 s period remembers the +2: nothing more until it has passed.
        assert_eq!(desired(h.reconcile(45.0, all(3), &high)), 3);
        assert_eq!(desired(h.reconcile(90.0, all(3), &high)), 5);
    }

    #[test]
    fn the_default_scale_up_is_at_most_four_pods_or_double_per_15_s() {
        let mut h = Hpa::new(Spec::new(1, 100, Some(Behavior::kubernetes_default())));
        // Wants 100 from 1: +4 (5) beats ×2 (2).
        assert_eq!(desired(h.reconcile(0.0, all(1), &[avg(100.0, 1.0)])), 5);
        // 15 s later the event is outside the 15 s period: from 5, ×2 (10) beats +4 (9).
        assert_eq!(desired(h.reconcile(15.0, all(5), &[avg(100.0, 1.0)])), 10);
        assert_eq!(desired(h.reconcile(30.0, all(10), &[avg(100.0, 1.0)])), 20);
    }

    #[test]
    fn percent_scale_down_rounds_the_pods_removed_up() {
        // The documentation's example: Percent 10 per 60 s, 80 replicas going to 10: 8 go
        // first (80 → 72), and a period later 10 % of 72 = 7.2 rounds up to 8 (72 → 64).
        let mut b = Behavior::kubernetes_default();
        b.down = Rules {
            stabilization_s: 0,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyKind::Percent,
                value: 10,
                period_s: 60,
            }],
            tolerance: None,
        };
        let mut h = Hpa::new(Spec::new(1, 100, Some(b)));
        let want_10 = avg(10.0, 1.0);
        let mut n = 80;
        let mut seen = Vec::new();
        for k in 0..9 {
            n = desired(h.reconcile(f64::from(k) * 15.0, all(n), &[want_10]));
            seen.push(n);
        }
        assert_eq!(seen, [72, 72, 72, 72, 64, 64, 64, 64, 57]);
    }

    #[test]
    fn select_policy_max_takes_the_largest_change_min_the_smallest_disabled_none() {
        let rules = |select| Rules {
            stabilization_s: 0,
            select,
            policies: vec![
                Policy {
                    kind: PolicyKind::Pods,
                    value: 4,
                    period_s: 60,
                },
                Policy {
                    kind: PolicyKind::Percent,
                    value: 10,
                    period_s: 60,
                },
            ],
            tolerance: None,
        };
        let run = |select, from: u32| {
            let mut b = Behavior::kubernetes_default();
            b.down = rules(select);
            let mut h = Hpa::new(Spec::new(1, 100, Some(b)));
            desired(h.reconcile(0.0, all(from), &[avg(1.0, 1.0)]))
        };
        // From 80: 10 % is 8 pods, more than 4. From 30: 10 % is 3, fewer than 4.
        assert_eq!(run(Select::Max, 80), 72);
        assert_eq!(run(Select::Max, 30), 26);
        assert_eq!(run(Select::Min, 80), 76);
        assert_eq!(run(Select::Min, 30), 27);
        assert_eq!(run(Select::Disabled, 80), 80);
    }

    #[test]
    fn the_seeds_scale_down_waits_300_s_then_removes_one_pod_per_120_s() {
        // The seeds' ScaledObject: scaleDown stabilization 300 s, Pods 1 per 120 s.
        let mut b = Behavior::kubernetes_default();
        b.down = Rules {
            stabilization_s: 300,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyKind::Pods,
                value: 1,
                period_s: 120,
            }],
            tolerance: None,
        };
        let mut h = Hpa::new(Spec::new(1, 5, Some(b)));
        // Scaled out to 4 under load; the load stops at t = 0 (the queue is empty from then).
        let mut n = desired(h.reconcile(-15.0, all(1), &[avg(100.0, 25.0)]));
        assert_eq!(n, 4);
        let mut changes = Vec::new();
        let mut t = 0.0;
        while t <= 900.0 {
            let next = desired(h.reconcile(t, all(n), &[avg(0.0, 25.0)]));
            if next != n {
                changes.push((t, next));
            }
            n = next;
            t += 15.0;
        }
        // The recommendation of 4 at −15 s leaves the 300 s window at 285 s (strictly after the
        // cut counts), then one pod per 120 s.
        assert_eq!(changes, [(285.0, 3), (405.0, 2), (525.0, 1)]);
    }

    #[test]
    fn the_legacy_path_doubles_or_adds_four_and_holds_the_max_for_the_window() {
        let mut h = Hpa::new(Spec::new(1, 100, None));
        assert_eq!(desired(h.reconcile(0.0, all(1), &[avg(50.0, 1.0)])), 4);
        assert_eq!(desired(h.reconcile(15.0, all(4), &[avg(50.0, 1.0)])), 8);
        assert_eq!(desired(h.reconcile(30.0, all(8), &[avg(50.0, 1.0)])), 16);
        // Demand falls: the highest recommendation of the last 5 minutes (50) holds, capped
        // by max(2 × 16, 4).
        assert_eq!(desired(h.reconcile(45.0, all(16), &[avg(1.0, 1.0)])), 32);
        // Once every high sample is older than 300 s, down to the minimum at once.
        let mut n = 32;
        for k in 4..30 {
            n = desired(h.reconcile(f64::from(k) * 15.0, all(n), &[avg(1.0, 1.0)]));
        }
        assert_eq!(n, 1);
    }

    #[test]
    fn the_value_path_scales_ready_pods() {
        let mut h = Hpa::new(Spec::new(1, 20, Some(Behavior::kubernetes_default())));
        // Total 60 over a Value target of 20 is ratio 3 over 2 ready pods of 4 existing: 6.
        let r = Reading {
            target: Target::Value(20.0),
            value: Some(60.0),
        };
        let n = Replicas {
            spec: 4,
            status: 4,
            ready: 2,
        };
        assert_eq!(desired(h.reconcile(0.0, n, &[r])), 6);
        // AverageValue ignores readiness: ceil(60 / 20) = 3, held at 4 by the window.
        let mut h = Hpa::new(Spec::new(1, 20, Some(Behavior::kubernetes_default())));
        assert_eq!(desired(h.reconcile(0.0, n, &[avg(60.0, 20.0)])), 4);
    }

    #[test]
    fn a_failed_metric_blocks_scale_down_but_not_scale_up() {
        let failed = Reading {
            target: Target::AverageValue(1.0),
            value: None,
        };
        let mut b = Behavior::kubernetes_default();
        b.down.stabilization_s = 0;
        let mut h = Hpa::new(Spec::new(1, 20, Some(b.clone())));
        assert_eq!(
            h.reconcile(0.0, all(4), &[avg(1.0, 1.0), failed]),
            Decision::Failed
        );
        let mut h = Hpa::new(Spec::new(1, 20, Some(b)));
        assert_eq!(
            h.reconcile(0.0, all(4), &[avg(8.0, 1.0), failed]),
            Decision::Desired(8)
        );
        let mut h = Hpa::new(Spec::new(1, 20, None));
        assert_eq!(h.reconcile(0.0, all(4), &[failed]), Decision::Failed);
    }

    #[test]
    fn the_maximum_over_metrics_wins_and_zero_replicas_disable_the_hpa() {
        let mut h = Hpa::new(Spec::new(1, 20, Some(Behavior::kubernetes_default())));
        let d = h.reconcile(0.0, all(2), &[avg(2.0, 1.0), avg(12.0, 2.0)]);
        assert_eq!(d, Decision::Desired(6));
        let mut h = Hpa::new(Spec::new(1, 20, None));
        assert_eq!(
            h.reconcile(0.0, all(0), &[avg(5.0, 1.0)]),
            Decision::Disabled
        );
        // Outside the bounds the bound is set without looking at metrics.
        let mut h = Hpa::new(Spec::new(2, 5, None));
        assert_eq!(h.reconcile(0.0, all(9), &[]), Decision::Desired(5));
        assert_eq!(h.reconcile(15.0, all(1), &[]), Decision::Desired(2));
    }
}
