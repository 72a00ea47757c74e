#!/usr/bin/env bash
# Data-parallel scaling on this machine: the same training run on 1 rank and on N local ranks
# (foxhunt train --nproc), samples per second and what the all-reduce costs per step.
#   scripts/bench-dist.sh [--nproc N] [--model mamba2|tft|dqn|ppo] [--epochs E | --steps S]
#                         [--batch B] [--out FILE]
# --batch is the per-rank batch of the N-rank run; the 1-rank run uses N*B, so both take the
# same optimizer steps over the same global batches. Writes a JSON summary (default
# bench-dist.json, atomically) and prints a table. Build first (scripts/run.sh build).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${FOXHUNT_BUILD_DIR:-build}/foxhunt"
NPROC=2; MODEL=mamba2; EPOCHS=2; STEPS=""; BATCH=32; OUT=bench-dist.json
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) NPROC="$2"; shift ;;
    --model) MODEL="$2"; shift ;;
    --epochs) EPOCHS="$2"; shift ;;
    --steps) STEPS="$2"; EPOCHS=""; shift ;;
    --batch) BATCH="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n 2,8p "$0"; exit 0 ;;
    *) echo "bench-dist: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$BIN" ] || { echo "bench-dist: $BIN not built (scripts/run.sh build)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LEN="--epochs $EPOCHS"; [ -n "$STEPS" ] && LEN="--steps $STEPS"
run() {  # run NAME BATCH [extra flags]
  local name=$1 batch=$2; shift 2
  local t0=$(date +%s.%N)
  "$BIN" train "$MODEL" $LEN --batch "$batch" --seed 1 --progress off --json --eval-episodes 0 \
    --out "$WORK/$name" "$@" > "$WORK/$name.json"
  local t1=$(date +%s.%N)
  python3 - "$WORK/$name.json" "$t0" "$t1" <<'PY' > "$WORK/$name.row"
import json, sys
s = json.load(open(sys.argv[1])); wall = float(sys.argv[3]) - float(sys.argv[2])
m = s["metrics"]; d = s.get("distributed") or {}
steps = d.get("steps_synchronized") or s["steps"]
print(json.dumps({"world_size": s.get("world_size", 1), "steps": s["steps"],
  "samples_per_s": m.get("samples_per_s"), "samples_per_s_all_ranks": s.get("samples_per_s_all_ranks", m.get("samples_per_s")),
  "train_seconds": s["seconds"], "wall_seconds": wall,
  "optimizer_steps": steps, "buckets": d.get("buckets"), "bucket_bytes": d.get("bucket_bytes"),
  "allreduce_wait_ms_per_step": 1000 * d["communication_wait_s"] / steps if d else None,
  "gradient_sync_ms_per_step": 1000 * d["gradient_sync_s"] / steps if d else None,
  "weights_identical": (d.get("last_weight_check") or {}).get("identical")}))
PY
}
run one $((BATCH * NPROC))
run many "$BATCH" --nproc "$NPROC"
python3 - "$WORK/one.row" "$WORK/many.row" "$OUT" "$MODEL" "$NPROC" "$BATCH" <<'PY'
import json, os, sys
one, many = (json.load(open(p)) for p in sys.argv[1:3])
out, model, n, b = sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
res = {"model": model, "cores": os.cpu_count(), "one_rank": one, "ranks": many,
       "speedup": many["samples_per_s_all_ranks"] / one["samples_per_s_all_ranks"]
       if one["samples_per_s_all_ranks"] else None}
tmp = out + ".tmp"
open(tmp, "w").write(json.dumps(res, indent=2) + "\n"); os.replace(tmp, out)
print(f"{model}: 1 rank at batch {n*b} vs {n} ranks at batch {b} ({os.cpu_count()} cores)")
print(f"{'ranks':>6} {'steps':>6} {'samples/s':>10} {'train s':>8} {'wait ms/step':>13} {'sync ms/step':>13}")
for r in (one, many):
    f = lambda v: "-" if v is None else f"{v:.2f}"
    print(f"{r['world_size']:>6} {r['steps']:>6} {r['samples_per_s_all_ranks']:>10.1f} {r['train_seconds']:>8.1f} "
          f"{f(r['allreduce_wait_ms_per_step']):>13} {f(r['gradient_sync_ms_per_step']):>13}")
print(f"speedup {res['speedup']:.2f}x, weights identical across ranks: {many['weights_identical']}; wrote {out}")
PY
