//! Pods and GPU nodes: what happens between the HPA raising `spec.replicas` and a replica
//! taking traffic, and after it is removed.
//!
//! A new pod is Pending until a node has a free GPU for it: a node that exists (or is being
//! launched) with room, else a new node from Karpenter after its provisioning delay. Once the
//! node is ready the pod pulls its image (skipped on a node that already pulled it), loads the
//! model and captures graphs (the engine profile's cold start unless overridden), warms up,
//! and becomes Ready. While it starts it counts in the Deployment's replicas, as it does for
//! the HPA. A pod removed by a scale-in drains (the preStop waits for in-flight requests);
//! when its node has no pod left, Karpenter consolidates it after `consolidateAfter` unless
//! the node is protected by `karpenter.sh/do-not-disrupt`. GPU-hours count node time, from
//! launch to removal.

use std::collections::HashMap;

use inferscale_rng::Rng;

/// A delay that does not parse: the text and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {reason}")]
pub struct DelayError {
    /// The delay as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A delay: fixed, uniform or normal (truncated at 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// Always this many seconds.
    Fixed(f64),
    /// Uniform between the two, seconds.
    Uniform(f64, f64),
    /// Normal with this mean and standard deviation, seconds, never below 0.
    Normal(f64, f64),
}

impl Delay {
    /// Parses `90s`, `60s..120s` (uniform) or `240s±30s` / `240s+-30s` (normal), with
    /// `parse` reading one duration.
    ///
    /// # Errors
    ///
    /// When a duration does not parse, or a range ends before it starts.
    pub fn parse<E: std::fmt::Display>(
        s: &str,
        parse: impl Fn(&str) -> Result<f64, E>,
    ) -> Result<Delay, DelayError> {
        let s = s.trim();
        let fail = |reason: String| DelayError {
            text: s.to_owned(),
            reason,
        };
        let one = |d: &str| parse(d.trim()).map_err(|e| fail(e.to_string()));
        if let Some((a, b)) = s.split_once("..") {
            let (a, b) = (one(a)?, one(b)?);
            if b < a {
                return Err(fail("the range's end is before its start".into()));
            }
            return Ok(Delay::Uniform(a, b));
        }
        if let Some((m, d)) = s.split_once('±').or_else(|| s.split_once("+-")) {
            return Ok(Delay::Normal(one(m)?, one(d)?));
        }
        parse(s).map(Delay::Fixed).map_err(|e| {
            fail(format!(
                "{e} (expected a duration, a range like 60s..120s, or 240s±30s)"
            ))
        })
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match *self {
            Delay::Fixed(v) => v,
            Delay::Uniform(a, b) => a + (b - a) * rng.next_f64(),
            Delay::Normal(m, sd) => (m + sd * rng.normal()).max(0.0),
        }
    }

    /// The mean, seconds.
    pub fn mean(&self) -> f64 {
        match *self {
            Delay::Fixed(v) => v,
            Delay::Uniform(a, b) => (a + b) / 2.0,
            Delay::Normal(m, _) => m,
        }
    }
}

impl std::fmt::Display for Delay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Delay::Fixed(v) => write!(f, "{v}s"),
            Delay::Uniform(a, b) => write!(f, "{a}s..{b}s"),
            Delay::Normal(m, sd) => write!(f, "{m}s±{sd}s"),
        }
    }
}

/// How pods start and nodes come and go.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// GPUs per pod (the engine's tensor-parallel size).
    pub gpus_per_pod: u32,
    /// Karpenter: from the pod Pending to the node Ready.
    pub node_provisioning: Delay,
    /// Image pull on a node that has not pulled it yet.
    pub image_pull: Delay,
    /// Weights, profiling, compile and graph capture.
    pub model_load: Delay,
    /// Warm-up before the readiness probe passes.
    pub warmup: Delay,
    /// `consolidateAfter`: how long a node stays empty before Karpenter removes it, seconds.
    pub consolidate_after_s: f64,
    /// Nodes carry `karpenter.sh/do-not-disrupt`: never consolidated.
    pub do_not_disrupt: bool,
    /// Nodes present at the start (ready, image pulled), at least enough for the initial
    /// replicas.
    pub initial_nodes: u32,
}

impl ClusterSpec {
    /// Pods per node.
    pub fn pods_per_node(&self) -> u32 {
        (self.gpus_per_node / self.gpus_per_pod.max(1)).max(1)
    }
}

