#!/usr/bin/env bash
# One entry point for the README quick start:
#   scripts/run.sh validate   set up, build, run `foxhunt validate` on its embedded defaults
#   scripts/run.sh test       set up, build, run the whole test suite (unit + slow learning tests)
#   scripts/run.sh build      set up and build only
#   scripts/run.sh fuzz [SECONDS] [TARGET...]
#                             libFuzzer runs (clang, ASan + UBSan) of the fuzz targets in fuzz/,
#                             SECONDS each (default 60); exit 1 on a crash, its input saved
#   scripts/run.sh sanitize [--ci] [CTEST ARGS]
#                             ASan + UBSan build (build-asan), then the unit suite under it;
#                             --ci: only the parsers, containers, serving and stress tests (CI)
#   scripts/run.sh tsan [CTEST ARGS]
#                             ThreadSanitizer build (build-tsan), then the concurrent serving,
#                             stress and data-parallel tests under it
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-validate}"
shift || true

scripts/setup.sh

if [ "$what" = fuzz ]; then
  # A separate clang build: every object instrumented (coverage, ASan, UBSan), LibTorch not.
  secs="${1:-60}"
  shift || true
  FUZZ_DIR="${FOXHUNT_FUZZ_DIR:-build-fuzz}"
  targets=("$@")
  if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/*.cpp; do
      n="$(basename "$f" .cpp)"
      [ "$n" = replay_main ] || targets+=("$n")
    done
  fi
  if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFOXHUNT_FUZZ=ON -DFOXHUNT_BUILD_TESTS=OFF -DFOXHUNT_BUILD_BENCH=OFF \
      -DFOXHUNT_BUILD_PYTHON=OFF >/dev/null
  fi
  cmake --build "$FUZZ_DIR" -j "${FOXHUNT_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"
  failed=()
  for t in "${targets[@]}"; do
    # New inputs go to the build's corpus; the checked-in seeds are read, never written.
    mkdir -p "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/crashes"
    echo "[fuzz] $t: ${secs} s" >&2
    if ! "$FUZZ_DIR/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/crashes/$t-" \
        "$FUZZ_DIR/corpus/$t" "fuzz/corpus/$t" 2>"$FUZZ_DIR/$t.log"; then
      failed+=("$t")
      tail -n 40 "$FUZZ_DIR/$t.log" >&2
    fi
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$FUZZ_DIR/$t.log" | tr '\n' ' ' >&2
    echo >&2
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "[fuzz] FAILED: ${failed[*]} (inputs in $FUZZ_DIR/crashes/: fix, then add each to fuzz/corpus/TARGET/)" >&2
    exit 1
  fi
  echo "[fuzz] ${#targets[@]} targets, ${secs} s each: no crash" >&2
  exit 0
fi

if [ "$what" = sanitize ] || [ "$what" = tsan ]; then
  # LibTorch is not instrumented; the suppressions (sanitizers/*.supp) are narrow, each with its
  # reason. Sanitizer-aware bounds: core/sanitizers.h.
  kind=address; dir="${FOXHUNT_ASAN_DIR:-build-asan}"
  if [ "$what" = tsan ]; then kind=thread; dir="${FOXHUNT_TSAN_DIR:-build-tsan}"; fi
  ci=0
  if [ "${1:-}" = --ci ]; then ci=1; shift; fi
  if [ ! -f "$dir/build.ninja" ]; then
    # -O1 and line tables only: the sanitizers' usual level, and a third less compile time.
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOXHUNT_SANITIZE=$kind \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
      -DFOXHUNT_BUILD_BENCH=OFF -DFOXHUNT_BUILD_PYTHON=OFF >/dev/null
  fi
  start=$(date +%s)
  # The test binary, the CLI it runs, the library example and the fuzz-corpus replays.
  cmake --build "$dir" -j "${FOXHUNT_JOBS:-$(nproc)}" --target foxhunt_tests foxhunt_cli library_example \
    $(for f in fuzz/*.cpp; do n="$(basename "$f" .cpp)"; [ "$n" = replay_main ] || echo "fuzz_replay_$n"; done)
  echo "[run] $what build: $(( $(date +%s) - start )) s" >&2
  supp="$PWD/sanitizers"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_odr_violation=0:${ASAN_OPTIONS:-}"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp:${UBSAN_OPTIONS:-}"
  export TSAN_OPTIONS="suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
  start=$(date +%s)
  if [ "$what" = sanitize ] && [ $ci = 1 ]; then
    # CI's share: every reader of outside bytes (bars, panel and tape CSV, bar specs, containers
    # and bundle headers, safetensors, rules, profiles, options; the fuzz corpora), the C ABI,
    # the serving runtime, the stress harness, the TFT stream's raw-float kernels and the stats.
    ctest --test-dir "$dir" -L unit -j "${FOXHUNT_JOBS:-$(nproc)}" --output-on-failure \
      -R 'Fuzz\.|^Bars|^Panel|^Tape|^BarSpec|^BarBuilder|^FlowFeatures|^Calendar|^Container|^BundleContract|^FileIo|^Error|^Safetensors|^RuleFit|^DecisionRule|^DeviceProfile|^StreamingFeatures|^Serving|^Stress|^Desk|^Capi|^CsvPanelSource|^ChunkRunner|^StreamOnThreads|^TftStream|^Stats\.' \
      -E '_CUDA$' "$@"
  elif [ "$what" = sanitize ]; then
    ctest --test-dir "$dir" -L unit -j "${FOXHUNT_JOBS:-$(nproc)}" --output-on-failure "$@"
  else
    # The tests that run threads: concurrent serving, the desk, stress, data-parallel training.
    ctest --test-dir "$dir" -L unit -R 'Desk|Concurrent|Parallel|Stress|Dist|Serving|ThreadPool|ChunkRunner|StreamOnThreads' \
      -j 1 --output-on-failure "$@"
  fi
  echo "[run] $what tests: $(( $(date +%s) - start )) s" >&2
  exit 0
fi

# The layering rule first: it takes a second and names the offending #include.
[ "$what" = test ] && scripts/check-layers.sh
BUILD_DIR="${FOXHUNT_BUILD_DIR:-build}"
JOBS="${FOXHUNT_JOBS:-$(nproc)}"
start=$(date +%s)
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # The test run (CI) builds warnings-as-errors for foxhunt's own code (not LibTorch's headers).
  werror=OFF; [ "$what" = test ] && werror=ON
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOXHUNT_WERROR=$werror >/dev/null
fi
# validate needs the CLI only; the tests need everything (the suite, examples, benchmarks).
target=()
[ "$what" = validate ] && target=(--target foxhunt_cli)
cmake --build "$BUILD_DIR" -j "$JOBS" "${target[@]}"
echo "[run] build: $(( $(date +%s) - start )) s" >&2

case "$what" in
  build) ;;
  validate) "$BUILD_DIR/foxhunt" validate "$@" ;;
  test)
    start=$(date +%s)
    # One process per core, one intra-op thread each (foxhunt's default): two OpenMP teams
    # spinning on two cores slow each other down many times over. Both labels in one run: the
    # slow tests (COST 1000) start first and the short ones fill the cores around them.
    ctest --test-dir "$BUILD_DIR" -L '^(unit|slow)$' -j "$JOBS" --output-on-failure "$@"
    # `pip install .` of the Python module (reusing this build) and its tests, installed.
    scripts/test-pip.sh "$BUILD_DIR"
    echo "[run] tests: $(( $(date +%s) - start )) s" >&2
    ;;
  *) echo "usage: scripts/run.sh validate|test|build|fuzz [SECONDS] [TARGET...]|sanitize|tsan" >&2; exit 2 ;;
esac
