//! The Kubernetes API as inferscale reads it, on kube-rs.
//!
//! - [`access`]: which API, and who we are there: `--kube-api` with a token file, a
//!   kubeconfig and its context (exec credential plugins such as `aws eks get-token` included,
//!   as kubectl runs them), or the pod's service account, in that order.
//! - [`discover`]: a Service's ready pods, from its EndpointSlices, listed then watched.
//! - [`live`]: the objects `check --kubeconfig` reads from a cluster, as JSON.
//! - `fake` (feature `fake`): a loopback server that answers like the API, for tests.

pub mod access;
pub mod discover;
#[cfg(feature = "fake")]
pub mod fake;
pub mod live;

pub use access::{Access, Kube, KubeError};
pub use discover::{Discovery, DiscoveryError, Endpoint};
