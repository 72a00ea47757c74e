#!/usr/bin/env bash
# The out-of-sample table of issue 50: the default ensemble against the volatility-targeted
# buy-and-hold, on the real S&P 500 (train to 2014, score 2015-2018), the real panel (the same
# split, equal-risk portfolio) and the S&P 500 walk-forward (refits every 504 bars from 60% of
# the file, as RESULTS.md's walk-forward entry). Prints a Markdown table: Sharpe, max drawdown,
# PSR, the ensemble's DSR, the fitted rule's choice and band, and whether the targets hold
# (ensemble Sharpe >= vol-target's - 0.05, its max drawdown no worse).
#   scripts/decisions-table.sh [OUT_DIR]        (default out/decisions)
# Environment: FOXHUNT (the binary; default build/foxhunt), FOXHUNT_DATA_DIR (where
# scripts/setup.sh put sp500_close.csv and panel_sp500_nasdaq_wti.csv), STEPS (RL steps,
# default 30000), EPOCHS (forecaster epochs, default 5), COST_BPS (default 1), EXTRA (more
# cost flags, e.g. "--spread-bps 1 --notional 1e7": train all trains and fits under them, the
# backtest scores with them). Each run's JSON stays in OUT_DIR; an
# ensemble already trained there is reused (delete OUT_DIR to start over). Takes ~30 minutes on
# 2 cores (the walk-forward trains 4 folds).
# Before/after: run it with the old binary (FOXHUNT=old/foxhunt, another OUT_DIR) and the new.
set -euo pipefail

out=${1:-out/decisions}
bin=${FOXHUNT:-build/foxhunt}
data_dir=${FOXHUNT_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/foxhunt}
steps=${STEPS:-30000}
epochs=${EPOCHS:-5}
cost=${COST_BPS:-1}
extra=${EXTRA:-}
sp500="$data_dir/sp500_close.csv"
panel="$data_dir/panel_sp500_nasdaq_wti.csv"

[ -x "$bin" ] || { echo "decisions-table: expected the foxhunt binary at '$bin' (FOXHUNT)" >&2; exit 2; }
for f in "$sp500" "$panel"; do
  [ -s "$f" ] || { echo "decisions-table: '$f' is missing: run scripts/setup.sh" >&2; exit 2; }
done
mkdir -p "$out"

# The rows of a CSV whose first column (an ISO date) is on or before 2014-12-31, with the header.
until_2014() {
  awk -F, 'NR == 1 || substr($1, 1, 10) <= "2014-12-31"' "$1" >"$2"
}

# Trains the ensemble on the bars up to 2014 unless it is already there, then backtests the whole
# file (the training range only warms up: 2015-2018 is scored).
held_out() {
  local name=$1 csv=$2
  local dir="$out/$name"
  if [ ! -f "$dir/ensemble/rule.json" ]; then
    until_2014 "$csv" "$out/$name-train.csv"
    echo "[decisions] $name: train all on $(($(wc -l <"$out/$name-train.csv") - 1)) rows" >&2
    # shellcheck disable=SC2086
    "$bin" train all --data "$out/$name-train.csv" --out "$dir/ensemble" --steps "$steps" \
      --epochs "$epochs" --cost-bps "$cost" $extra --progress off >"$dir.train.log" 2>&1 || {
      echo "decisions-table: train all failed, see $dir.train.log" >&2
      exit 1
    }
  fi
  echo "[decisions] $name: backtest 2015-2018" >&2
  # shellcheck disable=SC2086
  "$bin" backtest --bundles "$dir/ensemble" --data "$csv" --cost-bps "$cost" $extra --json \
    --gate none >"$dir.json"
}

mkdir -p "$out/sp500" "$out/panel"
held_out sp500 "$sp500"
held_out panel "$panel"
echo "[decisions] sp500: walk-forward every 504 bars" >&2
# shellcheck disable=SC2086
"$bin" backtest --data "$sp500" --walk-forward 504 --work "$out/walk-forward" --steps "$steps" \
  --epochs "$epochs" --cost-bps "$cost" $extra --json --gate none >"$out/walk-forward.json" \
  2>"$out/walk-forward.log"

python3 - "$out" "$bin" <<'PY'
import json, os, sys
out, binary = sys.argv[1], sys.argv[2]

def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)

def rule_of(path):
    try:
        with open(path) as f:
            fit = json.load(f).get("fit", {})
        return fit.get("chosen", "-"), fit.get("band", 0)
    except OSError:
        return "-", "-"

rows = []
sp = load("sp500.json")
rows.append(("S&P 500 2015-2018", sp["strategies"], rule_of(os.path.join(out, "sp500", "ensemble", "rule.json"))))
pn = load("panel.json")
rows.append(("panel 2015-2018 (equal-risk portfolio)", pn["portfolio"], rule_of(os.path.join(out, "panel", "ensemble", "rule.json"))))
wf = load("walk-forward.json")
folds = [r.get("rule_fit", {}) for r in wf.get("refits", [])]
chosen = ",".join(str(f.get("chosen", "-")) for f in folds)
bands = ",".join(f"{f.get('band', 0):g}" for f in folds)
rows.append((f"S&P 500 walk-forward ({len(folds)} folds)", wf["strategies"], (chosen, bands)))

def num(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)

print(f"binary: {binary}; cost {os.environ.get('COST_BPS', '1')} bp; extra flags: '{os.environ.get('EXTRA', '')}'")
print()
print("| series | ensemble Sharpe | vol-target Sharpe | buy-and-hold Sharpe | ensemble max dd | vol-target max dd | ensemble PSR | ensemble DSR | rule (chosen, band) | Sharpe >= vt - 0.05 | dd no worse |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, s, (chosen, band) in rows:
    e, v, b = s["ensemble"], s["vol_target"], s["buy_and_hold"]
    sharpe_ok = e["sharpe"] >= v["sharpe"] - 0.05
    dd_ok = e["max_drawdown"] >= v["max_drawdown"]
    print(f"| {name} | {num(e['sharpe'])} [{num(e.get('sharpe_lo'))}, {num(e.get('sharpe_hi'))}] "
          f"| {num(v['sharpe'])} | {num(b['sharpe'])} | {100 * e['max_drawdown']:.1f}% "
          f"| {100 * v['max_drawdown']:.1f}% | {num(e.get('psr'))} | {num(e.get('dsr'))} "
          f"| {chosen}, {band} | {'yes' if sharpe_ok else 'NO'} | {'yes' if dd_ok else 'NO'} |")
PY
