#!/usr/bin/env bash
# Fails when a file includes a header of an area it may not depend on (see ARCHITECTURE.md).
# The allowed sets mirror the DEPS of foxhunt_area() in CMakeLists.txt, closed transitively:
# each area may include itself and the areas below it on its own branch of the graph.
#   core <- memory <- dist;  core <- models <- quant;  core <- data;  core <- report;
#   memory, quant, data <- serving;  all but serving <- train <- plan;  plan, serving <- jobs;
#   jobs, report <- harness <- app/tests/bench
# (data and models are siblings: data produces matrices, models consume tensors; train joins them.
# report renders typed results as HTML/SVG/Markdown: it knows no model, only core.)
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [core]="core"
  [report]="core report"
  [memory]="core memory"
  [dist]="core memory dist"
  [models]="core models"
  [quant]="core models quant"
  [data]="core data"
  [train]="core memory dist models quant data train"
  [plan]="core memory dist models quant data train plan"
  [serving]="core memory models quant data serving"
  [jobs]="core memory dist models quant data serving train plan jobs"
  [harness]="core report memory dist models quant data serving train plan jobs harness"
)

bad=0
checked=0
while IFS= read -r file; do
  area=$(echo "$file" | sed -E 's#^(include/foxhunt|src)/([a-z_]+)/.*#\2#')
  if [ -z "${allowed[$area]+x}" ]; then
    echo "check-layers: $file: unknown area '$area' (expected one of: ${!allowed[*]})" >&2
    bad=1
    continue
  fi
  checked=$((checked + 1))
  while IFS= read -r line; do
    num=${line%%:*}
    dep=$(echo "$line" | sed -E 's#.*"foxhunt/([a-z_]+)/.*#\1#')
    if [[ " ${allowed[$area]} " != *" $dep "* ]]; then
      echo "check-layers: $file:$num: area '$area' includes 'foxhunt/$dep/' (allowed: ${allowed[$area]})" >&2
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"foxhunt/[a-z_]+/' "$file" || true)
  # Relative includes must stay inside the file's own area.
  while IFS= read -r line; do
    echo "check-layers: $file:${line%%:*}: relative include leaves the area: ${line#*:}" >&2
    bad=1
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"\.\./' "$file" || true)
done < <(find include/foxhunt src -type f \( -name '*.h' -o -name '*.cpp' \) | sort)

if [ "$bad" -ne 0 ]; then
  echo "check-layers: FAILED (an area may include only the areas listed for it)" >&2
  exit 1
fi
echo "check-layers: ok ($checked files, no upward includes)"
