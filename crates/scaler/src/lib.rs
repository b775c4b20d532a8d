//! A KEDA external scaler (`inferscale scaler`): it reads queue depth and latency histograms
//! straight from the pods and answers KEDA's `externalscaler.ExternalScaler` service
//! (`proto/externalscaler.proto`: the package, service, messages and field numbers KEDA
//! v2.17+ uses).
//!
//! - [`metadata`]: a trigger's `scalerMetadata`, read strictly (errors name the key).
//! - [`decide`]: from the pods' scrapes to the value, with the failure semantics (some pods
//!   failing: computed from the rest; all failing or none: an error, never a silent 0).
//! - [`scrape`]: the pods scraped concurrently, each with a timeout, answers cached briefly.
//!
//! The gRPC transport, discovery through EndpointSlices and the HTTP side are the next
//! steps (issue 13).

pub mod decide;
pub mod metadata;
pub mod scrape;

pub use decide::{Answer, History, NoValue, PodResult, answer, desired_replicas};
pub use metadata::{Config, MetadataError, Metric, Pods};
