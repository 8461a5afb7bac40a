#!/usr/bin/env bash
# Re-measures, back to back with the current binary, each operator of an Evolution experiment
# (scripts/evolve_experiment.sh): the seed (generation's kernel) and the evolved kernel on the standard set,
# rewriting OUT_DIR/op.seed_std.json and OUT_DIR/op.best_std.json, which scripts/evolve_report.py reads for
# its re-measured gap column. For a change of the bench (its floor, say) without re-running the search.
# Usage: scripts/evolve_remeasure.sh OUT_DIR [op...] (default: every operator in OUT_DIR/progress.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
cake=${CAKE:-./build/src/cli/cake}
db=${STORE:-$out/evo.db}
ops=("$@")
[ ${#ops[@]} -gt 0 ] || mapfile -t ops < <(awk '$1 != "done" {print $1}' "$out/progress.txt")
for op in "${ops[@]}"; do
  run=$(python3 -c "import json; print(json.load(open('$out/$op.evolve.json'))['evolution']['run'])" 2>/dev/null)
  [ -n "$run" ] || { echo "$op: no evolution run in $out/$op.evolve.json" >&2; continue; }
  read -r seed best < <(python3 scripts/evolve_kernels.py "$db" "$run")
  $cake eval bench/ops/$op.yaml --kernel "$seed/kernel.so" --threads 1 --json --store "$db" > "$out/$op.seed_std.json" 2>/dev/null
  $cake eval bench/ops/$op.yaml --kernel "$best/kernel.so" --threads 1 --json --store "$db" > "$out/$op.best_std.json" 2>/dev/null
  echo "$op re-measured" >&2
done
