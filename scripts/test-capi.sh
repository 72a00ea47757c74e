#!/usr/bin/env bash
# The C ABI from outside, as a C or Rust trading engine uses it (README "From C, Rust and other
# languages"): install the build to a temporary prefix; libfoxhunt_c.so exports exactly the
# header's foxhunt_* functions; examples/c/stream.c (C99, -Werror -pedantic, via pkg-config) and
# examples/rust (cargo build --offline) build against the prefix; on a series and on a panel both
# print `foxhunt predict --json`'s decisions, positions and signals bit for bit; both exit 2 with
# the library's message on a missing bundle directory. Run by ctest
# (Install.CApiConsumersMatchPredict). Usage: scripts/test-capi.sh BUILD_DIR
# shellcheck source=scripts/install-prefix.sh
source "$(dirname "$0")/install-prefix.sh" "$1"
fail() {
  echo "test-capi: $*" >&2
  exit 1
}

lib="$prefix/lib/libfoxhunt_c.so"
for f in "$lib" "$prefix/include/foxhunt/foxhunt.h" "$prefix/lib/pkgconfig/foxhunt.pc"; do
  test -f "$f" || fail "not installed: $f"
done

# ---- exports: the header's functions, nothing else (no C++, no LibTorch) ----------------------
# Symbols the linker itself may define in any shared object.
linker_symbols='_init|_fini|_edata|_end|__bss_start'
nm -D --defined-only "$lib" | awk '{print $NF}' | grep -vxE "$linker_symbols" | sort > "$tmp/exports.txt"
sed -nE 's/^FOXHUNT_API [^(]*[ *](foxhunt_[a-z_]+)\(.*/\1/p' "$src/include/foxhunt/foxhunt.h" \
  | sort > "$tmp/declared.txt"
test "$(wc -l < "$tmp/declared.txt")" -ge 15 || fail "read too few declarations from foxhunt.h"
diff "$tmp/declared.txt" "$tmp/exports.txt" > "$tmp/exports.diff" || {
  head -40 "$tmp/exports.diff" >&2
  fail "libfoxhunt_c.so: expected exactly the foxhunt_* functions of foxhunt.h as dynamic" \
    "symbols ('<' declared, not exported; '>' exported, not declared)"
}

# ---- the two consumers, built against the prefix only -----------------------------------------
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc_flags=$(pkg-config --cflags --libs foxhunt) || fail "pkg-config --cflags --libs foxhunt failed"
# shellcheck disable=SC2086  # the flags are words
run "${CC:-cc}" -std=c99 -Wall -Wextra -Werror -pedantic -o "$tmp/stream_c" \
  "$src/examples/c/stream.c" $pc_flags
command -v cargo > /dev/null || fail "cargo not found: scripts/setup.sh installs Debian's rustc and cargo"
# A copy: the build writes Cargo.lock and target/ beside the manifest, not in the source tree.
cp -r "$src/examples/rust" "$tmp/rust"
rm -rf "$tmp/rust/target" "$tmp/rust/Cargo.lock"
run env FOXHUNT_PREFIX="$prefix" CARGO_TARGET_DIR="$tmp/rust/target" \
  cargo build --offline --release --manifest-path "$tmp/rust/Cargo.toml"
stream_rs="$tmp/rust/target/release/stream"
test -x "$stream_rs" || fail "cargo built no $stream_rs"

# ---- bundles, a series and a panel ------------------------------------------------------------
train_bundles
run "$fh" data generate --bars 400 --seed 6 --start 1800000000 --out "$tmp/live2.csv"
# A panel whose rows are grouped by symbol, the later symbol in byte order first ("SPX" < "wti"),
# and with bars missing for one symbol: the consumers must sort and batch as predict does.
{
  echo "timestamp,symbol,open,high,low,close,volume"
  tail -n +2 "$tmp/live2.csv" | awk -F, -v OFS=, '{print $1, "wti", $2, $3, $4, $5, $6}'
  tail -n +2 "$tmp/live.csv" | awk -F, -v OFS=, 'NR % 7 != 3 {print $1, "SPX", $2, $3, $4, $5, $6}'
} > "$tmp/panel.csv"
# Without a dead band and with a large gain, briefly trained models move the position: the
# comparison then compares something.
echo '{"dead_band": 0.0, "forecast_gain": 50.0}' > "$tmp/rule.json"

