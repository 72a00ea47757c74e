#!/usr/bin/env bash
# What a C++ engine embedding foxhunt does (README "Embedding"): install the build to a
# temporary prefix, build examples/embed against it with find_package(foxhunt CONFIG), train
# bundles with the installed CLI and stream bars through the example. Run by ctest
# (Install.EmbedExampleBuildsAndRuns). Usage: scripts/test-install.sh BUILD_DIR
# shellcheck source=scripts/install-prefix.sh
source "$(dirname "$0")/install-prefix.sh" "$1"
test -f "$prefix/lib/cmake/foxhunt/foxhuntConfig.cmake"
test -f "$prefix/lib/cmake/foxhunt/foxhuntConfigVersion.cmake"
test -x "$prefix/bin/foxhunt"
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
run cmake -S "$src/examples/embed" -B "$tmp/embed" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix"
run cmake --build "$tmp/embed"
train_bundles
# Without a dead band, and with the forecasters taking their full size at a small edge (the
# default "distribution" rule's gain is 1 / full_edge; forecast_gain is the "median" rule's),
# briefly trained models move the position: the comparison below then compares something.
echo '{"dead_band": 0.0, "full_edge": 0.02}' > "$tmp/rule.json"
"$tmp/embed/embed" "$tmp/bundles" "$tmp/live.csv" "$tmp/rule.json" > "$tmp/decisions.txt"
# ... and the rule's gain is read: at the default full_edge the decisions differ.
echo '{"dead_band": 0.0}' > "$tmp/rule-default-edge.json"
"$tmp/embed/embed" "$tmp/bundles" "$tmp/live.csv" "$tmp/rule-default-edge.json" > "$tmp/default-edge.txt"
if cmp -s "$tmp/decisions.txt" "$tmp/default-edge.txt"; then
  echo "full_edge 0.02 and the default 0.1 gave the same decisions: the rule does not read it" >&2
  exit 1
fi
lines=$(wc -l < "$tmp/decisions.txt")
test "$lines" -eq 400 || { echo "expected 400 decisions, got $lines" >&2; exit 1; }
# The same decisions as the CLI's predict (one code path).
moves=$(cut -d' ' -f2 "$tmp/decisions.txt" | grep -vc '^[+-]0.0000$' || true)
test "$moves" -gt 100 || { echo "expected positions to be taken, got $moves non-zero" >&2; exit 1; }
"$fh" predict --bundles "$tmp/bundles" --data "$tmp/live.csv" --rule "$tmp/rule.json" --json 2>/dev/null \
  | python3 -c 'import json,sys; [print("%+.4f" % json.loads(l)["decision"]) for l in sys.stdin]' \
  > "$tmp/cli.txt"
cut -d' ' -f2 "$tmp/decisions.txt" | diff - "$tmp/cli.txt" > /dev/null \
  || { echo "embed and foxhunt predict disagree" >&2; exit 1; }
# A bad bundle directory is the typed input error (exit 2) in the embedding program too.
set +e
"$tmp/embed/embed" "$tmp/nowhere" "$tmp/live.csv" 2> /dev/null
rc=$?
set -e
test "$rc" -eq 2 || { echo "expected exit 2 for a missing bundle directory, got $rc" >&2; exit 1; }
echo "install + embed: $lines decisions, equal to foxhunt predict"
