#!/usr/bin/env bash
# Tuning speed: `inferscale tune` on the default suite and its held-out traces, pinned to one
# CPU (`taskset -c CPU`), three times; and the same with the seeds' queue shape side by side
# as a plain `rehearse` of the suite's longest trace (the unit a tuning is made of). Wall
# time from the shell's `date`, peak memory from GNU time. The CPU speed of this VM moves
# (bench/cpu-speed.sh): report all three runs.
# Usage: bench/tune.sh [THRESHOLDS.json] [CPU]
set -euo pipefail
cd "$(dirname "$0")/.."
thresholds=${1:-testdata/runs/thresholds-tuned.json}
cpu=${2:-1}
cargo build --release -q -p inferscale
bin=target/release/inferscale
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now() { date +%s.%N; }
echo "== inferscale tune on one CPU ($cpu), the default suite and held-out traces"
for i in 1 2 3; do
  t0=$(now)
  /usr/bin/time -f '%M' -o "$out/mem" taskset -c "$cpu" \
    $bin tune --thresholds "$thresholds" --out "$out/t$i" > "$out/t$i.txt" 2> "$out/t$i.err"
  t1=$(now)
  rehearsals=$(grep -o '[0-9]* rehearsals in' "$out/t$i.err" | cut -d' ' -f1)
  echo "run $i: $(echo "$t1 - $t0" | bc) s, $rehearsals rehearsals, peak RSS $(cat "$out/mem") KB"
done
grep '^the policy' "$out/t1.txt" || true
echo "== one rehearsal of the diurnal trace (2 h, warmed in), the seeds' ScaledObject"
$bin generate --thresholds "$thresholds" --signal queue --out "$out/seeds" > /dev/null
t0=$(now)
taskset -c "$cpu" $bin rehearse --scaledobject "$out/seeds/scaledobject.yaml" \
  --thresholds "$thresholds" --pattern 'diurnal:16.85..168.55@7200s' --warm-in 600s \
  --duration 7200s --json > /dev/null 2>&1
t1=$(now)
echo "rehearsal: $(echo "$t1 - $t0" | bc) s"
