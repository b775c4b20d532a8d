#!/usr/bin/env bash
# inferscale scaler over a fleet of simulated pods (one `inferscale sim --replicas N`):
#  1. latency and memory: GetMetrics (desired_replicas: the queue summed, the queue-time p95
#     merged over every pod) back to back for SECONDS, each call scraping every pod
#     (--cache 0s); the scaler pinned to CPU 0, everything else to CPU 1;
#  2. freshness: the fleet's queue stepped up and down, the scaler and a real Prometheus
#     (scraping the same pods every 15 s, as the seeds' ServiceMonitor does) polled side by
#     side the way KEDA polls each; how much sooner the scaler shows each step.
# Usage: bench/scaler.sh [PODS] [SECONDS]        (defaults: 200 pods, 600 s)
# Results: target/bench/scaler/{latency,freshness}.json
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${1:-200}
seconds=${2:-600}
base=${BASE:-21000}
out=target/bench/scaler
rm -rf "$out" && mkdir -p "$out"
cargo build --release -q -p inferscale -p inferscale-bench
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

taskset -c 1 target/release/inferscale sim --replicas "$pods" --listen "127.0.0.1:$base" \
  --max-num-seqs 2 --served-model-name m --speedup 4 > "$out/sim.log" 2>&1 &
pids+=($!)
last=$((base + pods - 1))
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$last/health" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$last/health" >/dev/null || { echo "the simulator did not come up" >&2; exit 1; }

grpc=$(free_port); http=$(free_port)
taskset -c 0 target/release/inferscale scaler --listen "127.0.0.1:$grpc" --http-listen "127.0.0.1:$http" \
  --cache 0s > "$out/scaler.log" 2>&1 &
scaler=$!
pids+=($scaler)
sleep 1
summary() { python3 -c 'import json,sys; d=json.load(sys.stdin); print({k: d[k] for k in ("calls","failed","latency_ms")}, {k: v for k, v in d["rss_kib"].items() if k != "samples"})'; }
# a. Pods that answer at once (each serves the exposition its simulated replica wrote, from
#    the bench's own thread): the scaler's cost, as with pods on machines of their own.
echo "== latency and memory: $pods pods served by the bench, $seconds s"
taskset -c 1 target/release/inferscale-bench scaler-latency --scaler "127.0.0.1:$grpc" \
  --base "$base" --pods "$pods" --seconds "$seconds" --pid "$scaler" --farm | tee "$out/latency.json" | summary
# b. The simulator's own 200 replicas as the pods: one core renders every exposition, so this
#    measures that core as much as the scaler.
echo "== latency: $pods pods served by inferscale sim (one core renders them all), 60 s"
taskset -c 1 target/release/inferscale-bench scaler-latency --scaler "127.0.0.1:$grpc" \
  --base "$base" --pods "$pods" --seconds 60 --pid "$scaler" | tee "$out/latency-sim.json" | summary

echo "== freshness: the scaler beside Prometheus (15 s scrapes)"
prom=$(free_port)
{
  echo "global: {scrape_interval: 15s, scrape_timeout: 10s}"
  echo "scrape_configs:"
  echo "- job_name: vllm"
  echo "  static_configs:"
  echo "  - targets:"
  for i in $(seq 0 $((pods - 1))); do echo "    - 127.0.0.1:$((base + i))"; done
} > "$out/prometheus.yml"
taskset -c 1 prometheus --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" \
  --web.listen-address="127.0.0.1:$prom" > "$out/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  n=$(curl -sf "http://127.0.0.1:$prom/api/v1/query?query=count(up==1)" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null || echo 0)
  [ "$n" = "$pods" ] && break
  sleep 0.5
done
echo "prometheus scrapes $n of $pods pods"
taskset -c 1 target/release/inferscale-bench scaler-freshness --scaler "127.0.0.1:$grpc" \
  --prometheus "http://127.0.0.1:$prom" --base "$base" --pods "$pods" | tee "$out/freshness.json" \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["prometheus_minus_scaler_s"])'
