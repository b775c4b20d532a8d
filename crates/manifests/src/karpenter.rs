//! The Karpenter `NodePool` and `EC2NodeClass` the GPU nodes come from
//! (`karpenter-nodepool.yaml`): GPU instances only, tainted so that only GPU pods land there,
//! removed only once empty and only after the HPA's scale-in window and a cold start, one at a
//! time, and capped at what the ScaledObject's maximum needs.
//!
//! The timing rules are functions ([`consolidate_after_s`], [`replicas_per_node`],
//! [`nodes_for`], [`gpu_limit`], [`start_on_ready_node_s`]) so that the README and a rehearsal
//! of the autoscaling use the same ones the manifest was written from.

use std::time::Duration;

use inferscale_analysis::Thresholds;
use inferscale_catalog::units::format_duration;

use crate::keda::scale_down_window_s;
use std::collections::BTreeMap;

use crate::objects::{
    BlockDeviceMapping, Budget, Disruption, EC2NodeClass, EC2NodeClassSpec, Ebs, Extra,
    NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassRef, NodePool, NodePoolSpec, ObjectMeta,
    Quantity, Requirement, SelectorTerm, Taint, TemplateMeta,
};
use crate::yaml::{ExplainError, Explained};
use crate::{GenerateError, Options};

/// The taint on the pool's nodes and the toleration key of the pods allowed on them: the
/// NVIDIA device plugin's resource name, as the seeds' NodePool and Deployment spell it.
pub const GPU_TAINT: &str = "nvidia.com/gpu";

/// The most GPUs per node taken (EC2's largest GPU instances, p4d, p5 or g6e.48xlarge, have
/// 8; twice that leaves room), for checking `gpus_per_node`.
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// The largest root volume the EC2NodeClass schema takes (`volumeSize` up to `59000Gi`).
pub const MAX_ROOT_VOLUME_GIB: u32 = 59_000;

/// The capacity types Karpenter knows (`karpenter.sh/capacity-type`).
pub const CAPACITY_TYPES: [&str; 3] = ["on-demand", "spot", "reserved"];

/// The NodePool's (and the EC2NodeClass's) name: `<deployment>-gpu`.
pub fn pool_name(o: &Options) -> String {
    format!("{}-gpu", o.deployment)
}

/// How many replicas one node holds: as many as its GPUs fit, at least one (a node with
/// fewer GPUs than a replica needs is refused by [`check`]).
pub fn replicas_per_node(o: &Options) -> u32 {
    (o.nodes.gpus_per_node / o.nodes.gpus_per_replica.max(1)).max(1)
}

/// How many nodes `replicas` replicas need (one per replica unless a node holds more).
pub fn nodes_for(replicas: u32, o: &Options) -> u32 {
    replicas.div_ceil(replicas_per_node(o))
}

/// `limits.nvidia.com/gpu`: the GPUs of the nodes the ScaledObject's `maxReplicaCount` needs.
/// Karpenter counts the GPUs of the nodes it launched, not those pods requested, so the limit
/// is rounded up to whole nodes; with one replica per node it is `max_replicas ×
/// gpus_per_replica`.
pub fn gpu_limit(o: &Options) -> u64 {
    u64::from(nodes_for(o.max_replicas, o)) * u64::from(o.nodes.gpus_per_node)
}

/// `disruption.consolidateAfter`, seconds: how long a node stays after its last vLLM pod left,
/// the HPA's scale-down stabilization window plus one cold start.
///
/// The HPA removed that pod only after demand had been lower for one window; Karpenter asks
/// for the same evidence again before it removes the node, plus a cold start. So a replica
/// the HPA asks back within that time lands on a node that is up and skips the node's
/// provisioning, and an idle GPU node costs at most that long per scale-in.
pub fn consolidate_after_s(t: &Thresholds, o: &Options) -> u32 {
    match &o.policy {
        Some(p) => p.consolidate_after_s,
        None => scale_down_window_s(t, o).saturating_add(o.cold_start_s),
    }
}

/// Seconds a new replica takes on a node that is already up (kept by `consolidateAfter`, or
/// with GPUs to spare): its cold start less the node's provisioning.
pub fn start_on_ready_node_s(o: &Options) -> u32 {
    o.cold_start_s.saturating_sub(o.nodes.provisioning_s)
}

/// A duration as Karpenter's schema takes it (`^([0-9]+(s|m|h))+$`): `15m`, `1h5m`, `0s`.
pub(crate) fn karpenter_duration(secs: u32) -> String {
    if secs == 0 {
        "0s".into()
    } else {
        format_duration(Duration::from_secs(u64::from(secs)))
    }
}

