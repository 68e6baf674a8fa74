#!/usr/bin/env bash
# Installs what tandem builds with, from Debian packages; does nothing when all are present.
# CUDA 13 (nvcc, cuBLAS, NCCL) is used from /usr/local/cuda when there; without it the build
# leaves the CUDA backend out.
set -euo pipefail

# gnuplot-nox: `tandem plot` draws its PNGs with it (pngcairo terminal), and its test runs it.
packages=(cmake ninja-build g++ pkg-config libcaf-dev libzmq3-dev cppzmq-dev libyaml-cpp-dev
          libboost-test-dev nlohmann-json3-dev libopenblas-openmp-dev libxxhash-dev libsentencepiece-dev
          gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# TANDEM_CI_NO_SKIP=1 (CI, .ci/run): the tests that are skipped where a tool is missing must run,
# so their tools come too: Slurm and munge (tests/integration/tools/launch/slurm/, which start
# their own slurmctld, slurmd and munged), iproute2 (the multi-host tests' network namespaces).
# Installing slurm-wlm enables its services, which stay down without a slurm.conf.
if [ "${TANDEM_CI_NO_SKIP:-0}" = 1 ]; then
  for p in slurm-wlm munge iproute2; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
# The Python tests (tests/python/) make their own venv from PyPI (tools/python_env.sh); they need a
# python3 with the venv module, from Debian when the machine has none.
if ! python3 -m venv --help >/dev/null 2>&1; then
  missing+=(python3 python3-venv)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "tools/setup.sh: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "tools/setup.sh: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
