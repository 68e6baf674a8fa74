#!/usr/bin/env bash
# Configures and builds tandem into build/ (or $TANDEM_BUILD_DIR). Extra arguments go to CMake's
# configure step, e.g. tools/build.sh -DTANDEM_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TANDEM_BUILD_DIR:-build}"
tools/setup.sh
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
