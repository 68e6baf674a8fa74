#!/usr/bin/env bash
# Packs the GPU tests (the op and engine suites, and the colocated run on one GPU), the op benchmark, the tensor-core rounding, batched-expert and norm-backward probes and tandem itself (for `tandem bench train --backend cuda`)
# of a build, with the libraries they load that a GPU
# machine may lack (CAF, ZeroMQ, Boost, OpenBLAS and their dependencies; not glibc, libstdc++ or
# the CUDA and NVIDIA libraries, which that machine brings: tools/bundle_libraries.sh), into
# BUNDLE_DIR/bin and BUNDLE_DIR/lib for tools/gpu_check.sh, and into BUNDLE_DIR.tar.xz for copying.
# (tools/bundle.sh packs the tandem binary itself, with the configs and launchers, to run it.)
#
#   tools/gpu_bundle.sh BUNDLE_DIR [BUILD_DIR]
#
# It refuses a build whose op benchmark has no cuDNN attention to compare with (run
# tools/fetch_cudnn_frontend.sh and configure again first), unless TANDEM_BUNDLE_WITHOUT_CUDNN=1.
set -euo pipefail
out=${1:?usage: tools/gpu_bundle.sh BUNDLE_DIR [BUILD_DIR]}
build=${2:-build}
# shellcheck disable=SC2034  # read by bundle_libraries.sh: its messages name this script
bundle_name=tools/gpu_bundle.sh
source "$(dirname "$0")/bundle_libraries.sh"
programs=("$build/tests/tandem_gpu_device_tests" "$build/tests/tandem_gpu_cuda_tests" "$build/tests/tandem_gpu_runtime_tests"
          "$build/tools/bench/cuda_ops_bench"
          "$build/tools/bench/tensor_core_rounding" "$build/tools/bench/moe_batched_gemm"
          "$build/tools/bench/norm_backward_designs" "$build/tandem")
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "tools/gpu_bundle.sh: $p is missing: build with CUDA first (tools/build.sh)" >&2; exit 1; }
done
# The op benchmark measures cuDNN's attention beside ours only when it was built with the cudnn
# frontend's headers; a bundle without them would print no peer for the attention rows.
if grep -Eq '^TANDEM_CUDNN_(FRONTEND_INCLUDE|INCLUDE|LIBRARY):[A-Z]+=.*NOTFOUND' "$build/CMakeCache.txt" 2>/dev/null &&
   [ "${TANDEM_BUNDLE_WITHOUT_CUDNN:-0}" != 1 ]; then
  echo "tools/gpu_bundle.sh: $build/tools/bench/cuda_ops_bench was built without cuDNN's attention (its peer):" \
       "run tools/fetch_cudnn_frontend.sh and configure again (cmake -S . -B $build), or set TANDEM_BUNDLE_WITHOUT_CUDNN=1" >&2
  exit 1
fi
rm -rf "$out.partial"
trap 'rm -rf "$out.partial" "$out.tar.xz.partial"' EXIT
mkdir -p "$out.partial/bin" "$out.partial/lib"
bundle_copy_libraries "$out.partial/lib" "${programs[@]}"
cp -L "${programs[@]}" "$out.partial/bin/"
strip --strip-debug "$out.partial"/bin/* "$out.partial"/lib/* 2>/dev/null || true
rm -rf "$out"
mv "$out.partial" "$out"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 > "$out.tar.xz.partial"
mv "$out.tar.xz.partial" "$out.tar.xz"
trap - EXIT
echo "tools/gpu_bundle.sh: $(du -sh "$out" | cut -f1) in $out, $(du -sh "$out.tar.xz" | cut -f1) as $out.tar.xz"
