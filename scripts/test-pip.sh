#!/usr/bin/env bash
# `pip install .` of the foxhunt Python module, then its tests against the installed package
# (tests/python/test_module.py: Python and the CLI give identical decisions on the same bars).
#
#   scripts/test-pip.sh [BUILD_DIR]   (default: build; scripts/run.sh test calls it)
#
# scikit-build-core builds in BUILD_DIR (-C build-dir), the directory the CMake build already
# compiled, so the install compiles nothing the build has: it configures BUILD_DIR again with the
# same options (tests and benchmarks kept on: the suite's targets stay in BUILD_DIR), builds the
# `_foxhunt` target and installs the `python` component into a fresh directory, from which the
# tests import the module. No build isolation: this venv's torch (LibTorch) and nanobind.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
[ -f "$BUILD_DIR/CMakeCache.txt" ] || { echo "test-pip: no CMake build in $BUILD_DIR" >&2; exit 2; }
PY="$PWD/.venv/bin/python"
target="$(mktemp -d "${TMPDIR:-/tmp}/foxhunt-pip.XXXXXX")"
trap 'rm -rf "$target"' EXIT
start=$(date +%s)
"$PY" -m pip install --quiet --no-build-isolation --no-deps --target "$target" \
  -C build-dir="$BUILD_DIR" \
  -C cmake.define.FOXHUNT_BUILD_TESTS=ON -C cmake.define.FOXHUNT_BUILD_BENCH=ON .
echo "[test-pip] pip install: $(( $(date +%s) - start )) s" >&2
# The installed package, not the build tree's: imported from $target with the repo off sys.path.
(cd "$target" && "$PY" -c "import foxhunt, sys; assert foxhunt.__file__.startswith(sys.argv[1]), foxhunt.__file__; print('[test-pip] foxhunt', foxhunt.__version__, 'from', foxhunt.__file__)" "$target")
PYTHONPATH="$target" FOXHUNT_CLI="$PWD/$BUILD_DIR/foxhunt" \
  "$PY" -m pytest -q -p no:cacheprovider tests/python/test_module.py
echo "[test-pip] done: $(( $(date +%s) - start )) s" >&2
