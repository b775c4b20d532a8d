#!/usr/bin/env python3
"""Convert SemiAnalysisAI/InferenceX experimental/token_position_decode_slo results to the
inferscale calibration CSV format.

Usage: inferencex_token_position.py RAW_DIR OUT_DIR
  RAW_DIR holds glm-5/, minimax-m2.5/, qwen3.5/ each with the results/*.json files of
  github.com/SemiAnalysisAI/InferenceX@843c6254ff69b567f772f6a5fd97675af3d04431
  experimental/token_position_decode_slo/<model>/results/ (copied under
  testdata/perf/public/raw/inferencex-token-position/).
Writes OUT_DIR/inferencex-token-position.csv (H200 runs) and
OUT_DIR/inferencex-token-position-glm5-gpu-unknown.csv (GLM-5 runs, GPU not stated).
"""
import csv
import json
import re
import sys
from pathlib import Path

REPO = "github.com/SemiAnalysisAI/InferenceX@843c6254ff69b567f772f6a5fd97675af3d04431"
BASE = "experimental/token_position_decode_slo"
COLUMNS = ["id", "source", "engine", "engine_version", "gpu", "num_gpus", "tp", "model",
           "weights_dtype", "kv_dtype", "input_len", "output_len", "load_type", "load_value",
           "duration_s", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
           "gpu_memory_utilization", "enforce_eager", "metric", "value", "unit", "confidence",
           "notes", "num_prompts"]

# (json key, metric, unit, scale)
METRICS = [
    ("median_ttft", "ttft_p50_ms", "ms", 1000.0),
    ("p99_ttft", "ttft_p99_ms", "ms", 1000.0),
    ("median_tpot", "tpot_p50_ms", "ms", 1000.0),
    ("p99_tpot", "tpot_p99_ms", "ms", 1000.0),
    ("median_e2el", "e2e_p50_ms", "ms", 1000.0),
    ("p99_e2el", "e2e_p99_ms", "ms", 1000.0),
    ("request_throughput", "throughput_rps", "req/s", 1.0),
    ("output_throughput", "output_tps", "tok/s", 1.0),
]

HARNESS = ("harness benchmark_serving_random.py (see SOURCES.md 1): streaming /v1/completions, "
           "ignore_eos, fixed lengths, unique random-token prompts; closed loop, 10*C prompts after "
           "2*C warm-ups; TTFT = first SSE chunk with 'choices'; TPOT = (latency-TTFT)/(OSL-1) per "
           "request; only median/p99 published")

SETUPS = {
    # model dir: (file regex, gpu, tp, num_gpus, weights dtype, engine_version, confidence, setup note)
    "minimax-m2.5": {
        "gpu": "H200", "engine_version": "nightly wheel dea63512bb9b (2026-02-14)",
        "confidence": "medium",
        "weights": "",
    },
    "qwen3.5": {
        "gpu": "H200", "engine_version": "vllm/vllm-openai:nightly (2026-02-16)",
        "confidence": "medium", "weights": "",
    },
    "glm-5": {
        "gpu": "", "engine_version": "vllm/vllm-openai:nightly (2026-02-13)",
        "confidence": "low", "weights": "fp8",
    },
}

NAME = re.compile(r"_(?P<par>tp8|tep8|dep8)_isl(?P<isl>\d+)_osl(?P<osl>\d+)_conc(?P<conc>\d+)\.json$")


