//! The predictor's behaviour, each property one a benchmark client would check: loads of
//! every kind, timeouts, prefix sharing, saturation and capacity plans, and the case files
//! of `fidelity`.

#![allow(clippy::unwrap_used)]

use inferscale_engine::hardware::find_gpu;
use inferscale_engine::model::find_model;
use inferscale_engine::{EngineConfig, Rng, profile};
use inferscale_predict::capacity::{plan, saturation_rps};
use inferscale_predict::fidelity::{Builtin, CaseFileError, Options, read_cases, run};
use inferscale_predict::workload::{Dist, Load, SharedPrefix, Workload};
use inferscale_predict::{Summary, predict};

fn eks() -> EngineConfig {
    profile("aws-eks-ministral-8b-l40s").unwrap()
}

fn h100_8b() -> EngineConfig {
    EngineConfig::new(
        find_gpu("H100").unwrap(),
        find_model("Llama-3.1-8B").unwrap(),
    )
}

#[test]
fn length_draws_keep_their_bounds_and_mean() {
    let mut rng = Rng::new(3);
    let d = Dist::Normal {
        mean: 500.0,
        std: 50.0,
        min: 400,
        max: 560,
    };
    let xs: Vec<u32> = (0..20_000).map(|_| d.draw(&mut rng)).collect();
    assert!(xs.iter().all(|x| (400..=560).contains(x)));
    let mean = xs.iter().map(|x| f64::from(*x)).sum::<f64>() / xs.len() as f64;
    assert!((mean - 495.0).abs() < 10.0, "{mean}");
    let u = Dist::Uniform { lo: 10, hi: 20 };
    assert!(
        (0..1000)
            .map(|_| u.draw(&mut rng))
            .all(|x| (10..=20).contains(&x))
    );
    assert_eq!(Dist::Fixed { n: 7 }.draw(&mut rng), 7);
}

#[test]
fn a_closed_loop_keeps_its_clients_busy_and_obeys_littles_law() {
    let w = Workload::fixed(512, 128, Load::Concurrency { clients: 8 }, 120.0);
    let s = predict(&h100_8b(), &w).unwrap();
    assert_eq!(s.failed, 0);
    // Little's law: clients = throughput × time in system.
    let l = s.throughput_rps * s.e2e.mean.unwrap();
    assert!((l - 8.0).abs() < 0.4, "throughput × e2e = {l}");
    assert!(s.queue_max <= 8);
    // More clients, more throughput, longer latency.
    let more = predict(
        &h100_8b(),
        &Workload::fixed(512, 128, Load::Concurrency { clients: 32 }, 120.0),
    )
    .unwrap();
    assert!(more.throughput_rps > 2.0 * s.throughput_rps);
    assert!(more.e2e.mean.unwrap() > s.e2e.mean.unwrap());
}

#[test]
fn an_offline_batch_finishes_faster_than_the_same_requests_one_by_one() {
    let batch = predict(
        &h100_8b(),
        &Workload::fixed(256, 64, Load::Offline { requests: 64 }, 600.0),
    )
    .unwrap();
    assert_eq!((batch.completed, batch.failed), (64, 0));
    let mut one = Workload::fixed(256, 64, Load::Sequential, 600.0);
    one.requests = Some(64);
    let seq = predict(&h100_8b(), &one).unwrap();
    assert_eq!(seq.completed, 64);
    assert!(
        batch.window_s * 5.0 < seq.window_s,
        "{} vs {}",
        batch.window_s,
        seq.window_s
    );
    // One at a time, there is no queue.
    assert_eq!(seq.queue_max, 0);
}

#[test]
fn a_client_timeout_fails_what_takes_longer_and_counts_it() {
    // Far above what one L40S sustains.
    let mut w = Workload::fixed(
        1000,
        200,
        Load::Rate {
            rps: 30.0,
            poisson: true,
        },
        120.0,
    );
    w.timeout_s = Some(30.0);
    let s = predict(&eks(), &w).unwrap();
    assert!(s.failed > 0 && s.completed > 0, "{s:?}");
    assert!(s.e2e.p99.unwrap() <= 30.0 + 1e-9);
    assert_eq!(s.sent, s.completed + s.failed);
    // Without a timeout, everything finishes, late.
    w.timeout_s = None;
    w.duration_s = 30.0;
    let s = predict(&eks(), &w).unwrap();
    assert_eq!(s.failed, 0);
}