/// Checks the node options (and the pool name they give): a GPU name Karpenter's label
/// carries, GPU counts that fit an instance, known capacity types, a volume the schema takes.
pub fn check(o: &Options) -> Result<(), GenerateError> {
    let n = &o.nodes;
    let value = |flag: &'static str, value: String, why: &str| GenerateError::Value {
        flag,
        value,
        why: why.to_owned(),
    };
    let name_ok = !n.gpu_name.is_empty()
        && n.gpu_name.len() <= 63
        && n.gpu_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && n.gpu_name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && n.gpu_name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !name_ok {
        return Err(value(
            "gpu-name",
            n.gpu_name.clone(),
            "Karpenter's karpenter.k8s.aws/instance-gpu-name values are lowercase letters and digits (l40s, a10g, l4, h100)",
        ));
    }
    if !(1..=MAX_GPUS_PER_NODE).contains(&n.gpus_per_replica) {
        return Err(value(
            "gpus-per-replica",
            n.gpus_per_replica.to_string(),
            &format!("a replica requests 1 to {MAX_GPUS_PER_NODE} GPUs"),
        ));
    }
    if !(n.gpus_per_replica..=MAX_GPUS_PER_NODE).contains(&n.gpus_per_node) {
        return Err(value(
            "gpus-per-node",
            n.gpus_per_node.to_string(),
            &format!(
                "a node has at least the GPUs of one replica ({}) and at most {MAX_GPUS_PER_NODE}",
                n.gpus_per_replica
            ),
        ));
    }
    if n.capacity_types.is_empty() {
        return Err(value(
            "capacity-types",
            String::new(),
            "give at least one of on-demand, spot, reserved",
        ));
    }
    for (k, c) in n.capacity_types.iter().enumerate() {
        if !CAPACITY_TYPES.contains(&c.as_str()) {
            return Err(value(
                "capacity-types",
                c.clone(),
                "a capacity type is on-demand, spot or reserved",
            ));
        }
        if n.capacity_types[..k].contains(c) {
            return Err(value("capacity-types", c.clone(), "given twice"));
        }
    }
    if !(1..=MAX_ROOT_VOLUME_GIB).contains(&n.root_volume_gib) {
        return Err(value(
            "root-volume",
            n.root_volume_gib.to_string(),
            &format!("an EBS root volume is 1 to {MAX_ROOT_VOLUME_GIB} GiB"),
        ));
    }
    let pool = pool_name(o);
    if pool.len() > 63 {
        return Err(value(
            "deployment",
            o.deployment.clone(),
            &format!(
                "the NodePool is named after it ({pool}), and a NodePool's name is a node label value: at most 63 characters"
            ),
        ));
    }
    Ok(())
}

/// One `requirements` entry with operator `In`.
fn requirement_in(key: &str, values: Vec<String>) -> Requirement {
    Requirement {
        key: key.to_owned(),
        operator: "In".to_owned(),
        values,
        min_values: None,
        extra: Extra::new(),
    }
}

/// The instance requirements, each with why (a comment on its values, by index).
fn requirements(o: &Options) -> Vec<(Requirement, String)> {
    let n = &o.nodes;
    vec![
        (
            requirement_in(
                "karpenter.k8s.aws/instance-category",
                vec!["g".into(), "p".into()],
            ),
            "EC2's NVIDIA GPU instance categories; the GPU name below narrows them to the families\nthat carry it, without naming a family (a new one with the same GPU stays allowed).".into(),
        ),
        (
            requirement_in("karpenter.k8s.aws/instance-gpu-name", vec![n.gpu_name.clone()]),
            "The thresholds hold for the GPU they were measured on: this must be that GPU.".into(),
        ),
        (
            requirement_in(
                "karpenter.k8s.aws/instance-gpu-count",
                vec![n.gpus_per_node.to_string()],
            ),
            format!(
                "{} GPU{} per node, {} per replica: {} replica{} per node.",
                n.gpus_per_node,
                if n.gpus_per_node == 1 { "" } else { "s" },
                n.gpus_per_replica,
                replicas_per_node(o),
                if replicas_per_node(o) == 1 { "" } else { "s" }
            ),
        ),
        (
            requirement_in("karpenter.sh/capacity-type", n.capacity_types.clone()),
            "Spot GPUs can be reclaimed with two minutes' notice, less than a replica's cold start:\nadd spot only if the remaining replicas can carry the load meanwhile.".into(),
        ),
        (
            requirement_in("kubernetes.io/arch", vec!["amd64".into()]),
            "The seeds' vLLM image is amd64, as the seeds' NodePool requires.".into(),
        ),
    ]
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(crate::k8s::string_map(pairs))
}

/// A cluster-scoped object's metadata (no namespace).
fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: name.to_owned(),
        labels: labels(&[("app.kubernetes.io/managed-by", "inferscale")]),
        ..ObjectMeta::default()
    }
}

