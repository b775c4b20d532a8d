//! The control loops a Kubernetes cluster runs over an inference deployment, in virtual
//! time and without I/O, so that a ScaledObject can be rehearsed before it is deployed.
//!
//! [`hpa`] is the HorizontalPodAutoscaler controller's reconcile step as Kubernetes implements
//! it (replica_calculator.go and horizontal.go; `../shared/reference/autoscaling.md` §1): the
//! per-metric proposals for External metrics with `AverageValue` and `Value` targets, the
//! tolerance, the maximum over metrics and the partial-failure rule, the recommendation seeded
//! at creation, the legacy normalization when `behavior` is unset, and with `behavior` the
//! stabilization windows (min over the scale-up window, max over the scale-down window) and
//! the `Pods`/`Percent` policies with their period bookkeeping and `selectPolicy`.
//!
//! Time is seconds as `f64` from any origin; the caller calls [`hpa::Hpa::reconcile`] once
//! per sync period (Kubernetes' default 15 s).

pub mod hpa;
