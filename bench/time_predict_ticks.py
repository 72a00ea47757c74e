#!/usr/bin/env python3
"""Times `foxhunt predict --ticks` over a tape: the best of RUNS whole runs, the fixed cost (process
start, LibTorch, bundle load) as the best run over a small tape, and predict's own print-to-decision
p50/p99 from its summary line. Used by scripts/tape-figures.sh and scripts/perf-figures.sh.

  time_predict_ticks.py BINARY BUNDLES TAPE SMALL_TAPE RUNS SPEC [--row]

Prints one JSON object (spec, prints, bars, whole_s, fixed_s, prints_per_s, steady_prints_per_s,
p50_us, p99_us, runs), or with --row one markdown table row. Exits 1 when predict fails or prints
no summary line.
"""
import json
import re
import subprocess
import sys
import time


def run(binary, bundles, tape):
    t0 = time.perf_counter()
    p = subprocess.run([binary, "predict", "--bundles", bundles, "--ticks", tape],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return time.perf_counter() - t0, p.stderr


def measure(binary, bundles, tape, small, runs, spec):
    best, fixed, summary = 1e9, 1e9, ""
    for _ in range(runs):
        wall, err = run(binary, bundles, tape)
        if wall < best:
            best, summary = wall, err
        fixed = min(fixed, run(binary, bundles, small)[0])
    m = re.search(r"(\d+) prints -> (\d+) \S+ bars .*p50 ([\d.]+) us, p99 ([\d.]+) us", summary)
    if not m:
        sys.exit(f"no summary line in predict's stderr: {summary[-300:]}")
    prints = int(m.group(1))
    return {"spec": spec, "prints": prints, "bars": int(m.group(2)), "whole_s": best,
            "fixed_s": fixed, "prints_per_s": prints / best,
            "steady_prints_per_s": prints / max(best - fixed, 1e-9),
            "p50_us": float(m.group(3)), "p99_us": float(m.group(4)), "runs": runs}


def main(argv):
    row = "--row" in argv
    args = [a for a in argv if a != "--row"]
    if len(args) != 6:
        sys.exit(__doc__)
    binary, bundles, tape, small, runs, spec = args
    r = measure(binary, bundles, tape, small, int(runs), spec)
    if row:
        print(f"| {spec} | {r['bars']:,} | {r['whole_s']:.2f} s | {r['prints_per_s']:,.0f} | "
              f"{r['fixed_s']:.2f} s | {r['steady_prints_per_s']:,.0f} | {r['p50_us']} us | "
              f"{r['p99_us']} us |")
    else:
        print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1:])
