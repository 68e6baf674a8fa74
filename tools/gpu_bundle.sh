#!/usr/bin/env bash
# Packs the GPU tests and the op benchmark of a build, with the libraries they load that a GPU
# machine may lack (CAF, ZeroMQ, Boost, OpenBLAS and their dependencies; not glibc, libstdc++ or
# the CUDA and NVIDIA libraries, which that machine brings), into BUNDLE_DIR/bin and
# BUNDLE_DIR/lib for tools/gpu_check.sh, and into BUNDLE_DIR.tar.xz for copying.
#
#   tools/gpu_bundle.sh BUNDLE_DIR [BUILD_DIR]
set -euo pipefail
out=${1:?usage: tools/gpu_bundle.sh BUNDLE_DIR [BUILD_DIR]}
build=${2:-build}
programs=("$build/tests/tandem_gpu_device_tests" "$build/tests/tandem_gpu_cuda_tests" "$build/tools/bench/cuda_ops_bench")
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "tools/gpu_bundle.sh: $p is missing: build with CUDA first (tools/build.sh)" >&2; exit 1; }
done
provided() {  # libraries the GPU machine has itself
  case "$(basename "$1")" in
    ld-linux*|libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*|libgcc_s.so*|libstdc++.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvidia*|libnvrtc*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
rm -rf "$out.partial"
mkdir -p "$out.partial/bin" "$out.partial/lib"
libraries_of() { ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'; }
for p in "${programs[@]}"; do
  cp -L "$p" "$out.partial/bin/"
  for lib in $(libraries_of "$p"); do provided "$lib" || cp -Ln "$lib" "$out.partial/lib/" 2>/dev/null || true; done
done
for lib in "$out.partial"/lib/*; do
  for dep in $(libraries_of "$lib"); do provided "$dep" || cp -Ln "$dep" "$out.partial/lib/" 2>/dev/null || true; done
done
strip --strip-debug "$out.partial"/bin/* "$out.partial"/lib/* 2>/dev/null || true
rm -rf "$out"
mv "$out.partial" "$out"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 > "$out.tar.xz.partial"
mv "$out.tar.xz.partial" "$out.tar.xz"
echo "tools/gpu_bundle.sh: $(du -sh "$out" | cut -f1) in $out, $(du -sh "$out.tar.xz" | cut -f1) as $out.tar.xz"
