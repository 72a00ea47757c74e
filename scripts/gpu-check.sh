#!/usr/bin/env bash
# The prepared GPU check: one run on a machine with an NVIDIA GPU and Python torch installed.
#   scripts/gpu-check.sh [--dry-run] [--out FILE]    (default FILE: gpu-check.json)
# Steps (each timed; a step that cannot run is recorded as skipped with the reason):
#   1. detect: nvidia-smi, Python torch (version, CUDA), the GPU
#   2. build:  configure against that torch (torch.utils.cmake_prefix_path) in build-gpu/, -j nproc
#   3. tests:  every *_CUDA GoogleTest (JSON results: passed, failed, skipped)
#   4. stress: foxhunt stress --device cuda --device-profile rtx3050ti-4gb (concurrent, switch,
#              soak), the 4 GB card emulated on the big GPU by the allocator's memory fraction
#   5. budget: foxhunt budget --device cuda --device-profile rtx3050ti-4gb: the three views measured
#              by the caching allocator under the profile's cap, with the workspace/context tags
#      plan:   foxhunt plan MODEL --device cuda --device-profile rtx3050ti-4gb for the four models:
#              the trainers' real steps measured by the caching allocator, verified under the
#              profile's usable bytes as its memory fraction
#      train:  foxhunt train tft --batch auto --device cuda (the whole run under the enforced cap)
# Writes one JSON file with every figure. --dry-run detects and prints the plan, runs nothing.
# A bare GPU machine (no apt) finds nlohmann-json, CLI11, Gloo's headers and GoogleTest in
# .gpu-deps/usr, packed here by scripts/gpu-deps.sh. GPU_CHECK_WORK=DIR keeps each step's log and
# the steps so far in DIR (so a run cut short still tells how far it got); GPU_CHECK_STEP_S caps
# each step after the build (default 150 s).
# Budget: under 10 minutes on an H200-class machine (the build is most of it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT="gpu-check.json"
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (expected --dry-run or --out FILE)" >&2; exit 2 ;;
  esac
  shift
done
PY="${PYTHON:-python3}"
if [ -n "${GPU_CHECK_WORK:-}" ]; then
  WORK="$GPU_CHECK_WORK"; mkdir -p "$WORK"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
STEP_S="${GPU_CHECK_STEP_S:-150}"
# timeout(1) where there is one: a hung step must not take the whole run with it.
TO=""; command -v timeout >/dev/null 2>&1 && TO="timeout --kill-after=10 $STEP_S"
log() { echo "[gpu-check] $*" >&2; }

# Results accumulate as one JSON object per step in $WORK/steps.jsonl.
step() {  # name status seconds detail-json
  printf '{"step": "%s", "status": "%s", "seconds": %s, "detail": %s}\n' "$1" "$2" "$3" "$4" \
    >>"$WORK/steps.jsonl"
  log "$1: $2 (${3} s)"
}
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }  # no bc on bare images
# The step's JSON where it wrote valid JSON, else the tail of its log as a JSON string.
json_or_log() { [ -s "$1" ] && "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null \
  && cat "$1" || "$PY" -c 'import json,sys,os; print(json.dumps("no JSON written; log tail: " + (open(sys.argv[1], errors="replace").read()[-3000:] if os.path.exists(sys.argv[1]) else "(no log)")))' "$2"; }
# Records step NAME from exit status RC (done when 0) and start time T, with $WORK/BASE.json as its
# detail, or the tail of $WORK/BASE.log (BASE: NAME unless given).
record() {  # name rc t [base]
  step "$1" "$([ "$2" = 0 ] && echo done || echo failed)" "$(since "$3")" \
    "$(json_or_log "$WORK/${4:-$1}.json" "$WORK/${4:-$1}.log")"
}
# Runs `foxhunt ARGS...` as step NAME: stdout to $WORK/NAME.json, stderr to $WORK/NAME.log.
foxhunt_step() {  # name args...
  local name=$1 t
  shift
  t=$(now)
  $TO "$BIN/foxhunt" "$@" >"$WORK/$name.json" 2>"$WORK/$name.log"
  record "$name" $? "$t"
}
# True where there are a CUDA device and the foxhunt binary; else records step NAME as skipped.
cuda_and_binary() {  # name
  [ -x "$BIN/foxhunt" ] && [ $HAVE_GPU = 1 ] && return 0
  step "$1" skipped "$(since "$t")" '"no CUDA device or no binary"'
  return 1
}
json_file_or() { [ -s "$1" ] && "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null \
  && cat "$1" || echo "$2"; }

# 1. detect
t=$(now)
GPU="none"; SMI="absent"
if command -v nvidia-smi >/dev/null 2>&1; then
  SMI="present"
  GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$GPU" ] || GPU="none"
fi
TORCH=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count(), sep="|")' 2>/dev/null || echo "absent|||")
IFS='|' read -r TORCH_VERSION TORCH_CUDA CUDA_OK CUDA_COUNT <<<"$TORCH"
PREFIX=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || echo "")
DEPS_PREFIX=""
[ -d "$ROOT/.gpu-deps/usr" ] && DEPS_PREFIX=";$ROOT/.gpu-deps/usr"
HAVE_GPU=0
[ "$CUDA_OK" = "True" ] && [ "${CUDA_COUNT:-0}" -gt 0 ] 2>/dev/null && HAVE_GPU=1
PLAN_DEVICE=cpu  # plans on the card where there is one, with the CPU ledger otherwise
[ $HAVE_GPU = 1 ] && PLAN_DEVICE=cuda
step detect done "$(since "$t")" "$(printf '{"nvidia_smi": "%s", "gpu": "%s", "torch": "%s", "torch_cuda": "%s", "cuda_available": %s, "devices": %s, "cmake_prefix_path": "%s", "cores": %s}' \
  "$SMI" "$GPU" "$TORCH_VERSION" "$TORCH_CUDA" "$([ $HAVE_GPU = 1 ] && echo true || echo false)" \
  "${CUDA_COUNT:-0}" "$PREFIX" "$(nproc)")"