#[test]
fn prompts_sent_again_are_cheaper_with_the_prefix_cache() {
    let mut cfg = h100_8b();
    let mut w = Workload::fixed(
        2000,
        50,
        Load::Rate {
            rps: 4.0,
            poisson: false,
        },
        120.0,
    );
    let cold: Summary = predict(&cfg, &w).unwrap();
    w.prefix = Some(SharedPrefix::Pool { prompts: 10 });
    let pooled = predict(&cfg, &w).unwrap();
    assert!(
        pooled.ttft.mean.unwrap() < 0.6 * cold.ttft.mean.unwrap(),
        "{:?} vs {:?}",
        pooled.ttft,
        cold.ttft
    );
    // With the cache off, the pool makes no difference.
    cfg.prefix_caching = false;
    let off = predict(&cfg, &w).unwrap();
    assert!((off.ttft.mean.unwrap() / cold.ttft.mean.unwrap() - 1.0).abs() < 0.05);
    // A shared system prompt helps less than whole prompts sent again, but helps.
    cfg.prefix_caching = true;
    w.prefix = Some(SharedPrefix::System {
        groups: 2,
        tokens: 1000,
    });
    let system = predict(&cfg, &w).unwrap();
    assert!(system.ttft.mean.unwrap() < cold.ttft.mean.unwrap());
    assert!(system.ttft.mean.unwrap() > pooled.ttft.mean.unwrap());
}

#[test]
fn saturation_grows_with_the_gpu_and_plans_grow_with_the_rate() {
    let w = Workload::fixed(
        512,
        128,
        Load::Rate {
            rps: 1.0,
            poisson: true,
        },
        60.0,
    );
    let model = find_model("Llama-3.1-8B").unwrap();
    let sat = |gpu: &str| {
        saturation_rps(
            &EngineConfig::new(find_gpu(gpu).unwrap(), model.clone()),
            &w,
        )
        .unwrap()
        .unwrap()
    };
    let (l40s, h100, h200) = (sat("L40S"), sat("H100"), sat("H200"));
    assert!(l40s < h100 && h100 <= h200 * 1.02, "{l40s} {h100} {h200}");
    let cfg = EngineConfig::new(find_gpu("L40S").unwrap(), model);
    let small = plan(&cfg, &w, 20.0, 5.0, Some(1.86)).unwrap().unwrap();
    let big = plan(&cfg, &w, 200.0, 5.0, Some(1.86)).unwrap().unwrap();
    assert!(
        big.replicas >= small.replicas * 5,
        "{} {}",
        small.replicas,
        big.replicas
    );
    assert!(big.at_target.e2e.p95.unwrap() <= 5.0);
    assert!(big.usd_per_hour.unwrap() > small.usd_per_hour.unwrap());
    // A looser SLO never needs more replicas; one below the unloaded latency (3.4 s here)
    // cannot be met at any rate.
    let loose = plan(&cfg, &w, 200.0, 8.0, None).unwrap().unwrap();
    assert!(loose.replicas <= big.replicas);
    assert!(plan(&cfg, &w, 200.0, 2.0, None).unwrap().is_none());
}

#[test]
fn the_default_run_saturates_between_50_and_60_requests_a_second() {
    // The seeds' deployment and prompt (35 tokens in, ~100 out), one replica.
    let w = Workload::fixed(
        35,
        100,
        Load::Rate {
            rps: 1.0,
            poisson: false,
        },
        60.0,
    );
    let sat = saturation_rps(&eks(), &w).unwrap().unwrap();
    assert!((50.0..=60.0).contains(&sat), "{sat}");
}

const HEADER: &str = "id,source,engine,engine_version,gpu,num_gpus,tp,model,weights_dtype,kv_dtype,input_len,output_len,load_type,load_value,duration_s,max_num_seqs,max_num_batched_tokens,max_model_len,gpu_memory_utilization,enforce_eager,metric,value,unit,confidence,notes";

