"""Writes a case file shaped like the closed-loop sweeps vendors publish (InferenceMAX's
grid: ISL/OSL 1k/1k, 1k/8k, 8k/1k; concurrency 4 to 1024; num_prompts = 10 x concurrency;
eight metrics a point), for timing `inferscale fidelity` only: the measured values are
placeholders (1.0), so its errors mean nothing.

    python3 bench/sweep_cases.py > /tmp/sweep.csv
"""
import csv
import sys

COLUMNS = ["id", "source", "engine", "engine_version", "gpu", "num_gpus", "tp", "model",
           "weights_dtype", "kv_dtype", "input_len", "output_len", "load_type", "load_value",
           "duration_s", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
           "gpu_memory_utilization", "enforce_eager", "metric", "value", "unit", "confidence",
           "notes", "num_prompts"]
SETUPS = [
    ("meta-llama/Llama-3.3-70B-Instruct-FP8", 4),
    ("openai/gpt-oss-120b", 1),
    ("Qwen/Qwen3-32B", 1),
    ("deepseek-ai/DeepSeek-R1-0528", 8),
]
GPUS = ["H100", "H200", "B200"]
LENGTHS = [(1024, 1024), (1024, 8192), (8192, 1024)]
CONCURRENCY = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
METRICS = ["throughput_rps", "output_tps", "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms",
           "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms"]


def main():
    w = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    n = 0
    for gpu in GPUS:
        for model, tp in SETUPS:
            for isl, osl in LENGTHS:
                for c in CONCURRENCY:
                    for m in METRICS:
                        n += 1
                        w.writerow({
                            "id": f"SWEEP-{n}", "source": "bench/sweep_cases.py (synthetic, timing only)",
                            "engine": "vLLM", "gpu": gpu, "num_gpus": tp, "tp": tp, "model": model,
                            "input_len": isl, "output_len": osl, "load_type": "concurrency",
                            "load_value": c, "num_prompts": 10 * c, "metric": m, "value": "1",
                            "unit": "", "confidence": "synthetic", "notes": "placeholder value",
                            "max_model_len": isl + osl + 256,
                        })


main()