def setup_for(model_dir, par):
    s = dict(SETUPS[model_dir])
    notes = []
    if model_dir == "minimax-m2.5":
        if par == "tep8":
            s["tp"] = "8"
            notes.append("server: serve_minimax_tep8_sbatch.sh = vllm serve --tensor-parallel-size 8 "
                         "--enable-expert-parallel (SLURM partition h200, 8 GPUs)")
        else:
            s["tp"] = ""
            s["confidence"] = "low"
            s["engine_version"] = "vLLM nightly (2026-02-14; exact build of the dep8 server not stated)"
            notes.append("'dep8' run: its server script is not in the repo; by InferenceX naming "
                         "DEP8 = data-parallel attention 8 + expert parallel 8 on 8 GPUs, so tp is "
                         "left blank (not stated); not a plain TP/replica layout")
        notes.append("weights dtype not stated in the source (MiniMax-M2.5 checkpoint is published in FP8)")
    elif model_dir == "qwen3.5":
        s["tp"] = "8"
        notes.append("server: serve_qwen35_tp8_sbatch.sh = vllm serve --tensor-parallel-size 8 "
                     "--language-model-only --enable-prefix-caching (SLURM partition h200, 8 GPUs); "
                     "weights dtype not stated (checkpoint Qwen/Qwen3.5-397B-A17B is BF16)")
    else:
        s["tp"] = "8"
        notes.append("GPU NOT STATED: SLURM partition 'main', 8 GPUs (GLM-5-FP8 needs >640 GB, so not "
                     "8x80 GB); server uses MTP speculative decoding (num_speculative_tokens 1), "
                     "which the simulator does not model; weights fp8 per the checkpoint name")
    s["num_gpus"] = "8"
    return s, notes


def rows_for(path, model_dir):
    m = NAME.search(path.name)
    if not m:
        raise SystemExit(f"unexpected file name {path}")
    d = json.loads(path.read_text())
    par, isl, osl, conc = m["par"], int(m["isl"]), int(m["osl"]), int(m["conc"])
    assert int(d["max_concurrency"]) == conc, path
    s, notes = setup_for(model_dir, par)
    completed = int(d["completed"])
    out_per_req = d["total_output_tokens"] / completed if completed else None
    in_per_req = d["total_input_tokens"] / completed if completed else None
    notes.append(HARNESS)
    notes.append(f"completed {completed}/{d['num_prompts']}; mean tokens/request in {in_per_req:g} out {out_per_req:g}")
    notes.append(f"benchmark date {d['date']}")
    src = f"{REPO}/{BASE}/{model_dir}/results/{path.name}"
    stem = path.stem
    out = []
    for key, metric, unit, scale in METRICS:
        v = d.get(key)
        if v is None:
            continue
        val = float(v) * scale
        out.append({
            "id": f"IXTP-{stem}-{metric}",
            "source": src,
            "engine": "vLLM",
            "engine_version": s["engine_version"],
            "gpu": s["gpu"],
            "num_gpus": s["num_gpus"],
            "tp": s["tp"],
            "model": d["model_id"],
            "weights_dtype": s["weights"],
            "kv_dtype": "",
            "input_len": isl,
            "output_len": osl,
            "load_type": "concurrency",
            "load_value": conc,
            "duration_s": f"{float(d['duration']):.3f}",
            "num_prompts": int(d["num_prompts"]),
            "max_num_seqs": "",
            "max_num_batched_tokens": "",
            "max_model_len": "",
            "gpu_memory_utilization": "",
            "enforce_eager": "",
            "metric": metric,
            "value": f"{val:.6g}",
            "unit": unit,
            "confidence": s["confidence"],
            "notes": "; ".join(notes + [f"orig field {key} (seconds -> ms)" if unit == "ms" else f"orig field {key}"]),
        })
    return out


def main():
    raw = Path(sys.argv[1])
    out_dir = Path(sys.argv[2])
    main_rows, glm_rows = [], []
    for model_dir in ["minimax-m2.5", "qwen3.5", "glm-5"]:
        files = sorted((raw / model_dir).glob("*.json"))
        if not files:
            files = sorted((raw / model_dir / "results").glob("*.json"))
        for f in files:
            (glm_rows if model_dir == "glm-5" else main_rows).extend(rows_for(f, model_dir))
    for name, rows in [("inferencex-token-position.csv", main_rows),
                       ("inferencex-token-position-glm5-gpu-unknown.csv", glm_rows)]:
        with open(out_dir / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
        print(name, len(rows))


if __name__ == "__main__":
    main()
