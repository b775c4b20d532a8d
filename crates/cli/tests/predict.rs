//! `inferscale predict` and `inferscale fidelity` end to end: the published measurements the
//! model is judged on, a capacity plan across GPUs, and a model brought as a Hugging Face
//! `config.json`.

#![allow(clippy::unwrap_used)]

mod common;

use common::{inferscale, stderr, stdout, tmp, workspace};
use serde_json::Value;

fn json_of(args: &[&str]) -> Value {
    let o = inferscale().args(args).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// The reference calibration set, as the repository carries it (`testdata/perf/`, a byte-for-byte
/// copy of `reference/perf/calibration_cases.clean.csv`).
fn reference_cases() -> String {
    workspace()
        .join("testdata/perf/calibration_cases.clean.csv")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_calibration_file_is_predicted_within_the_targets() {
    let path = reference_cases();
    let r = json_of(&["fidelity", &path, "--json"]);
    let median = |f: &str| r["per_family"][f]["median_ape"].as_f64().unwrap();
    // The targets: median absolute error ≤ 10 % for throughput, E2E and ITL, ≤ 20 %
    // for TTFT. The numbers come from the model and the harness facts, nothing per case.
    assert!(median("throughput") <= 0.10, "{}", median("throughput"));
    assert!(median("e2e") <= 0.10, "{}", median("e2e"));
    assert!(median("itl") <= 0.10, "{}", median("itl"));
    assert!(median("ttft") <= 0.20, "{}", median("ttft"));
    // Skipped cases are few, and each says why.
    let skipped = r["skipped"].as_array().unwrap();
    assert!(skipped.len() <= 6, "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|s| !s["reason"].as_str().unwrap().is_empty())
    );
    assert!(!r["harness_facts"].as_array().unwrap().is_empty());
    // Every case is a GPU, a model, a metric, measured and predicted.
    for c in r["cases"].as_array().unwrap() {
        assert!(c["predicted"].as_f64().unwrap() >= 0.0 && c["abs_error"].as_f64().unwrap() >= 0.0);
        assert!(c["ape"].is_null() || c["ape"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn a_model_from_its_config_json_predicts_as_the_built_in_one() {
    // Llama-3.1-8B's config.json as Hugging Face ships it (no `_inferscale` block).
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("crates/engine/models/Llama-3.1-8B.json"))
            .unwrap(),
    )
    .unwrap();
    cfg.as_object_mut().unwrap().remove("_inferscale");
    let file = tmp("predict", "config.json");
    std::fs::write(&file, cfg.to_string()).unwrap();
    let args = [
        "--gpu",
        "H100",
        "--input",
        "512",
        "--output",
        "128",
        "--concurrency",
        "16",
        "--json",
    ];
    let mut a = vec!["predict", "--model", "Llama-3.1-8B"];
    a.extend(args);
    let builtin = json_of(&a);
    let config = format!("my-llama={}", file.display());
    let mut b = vec!["predict", "--model-config", &config];
    b.extend(args);
    let brought = json_of(&b);
    let tput = |v: &Value| {
        v["predictions"][0]["summary"]["throughput_rps"]
            .as_f64()
            .unwrap()
    };
    let rel = tput(&brought) / tput(&builtin) - 1.0;
    // The built-in file also carries the parameter count HF reports; the bare config derives it.
    assert!(rel.abs() < 0.03, "{rel}");
    assert_eq!(brought["predictions"][0]["model"], "my-llama");

    // In a case file, a model that is not built in is skipped with what to do, and predicted
    // once its config is given.
    let cases = tmp("predict", "cases.csv");
    let header = std::fs::read_to_string(reference_cases()).unwrap();
    let header = header.lines().next().unwrap();
    std::fs::write(
        &cases,
        format!("{header}\nx,local,vLLM,,H100-SXM,1,1,acme/my-llama,bf16,,512,128,concurrency,16,120,,,,,,throughput_rps,20,req/s,high,\n"),
    )
    .unwrap();
    let cases = cases.to_string_lossy().into_owned();
    let skipped = json_of(&["fidelity", &cases, "--json"]);
    assert!(
        skipped["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("pass --model-config"),
        "{skipped}"
    );
    let done = json_of(&["fidelity", &cases, "--json", "--model-config", &config]);
    assert_eq!(done["cases"].as_array().unwrap().len(), 1, "{done}");
}

#[test]
fn a_capacity_plan_compares_gpus_at_an_slo_with_costs() {
    let r = json_of(&[
        "predict",
        "--gpu",
        "L40S,H100",
        "--price",
        "L40S=1.86",
        "--price",
        "H100=3.93",
        "--model",
        "Llama-3.1-8B",
        "--input",
        "512",
        "--output",
        "256",
        "--rps",
        "100",
        "--target-p95-e2e",
        "10s",
        "--json",
    ]);
    let gpus = r["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    for g in gpus {
        let p = &g["plan"];
        let replicas = p["replicas"].as_f64().unwrap();
        let per = p["per_replica_rps"].as_f64().unwrap();
        assert!(replicas * per >= 100.0 - 1e-6, "{p}");
        assert!(
            p["at_target"]["e2e"]["p95"].as_f64().unwrap() <= 10.0,
            "{p}"
        );
        assert!(p["usd_per_million_output_tokens"].as_f64().unwrap() > 0.0);
    }
    // A bigger GPU serves more per replica.
    assert!(
        gpus[1]["plan"]["per_replica_rps"].as_f64().unwrap()
            > gpus[0]["plan"]["per_replica_rps"].as_f64().unwrap()
    );
}

#[test]
fn the_names_people_serve_answer_and_a_typo_gets_suggestions() {
    for (model, gpu, tp) in [
        ("meta-llama/Llama-3.1-70B", "H100", "4"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "A10G", "1"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "L4", "1"),
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "H100", "1"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "A10G", "1"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "H200", "4"),
        ("Qwen/Qwen3.5-35B-A3B-FP8", "H100", "1"),
        ("01-ai/Yi-34B", "A100", "2"),
        ("deepseek-ai/DeepSeek-R1-0528", "H200", "8"),
        ("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "L40S", "1"),
        ("MiniMaxAI/MiniMax-M2.5", "H200", "4"),
        ("moonshotai/Kimi-K2.5", "B200", "8"),
    ] {
        let r = json_of(&[
            "predict",
            "--model",
            model,
            "--gpu",
            gpu,
            "--tp",
            tp,
            "--input",
            "217.4",
            "--output",
            "98.9",
            "--rps",
            "0.5",
            "--duration",
            "30s",
            "--json",
        ]);
        let s = &r["predictions"][0]["summary"];
        assert!(s["throughput_rps"].as_f64().unwrap() > 0.0, "{model}: {r}");
    }
    let o = inferscale()
        .args([
            "predict",
            "--model",
            "meta-llama/Lama-3.1-70B",
            "--gpu",
            "H100",
            "--rps",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown model \"meta-llama/Lama-3.1-70B\" (closest built-in: Llama-3.1-70B"),
        "{e}"
    );
}

#[test]
fn a_concurrency_sweep_is_one_command() {
    let r = json_of(&[
        "predict",
        "--model",
        "Qwen/Qwen3-32B",
        "--gpu",
        "H200",
        "--input",
        "1024",
        "--output",
        "256",
        "--concurrency",
        "4,16,64",
        "--requests",
        "128",
        "--json",
    ]);
    let p = r["predictions"].as_array().unwrap();
    assert_eq!(p.len(), 3);
    let field = |i: usize, f: &str| p[i]["summary"][f].as_f64().unwrap();
    // More clients: more throughput, each token slower, and every request of the 128 sent.
    assert!(field(0, "throughput_rps") < field(1, "throughput_rps"));
    assert!(field(1, "throughput_rps") < field(2, "throughput_rps"));
    assert!(p[0]["summary"]["tpot"]["p50"].as_f64() < p[2]["summary"]["tpot"]["p50"].as_f64());
    for x in p {
        assert_eq!(x["summary"]["completed"], 128, "{x}");
    }
    let text = inferscale()
        .args([
            "predict",
            "--model",
            "Qwen3-32B",
            "--gpu",
            "H200",
            "--concurrency",
            "4,16",
            "--requests",
            "32",
        ])
        .output()
        .unwrap();
    assert!(text.status.success());
    let t = stdout(&text);
    assert!(t.contains("clients") && t.contains("TPOT p50"), "{t}");
    assert_eq!(
        t.lines()
            .filter(|l| l.trim_start().starts_with("16 "))
            .count(),
        1,
        "{t}"
    );
}

#[test]
fn a_shape_or_a_request_trace_is_predicted_with_the_prefix_cache_it_implies() {
    // Six-turn conversations, each turn 384 new tokens after the history, 48-token answers:
    // the history is in the cache, so one replica sustains far more with it than without.
    let shape = |extra: &[&str]| {
        let mut args = vec![
            "predict",
            "--gpu",
            "L40S",
            "--model",
            "Ministral-3-8B",
            "--shape",
            "multi-turn:6",
            "--input",
            "384",
            "--output",
            "48",
            "--rps",
            "30",
            "--saturation",
            "--json",
        ];
        args.extend_from_slice(extra);
        json_of(&args)
    };
    let on = shape(&[]);
    let off = shape(&["--no-prefix-caching"]);
    let p = |v: &Value, k: &str| v["predictions"][0][k].clone();
    let hit = p(&on, "summary")["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!((0.6..0.8).contains(&hit), "{hit}");
    let off_hit = &p(&off, "summary")["prefix_cache_hit_rate"];
    assert!(
        off_hit.is_null() || off_hit.as_f64() == Some(0.0),
        "{off_hit}"
    );
    let (sat_on, sat_off) = (
        p(&on, "saturation_rps").as_f64().unwrap(),
        p(&off, "saturation_rps").as_f64().unwrap(),
    );
    assert!(sat_on > 1.5 * sat_off, "{sat_on} against {sat_off}");
    // What is sent is said: the prompts' own mean lengths, and the shape.
    assert_eq!(
        on["workload"]["sharing"],
        "shared-prefix prompts (multi-turn:6,16)"
    );
    let mean_in = on["workload"]["input"]["mean"].as_f64().unwrap();
    assert!((1400.0..1500.0).contains(&mean_in), "{mean_in}");
    // A request trace: its prompts at its own mean rate by default, its hash_ids' sharing
    // found in the cache within 5 points of what they imply (77.5 %).
    let trace = workspace().join("testdata/traces/chat-sessions.jsonl");
    let t = json_of(&[
        "predict",
        "--gpu",
        "L40S",
        "--model",
        "Ministral-3-8B",
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(t["workload"]["load"]["rps"].as_f64().unwrap(), 1.007);
    let sum = &t["predictions"][0]["summary"];
    assert_eq!(sum["completed"], 331);
    let hit = sum["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!((hit - 0.775).abs() < 0.05, "{hit}");
    // A shape's lengths must be whole tokens; a trace and a pool are not both meant.
    let o = inferscale()
        .args(["predict", "--gpu", "L40S", "--model", "Ministral-3-8B"])
        .args(["--shape", "multi-turn:6", "--input", "217.4", "--rps", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--input 217.4"), "{}", stderr(&o));
}
