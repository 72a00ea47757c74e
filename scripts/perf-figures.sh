#!/usr/bin/env bash
# Every target of the performance issue (#48) measured in one run on the built binaries, and every
# forward's time against this machine's own peak. Writes, atomically:
#   DIR/perf-figures.json   every figure, each target with its measured value and whether it is met
#   DIR/perf-figures.md     (a) every forward: dqn, ppo, mamba2, tft at batch 1 and 64, the TFT's
#                           INT8 form and the BF16 forms of the TFT and Mamba-2 (where the CPU has
#                           BF16): time, GFLOP/s, fraction of the peak of its precision
#                           (BUILD/peak.json, written by peak_bench); (b) each target: measured, met
# and prints the Markdown. The raw outputs of every step stay in DIR/raw/.
#   scripts/perf-figures.sh [--out DIR] [--quick] [--only LIST]
# --out    output directory (default out/perf-figures; git ignores out/)
# --quick  a smoke test (~2 minutes on 2 cores): short benchmark times, one bar type, short
#          stress runs, SB3 at a tenth of the steps; its figures are not the targets' (the full run
#          takes ~6-10 minutes on 2 cores)
# --only   comma-separated steps (default all): peak, forwards, bf16acc, tape, predict, stress,
#          desk, budget, ort, sb3 (the tables show only what DIR/raw holds from this run)
# Steps: peak_bench (peak.json); models_bench forward/*, quant_bench BM_TftForward and
# BM_Bf16Forward (median of 3 repetitions); a TFT trained 1-3 epochs on the S&P 500 closes cast to
# BF16 (`foxhunt quantize --precision bf16`: the test pinball loss against FP32); tape_bench
# (parse MB/s, bar building prints/s); `predict --ticks` over the E-mini tape with all four
# models per bar type (bundles trained briefly on the tape, kept in DIR/bundles_*: only their
# speed is measured), whole command best of 3 and the fixed cost of a 1,000-print tape;
# `stress --scenario concurrent` (one instrument, fresh default models: bar p50/p99, speedup over
# serial; median of 3 runs) and with --instruments 64 (the batching gain over one instrument);
# `budget --instruments 500` (wall time, the fit's prediction error); bench/compare_onnxruntime.py
# (dqn, ppo) and bench/compare_sb3.py (CartPole DQN 50k / PPO 100k steps against
# Stable-Baselines3; its packages come from `scripts/setup.sh --bench`, run here on first use).
# A step that fails leaves its figures "n/a" and makes the exit code 1; the rest still run.
# Environment: FOXHUNT_BUILD_DIR (default build), FOXHUNT_PYTHON (default .venv/bin/python),
# FOXHUNT_PEAK_JSON (default BUILD/peak.json), FOXHUNT_DATA_DIR (the data cache), TAPE (another
# tape), SEED (default 0), FOXHUNT_NO_INSTALL=1 (never run setup.sh for the SB3 packages).
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD="${FOXHUNT_BUILD_DIR:-build}"
OUT=out/perf-figures
QUICK=0
ONLY=all
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "perf-figures: --out needs a directory" >&2; exit 2; }
      OUT="$2"; shift ;;
    --quick) QUICK=1 ;;
    --only) [ $# -ge 2 ] || { echo "perf-figures: --only needs a list" >&2; exit 2; }
      ONLY="$2"; shift ;;
    -h|--help) sed -n 2,31p "$0"; exit 0 ;;
    *) echo "perf-figures: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
STEPS="peak forwards bf16acc tape predict stress desk budget ort sb3"
if [ "$ONLY" != all ]; then
  for s in ${ONLY//,/ }; do
    case " $STEPS " in *" $s "*) ;;
      *) echo "perf-figures: --only: expected steps among '$STEPS', got '$s'" >&2; exit 2 ;;
    esac
  done
fi
want() { [ "$ONLY" = all ] || case ",$ONLY," in *",$1,"*) true ;; *) false ;; esac; }

bin="$BUILD/foxhunt"
for b in foxhunt peak_bench models_bench quant_bench tape_bench; do
  [ -x "$BUILD/$b" ] ||
    { echo "perf-figures: expected $BUILD/$b (FOXHUNT_BUILD_DIR; scripts/run.sh build)" >&2
      exit 2; }
done
PY="${FOXHUNT_PYTHON:-.venv/bin/python}"
data_dir=${FOXHUNT_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/foxhunt}
tape=${TAPE:-$data_dir/emini_tick_data.csv}
sp500="$data_dir/sp500_close.csv"
seed=${SEED:-0}
export FOXHUNT_PEAK_JSON="${FOXHUNT_PEAK_JSON:-$BUILD/peak.json}"
RAW="$OUT/raw"
rm -rf "$RAW"  # figures of an earlier run never mix with this one's
mkdir -p "$RAW"
log() { echo "[perf-figures] $*" >&2; }

if ((QUICK)); then
  MIN_TIME=0.05 REPS=1 BAR_SPECS="time:1m" PREDICT_RUNS=1 STRESS_RUNS=1 STRESS_ITERS=300
  DESK_ITERS=30 ORT_MIN_TIME=0.05 DQN_STEPS=5000 PPO_STEPS=10000 TFT_EPOCHS=1
  TRAIN_FLAGS=(--steps 500 --epochs 1)
