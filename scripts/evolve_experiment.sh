#!/usr/bin/env bash
# The Evolution experiment of issue 6, per operator: `cake evolve` (20 rounds x 3 variants, 1 thread, 0.05 s
# of timing per case), then Halide's Adams2019 peer judged on the same operator, the seed and the evolved
# kernel re-measured back to back on the standard set, and the evolved kernel on the hidden set.
# Usage: scripts/evolve_experiment.sh OUT_DIR op [op...]; then scripts/evolve_report.py OUT_DIR for the table.
# CAKE=path/to/cake runs another binary (a copy, so that rebuilding the tree does not change a running
# experiment); STORE=path shares one store between workers.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
mkdir -p "$out"
cake=${CAKE:-./build/src/cli/cake}
db=${STORE:-$out/evo.db}
for op in "$@"; do
  start=$(date +%s)
  $cake evolve bench/ops/$op.yaml --rounds 20 --variants 3 --threads 1 --min-time 0.05 --store "$db" --json \
    > "$out/$op.evolve.json" 2> "$out/$op.evolve.log"
  rc=$?
  lib=$($cake lower bench/ops/$op.yaml --track halide -k schedule=adams2019 --store "$db" --json 2>/dev/null |
    python3 -c 'import json,sys; b=json.load(sys.stdin)["build"]; print(b["directory"]+"/kernel.so" if b["status"]=="ok" else "")' 2>/dev/null)
  if [ -n "$lib" ]; then
    $cake eval bench/ops/$op.yaml --kernel "$lib" --threads 1 --json --store "$db" > "$out/$op.adams.json" 2> "$out/$op.adams.log"
  fi
  run=$(python3 -c "import json; print(json.load(open('$out/$op.evolve.json'))['evolution']['run'])" 2>/dev/null)
  if [ -n "$run" ]; then
    # the seed (generation's kernel, the run's first variant) and the best of the last round
    read -r seed best < <(python3 scripts/evolve_kernels.py "$db" "$run")
    $cake eval bench/ops/$op.yaml --kernel "$seed/kernel.so" --threads 1 --json --store "$db" > "$out/$op.seed_std.json" 2>/dev/null
    $cake eval bench/ops/$op.yaml --kernel "$best/kernel.so" --threads 1 --json --store "$db" > "$out/$op.best_std.json" 2>/dev/null
    $cake eval bench/ops/$op.yaml --kernel "$best/kernel.so" --set hidden --threads 1 --json --store "$db" \
      > "$out/$op.hidden.json" 2> "$out/$op.hidden.log"
  fi
  echo "$op rc=$rc $(($(date +%s) - start)) s" >> "$out/progress.txt"
done
