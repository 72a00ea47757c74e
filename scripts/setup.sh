#!/usr/bin/env bash
# Installs everything foxhunt needs on Debian 12 (run as root; idempotent; ~1 s when all is there).
#   apt: build tools, GoogleTest, Google Benchmark, CLI11, nlohmann-json, spdlog/fmt, chromium
#        (headless render checks of the HTML reports), libgloo-dev (headers of the Gloo library
#        the torch wheel links; c10d's ProcessGroupGloo.hpp includes them)
#   pip: the pinned PyPI torch wheel (LibTorch headers, libraries and CMake config; CUDA build)
#   pip: nanobind (the Python module's bindings)
#   venv: .venv in the repo root for the Python cross-checks (tests/python), with safetensors,
#         pytest and scikit-build-core; onnxruntime and onnx (bench/compare_onnxruntime.py)
#   data: the S&P 500 daily closes for the forecast-quality tests (~/.cache/foxhunt, see below)
#   apt: rustc and cargo when no cargo is on PATH (examples/rust, the C ABI's Rust consumer that
#        scripts/test-capi.sh builds offline)
# Everything lands in system locations (dpkg, the system python3's site-packages), so a fresh clone
# on the same machine finds it again without downloading anything.
#   scripts/setup.sh [--bench]
# --bench  also stable-baselines3 and gymnasium in .venv (bench/compare_sb3.py, the CartPole
#          training comparison of scripts/perf-figures.sh, which runs this on first use); not
#          needed to build or test
set -euo pipefail

BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (expected --bench)" >&2; exit 2 ;;
  esac
done

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

# A Rust toolchain for examples/rust (no crates: `cargo build --offline`): Debian's, unless one
# is already on PATH (rustup's, for instance).
if command -v cargo > /dev/null; then
  log "rust: $(cargo --version) present"
else
  log "apt: installing rustc cargo (examples/rust)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq rustc cargo >/dev/null ||
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq rustc cargo >/dev/null; }
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

# The Python module (python/foxhunt, built by CMake with nanobind): nanobind in the system python
# that CMake finds (its CMake package and sources).
NANOBIND_PIN="2.9.2"
if "$PY" -c "import nanobind, sys; sys.exit(nanobind.__version__ != '${NANOBIND_PIN}')" 2>/dev/null; then
  log "pip: nanobind ${NANOBIND_PIN} present"
else
  log "pip: installing nanobind==${NANOBIND_PIN}"
  "$PY" -m pip install --quiet "nanobind==${NANOBIND_PIN}"
fi

# The Python cross-checks (tests/python, run by the C++ tests with .venv/bin/python): a venv that
# keeps the system torch visible (--system-site-packages) and adds what only the checks need.
VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  log "venv: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV"
fi
# scikit-build-core: `pip install --no-build-isolation .` of the Python module from this venv.
# onnxruntime + onnx: the engine a user would serve these networks with instead, and the package
# torch.onnx's exporter needs (bench/compare_onnxruntime.py and its ctest output check).
ORT_PIN=1.31.1 ONNX_PIN=1.23.2
# venv_packages LABEL MODULES PINNED PIP_ARGS...: nothing when the venv imports MODULES and the
# Python expression PINNED (their versions) holds; else pip installs PIP_ARGS and imports again.
venv_packages() {
  local label=$1 modules=$2 pinned=$3
  shift 3
  if "$VENV/bin/python" -c "import sys, $modules; sys.exit(not ($pinned))" 2>/dev/null; then
    log "venv: $label present"
  else
    log "venv: installing $label"
    "$VENV/bin/python" -m pip install --quiet "$@"
    "$VENV/bin/python" -c "import $modules" || { log "$label did not install"; exit 1; }
  fi
}
venv_packages "safetensors, pytest, scikit-build-core, onnxruntime, onnx" \
  "safetensors, pytest, scikit_build_core, onnx, onnxruntime" \
  "onnxruntime.__version__ == '$ORT_PIN' and onnx.__version__ == '$ONNX_PIN'" \
  safetensors "pytest==8.3.4" "scikit-build-core==0.11.6" "onnxruntime==${ORT_PIN}" \
  "onnx==${ONNX_PIN}"

# --bench: Stable-Baselines3 and gymnasium (pure Python; they use the system torch), for
# bench/compare_sb3.py only.
SB3_PIN=2.9.2 GYMNASIUM_PIN=1.4.0
if ((BENCH)); then
  venv_packages "stable-baselines3, gymnasium (--bench)" "stable_baselines3, gymnasium" \
    "stable_baselines3.__version__ == '$SB3_PIN' and gymnasium.__version__ == '$GYMNASIUM_PIN'" \
    "stable-baselines3==${SB3_PIN}" "gymnasium==${GYMNASIUM_PIN}"
fi