/// One GPU node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Stable id.
    pub id: usize,
    /// Launched (billing starts).
    pub launched: f64,
    /// Ready for pods.
    pub ready_at: f64,
    /// Removed (billing ends).
    pub removed: Option<f64>,
    /// Pods on it.
    pub pods: Vec<usize>,
    /// Whether it has pulled the image (or has a pull under way that ends then).
    pub image_at: Option<f64>,
    /// Since when it has had no pod.
    pub empty_since: Option<f64>,
}

/// The nodes and where each pod runs.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The configuration.
    pub spec: ClusterSpec,
    nodes: Vec<Node>,
    pod_node: HashMap<usize, usize>,
    rng: Rng,
}

/// When a placed pod becomes ready, and its stages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Start {
    /// The node it landed on.
    pub node: usize,
    /// Whether that node was launched for it.
    pub new_node: bool,
    /// Seconds from creation to Ready.
    pub ready_after_s: f64,
}

impl Cluster {
    /// `spec.initial_nodes` nodes, ready at 0.
    pub fn new(spec: ClusterSpec, seed: u64) -> Cluster {
        let mut c = Cluster {
            nodes: Vec::new(),
            pod_node: HashMap::new(),
            rng: Rng::new(seed),
            spec,
        };
        for id in 0..c.spec.initial_nodes as usize {
            c.nodes.push(Node {
                id,
                launched: 0.0,
                ready_at: 0.0,
                removed: None,
                pods: Vec::new(),
                image_at: Some(0.0),
                empty_since: Some(0.0),
            });
        }
        c
    }

