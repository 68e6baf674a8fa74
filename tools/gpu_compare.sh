#!/usr/bin/env bash
# On a GPU machine: one call that checks a change of the CUDA code against the build before it,
# for sessions whose device time is short. It runs the named GPU test suites of a bundle
# (tools/gpu_bundle.sh), then the op benchmark's rows for each op prefix, this bundle's
# cuda_ops_bench and the previous build's in turn, ROUNDS times, so both are measured on the same
# machine in the same minutes, and, when asked, the E2B train step beside transformers. Every log
# stays in LOG_DIR; the summary lines go to standard output. Run it from the repository root (the
# train benchmark reads configs/ from there). tools/gpu_check.sh runs everything instead.
#
#   tools/gpu_compare.sh BUNDLE_DIR LOG_DIR [--suite NAME]... [--only OP_PREFIX]...
#                        [--base OLD_CUDA_OPS_BENCH] [--rounds N] [--train] [--drift]
#
#   --suite NAME  a suite of tandem_gpu_cuda_tests (repeatable; default: backend_ops,
#                 cuda_attention_sampled, cuda_determinism; --suite none runs none)
#   --only PREFIX cuda_ops_bench --only PREFIX (repeatable; none given: no benchmark rows)
#   --base BENCH  the previous build's cuda_ops_bench (e.g. the last bundle's bin/cuda_ops_bench),
#                 run with the same rows after this bundle's in every round
#   --rounds N    rounds of benchmark rows (default 2)
#   --train       tools/bench/train_vs_peer.sh at the E2B shape, 5 steps, after the rows
#   --drift       CUDA's float32 path at the E2B shape against transformers, stage by stage, then
#                 its bfloat16 path's summary likewise
#                 (tools/reference/trace_drift.py over random bf16 weights that transformers saves
#                 first to GPU_COMPARE_E2B_DIR, default /tmp/gpu-compare-e2b, about 10 GB, kept for
#                 the next call on the same machine), last
#
# Each program runs under GPU_CHECK_TIMEOUT seconds (default 300; rc 124 when hit). The exit
# status is 1 when a suite or a program failed, 2 for bad arguments.
set -uo pipefail
usage="usage: tools/gpu_compare.sh BUNDLE_DIR LOG_DIR [--suite NAME]... [--only OP_PREFIX]... [--base BENCH] [--rounds N] [--train] [--drift]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
bundle=$1
logs=$2
shift 2
suites=()
prefixes=()
base=""
rounds=2
train=0
drift=0
while [ $# -gt 0 ]; do
  case $1 in
    --suite) [ $# -ge 2 ] || { echo "tools/gpu_compare.sh: --suite needs a name" >&2; exit 2; }; suites+=("$2"); shift 2 ;;
    --only) [ $# -ge 2 ] || { echo "tools/gpu_compare.sh: --only needs an op prefix" >&2; exit 2; }; prefixes+=("$2"); shift 2 ;;
    --base) [ $# -ge 2 ] || { echo "tools/gpu_compare.sh: --base needs a program" >&2; exit 2; }; base=$2; shift 2 ;;
    --rounds)
      [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "tools/gpu_compare.sh: --rounds needs a positive count" >&2; exit 2; }
      rounds=$2; shift 2 ;;
    --train) train=1; shift ;;
    --drift) drift=1; shift ;;
    *) echo "tools/gpu_compare.sh: unknown argument $1" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || suites=(backend_ops cuda_attention_sampled cuda_determinism)
[ "${suites[*]}" != none ] || suites=()
for p in tandem_gpu_cuda_tests cuda_ops_bench; do
  [ -x "$bundle/bin/$p" ] || { echo "tools/gpu_compare.sh: $bundle/bin/$p is missing: pack a bundle with tools/gpu_bundle.sh" >&2; exit 2; }
done
if [ -n "$base" ] && [ ! -x "$base" ]; then
  echo "tools/gpu_compare.sh: the previous build's benchmark $base is missing or not executable" >&2
  exit 2
fi
if [ -n "$base" ] && [ ${#prefixes[@]} -eq 0 ]; then
  echo "tools/gpu_compare.sh: --base compares benchmark rows: name them with --only" >&2
  exit 2
fi
mkdir -p "$logs"
run_name_width=36
source "$(dirname "$0")/gpu_run_env.sh"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
for suite in "${suites[@]}"; do
  run "$suite" "$bundle/bin/tandem_gpu_cuda_tests" --run_test="$suite" --color_output=no --report_level=short --log_level=message
done
# The rows themselves (a benchmark's lines that name an op or a ceiling), new then old, every round.
rows() { grep -E '^(ceiling|[a-z0-9_]+ {2,}|  cuDNN)' "$1" || true; }
for ((r = 1; r <= rounds; ++r)); do
  for prefix in "${prefixes[@]}"; do
    run "bench_new_${prefix}_$r" "$bundle/bin/cuda_ops_bench" --only "$prefix"
    echo "-- this build, $prefix, round $r"
    rows "$logs/bench_new_${prefix}_$r.log"
    if [ -n "$base" ]; then
      run "bench_base_${prefix}_$r" "$base" --only "$prefix"
      echo "-- the previous build, $prefix, round $r"
      rows "$logs/bench_base_${prefix}_$r.log"
    fi
  done
done
if [ "$train" = 1 ]; then
  if [ -x "$bundle/bin/tandem" ]; then
    run train_vs_peer_e2b tools/bench/train_vs_peer.sh "$bundle/bin/tandem" configs/models/gemma-4-E2B --backend cuda \
      --tokens 4096 --steps 5 --out "$logs/train_vs_peer_e2b"
    tail -n 4 "$logs/train_vs_peer_e2b.log"
  else
    echo "tools/gpu_compare.sh: --train: $bundle/bin/tandem is missing" >&2
    failed=1
  fi
fi
if [ "$drift" = 1 ]; then
  e2b=${GPU_COMPARE_E2B_DIR:-/tmp/gpu-compare-e2b}
  if [ ! -f "$e2b/config.json" ]; then  # save_random_model.py renames a complete directory into place
    run e2b_save python3 tools/reference/save_random_model.py --config configs/models/gemma-4-E2B --out "$e2b"
  fi
  if [ -f "$e2b/config.json" ]; then
    run trace_drift_e2b_fp32 python3 tools/reference/trace_drift.py --model "$e2b" --tandem "$bundle/bin/tandem" \
      --backend cuda --dtype fp32 --out "$logs/trace_drift_e2b"
    grep -v '^Loading' "$logs/trace_drift_e2b_fp32.log"
    # bfloat16 the same way: its distance from float64 beside transformers' bfloat16 (the summary).
    run trace_drift_e2b_bf16 python3 tools/reference/trace_drift.py --model "$e2b" --tandem "$bundle/bin/tandem" \
      --backend cuda --dtype bf16 --out "$logs/trace_drift_e2b_bf16"
    grep -E '^(final norm|\|dlogprob\||tandem .* against|first stage)' "$logs/trace_drift_e2b_bf16.log"
  fi
fi
exit $failed