#[test]
fn a_case_file_without_a_column_is_refused_naming_it() {
    let text = HEADER.replace(",load_type", "");
    let e = read_cases(&format!("{text}\n")).unwrap_err();
    assert_eq!(e, CaseFileError::Column("load_type"));
    assert!(e.to_string().contains("\"load_type\""));
    assert_eq!(
        read_cases(&format!("{HEADER}\n")).unwrap_err(),
        CaseFileError::Empty
    );
    assert!(matches!(read_cases("a,\"b\n"), Err(CaseFileError::Csv(_))));
}

#[test]
fn cases_are_predicted_or_skipped_with_the_reason() {
    let rows = [
        "a,s,vLLM,,H100-SXM,1,1,meta-llama/Llama-3.1-8B-Instruct,bf16,,512,128,concurrency,8,120,,,,,,throughput_rps,10,req/s,high,",
        "b,s,vLLM,,H100-SXM,1,1,meta-llama/Llama-3.1-8B-Instruct,bf16,,512,128,concurrency,8,120,,,,,,ttft_p50_ms,40,ms,high,",
        "c,s,vLLM,,Z9000,1,1,meta-llama/Llama-3.1-8B-Instruct,bf16,,512,128,rate,1,60,,,,,,throughput_rps,1,req/s,high,",
        "d,s,vLLM,,H100-SXM,1,1,acme/Secret-13B,bf16,,512,128,rate,1,60,,,,,,throughput_rps,1,req/s,high,",
        "e,s,vLLM,,H100-SXM,1,1,meta-llama/Llama-3.1-8B-Instruct,bf16,,512,128,rate,1,60,,,,,,throughput_rps,,req/s,high,",
        "f,s,vLLM,,H100-SXM,1,1,meta-llama/Llama-3.1-8B-Instruct,bf16,,512,128,rate,1,60,,,,,,node_provision_time,90,s,high,",
    ];
    let cases = read_cases(&format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap();
    let r = run(&cases, &Builtin, &Options::default(), &mut |_, _| {});
    let ids: Vec<&str> = r.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(
        r.cases
            .iter()
            .all(|c| c.predicted > 0.0 && c.ape.is_some_and(|a| a >= 0.0))
    );
    let reason = |id: &str| {
        r.skipped
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .reason
            .clone()
    };
    assert!(
        reason("c").contains("unknown GPU \"Z9000\""),
        "{}",
        reason("c")
    );
    assert!(
        reason("d").contains("pass --model-config"),
        "{}",
        reason("d")
    );
    assert!(reason("e").contains("no single measured value"));
    assert!(reason("f").contains("not something the engine model predicts"));
    assert_eq!(r.per_metric["throughput_rps"].n, 1);
    assert_eq!(r.per_gpu["H100-SXM"].n, 2);
}

#[test]
fn published_names_lengths_and_dtypes_are_read_as_published() {
    // Names as served (base, re-uploads, dated releases), fractional mean lengths, and the
    // dtypes reports write; each row is predicted, none skipped.
    let rows = [
        "n1,s,vLLM,,H100,4,4,meta-llama/Llama-3.1-70B,bf16,,217.4,98.9,rate,1,60,,,,,,e2e_mean_ms,3000,ms,high,",
        "n2,s,vLLM,,NVIDIA H100 80GB HBM3,1,1,mistralai/Mistral-7B-Instruct-v0.2,,,512,128,rate,2,60,,,,,,ttft_mean_ms,30,ms,high,",
        "n3,s,vLLM,,B200,1,1,nvidia/Llama-3.1-8B-Instruct-FP4,nvfp4,,1024,1024,concurrency,16,60,,,,,,tpot_p50_ms,5,ms,high,",
        "n4,s,vLLM,,H200,1,1,openai/gpt-oss-120b,mxfp4 (native),,1024,1024,concurrency,4,60,,,,,,tpot_p50_ms,4,ms,high,",
        "n5,s,vLLM,,H200,8,8,Qwen/Qwen3.5-397B-A17B,,,1024,128,concurrency,8,60,,,,,,tpot_p50_ms,10,ms,high,",
        "n6,s,vLLM,,H200,4,4,Qwen/Qwen3-235B-A22B-Instruct-2507-FP8,,,1000,100,rate,0.5,60,,,,,,e2e_mean_ms,3000,ms,high,",
    ];
    let cases = read_cases(&format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap();
    let r = run(&cases, &Builtin, &Options::default(), &mut |_, _| {});
    assert_eq!(r.skipped, Vec::new());
    assert_eq!(r.cases.len(), rows.len());

    // A mean length is kept: 98.9 output tokens take between 98 and 99 tokens' time.
    let lengths = |out: &str| {
        let row = format!(
            "x,s,vLLM,,H100,1,1,Llama-3.1-8B,,,512,{out},sequential,20,,,,,,,e2e_mean_ms,1000,ms,high,"
        );
        let c = read_cases(&format!("{HEADER}\n{row}\n")).unwrap();
        run(&c, &Builtin, &Options::default(), &mut |_, _| {}).cases[0].predicted
    };
    let (lo, mid, hi) = (lengths("98"), lengths("98.9"), lengths("99"));
    assert!(lo < mid && mid < hi, "{lo} {mid} {hi}");

    // What is not a length or a dtype is named.
    let bad = [
        "b1,s,vLLM,,H100,1,1,Llama-3.1-8B,,,0.5,128,rate,1,60,,,,,,e2e_mean_ms,1,ms,high,",
        "b2,s,vLLM,,H100,1,1,Llama-3.1-8B,int3,,512,128,rate,1,60,,,,,,e2e_mean_ms,1,ms,high,",
    ];
    let cases = read_cases(&format!("{HEADER}\n{}\n", bad.join("\n"))).unwrap();
    let r = run(&cases, &Builtin, &Options::default(), &mut |_, _| {});
    let reasons: Vec<&str> = r.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "input_len \"0.5\" is not a length of at least 1 token",
            "weights dtype \"int3\" is not modelled (bf16, fp16, fp8, int4/awq/gptq/w4a16, mxfp4, nvfp4)"
        ]
    );
}

