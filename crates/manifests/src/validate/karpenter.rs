//! The CEL rules (`x-kubernetes-validations`) of Karpenter's NodePool (karpenter.sh/v1) and
//! EC2NodeClass (karpenter.k8s.aws/v1) CRDs, which the OpenAPI validator does not evaluate:
//! the API server applies them on create, so a file that breaks one is refused at apply time.
//! Each rule below names the CRD rule it stands for; the rules that only compare an object
//! with its previous version (immutable fields) are left out.

use serde_json::Value;

use super::Finding;

/// Karpenter's rules for a NodePool or an EC2NodeClass (by `kind`), appended to `out`.
pub fn karpenter_rules(doc: &Value, out: &mut Vec<Finding>) {
    match doc["kind"].as_str() {
        Some("NodePool") => node_pool(&doc["spec"], out),
        Some("EC2NodeClass") => node_class(&doc["spec"], out),
        _ => {}
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn has(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

/// The label keys Karpenter keeps for itself: any under the `karpenter.sh` domain but
/// `karpenter.sh/capacity-type`, and `karpenter.sh/nodepool` and `kubernetes.io/hostname`.
fn restricted_label(key: &str) -> Option<&'static str> {
    let domain = key.split('/').next().unwrap_or(key);
    if key == "karpenter.sh/nodepool" {
        Some("label \"karpenter.sh/nodepool\" is restricted")
    } else if key == "kubernetes.io/hostname" {
        Some("label \"kubernetes.io/hostname\" is restricted")
    } else if key != "karpenter.sh/capacity-type" && domain.ends_with("karpenter.sh") {
        Some("label domain \"karpenter.sh\" is restricted")
    } else {
        None
    }
}

fn node_pool(spec: &Value, out: &mut Vec<Finding>) {
    let tpl = &spec["template"];
    for (key, _) in tpl["metadata"]["labels"].as_object().into_iter().flatten() {
        if let Some(why) = restricted_label(key) {
            out.push(Finding::error(
                "karpenter.restricted-label",
                format!("spec.template.metadata.labels.{key}"),
                why,
                "use a label outside the karpenter.sh domain",
            ));
        }
    }
    for (i, r) in items(&tpl["spec"]["requirements"]).iter().enumerate() {
        requirement(r, &format!("spec.template.spec.requirements[{i}]"), out);
    }
    let r = &tpl["spec"]["nodeClassRef"];
    for key in ["group", "kind", "name"] {
        if r[key].as_str() == Some("") {
            out.push(Finding::error(
                "karpenter.node-class-ref",
                format!("spec.template.spec.nodeClassRef.{key}"),
                format!("{key} may not be empty"),
                format!("set nodeClassRef.{key} (e.g. karpenter.k8s.aws, EC2NodeClass, its name)"),
            ));
        }
    }
    for (i, b) in items(&spec["disruption"]["budgets"]).iter().enumerate() {
        if has(b, "schedule") != has(b, "duration") {
            out.push(Finding::error(
                "karpenter.budget-schedule",
                format!("spec.disruption.budgets[{i}]"),
                "'schedule' must be set with 'duration'",
                "give both schedule and duration, or neither",
            ));
        }
    }
    if has(spec, "replicas") {
        let only_nodes = spec["limits"]
            .as_object()
            .is_none_or(|l| l.keys().all(|k| k == "nodes"));
        if !only_nodes {
            out.push(Finding::error(
                "karpenter.static-pool",
                "spec.limits",
                "only 'limits.nodes' is supported on static NodePools",
                "remove replicas, or limit nodes only",
            ));
        }
        if has(spec, "weight") {
            out.push(Finding::error(
                "karpenter.static-pool",
                "spec.weight",
                "'weight' is not supported on static NodePools",
                "remove replicas or weight",
            ));
        }
    }
}

/// One `requirements` entry: its key's domain, `In` with values, the numeric operators with
/// one non-negative integer, `minValues` within the values.
fn requirement(r: &Value, path: &str, out: &mut Vec<Finding>) {
    if let Some(why) = r["key"].as_str().and_then(restricted_label) {
        out.push(Finding::error(
            "karpenter.restricted-label",
            format!("{path}.key"),
            why,
            "select on a well-known label (karpenter.sh/capacity-type, karpenter.k8s.aws/…)",
        ));
    }
    let values = items(&r["values"]);
    match r["operator"].as_str().unwrap_or("") {
        "In" if values.is_empty() => out.push(Finding::error(
            "karpenter.requirement-values",
            format!("{path}.values"),
            "requirements with operator 'In' must have a value defined",
            "list the values, or use Exists",
        )),
        "Gt" | "Lt" | "Gte" | "Lte" => {
            let one_number = values.len() == 1
                && values[0]
                    .as_str()
                    .is_some_and(|v| v.parse::<i64>().is_ok_and(|n| n >= 0));
            if !one_number {
                out.push(Finding::error(
                    "karpenter.requirement-number",
                    format!("{path}.values"),
                    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                    "give one value, a whole number as a string (e.g. [\"4\"])",
                ));
            }
        }
        _ => {}
    }
    if r["operator"] == "In"
        && let Some(min) = r["minValues"].as_u64()
        && (values.len() as u64) < min
    {
        out.push(Finding::error(
            "karpenter.min-values",
            format!("{path}.minValues"),
            format!(
                "requirements with 'minValues' must have at least that many values specified in the 'values' field ({min} asked, {} given)",
                values.len()
            ),
            "list more values or lower minValues",
        ));
    }
}

/// The AMI families an alias may name, and the `amiFamily` each agrees with.
const ALIAS_FAMILIES: [(&str, &str); 6] = [
    ("al2", "AL2"),
    ("al2023", "AL2023"),
    ("bottlerocket", "Bottlerocket"),
    ("windows2019", "Windows2019"),
    ("windows2022", "Windows2022"),
    ("windows2025", "Windows2025"),
];

fn node_class(spec: &Value, out: &mut Vec<Finding>) {
    if has(spec, "role") == has(spec, "instanceProfile") {
        out.push(Finding::error(
            "karpenter.role",
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']",
            "give the nodes' IAM role (role) or an instance profile, not both",
        ));
    }
    if spec["role"].as_str() == Some("") {
        out.push(Finding::error(
            "karpenter.role",
            "spec.role",
            "role cannot be empty",
            "give the nodes' IAM role",
        ));
    }
    ami_selector(spec, out);
    selector_terms(spec, "subnetSelectorTerms", &["tags", "id"], out);
    selector_terms(
        spec,
        "securityGroupSelectorTerms",
        &["tags", "id", "name"],
        out,
    );
    for (key, _) in spec["tags"].as_object().into_iter().flatten() {
        let restricted = key.is_empty()
            || key == "eks:eks-cluster-name"
            || key.starts_with("kubernetes.io/cluster")
            || [
                "karpenter.sh/nodepool",
                "karpenter.sh/nodeclaim",
                "karpenter.k8s.aws/ec2nodeclass",
            ]
            .contains(&key.as_str());
        if restricted {
            out.push(Finding::error(
                "karpenter.restricted-tag",
                format!("spec.tags.{key}"),
                "an empty or restricted tag key (Karpenter and EKS set it)",
                "remove the tag",
            ));
        }
    }
    let mappings = items(&spec["blockDeviceMappings"]);
    if mappings.iter().filter(|m| m["rootVolume"] == true).count() > 1 {
        out.push(Finding::error(
            "karpenter.root-volume",
            "spec.blockDeviceMappings",
            "must have only one blockDeviceMappings with rootVolume",
            "mark one mapping rootVolume: true",
        ));
    }
    for (i, m) in mappings.iter().enumerate() {
        let ebs = &m["ebs"];
        if ebs.is_object() && !has(ebs, "snapshotID") && !has(ebs, "volumeSize") {
            out.push(Finding::error(
                "karpenter.ebs-size",
                format!("spec.blockDeviceMappings[{i}].ebs"),
                "snapshotID or volumeSize must be defined",
                "set volumeSize (e.g. 200Gi)",
            ));
        }
    }
}

fn ami_selector(spec: &Value, out: &mut Vec<Finding>) {
    let terms = items(&spec["amiSelectorTerms"]);
    let p = "spec.amiSelectorTerms";
    let any_alias = terms.iter().any(|t| has(t, "alias"));
    for (i, t) in terms.iter().enumerate() {
        if !["tags", "id", "name", "alias", "ssmParameter"]
            .iter()
            .any(|k| has(t, k))
        {
            out.push(Finding::error(
                "karpenter.ami-selector",
                format!("{p}[{i}]"),
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                "select the AMI by alias (al2023@latest), id, name, tags or SSM parameter",
            ));
        }
        for exclusive in ["id", "alias"] {
            let others = ["id", "alias", "tags", "name", "owner"]
                .iter()
                .filter(|k| **k != exclusive)
                .any(|k| has(t, k));
            if has(t, exclusive) && others {
                out.push(Finding::error(
                    "karpenter.ami-selector",
                    format!("{p}[{i}].{exclusive}"),
                    format!("'{exclusive}' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
                    format!("give {exclusive} alone in its term"),
                ));
            }
        }
        if let Some(alias) = t["alias"].as_str() {
            alias_rules(alias, &format!("{p}[{i}].alias"), out);
        }
    }
    if any_alias && terms.len() != 1 {
        out.push(Finding::error(
            "karpenter.ami-selector",
            p,
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            "keep the alias as the only term",
        ));
    }
    let alias_family = terms
        .iter()
        .filter_map(|t| t["alias"].as_str())
        .filter_map(|a| a.split('@').next())
        .find_map(|f| ALIAS_FAMILIES.iter().find(|(a, _)| *a == f));
    match (spec["amiFamily"].as_str(), alias_family) {
        (None, None) if !terms.is_empty() => out.push(Finding::error(
            "karpenter.ami-family",
            "spec.amiFamily",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
            "set amiFamily (AL2023, Bottlerocket, …) or select the AMI by alias",
        )),
        (Some(given), Some((alias, family))) if given != "Custom" && given != *family => {
            out.push(Finding::error(
                "karpenter.ami-family",
                "spec.amiFamily",
                format!(
                    "if set, amiFamily must be '{family}' or 'Custom' when using an {alias} alias"
                ),
                format!("set amiFamily: {family}, or remove it"),
            ))
        }
        _ => {}
    }
}

/// `family@version`, a family Karpenter knows, `latest` for Windows.
fn alias_rules(alias: &str, path: &str, out: &mut Vec<Finding>) {
    let (family, version) = alias.split_once('@').unwrap_or((alias, ""));
    if family.is_empty() || !family.chars().all(|c| c.is_ascii_alphanumeric()) || version.is_empty()
    {
        out.push(Finding::error(
            "karpenter.ami-alias",
            path,
            "'alias' is improperly formatted, must match the format 'family@version'",
            "write e.g. al2023@latest",
        ));
        return;
    }
    if !ALIAS_FAMILIES.iter().any(|(a, _)| *a == family) {
        out.push(Finding::error(
            "karpenter.ami-alias",
            path,
            "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
            "use al2023 or bottlerocket",
        ));
    } else if family.starts_with("windows") && version != "latest" {
        out.push(Finding::error(
            "karpenter.ami-alias",
            path,
            "windows families may only specify version 'latest'",
            format!("write {family}@latest"),
        ));
    }
}

/// Subnet and security-group selector terms: at least one term, each selecting by one of
/// `keys`, `id` (and `name`) alone, tags without empty keys or values.
fn selector_terms(spec: &Value, field: &str, keys: &[&str], out: &mut Vec<Finding>) {
    let terms = items(&spec[field]);
    let p = format!("spec.{field}");
    if spec.get(field).is_some() && terms.is_empty() {
        out.push(Finding::error(
            "karpenter.selector-terms",
            p.clone(),
            format!("{field} cannot be empty"),
            "select by the cluster's discovery tag (karpenter.sh/discovery: <cluster>)",
        ));
    }
    for (i, t) in terms.iter().enumerate() {
        if !keys.iter().any(|k| has(t, k)) {
            out.push(Finding::error(
                "karpenter.selector-terms",
                format!("{p}[{i}]"),
                format!("expected at least one, got none, {keys:?}"),
                "select by tags or id",
            ));
        }
        for (k, v) in t["tags"].as_object().into_iter().flatten() {
            if k.is_empty() || v.as_str() == Some("") {
                out.push(Finding::error(
                    "karpenter.empty-tag",
                    format!("{p}[{i}].tags"),
                    "empty tag keys or values aren't supported",
                    "fill in the tag (e.g. the cluster's name)",
                ));
            }
        }
    }
    // The CRD's rule refuses the list only when every term mixes `id` with another key.
    for exclusive in ["id", "name"].iter().filter(|k| keys.contains(k)) {
        let mixed = |t: &Value| {
            has(t, exclusive) && keys.iter().filter(|k| *k != exclusive).any(|k| has(t, k))
        };
        if !terms.is_empty() && terms.iter().all(mixed) {
            out.push(Finding::error(
                "karpenter.selector-terms",
                p.clone(),
                format!("'{exclusive}' is mutually exclusive, cannot be set with a combination of other fields in a selector term"),
                format!("give {exclusive} alone in its term"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn findings(doc: Value) -> String {
        let mut out = Vec::new();
        karpenter_rules(&doc, &mut out);
        out.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_node_pool_s_cel_rules() {
        let all = findings(json!({"kind": "NodePool", "spec": {
            "template": {
                "metadata": {"labels": {"karpenter.sh/custom": "x", "team": "ml"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": ""},
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": []},
                        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["four"]},
                        {"key": "kubernetes.io/hostname", "operator": "Exists"},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 2}
                    ]
                }
            },
            "disruption": {"budgets": [{"nodes": "0", "schedule": "@daily"}]}
        }}));
        for needle in [
            "spec.template.metadata.labels.karpenter.sh/custom: label domain",
            "requirements[0].values: requirements with operator 'In'",
            "requirements[1].values: requirements operator 'Gt'",
            "requirements[2].key: label \"kubernetes.io/hostname\" is restricted",
            "requirements[3].minValues",
            "nodeClassRef.name: name may not be empty",
            "budgets[0]: 'schedule' must be set with 'duration'",
        ] {
            assert!(all.contains(needle), "{needle}:\n{all}");
        }
        assert_eq!(all.lines().count(), 7, "{all}");
    }

    #[test]
    fn an_ec2_node_class_s_cel_rules() {
        let all = findings(json!({"kind": "EC2NodeClass", "spec": {
            "role": "r", "instanceProfile": "p",
            "amiFamily": "Bottlerocket",
            "amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-1", "name": "x"}],
            "subnetSelectorTerms": [],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": ""}}],
            "tags": {"karpenter.sh/nodepool": "x"},
            "blockDeviceMappings": [{"rootVolume": true, "ebs": {"volumeType": "gp3"}}, {"rootVolume": true, "ebs": {"volumeSize": "1Gi"}}]
        }}));
        for needle in [
            "spec: must specify exactly one of ['role', 'instanceProfile']",
            "amiSelectorTerms[1].id: 'id' is mutually exclusive",
            "spec.amiSelectorTerms: 'alias' is mutually exclusive",
            "spec.amiFamily: if set, amiFamily must be 'AL2023' or 'Custom'",
            "spec.subnetSelectorTerms: subnetSelectorTerms cannot be empty",
            "securityGroupSelectorTerms[0].tags: empty tag keys or values",
            "spec.tags.karpenter.sh/nodepool",
            "must have only one blockDeviceMappings with rootVolume",
            "blockDeviceMappings[0].ebs: snapshotID or volumeSize must be defined",
        ] {
            assert!(all.contains(needle), "{needle}:\n{all}");
        }
        let alias = |a: &str| {
            findings(
                json!({"kind": "EC2NodeClass", "spec": {"role": "r", "amiSelectorTerms": [{"alias": a}],
                "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}}),
            )
        };
        assert_eq!(alias("al2023@latest"), "");
        assert!(alias("al2023").contains("improperly formatted"));
        assert!(alias("ubuntu@latest").contains("family is not supported"));
        assert!(alias("windows2022@v1").contains("only specify version 'latest'"));
        let no_alias = findings(json!({"kind": "EC2NodeClass", "spec": {"role": "r",
            "amiSelectorTerms": [{"id": "ami-1"}]}}));
        assert!(no_alias.contains("must specify amiFamily"), "{no_alias}");
    }
}
