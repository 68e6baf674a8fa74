#!/usr/bin/env bash
# Runs one Python test of tests/python/ in the pinned environment of tools/python_env.sh (numpy,
# safetensors, transformers; no torch), creating that environment first where it is missing.
#
# Usage: tests/python/run_python_test.sh SCRIPT [ARGS...]   (the venv follows $TANDEM_BUILD_DIR)
# Exit:  the script's status; 1 when the environment cannot be created (never a skip: a test
#        that cannot run has failed).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 SCRIPT [ARGS...]" >&2
  exit 2
fi
script="$1"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

if ! env_out="$("$root/tools/python_env.sh")"; then
  echo "$(basename "$script") FAILED: the Python test environment could not be created (reason above)" >&2
  exit 1
fi
python="$(tail -n 1 <<<"$env_out")"
if [[ ! -x "$python" ]]; then
  echo "$(basename "$script") FAILED: tools/python_env.sh printed '$python', not an interpreter" >&2
  exit 1
fi
exec "$python" "$script" "$@"
