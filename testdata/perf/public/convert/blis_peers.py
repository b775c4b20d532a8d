"""Side by side on BLIS's held-out runs: inferscale's errors (from `inferscale fidelity
blis-heldout.csv --json`) and those of the simulators the sim-to-real study ran on the very
same experiment stages (its `error_records.csv`, columns `simulator`, `predicted`, `actual`).

    git -C <sim-to-real mirror> show 7f3b27022dcd575958a2f0c7b2373afece64c655:results_iter36/error_records.csv > heldout_errors.csv
    inferscale fidelity testdata/perf/public/blis-heldout.csv --json > ours.json
    python3 blis_peers.py heldout_errors.csv ours.json

Only held-out rows (ids BLISHO-…) that both predicted are compared; per metric family, the
median absolute percentage error and the median signed error of each simulator."""
import csv
import json
import re
import statistics
import sys
from collections import defaultdict


def family(metric):
    return metric.split("_")[0]


def main(peer_path, ours_path):
    ours = json.load(open(ours_path))
    want = {}
    for c in ours["cases"]:
        m = re.match(r"BLISHO-(\d+)-s(\d+)-(.*?)(_ms)?$", c["id"])
        if not m:
            continue
        metric = c["metric"].removesuffix("_ms")
        want[(m[1], m[2], metric)] = (c["measured"], c["predicted"])
    errs = defaultdict(lambda: defaultdict(list))
    for r in csv.DictReader(open(peer_path, newline="")):
        key = (r["exp_id"], r["stage_index"], r["metric_name"])
        if key not in want:
            continue
        measured, mine = want[key]
        actual, pred = float(r["actual"]), float(r["predicted"])
        if abs(actual - measured) > 1e-4 * max(1.0, abs(measured)):
            raise SystemExit(f"{key}: actual {actual} is not the case's {measured}")
        errs[r["simulator"]][family(key[2])].append((pred - actual) / actual)
        errs["inferscale"][(family(key[2]), key)].append((mine - measured) / measured)
    # inferscale once per row, whatever the number of peers.
    mine = defaultdict(list)
    for (fam, _), v in errs.pop("inferscale").items():
        mine[fam].append(v[0])
    errs["inferscale"] = mine
    print("| simulator | family | rows | median error | median bias |")
    print("|---|---|---|---|---|")
    for sim in sorted(errs, key=lambda s: (s != "inferscale", s)):
        for fam in sorted(errs[sim]):
            v = errs[sim][fam]
            ape = statistics.median(abs(x) for x in v)
            bias = statistics.median(v)
            print(f"| {sim} | {fam} | {len(v)} | {ape * 100:.1f} % | {bias * 100:+.1f} % |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
