#!/usr/bin/env bash
# Runs every benchmark program (bench/*.cpp, built into the build directory) and writes one JSON.
#   scripts/bench.sh [--out FILE] [--filter REGEX] [--min-time S] [--compare OLD.json]
# --out       where the combined JSON goes (default BUILD/bench-results.json, in the build
#             directory, which git ignores), written atomically
# --filter    Google Benchmark filter passed to every program (default: all benchmarks)
# --min-time  minimum time per benchmark in seconds (default 0.2)
# --compare   also compare with an earlier file: every benchmark whose real time changed by more
#             than 10% is flagged, and every foxhunt/eager ratio that changed by more than 10%
#             (a report for people, not a gate: these machines are noisy; the exit code is 0
#             either way unless a program failed)
# Then, if .venv/bin/python exists, bench/compare_python.py times the models whose forward/<model>/
# benchmarks the filter selects against the same networks in PyTorch eager (same --min-time,
# FOXHUNT_THREADS threads, default 1); its JSON goes under "compare_python" in the output. So does
# bench/compare_onnxruntime.py (the same networks in ONNX Runtime), under "compare_onnxruntime".
# The build directory is FOXHUNT_BUILD_DIR (default build); build it first (scripts/run.sh build).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${FOXHUNT_BUILD_DIR:-build}"
OUT="$BUILD/bench-results.json"
FILTER="."
MIN_TIME="0.2"
COMPARE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift ;;
    --filter) FILTER="$2"; shift ;;
    --min-time) MIN_TIME="$2"; shift ;;
    --compare) COMPARE="$2"; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -z "$COMPARE" ] || [ -f "$COMPARE" ] || { echo "bench: --compare: no file '$COMPARE'" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failed=0
programs=()
# peak_bench first: it writes BUILD/peak.json, which the others' fraction-of-peak counters read.
for src in bench/peak_bench.cpp $(ls bench/*.cpp | grep -v '^bench/peak_bench.cpp$'); do
  name=$(basename "$src" .cpp)
  bin="$BUILD/$name"
  if [ ! -x "$bin" ]; then
    echo "bench: $bin is not built (scripts/run.sh build)" >&2
    failed=1
    continue
  fi
  echo "[bench] $name" >&2
  if "$bin" --benchmark_filter="$FILTER" --benchmark_min_time="$MIN_TIME" \
      --benchmark_out="$WORK/$name.json" --benchmark_out_format=json >"$WORK/$name.log" 2>&1; then
    programs+=("$name")
  else
    echo "bench: $name failed:" >&2
    tail -5 "$WORK/$name.log" >&2
    failed=1
  fi
done

# The same networks in PyTorch eager (bench/compare_python.py), for the models the filter selects.
PY=.venv/bin/python
if [ -x "$PY" ] && [ -x "$BUILD/models_bench" ]; then
  models=$("$BUILD/models_bench" --benchmark_list_tests=true --benchmark_filter="$FILTER" 2>/dev/null \
    | sed -n 's|^forward/\([^/]*\)/.*|\1|p' | sort -u | paste -sd, -)
  # ... and the same networks in ONNX Runtime (bench/compare_onnxruntime.py).
  for cmp in compare_python compare_onnxruntime; do
    [ -n "$models" ] || break
    echo "[bench] $cmp ($models)" >&2
    if ! "$PY" "bench/$cmp.py" --build "$BUILD" --threads "${FOXHUNT_THREADS:-1}" \
        --min-time "$MIN_TIME" --models "$models" --out "$WORK/$cmp.json" \
        >&2 2>"$WORK/$cmp.log"; then
      echo "bench: $cmp failed:" >&2
      tail -5 "$WORK/$cmp.log" >&2
      failed=1
    fi
  done
elif [ ! -x "$PY" ]; then
  echo "bench: $PY is missing: no PyTorch-eager comparison (scripts/setup.sh)" >&2
fi

PEAK_JSON="$BUILD/peak.json" python3 - "$WORK" "$OUT" "$COMPARE" "${programs[@]}" <<'PYEOF'
import json, os, sys, tempfile
work, out, compare, programs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
result = {"context": None, "benchmarks": {}}
# Latency percentiles, FLOP rates and fractions of the machine's peak (bench/peak_fraction.h),
# the peak figures themselves (bench/peak_bench.cpp) and the benchmarks' labels.
KEPT = {"p50_us", "p99_us", "flops", "gflops", "peak_fraction", "roofline_fraction",
        "best_gflops", "gops", "best_gops", "gbs", "best_gbs", "label"}
for p in programs:
    path = os.path.join(work, p + ".json")
    try:
        data = json.load(open(path))
    except (OSError, ValueError):  # no benchmark matched the filter: nothing written
        continue
    result["context"] = result["context"] or data.get("context")
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        entry = {k: b[k] for k in ("real_time", "cpu_time", "time_unit", "iterations") if k in b}
        entry.update({k: v for k, v in b.items() if k.endswith("per_second") or k in KEPT})
        result["benchmarks"][f"{p}/{b['name']}"] = entry
try:  # the machine's peak per core (bench/peak_bench.cpp)
    result["peak"] = json.load(open(os.environ["PEAK_JSON"]))
except (OSError, ValueError):
    pass
for cmp in ("compare_python", "compare_onnxruntime"):
    try:  # written even when an output check failed ("ok": false)
        result[cmp] = json.load(open(os.path.join(work, cmp + ".json")))
    except (OSError, ValueError):
        pass
d = os.path.dirname(os.path.abspath(out))
fd, tmp = tempfile.mkstemp(dir=d)
with os.fdopen(fd, "w") as f:
    json.dump(result, f, indent=2)
os.replace(tmp, out)
print(f"[bench] {len(result['benchmarks'])} benchmarks -> {out}", file=sys.stderr)
if compare:
    old = json.load(open(compare))["benchmarks"]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    flagged = 0
    print(f"{'benchmark':60s} {'old':>12s} {'new':>12s} {'change':>8s}")
    for name, new in sorted(result["benchmarks"].items()):
        if name not in old:
            print(f"{name:60s} {'-':>12s} {new['real_time']:>10.4g}{new['time_unit']:>2s}      new")
            continue
        o = old[name]
        a = o["real_time"] * scale[o.get("time_unit", "ns")]
        b = new["real_time"] * scale[new.get("time_unit", "ns")]
        change = (b - a) / a if a > 0 else 0.0
        mark = "  SLOWER" if change > 0.10 else "  faster" if change < -0.10 else ""
        flagged += bool(mark)
        print(f"{name:60s} {a*1e6:>10.4g}us {b*1e6:>10.4g}us {100*change:>+7.1f}%{mark}")
    for name in sorted(set(old) - set(result["benchmarks"])):
        print(f"{name:60s} (gone)")
    print(f"[bench] {flagged} benchmarks changed by more than 10%", file=sys.stderr)
    for cmp, peer in (("compare_python", "eager"), ("compare_onnxruntime", "ORT")):
        old_cp = (json.load(open(compare)).get(cmp) or {}).get("results", {})
        new_cp = (result.get(cmp) or {}).get("results", {})
        if not (old_cp and new_cp):
            continue
        flagged = 0
        print(f"{'foxhunt/' + peer + ' ratio':60s} {'old':>12s} {'new':>12s} {'change':>8s}")
        for name, new in sorted(new_cp.items()):
            o = old_cp.get(name, {})
            if "ratio" not in new or "ratio" not in o:
                continue
            change = (new["ratio"] - o["ratio"]) / o["ratio"] if o["ratio"] > 0 else 0.0
            mark = "  SLOWER" if change > 0.10 else "  faster" if change < -0.10 else ""
            flagged += bool(mark)
            print(f"{cmp + '/' + name:60s} {o['ratio']:>11.3f}x {new['ratio']:>11.3f}x "
                  f"{100*change:>+7.1f}%{mark}")
        print(f"[bench] {flagged} foxhunt/{peer} ratios changed by more than 10%", file=sys.stderr)
PYEOF
exit $failed
