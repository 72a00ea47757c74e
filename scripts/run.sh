#!/usr/bin/env bash
# One entry point for the README quick start:
#   scripts/run.sh validate   set up, build, run `foxhunt validate` on its embedded defaults
#   scripts/run.sh test       set up, build, run the whole test suite (unit + slow learning tests)
#   scripts/run.sh build      set up and build only
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-validate}"
shift || true

scripts/setup.sh
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
    # spinning on two cores slow each other down many times over.
    ctest --test-dir "$BUILD_DIR" -L unit -j "$JOBS" --output-on-failure "$@"
    ctest --test-dir "$BUILD_DIR" -L slow -j "$JOBS" --output-on-failure "$@"
    echo "[run] tests: $(( $(date +%s) - start )) s" >&2
    ;;
  *) echo "usage: scripts/run.sh validate|test|build" >&2; exit 2 ;;
esac
