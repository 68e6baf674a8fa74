#!/usr/bin/env bash
# Creates the Python environment of the CPU tests (tests/python/): a venv at
# "${TANDEM_BUILD_DIR:-build}/python" (relative to the repository root) holding exactly the pinned
# packages of tools/reference/requirements-ci.txt (numpy, safetensors, transformers; no torch).
# Idempotent: a venv whose stamp matches the requirements file is reused without touching pip.
# Concurrent callers serialize on a lock file beside the venv.
#
# Usage: tools/python_env.sh        (PYTHON3 overrides the base interpreter, default python3)
# Prints the venv's python path as the last line of stdout; progress goes to stderr.
# Exit:  0 ready; 1 the environment could not be created (the reason on stderr).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${TANDEM_BUILD_DIR:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
venv="$build/python"
requirements="$root/tools/reference/requirements-ci.txt"
stamp="$venv/.tandem-requirements"
base="${PYTHON3:-python3}"

fail() {
  echo "tools/python_env.sh: cannot create the Python test environment in $venv: $*" >&2
  exit 1
}

[[ -f "$requirements" ]] || fail "$requirements is missing"

ready() {
  [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$stamp" "$requirements"
}

if ready; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$build" || fail "cannot create $build"
exec 9>"$build/.python-env.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if ready; then  # another caller built it while this one waited
  echo "$venv/bin/python"
  exit 0
fi

command -v "$base" >/dev/null 2>&1 || fail "$base not found (install Python 3.10 or newer)"
"$base" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || fail "$base is $("$base" --version 2>&1); Python 3.10 or newer is needed"
"$base" -m venv --help >/dev/null 2>&1 \
  || fail "$base has no venv module (Debian/Ubuntu: apt-get install python3-venv)"

log="$build/python-env.log"
echo "tools/python_env.sh: creating $venv from $requirements (log: $log)" >&2
rm -rf "$venv"
if ! "$base" -m venv "$venv" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  rm -rf "$venv"
  fail "'$base -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)"
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$requirements" >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  rm -rf "$venv"
  fail "pip could not install the pinned packages of $requirements (no network or no matching wheel?)"
fi
if ! "$venv/bin/python" -c 'import numpy, safetensors.numpy, transformers' >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  rm -rf "$venv"
  fail "the installed packages do not import"
fi
cp "$requirements" "$stamp"
echo "$venv/bin/python"
