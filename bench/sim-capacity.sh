#!/usr/bin/env bash
# Simulator capacity, with the simulator pinned to CPU 0 and the client to CPU 1:
#  1. throughput: the `instant` profile (no model delay), so only the simulator's HTTP/SSE
#     machinery limits streamed tokens per second;
#  2. concurrency: an engine that batches thousands of requests (Llama-3.2-1B on an H200 with
#     --max-num-seqs 8192, 10× speed-up), so every stream stays open while its tokens are
#     generated step by step.
# Usage: bench/sim-capacity.sh [STREAMS]
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-5000}
cargo build --release -q -p inferscale -p inferscale-bench
run() {
  local tokens=$1; shift
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  taskset -c 0 target/release/inferscale sim "$@" --listen "127.0.0.1:$port" > target/sim-capacity.log 2>&1 &
  local sim=$!
  for _ in $(seq 400); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.05; done
  taskset -c 1 target/release/inferscale-bench sim-capacity --addr "127.0.0.1:$port" --streams "$streams" --tokens "$tokens" --pid "$sim"
  echo "simulator peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$sim/status)"
  kill $sim; wait $sim 2>/dev/null || true
}
echo "== throughput: instant profile, $streams streams × 2000 tokens"
run 2000 --profile instant
echo "== concurrency: $streams streams × 1000 tokens, batched by the engine"
run 1000 --gpu H200 --model Llama-3.2-1B --kv-cache-dtype fp8 --max-num-seqs 8192 --max-num-batched-tokens 65536 --max-model-len 4096 --speedup 10
