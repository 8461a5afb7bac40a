#!/usr/bin/env bash
# Installs every build and run dependency of CAKE from Debian packages. Idempotent: a package
# already present is skipped, so a second run costs only the dpkg query.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build clang clang-format clang-tidy libclang-rt-14-dev
  # utility libraries
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libsqlite3-dev libcpp-httplib-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # code-generation tracks
  libhalide14-0-dev libhwy-dev pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  # peers (baselines)
  libdnnl-dev libopenblas-dev libtorch-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
