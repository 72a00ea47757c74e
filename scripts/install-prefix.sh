# shellcheck shell=bash disable=SC2034  # the variables are the callers'
# Sourced (not run) by scripts/test-install.sh and scripts/test-capi.sh, with the caller's
# BUILD_DIR as $1: installs the build to a temporary prefix and defines what both tests use.
#   build, src  the build tree and the source tree (absolute)
#   tmp         a scratch directory, removed when the caller exits
#   prefix, fh  the installed tree and its foxhunt CLI
#   run CMD...  runs CMD quietly; on failure prints its output and exits 1
#   train_bundles  trains bundles of all four models into $tmp/bundles on $tmp/train.csv (1,500
#               synthetic bars, seed 3) and writes the 400 later bars $tmp/live.csv (seed 4)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # quiet unless it fails
  "$@" > "$tmp/step.log" 2>&1 || { cat "$tmp/step.log" >&2; echo "FAILED: $*" >&2; exit 1; }
}
prefix="$tmp/prefix"
run cmake --install "$build" --prefix "$prefix"
fh="$prefix/bin/foxhunt"
train_bundles() {
  run "$fh" data generate --bars 1500 --seed 3 --out "$tmp/train.csv"
  run "$fh" train all --data "$tmp/train.csv" --steps 256 --epochs 1 --eval-episodes 0 \
    --progress off --out "$tmp/bundles"
  run "$fh" data generate --bars 400 --seed 4 --start 1800000000 --out "$tmp/live.csv"
}
