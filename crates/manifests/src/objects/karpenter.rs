//! Karpenter's objects, as far as inferscale writes and reads them: the `NodePool`
//! (karpenter.sh/v1) the GPU nodes come from, and the AWS `EC2NodeClass`
//! (karpenter.k8s.aws/v1) it launches them with.
//!
//! Field names and types follow the CRDs' OpenAPI v3 schemas (`schemas/NodePool.v1.openapi.json`,
//! `schemas/EC2NodeClass.v1.openapi.json`). The fields named are those a rehearsal of the
//! autoscaling reads (requirements, taints, disruption, limits, the pods' do-not-disrupt
//! annotation) and those the generator sets; every other field is kept in `extra` and written
//! back unchanged. The accessors give Karpenter's defaults where a field is absent.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Extra, ObjectMeta, Quantity, TemplateMeta};

/// The annotation that keeps Karpenter from voluntarily disrupting a node (on a Node or
/// NodeClaim: consolidation and drift) or a pod's node (consolidation, and drift unless the
/// NodeClaim sets a terminationGracePeriod). Expiry and forceful termination ignore it.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// A Karpenter `NodePool` (karpenter.sh/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    /// `karpenter.sh/v1`.
    pub api_version: String,
    /// `NodePool`.
    pub kind: String,
    /// Name and labels (a NodePool is cluster-scoped).
    pub metadata: ObjectMeta,
    /// What nodes it launches, when it removes them, how many at most.
    pub spec: NodePoolSpec,
}

/// `NodePool.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// The nodes' template.
    pub template: NodeClaimTemplate,
    /// When Karpenter removes or replaces nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// The most resources (`cpu`, `memory`, `nvidia.com/gpu`, `nodes`) the pool's nodes may
    /// hold together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Priority among NodePools that fit a pod (1..=100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Anything else (`replicas` of a static pool, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.template`: the NodeClaims the pool creates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    /// The nodes' labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// What the nodes are.
    pub spec: NodeClaimTemplateSpec,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.template.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// The provider's node class (an EC2NodeClass on AWS).
    pub node_class_ref: NodeClassRef,
    /// The labels an instance type must have (instance category, GPU name and count,
    /// capacity type, architecture, …).
    pub requirements: Vec<Requirement>,
    /// Taints every node carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints a node carries until something (a DaemonSet, a device plugin) removes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// How long a node lives before it is replaced (`720h` by default, or `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    /// How long a draining node waits for its pods before it is deleted anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `nodeClassRef`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassRef {
    /// `karpenter.k8s.aws` (or `eks.amazonaws.com` on EKS Auto Mode).
    pub group: String,
    /// `EC2NodeClass` (or `NodeClass`).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One node-selector requirement: `key`, `operator`, `values`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    /// The label (`karpenter.k8s.aws/instance-gpu-name`, `karpenter.sh/capacity-type`, …).
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte`, `Lte`.
    pub operator: String,
    /// The values (strings, numbers included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// How many of the values the instance types considered must cover at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The key (`nvidia.com/gpu`).
    pub key: String,
    /// The value, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
    /// Anything else (`timeAdded`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.disruption`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// `WhenEmpty`, `WhenEmptyOrUnderutilized` (the default) or `Balanced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<String>,
    /// How long a node must have stayed consolidatable (for `WhenEmpty`: empty) before it is
    /// removed: a duration (`15m`, the default `0s`) or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<String>,
    /// How many nodes may be disrupted at once (default: one budget of `10%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One disruption budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Nodes at once: a count (`"1"`) or a percentage of the pool (`"10%"`).
    pub nodes: String,
    /// The disruptions it limits (`Empty`, `Drifted`, `Underutilized`; all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
    /// A cron schedule when the budget applies (with `duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// For how long after each scheduled time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `consolidateAfter` (or `expireAfter`) read: a wait, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// After this long.
    Wait(Duration),
    /// `Never`.
    Never,
}