# One canonical line per decision: timestamp, symbol ("-" for a series), then decision, position
# and each model's signal (by name) as exact hex floats ("null" while warming up).
cat > "$tmp/canon.py" <<'PY'
import json, sys

def h(v):
    return "null" if v is None else float(v).hex()

def line(ts, sym, dec, pos, sig):
    return " ".join([str(ts), sym, h(dec), h(pos)] + [f"{m}={h(sig[m])}" for m in sorted(sig)])

kind, path = sys.argv[1], sys.argv[2]
if kind == "predict":
    for l in open(path):
        d = json.loads(l)
        print(line(d["timestamp"], d.get("symbol", "-"), d["decision"], d["position"], d["signals"]))
else:
    rows = open(path).read().splitlines()
    models = rows[0].split(",")[4:]
    for r in rows[1:]:
        f = r.split(",")
        sig = {m: None if s == "null" else float(s) for m, s in zip(models, f[4:])}
        if len(sig) != len(models) or len(f) != 4 + len(models):
            sys.exit(f"{path}: expected {4 + len(models)} fields, got: {r}")
        print(line(int(f[0]), f[1], float(f[2]), float(f[3]), sig))
PY

for input in live panel; do
  "$fh" predict --bundles "$tmp/bundles" --data "$tmp/$input.csv" --rule "$tmp/rule.json" --json \
    2> /dev/null > "$tmp/predict.jsonl" || fail "foxhunt predict on $input.csv failed"
  python3 "$tmp/canon.py" predict "$tmp/predict.jsonl" > "$tmp/want.txt"
  lines=$(wc -l < "$tmp/want.txt")
  expected=400
  [ "$input" = panel ] && expected=$((400 + 400 - 57))  # 57 SPX rows dropped (NR % 7 == 3)
  test "$lines" -eq "$expected" || fail "$input: predict gave $lines decisions, expected $expected"
  moves=$(awk '$3 != "0x0.0p+0" && $3 != "-0x0.0p+0"' "$tmp/want.txt" | wc -l)
  test "$moves" -gt 50 || fail "$input: expected positions to be taken, got $moves non-zero"
  ready=$(grep -c -v '=null' "$tmp/want.txt" || true)
  test "$ready" -gt 50 || fail "$input: expected decisions with every model ready, got $ready"
  for exe in "$tmp/stream_c" "$stream_rs"; do
    "$exe" "$tmp/bundles" "$tmp/$input.csv" "$tmp/rule.json" > "$tmp/got.csv" 2> "$tmp/err.txt" \
      || { cat "$tmp/err.txt" >&2; fail "$exe on $input.csv failed"; }
    python3 "$tmp/canon.py" consumer "$tmp/got.csv" > "$tmp/got.txt"
    diff "$tmp/want.txt" "$tmp/got.txt" > "$tmp/diff.txt" || {
      head -10 "$tmp/diff.txt" >&2
      fail "$exe on $input.csv: decisions differ from foxhunt predict --json ('<' predict)"
    }
  done
done

# ---- a missing bundle directory: exit 2 with the library's own message ------------------------
set +e
"$fh" predict --bundles "$tmp/nowhere" --data "$tmp/live.csv" > /dev/null 2> "$tmp/cli_err.txt"
set -e
message=$(sed -n 's/^foxhunt: //p' "$tmp/cli_err.txt" | head -1)
case "$message" in *"$tmp/nowhere"*) ;; *) fail "predict's message does not name the directory: $message" ;; esac
for exe in "$tmp/stream_c" "$stream_rs"; do
  set +e
  "$exe" "$tmp/nowhere" "$tmp/live.csv" > /dev/null 2> "$tmp/err.txt"
  rc=$?
  set -e
  test "$rc" -eq 2 || fail "$exe: expected exit 2 for a missing bundle directory, got $rc"
  grep -qF -- "$message" "$tmp/err.txt" \
    || fail "$exe: expected the library's message '$message', got: $(cat "$tmp/err.txt")"
done
echo "test-capi: only foxhunt_* exported; C and Rust equal to foxhunt predict on a series and a panel"
