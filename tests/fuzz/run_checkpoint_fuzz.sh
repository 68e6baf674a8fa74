#!/usr/bin/env bash
# Fuzzes the checkpoint parsers (gpu/model/safetensors_format.cpp, gpu/model/checkpoint_index.cpp)
# with libFuzzer for a bounded time. Builds tests/fuzz/checkpoint_fuzz.cpp with those sources and
# what they link against alone under clang++ -fsanitize=fuzzer,address,undefined, seeds a corpus
# with valid small safetensors files and index texts and a few near misses of each (written by the
# target itself into a temporary folder), and fuzzes with a per-allocation cap far below anything
# a small file may cause.
#
# Usage: tests/fuzz/run_checkpoint_fuzz.sh [SECONDS]   (default 20; CLANGXX overrides the compiler)
# Exit:  0 no crash; 77 clang++ or libFuzzer missing (CTest: skipped); otherwise the fuzzer's
#        failure (or a build failure); the crashing input is kept and its path printed.
set -euo pipefail

seconds="${1:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cxx="${CLANGXX:-clang++}"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz.checkpoint skipped: $cxx not found"
  exit 77
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/tandem-checkpoint-fuzz.XXXXXX")"
keep=0
cleanup() { if [[ $keep == 0 ]]; then rm -rf "$work"; fi; }
trap cleanup EXIT

# libFuzzer ships with clang's compiler-rt; without it the link below fails: skip, do not fail.
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$work/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$work/probe.cpp" -o "$work/probe" >"$work/probe.log" 2>&1; then
  echo "fuzz.checkpoint skipped: $cxx cannot link libFuzzer with ASan and UBSan:"
  cat "$work/probe.log"
  exit 77
fi

echo "fuzz.checkpoint: building with $("$cxx" --version | head -n 1)"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -Wall -Wextra -Wpedantic -Werror -I "$root" \
  "$here/checkpoint_fuzz.cpp" "$root/gpu/model/json_text.cpp" "$root/gpu/model/safetensors_format.cpp" \
  "$root/gpu/model/checkpoint_index.cpp" "$root/gpu/core/status.cpp" "$root/gpu/core/dtype.cpp" \
  -o "$work/checkpoint_fuzz"

mkdir "$work/corpus"
TANDEM_CHECKPOINT_FUZZ_SEEDS="$work/corpus" "$work/checkpoint_fuzz"
seeds=$(find "$work/corpus" -type f | wc -l)
echo "fuzz.checkpoint: $seeds seed inputs (safetensors files and index texts), fuzzing for ${seconds}s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
set +e
"$work/checkpoint_fuzz" -max_total_time="$seconds" -timeout=10 -max_len=8192 -rss_limit_mb=2048 \
  -malloc_limit_mb=64 -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" >"$work/fuzz.log" 2>&1
rc=$?
set -e

if [[ $rc != 0 ]]; then
  keep=1
  tail -n 60 "$work/fuzz.log"
  echo "fuzz.checkpoint FAILED (exit $rc); log and crashing input kept in $work:"
  ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true
  exit "$rc"
fi
grep -E '^(#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs)' "$work/fuzz.log" || true
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
corpus=$(find "$work/corpus" -type f | wc -l)
echo "fuzz.checkpoint: no crash in ${runs:-?} runs over ${seconds}s; corpus grew from $seeds to $corpus inputs"
