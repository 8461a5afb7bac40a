#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, then runs CAKE on the default
# operator (rms_norm). Usage: scripts/run.sh [contract.yaml]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
contract="${1:-bench/ops/rms_norm.yaml}"
./build/src/cli/cake doctor
./build/src/cli/cake check "$contract"
