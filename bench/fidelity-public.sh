#!/usr/bin/env bash
# `inferscale fidelity` over more than 3,000 rows (issue 35's target: within 60 s on 2 cores):
# every published set in testdata/perf (calibration, BLIS's held-out runs, InferenceX's
# sweeps) plus a synthetic grid shaped like vendors' concurrency sweeps (bench/sweep_cases.py,
# placeholder values: timing only), merged into one file, three runs. Wall time from the
# shell's `date`; peak memory from /usr/bin/time when it is there.
# Usage: bench/fidelity-public.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p inferscale
bin=target/release/inferscale
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 bench/sweep_cases.py > "$dir/sweep.csv"
python3 - "$dir/all.csv" testdata/perf/calibration_cases.clean.csv testdata/perf/public/*.csv "$dir/sweep.csv" <<'PY'
import csv, sys
rows, cols = [], []
for path in sys.argv[2:]:
    for r in csv.DictReader(open(path, newline="")):
        rows.append(r)
        cols += [k for k in r if k not in cols]
with open(sys.argv[1], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols, restval="")
    w.writeheader()
    w.writerows(rows)
print(f"{len(rows)} rows from {len(sys.argv) - 2} files", file=sys.stderr)
PY
now() { date +%s.%N; }
for f in "$dir/sweep.csv" "$dir/all.csv"; do
  echo "== $(basename "$f"): $(($(wc -l < "$f") - 1)) rows"
  for i in 1 2 3; do
    t0=$(now); $bin fidelity "$f" --json > "$dir/out.json"; t1=$(now)
    echo "run $i: $(echo "$t1 - $t0" | bc) s"
  done
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(len(d['cases']), 'predicted,', len(d['skipped']), 'skipped')" "$dir/out.json"
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "peak RSS %M KiB" $bin fidelity "$f" --json > /dev/null
  fi
done
