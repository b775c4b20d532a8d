#!/usr/bin/env bash
# How fast the load generator can push requests through: one open-loop step far past what it
# can hold (--rate, default 150,000 req/s) against the tiny nginx of bench/nginx.sh on CPU 0,
# with the client on CPU 1. The schedule falls behind at once, so the sending loop never waits
# for a send time: it sends whenever one of its --max-in-flight slots is free (the rest of the
# plan is dropped at the cap, cheaply, and not counted). Its throughput is the requests it sent
# divided by the time it took to send them (the middle 80 % of the sends, leaving out the start
# and the end). This is a closed loop of up to --max-in-flight requests, the busiest the
# client's request path gets, not a schedule it holds: bench/ceiling.sh says what it holds. A
# rate is held only when the client can catch up after the machine's stalls, so throughput well
# above the rate is the headroom behind those verdicts.
# Give --bin more than once to compare builds run by run (A, B, A, B, ...).
# Usage: bench/capacity.sh [--rate 150000] [--runs 3] [--seconds 3] [--max-in-flight 1000]
#   [--bin PATH]...
# Needs nginx, python3. Results: target/bench/capacity/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=150000
runs=3
seconds=3
cap=1000
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --max-in-flight) cap=$2; shift 2 ;;
    --bin) bins+=("$2"); shift 2 ;;
    *) echo "bench/capacity.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
done
if [ ${#bins[@]} -eq 0 ]; then
  cargo build --release -q -p inferscale
  bins=(target/release/inferscale)
fi
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "bench/capacity.sh: --bin $b is not an executable" >&2; exit 2; }
done
dir=target/bench/capacity
port=18083
# shellcheck source=bench/nginx.sh
source bench/nginx.sh
results=$dir/results.jsonl
: > "$results"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ)"
for i in $(seq 1 "$runs"); do
  for b in "${bins[@]}"; do
    taskset -c 1 "$b" load --url "http://127.0.0.1:$port" --rates "$rate" --step "${seconds}s" \
      --rest 0s --no-metrics --max-in-flight "$cap" --model m --no-stream --max-tokens 16 \
      --warmup 0 --out "$dir/run.json" --requests-out "$dir/requests.jsonl" > /dev/null 2>&1 || true
    python3 - "$dir/requests.jsonl" "$b" "$i" >> "$results" <<'PY'
import json, sys
sent = sorted(r["sent_s"] for r in map(json.loads, open(sys.argv[1])) if r.get("sent_s") is not None)
n = len(sent)
lo, hi = sent[n // 10], sent[9 * n // 10]
print(json.dumps({"bin": sys.argv[2], "run": int(sys.argv[3]), "sent": n,
                  "capacity_rps": round((9 * n // 10 - n // 10) / (hi - lo))}))
PY
    tail -1 "$results" | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(f\"{r['bin']}, run {r['run']}: {r['sent']} sent, {r['capacity_rps']} req/s\")"
  done
done
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for b in dict.fromkeys(r["bin"] for r in rows):
    c = sorted(r["capacity_rps"] for r in rows if r["bin"] == b)
    print(f"{b}: {', '.join(map(str, c))} req/s (median {c[len(c) // 2]})")
PY
