#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, then `cake run` on the default operator
# (rms_norm): route, generate and verify a kernel, evolve it (3 rounds), time it against libtorch, and write the operator package
# to cake-out/<operator>. Usage: scripts/run.sh [contract.yaml] [more cake run options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
contract="${1:-bench/ops/rms_norm.yaml}"
shift || true
./build/src/cli/cake doctor
./build/src/cli/cake run "$contract" "$@"
