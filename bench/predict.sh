#!/usr/bin/env bash
# Prediction speed: `inferscale fidelity` over the whole calibration file, three times, and
# each of its setups (cases that share a GPU, model, settings and load: one simulation) on
# its own, to find the slowest single case. Wall time from the shell's `date`, on an
# otherwise idle machine.
# Usage: bench/predict.sh [CASES.csv]
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-testdata/perf/calibration_cases.clean.csv}
cargo build --release -q -p inferscale
bin=target/release/inferscale
now() { date +%s.%N; }
echo "== the whole file: $cases"
for i in 1 2 3; do
  t0=$(now); $bin fidelity "$cases" --json > /dev/null; t1=$(now)
  echo "run $i: $(echo "$t1 - $t0" | bc) s"
done
echo "== each setup alone (the slowest five)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$cases" "$dir" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
keys = ["gpu", "num_gpus", "tp", "model", "weights_dtype", "kv_dtype", "input_len", "output_len",
        "load_type", "load_value", "duration_s", "max_num_seqs", "max_num_batched_tokens",
        "max_model_len", "gpu_memory_utilization", "enforce_eager", "source"]
groups = {}
for r in rows:
    groups.setdefault(tuple(r[k] for k in keys), []).append(r)
for i, g in enumerate(groups.values()):
    with open(f"{sys.argv[2]}/{i:03}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(g)
print(len(groups), "setups", file=sys.stderr)
PY
for f in "$dir"/*.csv; do
  t0=$(now); $bin fidelity "$f" --json > /dev/null; t1=$(now)
  printf '%s %s\n' "$(echo "$t1 - $t0" | bc)" "$(sed -n 2p "$f" | cut -d, -f1)"
done | sort -rn | head -5
