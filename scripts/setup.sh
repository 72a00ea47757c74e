#!/usr/bin/env bash
# Installs everything foxhunt needs on Debian 12 (run as root; idempotent; ~1 s when all is there).
#   apt: build tools, GoogleTest, Google Benchmark, CLI11, nlohmann-json, spdlog/fmt, chromium
#        (headless render checks of the HTML reports), libgloo-dev (headers of the Gloo library
#        the torch wheel links; c10d's ProcessGroupGloo.hpp includes them)
#   pip: the pinned PyPI torch wheel (LibTorch headers, libraries and CMake config; CUDA build)
#   venv: .venv in the repo root for the Python cross-checks (tests/python), with safetensors
#   data: the S&P 500 daily closes for the forecast-quality tests (~/.cache/foxhunt, see below)
# Everything lands in system locations (dpkg, the system python3's site-packages), so a fresh clone
# on the same machine finds it again without downloading anything.
set -euo pipefail

TORCH_PIN="${FOXHUNT_TORCH_PIN:-2.15.0}"
APT_PACKAGES=(build-essential cmake ninja-build git pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev chromium libgloo-dev)

log() { echo "[setup] $*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  log "apt: all ${#APT_PACKAGES[@]} packages present"
fi

PY="${PYTHON:-python3}"
have_torch() {
  "$PY" - "$TORCH_PIN" <<'PYEOF' 2>/dev/null
import sys, importlib.metadata as md
v = md.version("torch")
sys.exit(0 if v.split("+")[0] == sys.argv[1] else 1)
PYEOF
}
if have_torch; then
  log "pip: torch ${TORCH_PIN} present"
else
  log "pip: installing torch==${TORCH_PIN} (the CUDA build: ~0.5 GB wheel + ~3 GB nvidia runtime wheels)"
  "$PY" -m pip install --quiet "torch==${TORCH_PIN}"
  have_torch || { log "torch ${TORCH_PIN} did not install"; exit 1; }
fi
# numpy only silences a torch import warning in the Python cross-checks.
"$PY" -c "import numpy" 2>/dev/null || "$PY" -m pip install --quiet numpy || true

# The Python cross-checks (tests/python, run by the C++ tests with .venv/bin/python): a venv that
# keeps the system torch visible (--system-site-packages) and adds what only the checks need.
VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  log "venv: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV"
fi
if "$VENV/bin/python" -c "import safetensors" 2>/dev/null; then
  log "venv: safetensors present"
else
  log "venv: installing safetensors"
  "$VENV/bin/python" -m pip install --quiet safetensors
  "$VENV/bin/python" -c "import safetensors" || { log "safetensors did not install"; exit 1; }
fi

# A real close-only daily series for the model-quality checks (issue 11): the S&P 500 daily closes
# 1999-2018 that the pinned `arch` wheel on PyPI ships as package data (arch/data/sp500), rewritten
# as "date,close" with ISO dates. Only the wheel's data file is used; arch is not installed.
ARCH_PIN="8.0.0"
DATA_DIR="${FOXHUNT_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/foxhunt}"
SP500="$DATA_DIR/sp500_close.csv"
if [ -s "$SP500" ]; then
  log "data: $SP500 present"
else
  log "data: fetching the S&P 500 daily closes (arch==${ARCH_PIN} wheel, package data only)"
  mkdir -p "$DATA_DIR"
  tmp="$(mktemp -d)"
  # Not fatal: without it only the two forecast-quality tests fail (naming this file).
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "arch==${ARCH_PIN}" &&
  "$PY" - "$tmp" "$SP500" <<'PYEOF' || log "data: could not fetch $SP500 (the forecast-quality tests need it)"
import csv, datetime, glob, gzip, io, os, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "arch-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    raw = gzip.decompress(z.read("arch/data/sp500/sp500.csv.gz")).decode()
rows = list(csv.DictReader(io.StringIO(raw)))
part = out + ".tmp"
with open(part, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["date", "close"])
    for r in rows:
        d = datetime.datetime.strptime(r["Date"], "%m/%d/%Y").date().isoformat()
        w.writerow([d, r["Close"]])
os.replace(part, out)  # atomic: a half-written file is never left under the final name
print(f"[setup] data: wrote {out} ({len(rows)} bars)", file=sys.stderr)
PYEOF
  rm -rf "$tmp"
fi