else
  MIN_TIME=0.5 REPS=3 BAR_SPECS="time:1m tick:500 volume:1000 dollar:1.5e6" PREDICT_RUNS=3
  STRESS_RUNS=3 STRESS_ITERS=1000 DESK_ITERS=200 ORT_MIN_TIME=0.5 DQN_STEPS=50000
  PPO_STEPS=100000 TFT_EPOCHS=3 TRAIN_FLAGS=(--steps 2000 --epochs 1)
fi
printf '{"quick": %d, "load_start": "%s", "started": "%s", "commit": "%s"}\n' "$QUICK" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$RAW/run.json"

failed=0
# step NAME CMD...: runs CMD with stdout to RAW/NAME.out and stderr to RAW/NAME.err; records its
# exit code and wall seconds in RAW/NAME.step.
step() {
  local name=$1; shift
  log "$name"
  local t0 rc ms
  t0=$(date +%s%N)
  "$@" >"$RAW/$name.out" 2>"$RAW/$name.err"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  printf '{"rc": %d, "seconds": %d.%03d}\n' "$rc" $((ms / 1000)) $((ms % 1000)) >"$RAW/$name.step"
  if [ "$rc" -ne 0 ]; then
    log "$name failed (exit $rc), see $RAW/$name.err:"
    tail -3 "$RAW/$name.err" >&2
    failed=1
  fi
  return "$rc"
}
gbench() {  # gbench NAME PROGRAM FILTER: a Google Benchmark program's JSON in RAW/NAME.json
  local name=$1 prog=$2 filter=$3
  step "$name" "$BUILD/$prog" --benchmark_filter="$filter" --benchmark_min_time="$MIN_TIME" \
    --benchmark_repetitions="$REPS" --benchmark_out="$RAW/$name.json" --benchmark_out_format=json
}

want peak && gbench peak peak_bench .
if want forwards; then
  gbench models models_bench '^forward/'
  gbench quant quant_bench 'BM_TftForward/int8:[01]/|BM_Bf16Forward'
fi
if want bf16acc; then
  if [ -s "$sp500" ]; then
    step bf16acc_train "$bin" train tft --data "$sp500" --epochs "$TFT_EPOCHS" --seed "$seed" \
      --out "$RAW/tft_sp500" --progress off &&
      step bf16acc "$bin" quantize tft --bundle "$RAW/tft_sp500" --out "$RAW/tft_sp500_bf16" \
        --precision bf16 --json
  else
    log "bf16acc: $sp500 is missing (scripts/setup.sh): skipped"
  fi
fi
if want tape; then
  if [ -s "$tape" ]; then gbench tape tape_bench .; else log "tape: $tape is missing: skipped"; fi
fi

# predict --ticks per bar type: the whole command best of PREDICT_RUNS, and a 1,000-print tape's.
if want predict && [ -s "$tape" ]; then
  head -n 1001 "$tape" >"$RAW/tape_1k.csv"
  for spec in $BAR_SPECS; do
    kind=${spec%%:*}
    dir="$OUT/bundles_$kind"
    # Bundles are kept between runs unless the binary is newer than them.
    if [ ! -s "$dir/summary.json" ] || [ "$bin" -nt "$dir/summary.json" ]; then
      rm -rf "$dir"
      step "train_$kind" "$bin" train all --ticks "$tape" --bar "$spec" --seed "$seed" \
        "${TRAIN_FLAGS[@]}" --out "$dir" --progress off || continue
    fi
    step "predict_$kind" python3 bench/time_predict_ticks.py "$bin" "$dir" "$tape" \
      "$RAW/tape_1k.csv" "$PREDICT_RUNS" "$spec"
  done
elif want predict; then
  log "predict: $tape is missing: skipped"
fi

if want stress; then
  for i in $(seq "$STRESS_RUNS"); do
    step "stress_$i" "$bin" stress --scenario concurrent --iterations "$STRESS_ITERS" --json
  done
fi
if want desk; then
  for i in $(seq "$STRESS_RUNS"); do
    step "desk_$i" "$bin" stress --scenario concurrent --instruments 64 \
      --iterations "$DESK_ITERS" --json
  done
fi
want budget && step budget "$bin" budget --instruments 500 --json

if want ort; then
  if [ -x "$PY" ]; then
    step ort "$PY" bench/compare_onnxruntime.py --build "$BUILD" --threads 1 \
      --min-time "$ORT_MIN_TIME" --models dqn,ppo --out "$RAW/ort.json"
  else
    log "ort: $PY is missing (scripts/setup.sh): skipped"
  fi
fi
if want sb3; then
  sb3_ok() { [ -x "$PY" ] && "$PY" -c "import stable_baselines3, gymnasium" 2>/dev/null; }
  if ! sb3_ok && [ "${FOXHUNT_NO_INSTALL:-0}" != 1 ]; then
    log "sb3: installing stable-baselines3 and gymnasium (scripts/setup.sh --bench)"
    scripts/setup.sh --bench >"$RAW/setup_bench.log" 2>&1 || log "sb3: setup.sh --bench failed"
  fi
  if sb3_ok; then
    step sb3 "$PY" bench/compare_sb3.py --build "$BUILD" --dqn-steps "$DQN_STEPS" \
      --ppo-steps "$PPO_STEPS" --seed "$seed" --out "$RAW/sb3.json"
  else
    log "sb3: stable-baselines3 / gymnasium not importable by $PY: skipped"
  fi
fi

python3 scripts/perf_figures_report.py "$RAW" "$OUT" || failed=1
exit $failed
