#!/usr/bin/env bash
# Fuzzes one parser with libFuzzer for a bounded time. Builds tests/fuzz/TARGET_fuzz.cpp with the
# sources it covers alone under clang++ -fsanitize=fuzzer,address,undefined, lets the target write
# its own seed corpus into a temporary folder (TANDEM_<TARGET>_FUZZ_SEEDS), and fuzzes with a
# per-allocation cap far below anything a small input may cause.
#
#   codec       the control-plane codec (orchestration/control/codec.cpp): one valid frame per kind
#   checkpoint  safetensors headers and model.safetensors.index.json (gpu/model/): valid small
#               files and index texts, and near misses of each
#
# Usage: tests/fuzz/run_fuzz.sh TARGET [SECONDS]   (default 20; CLANGXX overrides the compiler)
# Exit:  0 no crash; 77 clang++ or libFuzzer missing (CTest: skipped); 2 unknown target; otherwise
#        the fuzzer's failure (or a build failure); the crashing input is kept and its path printed.
set -euo pipefail

target="${1:-}"
seconds="${2:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cxx="${CLANGXX:-clang++}"

case "$target" in
  codec)
    sources=("$root/orchestration/control/codec.cpp")
    max_len=4096 malloc_mb=16 ;;
  checkpoint)
    sources=("$root/gpu/model/json_text.cpp" "$root/gpu/model/safetensors_format.cpp"
             "$root/gpu/model/checkpoint_index.cpp" "$root/gpu/core/status.cpp" "$root/gpu/core/dtype.cpp")
    max_len=8192 malloc_mb=64 ;;
  *)
    echo "usage: $0 codec|checkpoint [SECONDS]" >&2
    exit 2 ;;
esac
name="fuzz.$target"
seeds_var="TANDEM_${target^^}_FUZZ_SEEDS"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "$name skipped: $cxx not found"
  exit 77
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/tandem-$target-fuzz.XXXXXX")"
keep=0
cleanup() { if [[ $keep == 0 ]]; then rm -rf "$work"; fi; }
trap cleanup EXIT

# libFuzzer ships with clang's compiler-rt; without it the link below fails: skip, do not fail.
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$work/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$work/probe.cpp" -o "$work/probe" >"$work/probe.log" 2>&1; then
  echo "$name skipped: $cxx cannot link libFuzzer with ASan and UBSan:"
  cat "$work/probe.log"
  exit 77
fi

echo "$name: building with $("$cxx" --version | head -n 1)"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -Wall -Wextra -Wpedantic -Werror -I "$root" \
  "$here/${target}_fuzz.cpp" "${sources[@]}" -o "$work/fuzzer"

mkdir "$work/corpus"
env "$seeds_var=$work/corpus" "$work/fuzzer"
seeds=$(find "$work/corpus" -type f | wc -l)
echo "$name: $seeds seed inputs, fuzzing for ${seconds}s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
set +e
"$work/fuzzer" -max_total_time="$seconds" -timeout=10 -max_len="$max_len" -rss_limit_mb=2048 \
  -malloc_limit_mb="$malloc_mb" -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" >"$work/fuzz.log" 2>&1
rc=$?
set -e

if [[ $rc != 0 ]]; then
  keep=1
  tail -n 60 "$work/fuzz.log"
  echo "$name FAILED (exit $rc); log and crashing input kept in $work:"
  ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true
  exit "$rc"
fi
grep -E '^(#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs)' "$work/fuzz.log" || true
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
corpus=$(find "$work/corpus" -type f | wc -l)
echo "$name: no crash in ${runs:-?} runs over ${seconds}s; corpus grew from $seeds to $corpus inputs"
