#!/usr/bin/env bash
# Renders an HTML report in headless Chromium and checks that the screenshot is not blank.
#   scripts/render-report.sh REPORT.html OUT.png
# Exit codes: 0 the page shows content (more than 1% non-white pixels), 1 the screenshot is blank,
# 2 usage or missing input, 3 no Chromium or it failed to write the screenshot.
# The browser is $CHROMIUM, else chromium / chromium-browser / google-chrome on PATH. It runs with
# --no-sandbox (needed as root, e.g. in containers) and a throwaway profile that is removed on exit.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 REPORT.html OUT.png" >&2
  exit 2
fi
html=$1
out=$2
if [ ! -f "$html" ]; then
  echo "render-report: expected an HTML file, '$html' does not exist" >&2
  exit 2
fi

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
      browser=$(command -v "$candidate")
      break
    fi
  done
fi
if [ -z "$browser" ]; then
  echo "render-report: expected chromium on PATH (or \$CHROMIUM), found none" >&2
  exit 3
fi

here=$(cd "$(dirname "$0")" && pwd)
# A file:// URI with spaces and other characters percent-encoded.
url=$(python3 -c 'import pathlib, sys; print(pathlib.Path(sys.argv[1]).resolve().as_uri())' "$html")
out_abs=$(python3 -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' "$out")
profile=$(mktemp -d "${TMPDIR:-/tmp}/foxhunt-chromium.XXXXXX")
trap 'rm -rf "$profile"' EXIT
rm -f "$out_abs"

start=$(date +%s.%N)
# The browser logs harmless D-Bus noise on stderr; it is kept in the profile and shown on failure.
status=0
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --no-first-run --no-default-browser-check --window-size=1200,1600 \
  --user-data-dir="$profile" --screenshot="$out_abs" "$url" \
  >"$profile/browser.log" 2>&1 || status=$?
end=$(date +%s.%N)
if [ "$status" -ne 0 ] || [ ! -s "$out_abs" ]; then
  echo "render-report: $browser exited with $status and wrote no screenshot to '$out_abs':" >&2
  tail -n 20 "$profile/browser.log" >&2 || true
  exit 3
fi
python3 -c 'import sys; print(f"render-report: rendered in {float(sys.argv[2]) - float(sys.argv[1]):.2f} s", file=sys.stderr)' "$start" "$end"

python3 "$here/../tests/python/check_screenshot.py" "$out_abs"
