#!/usr/bin/env bash
# Fails when a file includes a header of an area it may not depend on (see ARCHITECTURE.md).
# The allowed sets are the DEPS of foxhunt_area() in CMakeLists.txt, closed transitively (read
# from there): each area may include itself and the areas below it on its own branch of the graph.
#   core <- memory <- dist;  core <- quant <- models;  core <- data;  core <- report;
#   memory, models, data <- serving;  all but serving <- train <- plan;  plan, serving <- jobs;
#   jobs, report <- harness <- capi (the C ABI; its header is include/foxhunt/foxhunt.h);
#   harness <- app/tests/bench;  core <- cuda (the CUDA plugin, linked by no area)
# (data and models are siblings: data produces matrices, models consume tensors; train joins them.
# report renders typed results as HTML/SVG/Markdown: it knows no model, only core.)
set -euo pipefail
cd "$(dirname "$0")/.."

# The areas in their CMakeLists.txt order (FOXHUNT_AREAS) and the direct DEPS each one's
# foxhunt_area() line gives it.
read -ra areas < <(sed -nE 's/^set\(FOXHUNT_AREAS (.*)\)$/\1/p' CMakeLists.txt)
declare -A deps
while read -r name rest; do
  deps[$name]=${rest#*DEPS}
done < <(sed -nE 's/^foxhunt_area\((.*)\)$/\1/p' CMakeLists.txt)
for area in "${areas[@]}"; do
  if [ -z "${deps[$area]+x}" ]; then
    echo "check-layers: CMakeLists.txt: FOXHUNT_AREAS lists '$area' but no foxhunt_area($area)" >&2
    exit 1
  fi
done
# allowed[AREA]: AREA and the areas its DEPS reach, in the order of `areas`.
declare -A reach allowed
for area in "${areas[@]}"; do
  reach=()
  todo=("$area")
  while [ ${#todo[@]} -gt 0 ]; do
    a=${todo[0]}
    todo=("${todo[@]:1}")
    [ -n "${reach[$a]+x}" ] && continue
    reach[$a]=1
    todo+=(${deps[$a]})
  done
  set=""
  for a in "${areas[@]}"; do
    [ -n "${reach[$a]+x}" ] && set+="${set:+ }$a"
  done
  allowed[$area]=$set
done
# The CUDA plugin (src/cuda/, libfoxhunt_cuda.so: core/cuda_plugin.h) is no area: it links none
# and may include only core's headers (its table's type) besides LibTorch's.
allowed[cuda]=core

bad=0
checked=0
while IFS= read -r file; do
  area=$(echo "$file" | sed -E 's#^(include/foxhunt|src)/([a-z_]+)/.*#\2#')
  # The C ABI's one header sits directly in include/foxhunt/ (<foxhunt/foxhunt.h>): area capi.
  [[ $file =~ ^include/foxhunt/[^/]+$ ]] && area=capi
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
