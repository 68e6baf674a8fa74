#!/usr/bin/env bash
# Puts the cudnn frontend's C++ headers (header-only; from PyPI's nvidia-cudnn-frontend wheel) into
# build/_deps/cudnn_frontend/include, where CMake looks for them: cuda_ops_bench then measures
# cuDNN's fused attention beside ours. Nothing else in tandem uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/_deps/cudnn_frontend
version=1.32.0
if [ -f "$dest/include/cudnn_frontend.h" ]; then exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
  -d "$tmp" "nvidia-cudnn-frontend==$version"
mkdir -p "$tmp/x"
(cd "$tmp/x" && python3 -m zipfile -e "$tmp"/nvidia_cudnn_frontend-*.whl .)
mkdir -p "$dest"
rm -rf "$dest/include.partial"
cp -r "$tmp/x/include" "$dest/include.partial"
mv "$dest/include.partial" "$dest/include"
echo "cudnn frontend $version headers in $dest/include"