#[test]
fn fp4_weights_run_on_fp4_tensor_cores_or_weight_only() {
    use inferscale_engine::hardware::find_gpu;
    use inferscale_engine::model::WeightDtype;
    let b200 = find_gpu("B200").unwrap();
    let h100 = find_gpu("H100").unwrap();
    assert_eq!(b200.runs(WeightDtype::Nvfp4), Ok(true));
    assert_eq!(h100.runs(WeightDtype::Nvfp4), Ok(false));
    assert_eq!(h100.runs(WeightDtype::Fp8), Ok(true));
    assert_eq!(find_gpu("A100").unwrap().runs(WeightDtype::Fp8), Ok(false));
    // A GPU older than vLLM's Marlin kernels is refused, naming it.
    let t4 = inferscale_engine::hardware::GpuSpec {
        name: "T4".into(),
        compute_capability: Some(7.5),
        fp8_tflops: None,
        fp4_tflops: None,
        ..h100.clone()
    };
    let e = t4.runs(WeightDtype::Nvfp4).unwrap_err().to_string();
    assert!(
        e.contains("nvfp4 weights on T4 (compute capability 7.5)"),
        "{e}"
    );
    assert_eq!(t4.runs(WeightDtype::Bf16), Ok(true));
    // On Blackwell FP4 is faster than FP8 at the same batch; on Hopper, weight-only FP4 reads
    // fewer bytes than FP8 at batch 1 but multiplies at the 16-bit rate.
    let model = inferscale_engine::model::find_model("Llama-3.1-70B").unwrap();
    let step = |gpu: &inferscale_engine::hardware::GpuSpec, d: WeightDtype, batch: u32| {
        let mut cfg = inferscale_engine::EngineConfig::new(gpu.clone(), model.clone());
        cfg.dtype = d;
        cfg.tensor_parallel_size = 4;
        let w = Workload::fixed(2048, 64, Load::Concurrency { clients: batch }, 30.0);
        inferscale_predict::predict(&cfg, &w)
            .unwrap()
            .throughput_rps
    };
    assert!(step(&b200, WeightDtype::Nvfp4, 64) > step(&b200, WeightDtype::Fp8, 64));
    assert!(step(&h100, WeightDtype::Nvfp4, 1) > step(&h100, WeightDtype::Fp8, 1));
}
