//! What `inferscale scaler` (KEDA's `external` trigger) computes, without its I/O: a
//! trigger's `scalerMetadata` read strictly ([`metadata`]), and the value KEDA is given from
//! the pods' scrapes, with its failure semantics ([`decide`]). The scaler serves it over
//! gRPC; the rehearsal evaluates an `external` trigger with the same code on the simulated
//! pods' expositions, so what it rehearses is what the scaler would answer.

pub mod decide;
pub mod metadata;
