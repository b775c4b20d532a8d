#!/usr/bin/env bash
# Rehearsal speed: a 24 h diurnal trace (20 -> 500 -> 20 req/s, the seeds' requests) under the
# seeds'-shape ScaledObject `generate --signal queue` writes from the seeds' thresholds with up
# to 20 replicas, clients that wait (`--client patient`: the rehearsal as the earlier versions
# ran it, so the verdict is comparable across them), on one core (taskset -c 0), three times;
# then each built-in signal once (--compare-signals).
# Prints wall time, requests simulated and peak RSS of each run.
# Usage: bench/rehearse.sh [PATTERN]
set -euo pipefail
cd "$(dirname "$0")/.."
pattern=${1:-diurnal:20..500@24h}
cargo build --release -q -p inferscale
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
target/release/inferscale generate --thresholds testdata/runs/thresholds-default.json \
  --out "$dir/m" --max-replicas 20 --signal queue > /dev/null
for i in 1 2 3; do
  /usr/bin/time -f "run $i: %e s wall, %M KB peak RSS" taskset -c 0 \
    target/release/inferscale rehearse --scaledobject "$dir/m/scaledobject.yaml" \
      --thresholds testdata/runs/thresholds-default.json \
      --pattern "$pattern" --duration 24h --client patient --json 2> "$dir/err" \
      > "$dir/out.json" || true
  tail -1 "$dir/err"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("  requests", s["requests"], "max replicas", s["max_replicas"], "SLO", round(100*s["slo_attainment"],2), "% GPU-h", round(s["gpu_hours"],1))' "$dir/out.json"
done
echo "== every built-in signal, one after the other"
/usr/bin/time -f "all eight: %e s wall, %M KB peak RSS" taskset -c 0 \
  target/release/inferscale rehearse --thresholds testdata/runs/thresholds-default.json \
    --compare-signals --pattern "$pattern" --duration 24h --client patient 2> "$dir/err" \
  | head -10
grep -E "done in|all eight" "$dir/err"
