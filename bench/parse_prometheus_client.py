"""Times Python prometheus_client's text parser on a file; prints one JSON line.

Usage: python parse_prometheus_client.py FILE MIN_SECONDS
"""
import json
import sys
import time

from importlib.metadata import version

from prometheus_client.parser import text_string_to_metric_families

path, min_seconds = sys.argv[1], float(sys.argv[2])
text = open(path, encoding="utf-8").read()
size = len(text.encode("utf-8"))
best = float("inf")
runs = 0
samples = 0
start = time.perf_counter()
while runs < 3 or time.perf_counter() - start < min_seconds:
    t0 = time.perf_counter()
    fams = list(text_string_to_metric_families(text))
    dt = time.perf_counter() - t0
    best = min(best, dt)
    samples = sum(len(f.samples) for f in fams)
    runs += 1
print(json.dumps({"tool": "prometheus_client " + version("prometheus_client"),
                  "bytes": size, "seconds": best, "runs": runs, "samples": samples}))
