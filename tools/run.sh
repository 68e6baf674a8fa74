#!/usr/bin/env bash
# Builds tandem and runs a recipe: the default one (configs/recipes/tiny-cpu.yaml) or the one given,
# with any key=value overrides after it (`--dry-run` prints the plan instead).
#
# The default recipe trains the tiny arithmetic model (configs/models/tiny-arithmetic) with the
# Gemma 4 CPU engines: a supervised warm-up, then GRPO. A recipe asking for something not built yet
# is refused, with the list.
#
# --fresh: a run directory (logger.log_dir, logs/tiny-cpu by default) that holds an earlier run is
# left as it is and this run writes to the first free sibling (logs/tiny-cpu.2, ...), so running
# this script again never mixes two runs' records.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
recipe="configs/recipes/tiny-cpu.yaml"
if [ $# -gt 0 ] && [[ "$1" != *=* ]] && [[ "$1" != --* ]]; then
  recipe="$1"
  shift
fi
exec "${TANDEM_BUILD_DIR:-build}/tandem" run "$recipe" --fresh "$@"