    /// Every node, present and removed.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Nodes not removed at `t`.
    pub fn live_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.removed.is_none()).count()
    }

    /// Places pod `pod` already running at time 0 (the initial replicas).
    pub fn place_running(&mut self, pod: usize) {
        let s = self.place(pod, 0.0);
        debug_assert!(!s.new_node || self.spec.initial_nodes == 0);
        if let Some(n) = self.nodes.get_mut(s.node) {
            n.ready_at = 0.0;
            n.launched = n.launched.min(0.0);
            n.image_at = Some(0.0);
        }
    }

    /// Places a new pod at `t` and says when it will be ready.
    pub fn place(&mut self, pod: usize, t: f64) -> Start {
        let per = self.spec.pods_per_node() as usize;
        let free = self
            .nodes
            .iter()
            .position(|n| n.removed.is_none() && n.pods.len() < per);
        let (i, new_node) = match free {
            Some(i) => (i, false),
            None => {
                let id = self.nodes.len();
                let delay = self.spec.node_provisioning.sample(&mut self.rng);
                self.nodes.push(Node {
                    id,
                    launched: t,
                    ready_at: t + delay,
                    removed: None,
                    pods: Vec::new(),
                    image_at: None,
                    empty_since: None,
                });
                (id, true)
            }
        };
        let node = &mut self.nodes[i];
        node.pods.push(pod);
        node.empty_since = None;
        let on_node = node.ready_at.max(t);
        let pulled = match node.image_at {
            Some(at) => at.max(on_node),
            None => {
                let at = on_node + self.spec.image_pull.sample(&mut self.rng);
                node.image_at = Some(at);
                at
            }
        };
        let ready = pulled
            + self.spec.model_load.sample(&mut self.rng)
            + self.spec.warmup.sample(&mut self.rng);
        self.pod_node.insert(pod, i);
        Start {
            node: i,
            new_node,
            ready_after_s: ready - t,
        }
    }

    /// Pod `pod` left at `t` (drained, or deleted before it was ready).
    pub fn release(&mut self, pod: usize, t: f64) {
        let Some(i) = self.pod_node.remove(&pod) else {
            return;
        };
        let n = &mut self.nodes[i];
        n.pods.retain(|p| *p != pod);
        if n.pods.is_empty() {
            n.empty_since = Some(t);
        }
    }

    /// Karpenter's consolidation at `t`: empty nodes past `consolidateAfter` go. Returns how
    /// many went.
    pub fn consolidate(&mut self, t: f64) -> usize {
        if self.spec.do_not_disrupt {
            return 0;
        }
        let after = self.spec.consolidate_after_s;
        let mut gone = 0;
        for n in &mut self.nodes {
            if n.removed.is_none()
                && n.empty_since
                    .is_some_and(|e| e + after <= t && n.ready_at <= t)
            {
                n.removed = Some(t);
                gone += 1;
            }
        }
        gone
    }

    /// GPU-hours used from 0 to `end`.
    pub fn gpu_hours(&self, end: f64) -> f64 {
        self.nodes
            .iter()
            .map(|n| (n.removed.unwrap_or(end).min(end) - n.launched.max(0.0)).max(0.0))
            .sum::<f64>()
            * f64::from(self.spec.gpus_per_node)
            / 3600.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ClusterSpec {
        ClusterSpec {
            gpus_per_node: 1,
            gpus_per_pod: 1,
            node_provisioning: Delay::Fixed(60.0),
            image_pull: Delay::Fixed(30.0),
            model_load: Delay::Fixed(50.0),
            warmup: Delay::Fixed(10.0),
            consolidate_after_s: 300.0,
            do_not_disrupt: false,
            initial_nodes: 1,
        }
    }

    fn secs(s: &str) -> Result<f64, String> {
        s.strip_suffix('s')
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{s:?} is not a duration"))
    }

    #[test]
    fn delays_parse_in_three_shapes() {
        assert_eq!(Delay::parse("90s", secs), Ok(Delay::Fixed(90.0)));
        assert_eq!(
            Delay::parse("60s..120s", secs),
            Ok(Delay::Uniform(60.0, 120.0))
        );
        assert_eq!(
            Delay::parse("240s±30s", secs),
            Ok(Delay::Normal(240.0, 30.0))
        );
        assert_eq!(
            Delay::parse("240s+-30s", secs),
            Ok(Delay::Normal(240.0, 30.0))
        );
        assert!(Delay::parse("120s..60s", secs).is_err());
        assert!(
            Delay::parse("soon", secs)
                .unwrap_err()
                .to_string()
                .contains("soon")
        );
        let mut rng = Rng::new(1);
        for _ in 0..100 {
            let v = Delay::Uniform(60.0, 120.0).sample(&mut rng);
            assert!((60.0..=120.0).contains(&v));
            assert!(Delay::Normal(1.0, 10.0).sample(&mut rng) >= 0.0);
        }
    }

    #[test]
    fn a_pod_waits_for_a_node_then_pulls_loads_and_warms_up() {
        let mut c = Cluster::new(spec(), 1);
        c.place_running(0);
        // No room on node 0: a new node (60 s), pull (30 s), load (50 s), warm-up (10 s).
        let s = c.place(1, 100.0);
        assert_eq!((s.node, s.new_node, s.ready_after_s), (1, true, 150.0));
        // The pod leaves; a later pod on the same node skips the pull.
        c.release(1, 400.0);
        let s = c.place(2, 500.0);
        assert_eq!((s.node, s.new_node, s.ready_after_s), (1, false, 60.0));
    }

    #[test]
    fn empty_nodes_are_consolidated_after_the_window_unless_protected() {
        let mut c = Cluster::new(spec(), 1);
        c.place_running(0);
        c.place(1, 0.0);
        c.release(1, 1000.0);
        assert_eq!(c.consolidate(1299.0), 0);
        assert_eq!(c.consolidate(1300.0), 1);
        assert_eq!(c.live_nodes(), 1);
        // One node from 0 to the end (2 h), one from 0 to 1300 s.
        assert!((c.gpu_hours(7200.0) - (2.0 + 1300.0 / 3600.0)).abs() < 1e-9);
        let mut p = Cluster::new(
            ClusterSpec {
                do_not_disrupt: true,
                ..spec()
            },
            1,
        );
        p.place(0, 0.0);
        p.release(0, 10.0);
        assert_eq!(p.consolidate(1e6), 0);
    }

    #[test]
    fn several_pods_share_a_node_with_room() {
        let mut c = Cluster::new(
            ClusterSpec {
                gpus_per_node: 4,
                initial_nodes: 0,
                ..spec()
            },
            1,
        );
        let a = c.place(0, 0.0);
        let b = c.place(1, 10.0);
        assert!(a.new_node && !b.new_node);
        assert_eq!(a.node, b.node);
        // The second pod waits for the same node and the same pull.
        assert_eq!(b.ready_after_s, 150.0 - 10.0);
    }
}
