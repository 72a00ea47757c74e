#!/usr/bin/env bash
# Packs the header-only and static build dependencies that a bare GPU machine lacks (it has
# CUDA, Python torch, CMake and ninja, but no apt): nlohmann-json, CLI11, Gloo's headers and
# GoogleTest, copied from this machine's Debian packages into .gpu-deps/usr with their CMake
# config files, which find their prefix relative to themselves. scripts/gpu-check.sh adds
# .gpu-deps/usr to CMAKE_PREFIX_PATH when it exists. Run scripts/setup.sh first.
#   scripts/gpu-deps.sh [DEST]      (default DEST: .gpu-deps, ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-.gpu-deps}"
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp"
for pkg in nlohmann-json3-dev libcli11-dev libgloo-dev libgtest-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
    { echo "gpu-deps: $pkg is not installed (run scripts/setup.sh)" >&2; exit 2; }
  # Only files (headers, CMake configs, static archives); docs and sources stay behind.
  dpkg -L "$pkg" | grep -E '^/usr/(include|share/cmake|lib)/' | while read -r f; do
    case "$f" in */libgloo*|*/cmake/Gloo/*) continue ;; esac
    [ -f "$f" ] && cp --parents "$f" "$DEST.tmp"
  done
done
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "gpu-deps: $(du -sh "$DEST" | cut -f1) in $DEST (prefix $DEST/usr)" >&2
