#!/usr/bin/env bash
# Builds tandem and runs a recipe: the default one (configs/recipes/tiny-cpu.yaml) or the one given,
# with any key=value overrides after it. Until the RL loop lands, this prints the recipe's plan
# (`tandem run --dry-run`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
recipe="configs/recipes/tiny-cpu.yaml"
if [ $# -gt 0 ] && [[ "$1" != *=* ]]; then
  recipe="$1"
  shift
fi
exec "${TANDEM_BUILD_DIR:-build}/tandem" run "$recipe" "$@" --dry-run
