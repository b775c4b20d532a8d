// A one-off judgement (its own workspace, not built by CI): the jsonschema crate against
// inferscale's hand-written CRD validator, on KEDA's ScaledObject schema.
use std::time::Instant;
use inferscale_manifests::validate::{schema, schema_for};
use serde_json::{json, Value};

fn main() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/aws-eks/keda-scaledobject.yaml")).unwrap();
    let seeds: Value = inferscale_manifests::yaml::from_str(&text).unwrap();
    let crd = schema_for("keda.sh/v1alpha1", "ScaledObject").unwrap();
    let js = jsonschema::validator_for(crd).unwrap();
    let ours = |doc: &Value| { let mut e = Vec::new(); schema(crd, doc, "", &mut e); e };
    let theirs = |doc: &Value| js.iter_errors(doc).map(|e| format!("{} {}", e.instance_path(), e)).collect::<Vec<_>>();
    let mut cases: Vec<(&str, Value)> = vec![("seeds (valid)", seeds.clone())];
    let mut c = seeds.clone(); c["spec"]["scaleTargetRef"]["nmae"] = json!("x"); cases.push(("unknown field spec.scaleTargetRef.nmae", c));
    let mut c = seeds.clone(); c["spec"]["minReplicaCount"] = json!("one"); cases.push(("minReplicaCount: \"one\"", c));
    let mut c = seeds.clone(); c["spec"]["triggers"][0].as_object_mut().unwrap().remove("type"); cases.push(("trigger without type", c));
    let mut c = seeds.clone(); c["spec"]["triggers"][0]["metadata"]["threshold"] = json!(25); cases.push(("metadata.threshold: 25 (int, CRD wants string)", c));
    let mut c = seeds.clone(); c["spec"]["minReplicaCount"] = json!(3_000_000_000u64); cases.push(("minReplicaCount beyond int32", c));
    let mut c = seeds.clone(); c["spec"]["triggr"] = json!([]); cases.push(("unknown field spec.triggr", c));
    for (name, doc) in &cases {
        println!("{name}\n  ours:       {:?}\n  jsonschema: {:?}", ours(doc), theirs(doc));
    }
    for round in 0..3 {
        let n = 20_000;
        let t = Instant::now(); for _ in 0..n { std::hint::black_box(ours(&seeds)); } let a = t.elapsed() / n;
        let t = Instant::now(); for _ in 0..n { std::hint::black_box(js.is_valid(&seeds)); } let b = t.elapsed() / n;
        let t = Instant::now(); for _ in 0..200 { std::hint::black_box(jsonschema::validator_for(crd).unwrap()); } let c = t.elapsed() / 200;
        println!("round {round}: ours {a:?}/object, jsonschema {b:?}/object (+ {c:?} to compile the schema)");
    }
}