/// The NodePool, with why each setting is what it is.
pub fn node_pool(t: &Thresholds, o: &Options) -> Explained<NodePool> {
    let pool = pool_name(o);
    let window = scale_down_window_s(t, o);
    let after = consolidate_after_s(t, o);
    let limit = gpu_limit(o);
    let (requirements, why): (Vec<_>, Vec<_>) = requirements(o).into_iter().unzip();
    let object = NodePool {
        api_version: "karpenter.sh/v1".to_owned(),
        kind: "NodePool".to_owned(),
        metadata: metadata(&pool),
        spec: NodePoolSpec {
            template: NodeClaimTemplate {
                metadata: Some(TemplateMeta {
                    labels: labels(&[("amiFamily", "al2023")]),
                    annotations: None,
                    extra: Extra::new(),
                }),
                spec: NodeClaimTemplateSpec {
                    node_class_ref: NodeClassRef {
                        group: "karpenter.k8s.aws".to_owned(),
                        kind: "EC2NodeClass".to_owned(),
                        name: pool.clone(),
                        extra: Extra::new(),
                    },
                    requirements,
                    taints: vec![Taint {
                        key: GPU_TAINT.to_owned(),
                        value: None,
                        effect: "NoSchedule".to_owned(),
                        extra: Extra::new(),
                    }],
                    startup_taints: Vec::new(),
                    expire_after: Some("720h".to_owned()),
                    termination_grace_period: None,
                    extra: Extra::new(),
                },
                extra: Extra::new(),
            },
            disruption: Some(Disruption {
                consolidation_policy: Some("WhenEmpty".to_owned()),
                consolidate_after: Some(karpenter_duration(after)),
                budgets: Some(vec![Budget {
                    nodes: "1".to_owned(),
                    reasons: None,
                    schedule: None,
                    duration: None,
                    extra: Extra::new(),
                }]),
                extra: Extra::new(),
            }),
            limits: Some(BTreeMap::from([(
                GPU_TAINT.to_owned(),
                Quantity::Number(limit.into()),
            )])),
            weight: None,
            extra: Extra::new(),
        },
    };
    let header = format!(
        "{}\n\nApply once per cluster, after filling in the EC2NodeClass's placeholders (the second\ndocument):\n\nenvsubst < karpenter-nodepool.yaml | kubectl apply -f -",
        crate::header(
            t,
            &format!(
                "Karpenter NodePool for the vLLM replicas: {} GPU nodes, removed only when empty.",
                o.nodes.gpu_name
            ),
        )
    );
    let mut e = Explained::new(header, object);
    for (k, why) in why.into_iter().enumerate() {
        e.comment(format!("spec.template.spec.requirements[{k}].values"), why);
    }
    e.comment(
        "spec.template.metadata",
        "The seeds' NVIDIA device plugin chart runs on nodes labelled amiFamily: al2023 (its\nnodeSelector); without the plugin a node never offers nvidia.com/gpu and the pods stay\nPending. Keep the label in step with the EC2NodeClass's AMI.",
    )
    .comment(
        "spec.template.spec.taints",
        format!(
            "Only pods that tolerate {GPU_TAINT} land on these nodes: the vLLM pods (vllm-deployment-patch.yaml\nadds the toleration) and the GPU DaemonSets (the NVIDIA device plugin, the DCGM exporter).\nAnything else would hold a GPU node up, and an empty node is what consolidation removes."
        ),
    )
    .comment(
        "spec.template.spec.expireAfter",
        "Karpenter's default, written out: nodes are removed after 30 days. Expiry is forceful\n(karpenter.sh/do-not-disrupt does not hold it off, nor do the budgets below), so the replica\non an expiring node is evicted, drained by its preStop hook, and its replacement pays a cold\nstart on a new node. Never keeps nodes until you replace them.",
    )
    .comment(
        "spec.disruption.consolidationPolicy",
        "WhenEmpty, not WhenEmptyOrUnderutilized: a node is removed only once no vLLM pod runs on\nit. Underutilized consolidation would evict a serving replica to pack it elsewhere, and the\nreplica would pay a cold start (minutes of loading weights and warming up) while the others\ncarry its load. The pods' karpenter.sh/do-not-disrupt annotation (vllm-deployment-patch.yaml)\nblocks that too; this keeps the pool safe for pods without it.",
    )
    .comment(
        "spec.disruption.consolidateAfter",
        format!(
            "{after} s: the ScaledObject's scale-down stabilization window ({window} s) plus a cold start\n({} s). The HPA removed the node's last replica after {window} s of lower demand; the node\nwaits as long again plus a cold start, so a replica asked back meanwhile skips the node's\nprovisioning ({} s), and an idle GPU node costs at most this long per scale-in.",
            o.cold_start_s, o.nodes.provisioning_s
        ),
    )
    .comment(
        "spec.disruption.budgets",
        "At most one node disrupted at a time, whether empty or drifted (after an AMI release).",
    )
    .comment(
        "spec.limits",
        format!(
            "{limit} GPUs: the {} node{} the ScaledObject's maximum of {} replicas needs ({} GPU{} each).\nKarpenter launches nothing past it, so a runaway scale-out cannot buy more GPUs.",
            nodes_for(o.max_replicas, o),
            if nodes_for(o.max_replicas, o) == 1 { "" } else { "s" },
            o.max_replicas,
            o.nodes.gpus_per_node,
            if o.nodes.gpus_per_node == 1 { "" } else { "s" },
        ),
    );
    e
}