plan() {
  cat >&2 <<TXT
[gpu-check] plan on this machine (gpu: $GPU; torch $TORCH_VERSION, CUDA ${TORCH_CUDA:-none}, available: $CUDA_OK):
  2. build   cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=$PREFIX && cmake --build build-gpu -j $(nproc)
  3. tests   build-gpu/foxhunt_tests --gtest_filter='*_CUDA*' --gtest_output=json  $([ $HAVE_GPU = 1 ] || echo "(would be SKIPPED: no CUDA device)")
  4. stress  build-gpu/foxhunt stress --device cuda --device-profile rtx3050ti-4gb --scenario concurrent,switch,soak --json  $([ $HAVE_GPU = 1 ] || echo "(would be SKIPPED: no CUDA device)")
  5. budget  build-gpu/foxhunt budget --device $PLAN_DEVICE --device-profile rtx3050ti-4gb --json
     plan    build-gpu/foxhunt plan MODEL --device $PLAN_DEVICE --device-profile rtx3050ti-4gb --json for dqn ppo mamba2 tft
     train   build-gpu/foxhunt train tft --batch auto --device cuda --epochs 1 --json $([ $HAVE_GPU = 1 ] || echo "(would be SKIPPED: no CUDA device)")
  6. dist    build-gpu/foxhunt train mamba2 --device cuda --nproc 2 --backend gloo --epochs 1 --json
             (two ranks on one GPU over Gloo; NCCL needs one GPU per rank: also --backend nccl when
             there are >= 2 devices)  $([ $HAVE_GPU = 1 ] || echo "(would be SKIPPED: no CUDA device)")
TXT
}

if [ $DRY = 1 ]; then
  plan
  for s in build tests stress budget plan train_auto dist; do step "$s" "skipped" 0 '"dry run"'; done
