#!/usr/bin/env bash
# Configures and builds tandem into build/ (or $TANDEM_BUILD_DIR). Extra arguments go to CMake's
# configure step, e.g. tools/build.sh -DTANDEM_CUDA=OFF. TANDEM_WERROR=1 makes warnings errors
# (developers and CI; a user's compiler may warn where ours does not).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TANDEM_BUILD_DIR:-build}"
tools/setup.sh
werror=OFF
[ "${TANDEM_WERROR:-0}" = 1 ] && werror=ON
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ] || ! grep -q "^TANDEM_WERROR:BOOL=$werror\$" "$build/CMakeCache.txt"; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_WERROR="$werror" "$@" >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