/// The placeholder the user fills (envsubst, or by hand), as the seeds write it.
const CLUSTER: &str = "${CLUSTER_NAME}";

fn discovery() -> Vec<SelectorTerm> {
    vec![SelectorTerm {
        tags: labels(&[("karpenter.sh/discovery", CLUSTER)]),
        ..SelectorTerm::default()
    }]
}

/// The EC2NodeClass the NodePool launches from: a skeleton with placeholders.
pub fn node_class(o: &Options) -> Explained<EC2NodeClass> {
    let gib = o.nodes.root_volume_gib;
    let object = EC2NodeClass {
        api_version: "karpenter.k8s.aws/v1".to_owned(),
        kind: "EC2NodeClass".to_owned(),
        metadata: metadata(&pool_name(o)),
        spec: EC2NodeClassSpec {
            role: Some(format!("KarpenterNodeRole-{CLUSTER}")),
            ami_family: None,
            ami_selector_terms: vec![SelectorTerm {
                alias: Some("al2023@latest".to_owned()),
                ..SelectorTerm::default()
            }],
            subnet_selector_terms: discovery(),
            security_group_selector_terms: discovery(),
            block_device_mappings: vec![BlockDeviceMapping {
                device_name: Some("/dev/xvda".to_owned()),
                root_volume: Some(true),
                ebs: Some(Ebs {
                    volume_size: Some(format!("{gib}Gi")),
                    volume_type: Some("gp3".to_owned()),
                    encrypted: Some(true),
                    delete_on_termination: Some(true),
                    extra: Extra::new(),
                }),
                extra: Extra::new(),
            }],
            instance_store_policy: None,
            tags: None,
            extra: Extra::new(),
        },
    };
    let mut e = Explained::new(
        "The EC2NodeClass the NodePool launches from: a skeleton to complete for your cluster.",
        object,
    );
    e.comment(
        "spec.role",
        "Fill in: the IAM role the nodes run as (the one Karpenter's setup created), and below the\ncluster's name in the discovery tags of its subnets and security groups. ${CLUSTER_NAME} is a\nplaceholder: envsubst < karpenter-nodepool.yaml | kubectl apply -f -",
    )
    .comment(
        "spec.amiSelectorTerms",
        "EKS-optimized AL2023; Karpenter picks its NVIDIA variant for GPU instances. @latest moves\nto each new release, which drifts every node (replaced one at a time, and not while a vLLM\npod with do-not-disrupt runs on it): pin a version (al2023@vYYYYMMDD) to choose when.\nbottlerocket@latest works too (its NVIDIA variant carries the device plugin; drop the\nNodePool's amiFamily label, and give the volume below to /dev/xvdb, Bottlerocket's data\nvolume).",
    )
    .comment(
        "spec.blockDeviceMappings",
        format!(
            "A {gib} GiB root volume: the OS, the vLLM image (tens of GB) and the model's weights\n(about 2 bytes a parameter: 16 GB for an 8B model), with room for the next version during a\nrollout. On families with NVMe instance store (g6e has), instanceStorePolicy: RAID0 (the\nseeds' setting) puts images and ephemeral storage there instead."
        ),
    );
    e
}

/// `karpenter-nodepool.yaml`: the NodePool, then its EC2NodeClass, as two YAML documents.
pub fn node_pool_file(t: &Thresholds, o: &Options) -> Result<String, ExplainError> {
    Ok(format!(
        "{}---\n{}",
        node_pool(t, o).to_yaml()?,
        node_class(o).to_yaml()?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_karpenter_reads_them() {
        for (secs, text) in [
            (0, "0s"),
            (45, "45s"),
            (90, "1m30s"),
            (600, "10m"),
            (3900, "1h5m"),
        ] {
            assert_eq!(karpenter_duration(secs), text);
            assert_eq!(
                crate::objects::After::parse(text),
                Some(crate::objects::After::Wait(Duration::from_secs(u64::from(
                    secs
                ))))
            );
        }
    }

    #[test]
    fn a_replica_on_a_node_already_up_skips_the_provisioning() {
        let mut o = Options::example();
        assert_eq!(start_on_ready_node_s(&o), 300 - 180);
        o.cold_start_s = 60;
        assert_eq!(start_on_ready_node_s(&o), 0);
    }
}