else
  # 2. build
  t=$(now)
  if [ -z "$PREFIX" ]; then
    step build skipped "$(since "$t")" '"Python torch not importable: nothing to build against"'
  elif cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX$DEPS_PREFIX" \
        -DFOXHUNT_BUILD_BENCH=OFF >"$WORK/configure.log" 2>&1 &&
      cmake --build build-gpu -j "$(nproc)" >"$WORK/build.log" 2>&1; then
    step build done "$(since "$t")" '"build-gpu"'
  else
    step build failed "$(since "$t")" "$("$PY" -c 'import json,sys; print(json.dumps("".join(open(f).read() for f in sys.argv[1:] if __import__("os").path.exists(f))[-4000:]))' "$WORK/configure.log" "$WORK/build.log" 2>/dev/null || echo '"see build-gpu"')"
  fi
  BIN="$ROOT/build-gpu"
  # Which C++ runtime the binary really loads (a libstdc++ other than the compiler's is the first
  # suspect for a crash inside std::filesystem seen on an H200 machine).
  if [ -x "$BIN/foxhunt" ]; then
    LIBS=$( (c++ --version | head -1; ldd "$BIN/foxhunt" | grep -E 'libstdc|libgcc_s') 2>&1 |
      "$PY" -c 'import json,sys; print(json.dumps(sys.stdin.read().strip().splitlines()))')
    step runtime_libs done 0 "$LIBS"
  fi
  # 3. CUDA tests
  t=$(now)
  if [ ! -x "$BIN/foxhunt_tests" ]; then
    step tests skipped "$(since "$t")" '"no test binary (build failed or skipped)"'
  elif [ $HAVE_GPU = 0 ]; then
    step tests skipped "$(since "$t")" '"no CUDA device"'
  else
    $TO "$BIN/foxhunt_tests" --gtest_filter='*_CUDA*' --gtest_output="json:$WORK/cuda_tests.json" \
      >"$WORK/cuda_tests.log" 2>&1
    record tests $? "$t" cuda_tests
  fi
  # 4. stress on the emulated 4 GB card
  t=$(now)
  if cuda_and_binary stress; then
    $TO "$BIN/foxhunt" stress --device cuda --device-profile rtx3050ti-4gb \
      --scenario concurrent,switch,soak --json >"$WORK/stress.json" 2>"$WORK/stress.log"
    rc=$?
    # A crash (signal): the same run once more under gdb, its backtraces kept with the log.
    DBG=$(command -v gdb || command -v cuda-gdb || true)
    if [ $rc -ge 128 ] && [ $rc -ne 137 ] && [ -n "$DBG" ]; then
      $TO "$DBG" -q -batch -ex run -ex "thread apply all bt 12" --args "$BIN/foxhunt" stress \
        --device cuda --device-profile rtx3050ti-4gb --scenario concurrent,switch,soak --json \
        >"$WORK/stress_gdb.log" 2>&1
      tail -c 6000 "$WORK/stress_gdb.log" >>"$WORK/stress.log"
    fi
    record stress $rc "$t"
  fi
  # 5. budget and plan (on the card where there is one, the CPU ledger otherwise)
  if [ -x "$BIN/foxhunt" ]; then
    foxhunt_step budget budget --device "$PLAN_DEVICE" --device-profile rtx3050ti-4gb --json
    for m in dqn ppo mamba2 tft; do
      foxhunt_step "plan_$m" plan "$m" --device "$PLAN_DEVICE" --device-profile rtx3050ti-4gb --json
    done
  else
    step budget skipped 0 '"no binary"'
  fi
  # 5b. --batch auto on CUDA: planned on the card, trained under the enforced cap
  t=$(now)
  if cuda_and_binary train_auto; then
    foxhunt_step train_auto train tft --batch auto --device cuda --device-profile rtx3050ti-4gb \
      --epochs 1 --progress off --json --out "$WORK/train_auto"
  fi
  # 6. data-parallel training with CUDA tensors (Gloo on one GPU; NCCL when there are two)
  t=$(now)
  if cuda_and_binary dist; then
    backends="gloo"
    [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)" -ge 2 ] &&
      backends="gloo nccl"
    for b in $backends; do
      foxhunt_step "dist_$b" train mamba2 --device cuda --nproc 2 --backend "$b" --epochs 1 \
        --progress off --timeout 120 --json --out "$WORK/dist_$b"
    done
  fi
fi

"$PY" - "$WORK/steps.jsonl" "$OUT" <<'PYEOF'
import json, os, sys, tempfile
# One JSON object per step; a step's detail may span lines (pretty-printed reports).
text, steps, dec, i = open(sys.argv[1]).read(), [], json.JSONDecoder(), 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    steps.append(obj)
out = {"steps": steps,
       "skipped": [s["step"] for s in steps if s["status"] == "skipped"],
       "failed": [s["step"] for s in steps if s["status"] == "failed"],
       "ok": not any(s["status"] == "failed" for s in steps)}
d = os.path.dirname(os.path.abspath(sys.argv[2]))
fd, tmp = tempfile.mkstemp(dir=d)
with os.fdopen(fd, "w") as f:
    json.dump(out, f, indent=2)
os.replace(tmp, sys.argv[2])
print(f"[gpu-check] wrote {sys.argv[2]}: skipped {out['skipped'] or 'nothing'}, failed {out['failed'] or 'nothing'}", file=sys.stderr)
sys.exit(0 if out["ok"] else 1)
PYEOF
