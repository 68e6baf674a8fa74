#!/usr/bin/env bash
# Builds tandem and runs every test with CTest. Tests labelled `gpu` report "skipped" where no
# CUDA device is visible. Extra arguments go to ctest (e.g. -LE gpu, -R cli, -j 4).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
exec ctest --test-dir "${TANDEM_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
