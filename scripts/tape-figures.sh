#!/usr/bin/env bash
# The tape figures of the Ticks issue on the E-mini tape that scripts/setup.sh caches:
#  1. skill: train all on the bars of the first 85% of the 1-minute bars' time (the fit holds the
#     last 15% of those out for validation, so training sees ~70%), then backtest the whole tape:
#     its last 15% is scored. Twice: on the tape (the five flow columns on) and on the same bars
#     as a plain OHLCV CSV (flow off). Prints each forecaster's pinball skill against its best
#     naive baseline with the bootstrap interval, and the strategies' Sharpe.
#  2. per bar type (time:1m, tick:500, volume:1000, dollar:1.5e6: 1,000-2,300 bars on this tape),
#     bundles trained on the tape (time:1m: those of 1); `predict --ticks` over the whole tape
#     with all four models: wall time of the whole command (process start and bundle load
#     included) and of a 1,000-print tape (the fixed cost), so the steady state is their
#     difference; print-to-decision p50/p99 as predict reports them.
#   scripts/tape-figures.sh [OUT_DIR]     (default out/tape-figures; ~4 minutes on 2 cores)
# Environment: FOXHUNT (default build/foxhunt), FOXHUNT_DATA_DIR (the data cache), TAPE (another
# tape with DateTime,Price,Volume columns), SEED (default 0).
set -euo pipefail

out=${1:-out/tape-figures}
bin=${FOXHUNT:-build/foxhunt}
data_dir=${FOXHUNT_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/foxhunt}
tape=${TAPE:-$data_dir/emini_tick_data.csv}
seed=${SEED:-0}
[ -x "$bin" ] || { echo "tape-figures: expected the foxhunt binary at '$bin' (FOXHUNT)" >&2; exit 2; }
[ -s "$tape" ] || { echo "tape-figures: expected a tape at '$tape': run scripts/setup.sh" >&2; exit 2; }
mkdir -p "$out"

# -- 1. skill, flow on and off --------------------------------------------------------------------
"$bin" data bars --ticks "$tape" --bar time:1m --out "$out/bars_1m.csv" >/dev/null
bars=$(($(wc -l <"$out/bars_1m.csv") - 1))
cut=$((bars * 85 / 100))
# The first bar after the cut opens the held-out part; prints before it train.
cut_time=$(sed -n "$((cut + 2))p" "$out/bars_1m.csv" | cut -d, -f1)
cut_tape=$(echo "$cut_time" | sed 's/T/ /; s/Z$//')
awk -F, -v t="$cut_tape" 'NR == 1 || $1 < t' "$tape" >"$out/tape_train.csv"
cut -d, -f1-6 "$out/bars_1m.csv" >"$out/bars_1m_plain.csv"
head -n $((cut + 1)) "$out/bars_1m_plain.csv" >"$out/bars_train_plain.csv"
echo "## E-mini tape: $bars one-minute bars; training before $cut_time ($cut bars), the rest scored"
"$bin" train all --ticks "$out/tape_train.csv" --bar time:1m --seed "$seed" --out "$out/flow" \
  --progress off >"$out/train_flow.txt" 2>&1 || true
"$bin" train all --data "$out/bars_train_plain.csv" --seed "$seed" --out "$out/plain" \
  --progress off >"$out/train_plain.txt" 2>&1 || true
"$bin" backtest --bundles "$out/flow" --ticks "$tape" --gate none --json >"$out/bt_flow.json"
"$bin" backtest --bundles "$out/plain" --data "$out/bars_1m_plain.csv" --gate none --json \
  >"$out/bt_plain.json"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("| flow features | scored bars | forecaster | best naive | pinball skill [95% CI] | P10-P90 coverage | ensemble Sharpe | vol-target Sharpe |")
print("|---|---|---|---|---|---|---|---|")
for name in ("flow", "plain"):
    j = json.load(open(f"{out}/bt_{name}.json"))
    s = j["strategies"]
    for model, f in sorted(j["forecasters"].items()):
        print(f"| {'on' if name == 'flow' else 'off'} | {j['scored_bars']} | {model} | "
              f"{f['best_baseline']} | {100 * f['skill']:+.1f}% [{100 * f['skill_lo']:+.1f}%, "
              f"{100 * f['skill_hi']:+.1f}%] | {100 * f['coverage_p10_p90']:.1f}% | "
              f"{s['ensemble']['sharpe']:.2f} | {s['vol_target']['sharpe']:.2f} |")
PY

# -- 2. predict --ticks per bar type: throughput and print-to-decision ------------------------------
# Bundles per bar type (time:1m: the flow ones of 1; the others trained on the whole tape: the
# prints before the cut are too few for tick/volume/dollar bars of these sizes, and only their
# speed is measured here).
head -n 1001 "$tape" >"$out/tape_1k.csv"
prints=$(($(wc -l <"$tape") - 1))
echo
echo "## predict --ticks, four models, the whole tape ($prints prints), best of 3 runs"
echo "| bar | bars | whole command | prints/s | fixed cost (start, load, 1,000 prints) | steady prints/s | print-to-decision p50 | p99 |"
echo "|---|---|---|---|---|---|---|---|"
for spec in time:1m tick:500 volume:1000 dollar:1.5e6; do
  dir="$out/flow"
  if [ "$spec" != time:1m ]; then
    dir="$out/bundles_${spec%%:*}"
    [ -s "$dir/summary.json" ] || "$bin" train all --ticks "$tape" --bar "$spec" \
      --seed "$seed" --out "$dir" --progress off >"$dir.txt" 2>&1
  fi
  python3 "$(dirname "$0")/../bench/time_predict_ticks.py" "$bin" "$dir" "$tape" "$out/tape_1k.csv" 3 "$spec" --row
done
