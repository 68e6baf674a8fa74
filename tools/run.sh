#!/usr/bin/env bash
# Builds tandem and runs a recipe: the default one (configs/recipes/tiny-cpu.yaml) or the one given,
# with any key=value overrides after it (`--dry-run` prints the plan instead).
#
# Until the Gemma 4 engines land, the run uses the fake engines (runtime.engine=fake): the whole
# runtime (worker processes, control and data planes, training steps, refits) over a deterministic
# fake model; a later runtime.engine=... on the command line wins.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
recipe="configs/recipes/tiny-cpu.yaml"
if [ $# -gt 0 ] && [[ "$1" != *=* ]] && [[ "$1" != --* ]]; then
  recipe="$1"
  shift
fi
exec "${TANDEM_BUILD_DIR:-build}/tandem" run "$recipe" runtime.engine=fake "$@"
