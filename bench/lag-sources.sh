#!/usr/bin/env bash
# Where the load generator's schedule lag comes from, against a server that is never the
# limit: a tiny nginx (Debian's `nginx`) that answers every POST with a fixed completion,
# pinned to CPU 0; wrk's closed-loop rate on it for scale; then `inferscale load` pinned to
# CPU 1, N runs of one 10 s step at RATE, each with its own lag percentiles (run.json), its
# CPU and context switches (/usr/bin/time), and what its stall probe saw (stalls, and the
# CPU time the hypervisor stole, from /proc/stat).
# Usage: bench/lag-sources.sh [RATE] [RUNS]   (defaults 12000 3). Needs nginx, wrk, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-12000}
runs=${2:-3}
cargo build --release -q -p inferscale
dir=target/bench/lag-sources
port=18080
# shellcheck source=bench/nginx.sh
source bench/nginx.sh
echo "wrk, closed loop, 32 connections, CPU 1:"
taskset -c 1 wrk -t1 -c32 -d5s -s "$dir/post.lua" "http://127.0.0.1:$port/v1/completions" | grep -E "Requests/sec"
echo "inferscale load at $rate req/s, CPU 1, $runs runs:"
for i in $(seq 1 "$runs"); do
  taskset -c 1 /usr/bin/time -o "$dir/time.txt" -f "%U %S %w %c" target/release/inferscale load \
    --url "http://127.0.0.1:$port" --rates "$rate" --step 10s --rest 0s --no-metrics \
    --max-in-flight 1000 --model m --no-stream --max-tokens 16 --warmup 0 \
    --out "$dir/run-$i.json" > /dev/null 2>&1
  python3 - "$dir/run-$i.json" "$dir/time.txt" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
c = s["client"]
u, sy, vol, inv = open(sys.argv[2]).read().split()
st = c.get("stalls") or {}
print(f"  ok {s['requests']['ok']} dropped {s['requests']['dropped']}  lag p50 {c['lag_p50_s']*1e3:.3f} "
      f"p99 {c['lag_p99_s']*1e3:.3f} max {c['lag_max_s']*1e3:.1f} ms  cpu user {u} sys {sy} s  "
      f"switches {vol} voluntary {inv} involuntary  stalls {st.get('count')} "
      f"(longest {st.get('longest_s', 0)*1e3:.1f} ms)  CPU waits {st.get('cpu_waits', 0)} "
      f"(longest {st.get('cpu_wait_longest_s', 0)*1e3:.1f} ms)  steal {st.get('steal_s') or 0:.2f} s")
PY
done
