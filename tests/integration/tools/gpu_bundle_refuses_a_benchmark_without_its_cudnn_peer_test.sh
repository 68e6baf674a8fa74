#!/usr/bin/env bash
# tools/gpu_bundle.sh refuses a build whose op benchmark was configured without cuDNN's attention
# (its CMakeCache has a NOTFOUND cuDNN path): it names tools/fetch_cudnn_frontend.sh and leaves no
# bundle behind; with TANDEM_BUNDLE_WITHOUT_CUDNN=1, or with every cuDNN path found, it packs the
# programs. The build is a stand-in: the eight programs are copies of true(1), so the test runs on
# any machine.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $1" >&2; [ -z "${2:-}" ] || { echo "--- output:" >&2; cat "$2" >&2; }; exit 1; }

build="$work/build"
mkdir -p "$build/tests" "$build/tools/bench"
for p in tests/tandem_gpu_device_tests tests/tandem_gpu_cuda_tests tests/tandem_gpu_runtime_tests tools/bench/cuda_ops_bench tools/bench/tensor_core_rounding tools/bench/moe_batched_gemm tools/bench/norm_backward_designs tandem; do
  cp "$(type -P true)" "$build/$p"
done
cache() {  # the cuDNN lines of a CMakeCache: frontend headers found or not
  {
    echo "TANDEM_CUDNN_FRONTEND_INCLUDE:PATH=$1"
    echo "TANDEM_CUDNN_INCLUDE:PATH=/usr/local/cuda/include"
    echo "TANDEM_CUDNN_LIBRARY:FILEPATH=/usr/local/cuda/lib/libcudnn.so"
  } > "$build/CMakeCache.txt"
}

cache TANDEM_CUDNN_FRONTEND_INCLUDE-NOTFOUND
if "$source_dir/tools/gpu_bundle.sh" "$work/refused" "$build" > "$work/refused.txt" 2>&1; then
  fail "a build without the cudnn frontend was bundled" "$work/refused.txt"
fi
grep -q "tools/fetch_cudnn_frontend.sh" "$work/refused.txt" || fail "the refusal does not say what to run" "$work/refused.txt"
[ ! -e "$work/refused" ] && [ ! -e "$work/refused.tar.xz" ] || fail "a refused bundle left files behind"

TANDEM_BUNDLE_WITHOUT_CUDNN=1 "$source_dir/tools/gpu_bundle.sh" "$work/forced" "$build" > "$work/forced.txt" 2>&1 ||
  fail "TANDEM_BUNDLE_WITHOUT_CUDNN=1 did not bundle" "$work/forced.txt"
[ -x "$work/forced/bin/cuda_ops_bench" ] && [ -f "$work/forced.tar.xz" ] || fail "the forced bundle lacks its programs" "$work/forced.txt"

cache "$work/cudnn_frontend/include"
"$source_dir/tools/gpu_bundle.sh" "$work/found" "$build" > "$work/found.txt" 2>&1 || fail "a build with cuDNN was refused" "$work/found.txt"
[ -x "$work/found/bin/tandem" ] || fail "the bundle lacks its programs" "$work/found.txt"
echo "ok: refused without the cudnn frontend, bundled with it or when told to"
