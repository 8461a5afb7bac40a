#!/usr/bin/env bash
# Configures and builds CAKE into ./build (Ninja, RelWithDebInfo). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja "$@" > build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
ninja -C build -j"$(nproc)"