# Real daily data from the package data of the pinned `arch` wheel on PyPI (only the wheel's data
# files are read; arch is not installed), each file written once (skipped when present):
# - the S&P 500 daily closes 1999-2018 (arch/data/sp500) as "date,close" with ISO dates: the
#   close-only series of the model-quality checks (issue 11);
# - a long-format panel "date,symbol,open,high,low,close,volume" (data/panel.h), rows sorted by
#   date then symbol: SP500 and NASDAQ daily OHLCV 1999-2018 (arch/data/sp500, arch/data/nasdaq)
#   and WTI crude daily closes 1986-2019 (arch/data/wti, FRED's DCOILWTICO) as close-only rows
#   (open, high, low and volume left empty; FRED's '.' holidays dropped).
ARCH_PIN="8.0.0"
DATA_DIR="${FOXHUNT_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/foxhunt}"
SP500="$DATA_DIR/sp500_close.csv"
PANEL="$DATA_DIR/panel_sp500_nasdaq_wti.csv"
need_arch=0
for f in "$SP500" "$PANEL"; do
  if [ -s "$f" ]; then log "data: $f present"; else need_arch=1; fi
done
if ((need_arch)); then
  log "data: fetching daily series (arch==${ARCH_PIN} wheel, package data only)"
  mkdir -p "$DATA_DIR"
  tmp="$(mktemp -d)"
  # Not fatal: without them only the tests that read these files fail or skip (naming the file).
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "arch==${ARCH_PIN}" &&
  "$PY" - "$tmp" "$SP500" "$PANEL" <<'PYEOF' || log "data: could not write $SP500 / $PANEL (the forecast-quality and panel tests need them)"
import csv, datetime, glob, gzip, io, os, sys, zipfile
tmp, sp500_out, panel_out = sys.argv[1], sys.argv[2], sys.argv[3]
wheel = glob.glob(os.path.join(tmp, "arch-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    def rows(name):
        raw = gzip.decompress(z.read(f"arch/data/{name}/{name}.csv.gz")).decode()
        return list(csv.DictReader(io.StringIO(raw)))
    sp500, nasdaq, wti = rows("sp500"), rows("nasdaq"), rows("wti")

def iso(us_date):
    return datetime.datetime.strptime(us_date, "%m/%d/%Y").date().isoformat()

def write_atomic(out, header, records, lineterminator):
    part = out + ".tmp"
    with open(part, "w", newline="") as f:
        w = csv.writer(f, lineterminator=lineterminator)
        w.writerow(header)
        w.writerows(records)
    os.replace(part, out)  # atomic: a half-written file is never left under the final name

if not (os.path.exists(sp500_out) and os.path.getsize(sp500_out) > 0):
    write_atomic(sp500_out, ["date", "close"], [[iso(r["Date"]), r["Close"]] for r in sp500], "\r\n")
    print(f"[setup] data: wrote {sp500_out} ({len(sp500)} bars)", file=sys.stderr)

if not (os.path.exists(panel_out) and os.path.getsize(panel_out) > 0):
    records = []
    for symbol, data in (("SP500", sp500), ("NASDAQ", nasdaq)):
        for r in data:
            records.append([iso(r["Date"]), symbol, r["Open"], r["High"], r["Low"], r["Close"],
                            r["Volume"]])
    wti_bars = [r for r in wti if r["DCOILWTICO"] != "."]  # FRED marks holidays with '.'
    for r in wti_bars:
        records.append([iso(r["Date"]), "WTI", "", "", "", r["DCOILWTICO"], ""])
    records.sort(key=lambda rec: (rec[0], rec[1]))  # interleaved: by date, then symbol
    write_atomic(panel_out, ["date", "symbol", "open", "high", "low", "close", "volume"], records,
                 "\n")
    print(f"[setup] data: wrote {panel_out} ({len(sp500)} SP500 + {len(nasdaq)} NASDAQ + "
          f"{len(wti_bars)} WTI rows)", file=sys.stderr)
PYEOF
  rm -rf "$tmp"
fi

# A real trade tape from the package data of the pinned `mlfinpy` wheel on PyPI (pure Python, MIT;
# only its data file is read, mlfinpy is not installed): E-mini S&P 500 futures prints,
# mlfinpy/dataset/data/tick_data.csv, copied byte for byte as emini_tick_data.csv (500,000 prints,
# "DateTime,Price,Volume", 2013-09-01 17:00 to 2013-09-03 13:51, millisecond timestamps; the tape
# tests and the README's tape workflow read it). The wheel declares Python >= 3.11, so the download
# names that version (the wheel is py3-none-any: any interpreter can read the zip).
MLFINPY_PIN="0.1.2"
TAPE="$DATA_DIR/emini_tick_data.csv"
if [ -s "$TAPE" ]; then
  log "data: $TAPE present"
else
  log "data: fetching the E-mini tape (mlfinpy==${MLFINPY_PIN} wheel, package data only)"
  mkdir -p "$DATA_DIR"
  tmp="$(mktemp -d)"
  # Not fatal: without it only the tape tests skip (naming the file).
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --dest "$tmp" "mlfinpy==${MLFINPY_PIN}" &&
  "$PY" - "$tmp" "$TAPE" <<'PYEOF' || log "data: could not write $TAPE (the tape tests need it)"
import glob, os, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "mlfinpy-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    raw = z.read("mlfinpy/dataset/data/tick_data.csv")
part = out + ".tmp"
with open(part, "wb") as f:
    f.write(raw)
os.replace(part, out)  # atomic: a half-written file is never left under the final name
prints = raw.count(b"\n") - 1  # lines after the header
print(f"[setup] data: wrote {out} ({prints} prints)", file=sys.stderr)
PYEOF
  rm -rf "$tmp"
fi
