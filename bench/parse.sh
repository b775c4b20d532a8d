#!/usr/bin/env bash
# Parser throughput, side by side: inferscale-promtext vs the prometheus-parse crate vs
# Python's prometheus_client. Usage: bench/parse.sh [--seconds S]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/bench-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q prometheus_client==0.26.0
fi
cargo run --release -q -p inferscale-bench -- parse --python "$venv/bin/python" "$@"