impl After {
    /// Reads Karpenter's form (`^(([0-9]+(s|m|h))+|Never)$`: `30s`, `15m`, `1h30m`, `Never`).
    ///
    /// ```
    /// use inferscale_manifests::objects::After;
    /// use std::time::Duration;
    /// assert_eq!(After::parse("1h5m"), Some(After::Wait(Duration::from_secs(3900))));
    /// assert_eq!(After::parse("Never"), Some(After::Never));
    /// assert_eq!(After::parse("5 minutes"), None);
    /// assert_eq!(After::parse("1.5h"), None);
    /// ```
    pub fn parse(s: &str) -> Option<After> {
        if s == "Never" {
            return Some(After::Never);
        }
        let mut total: u64 = 0;
        let mut rest = s;
        if rest.is_empty() {
            return None;
        }
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let n: u64 = rest[..digits].parse().ok()?;
            let unit = match rest[digits..].chars().next()? {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => return None,
            };
            total = total.checked_add(n.checked_mul(unit)?)?;
            rest = &rest[digits + 1..];
        }
        Some(After::Wait(Duration::from_secs(total)))
    }
}

impl NodePool {
    /// `consolidationPolicy`, with Karpenter's default.
    pub fn consolidation_policy(&self) -> &str {
        self.spec
            .disruption
            .as_ref()
            .and_then(|d| d.consolidation_policy.as_deref())
            .unwrap_or("WhenEmptyOrUnderutilized")
    }

    /// `consolidateAfter`, with Karpenter's default (`0s`); `None` when it is not a duration
    /// Karpenter takes.
    pub fn consolidate_after(&self) -> Option<After> {
        After::parse(
            self.spec
                .disruption
                .as_ref()
                .and_then(|d| d.consolidate_after.as_deref())
                .unwrap_or("0s"),
        )
    }

    /// The budgets, with Karpenter's default (one of `10%`).
    pub fn budgets(&self) -> Vec<Budget> {
        self.spec
            .disruption
            .as_ref()
            .and_then(|d| d.budgets.clone())
            .unwrap_or_else(|| {
                vec![Budget {
                    nodes: "10%".into(),
                    reasons: None,
                    schedule: None,
                    duration: None,
                    extra: Extra::new(),
                }]
            })
    }

    /// The requirement on `key`, if any.
    pub fn requirement(&self, key: &str) -> Option<&Requirement> {
        self.spec
            .template
            .spec
            .requirements
            .iter()
            .find(|r| r.key == key)
    }

    /// The limit on `resource` (`nvidia.com/gpu`, `cpu`, …), if any.
    pub fn limit(&self, resource: &str) -> Option<&Quantity> {
        self.spec.limits.as_ref()?.get(resource)
    }

    /// Whether the node template carries `karpenter.sh/do-not-disrupt: "true"` (its nodes are
    /// then never consolidated nor drifted).
    pub fn do_not_disrupt(&self) -> bool {
        self.spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(DO_NOT_DISRUPT))
            .is_some_and(|v| v == "true")
    }
}

/// An AWS `EC2NodeClass` (karpenter.k8s.aws/v1): how a NodePool's nodes are launched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClass {
    /// `karpenter.k8s.aws/v1`.
    pub api_version: String,
    /// `EC2NodeClass`.
    pub kind: String,
    /// Name and labels (cluster-scoped).
    pub metadata: ObjectMeta,
    /// The AMI, IAM role, network and disks.
    pub spec: EC2NodeClassSpec,
}

/// `EC2NodeClass.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// The IAM role the nodes run as (or `instanceProfile`, in `extra`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The AMI family, needed when no alias selects the AMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// Which AMI: an alias (`al2023@latest`), or ids, names, tags.
    pub ami_selector_terms: Vec<SelectorTerm>,
    /// Which subnets.
    pub subnet_selector_terms: Vec<SelectorTerm>,
    /// Which security groups.
    pub security_group_selector_terms: Vec<SelectorTerm>,
    /// The disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `RAID0`: the instance-store NVMe disks as one array for images and ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    /// Tags on the instances and volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Anything else (userData, kubelet, metadataOptions, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One selector term (AMI, subnet or security group): an alias, an id, a name or tags.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    /// An AMI alias: `family@version` (`al2023@latest`, `bottlerocket@v1.30.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// An AMI, subnet or security-group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// An AMI or security-group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tags to match (`karpenter.sh/discovery: <cluster>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Anything else (owner, ssmParameter).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One block-device mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// The device (`/dev/xvda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Whether it is the root volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<Ebs>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An EBS volume of a block-device mapping.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ebs {
    /// Its size (`200Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// `gp3`, `gp2`, `io2`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    /// Encrypted at rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Deleted with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Anything else (iops, throughput, kmsKeyID, snapshotID, …).
    #[serde(flatten)]
    pub extra: Extra,
}
