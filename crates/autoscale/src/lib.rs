//! The control loops a Kubernetes cluster runs over an inference deployment, in virtual
//! time and without I/O, so that a ScaledObject can be rehearsed before it is deployed.
//!
//! - [`hpa`]: the HorizontalPodAutoscaler controller's reconcile step as Kubernetes implements
//!   it (replica_calculator.go and horizontal.go; `../shared/reference/autoscaling.md` §1):
//!   the per-metric proposals for External metrics with `AverageValue` and `Value` targets,
//!   the tolerance, the maximum over metrics and the partial-failure rule, the recommendation
//!   seeded at creation, the legacy normalization when `behavior` is unset, and with
//!   `behavior` the stabilization windows (min over the scale-up window, max over the
//!   scale-down window) and the `Pods`/`Percent` policies with their period bookkeeping and
//!   `selectPolicy`.
//! - [`keda`]: KEDA's operator and metrics server (§2): the ScaledObject read with KEDA's
//!   defaults and refusals, polling, activation, cooldown, fallback, `useCachedMetrics`,
//!   `scalingModifiers` (whose formulas [`formula`] parses).
//! - [`alerts`]: alerting rules evaluated as Prometheus' rule manager does (an instance per
//!   series, pending, firing after `for`, `keep_firing_for`), read from a PrometheusRule or
//!   rule file; the rehearsal and `inferscale monitor` share it.
//! - [`cluster`]: pods and GPU nodes: Karpenter's provisioning, image pulls, model load,
//!   warm-up, drain on scale-in, consolidation, GPU-hours.
//! - [`traffic`]: the offered rate (a CSV trace or a pattern) and its seeded arrivals.
//! - [`rehearse`]: all of it over simulated replicas (the engine's fleet), with Prometheus'
//!   scrapes into the PromQL store, the triggers' own queries and the alert rules evaluated
//!   on the same series; a timeline, scale events, alerts and a summary.
//!
//! Time is seconds as `f64` from the start; nothing reads a clock, and the same seed gives
//! the same result.

pub mod alerts;
pub mod cluster;
pub mod external;
pub mod formula;
pub mod hpa;
pub mod keda;
pub mod rehearse;
pub mod replica;
pub mod signals;
pub mod traffic;
pub mod tune;
