#!/usr/bin/env bash
# How fast this machine's CPU runs, over time: a fixed loop (Python) counts the work it gets
# done in each 50 ms window, pinned to one CPU, with nothing else running. On a shared host a
# vCPU's speed moves with its neighbours' load (another guest on the same physical core, or
# the core's clock), which the guest's own counters do not show: no steal is reported, the
# vCPU simply does less per second. Prints one mark per window (^ at least 1.05x the median
# window, _ under 0.8x, . between), the stretches under 0.8x, and their share of the time.
# The median is printed too (loops of 1,000 per window), so invocations can be compared.
# Usage: bench/cpu-speed.sh [--cpu 1] [--seconds 20]
set -euo pipefail
cpu=1
seconds=20
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "bench/cpu-speed.sh: unknown argument $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
done
taskset -c "$cpu" python3 - "$seconds" <<'PY'
import sys, time
end = time.perf_counter() + float(sys.argv[1])
work = []
while time.perf_counter() < end:
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.05:
        for _ in range(1000):
            pass
        n += 1
    work.append(n)
ranked = sorted(work)
median = ranked[len(ranked) // 2]
marks = "".join("_" if n < 0.8 * median else "^" if n > 1.05 * median else "." for n in work)
print(marks)
slow = sorted(len(s) for s in marks.replace("^", ".").split(".") if s)
print(f"windows: {len(work)}; median window {median} loops of 1000; slowest {ranked[0] / median:.2f}x, p10 {ranked[len(ranked) // 10] / median:.2f}x, "
      f"p90 {ranked[len(ranked) * 9 // 10] / median:.2f}x, fastest {ranked[-1] / median:.2f}x the median window")
print(f"time under 0.8x: {100 * marks.count('_') / len(marks):.0f} %; longest stretches (50 ms windows): {slow[-5:]}")
PY
