#!/usr/bin/env bash
# One series with N labels (a hostile or broken exporter), read by `inferscale scrape` and by
# `promtool check metrics` (Prometheus 2.42, Debian's package), three times each.
# Usage: bench/wide-labels.sh [N ...]   (default: 40000 80000 160000 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p inferscale
bin=target/release/inferscale
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sizes=("${@:-40000 80000 160000 1000000}")
for n in ${sizes[@]}; do
  python3 -c "import sys; n=int(sys.argv[1]); print('vllm:num_requests_waiting{' + ','.join(f'l{i}=\"v\"' for i in range(n)) + '} 1')" "$n" > "$dir/$n.prom"
  for r in 1 2 3; do
    /usr/bin/time -f "inferscale $n labels ($(stat -c %s "$dir/$n.prom") bytes) run $r: %e s, %M KiB" \
      "$bin" scrape "$dir/$n.prom" > /dev/null
  done
  if command -v promtool > /dev/null; then
    /usr/bin/time -f "promtool   $n labels: %e s, %M KiB (exit status %x; 124: stopped at 100 s)" \
      timeout 100 promtool check metrics < "$dir/$n.prom" > /dev/null 2>&1 || true
  fi
done
