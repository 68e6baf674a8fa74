#!/usr/bin/env bash
# On a GPU machine: runs the CUDA tests (label gpu) and the op benchmark from a bundle of built
# programs (BUNDLE_DIR/bin: tandem_gpu_device_tests, tandem_gpu_cuda_tests, cuda_ops_bench, tandem,
# tensor_core_rounding, moe_batched_gemm;
# BUNDLE_DIR/lib: the non-system libraries they load; tools/gpu_bundle.sh makes it), and keeps
# their logs. Where the build tree itself is on the GPU machine, `ctest -L gpu` runs the same tests.
# Run it from the repository root: the engine tests read configs/ and tests/data/ from there.
#
#   tools/gpu_check.sh BUNDLE_DIR [LOG_DIR] [--quick]
#
# Each program runs under a time limit of GPU_CHECK_TIMEOUT seconds (default 300; rc 124 when hit).
# The machine must provide the CUDA 13 runtime libraries (cuBLAS, cuBLASLt, NCCL) and, for the
# benchmark's cuDNN peer, libcudnn 9 (found in /usr/local/cuda or in torch's nvidia-cudnn wheel).
set -uo pipefail
bundle=${1:?usage: tools/gpu_check.sh BUNDLE_DIR [LOG_DIR] [--quick]}
logs=${2:-gpu-check-logs}
quick=${3:-}
mkdir -p "$logs"
source "$(dirname "$0")/gpu_run_env.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$logs/gpu.txt"
[ -x "$bundle/bin/tandem_gpu_device_tests" ] && run device_self_test "$bundle/bin/tandem_gpu_device_tests"
for suite in backend_ops cuda_attention_sampled cuda_determinism cuda_large_tensors cuda_captured_work cuda_moe_capture \
             train_engine_conformance gemma4_train_engine cuda_train_engine_parity nccl_group \
             generate_engine_conformance gemma4_generate_engine cuda_chunk_hashes; do
  run "$suite" "$bundle/bin/tandem_gpu_cuda_tests" --run_test="$suite" --color_output=no --report_level=short --log_level=test_suite
done
run cuda_ops_bench "$bundle/bin/cuda_ops_bench" $quick
cat "$logs/cuda_ops_bench.log"
# Whether wgmma and mma.sync give the attention forward's products the same bits (a finding, not
# a pass or fail: it decides what a decode attention kernel may be built on).
if [ -x "$bundle/bin/tensor_core_rounding" ]; then
  run tensor_core_rounding "$bundle/bin/tensor_core_rounding"
  cat "$logs/tensor_core_rounding.log"
fi
# Whether one strided-batched call over experts padded to the batch gives each real row the
# per-expert call's bits (a finding: it decides how a captured MoE decode step multiplies).
if [ -x "$bundle/bin/moe_batched_gemm" ]; then
  run moe_batched_gemm "$bundle/bin/moe_batched_gemm"
  cat "$logs/moe_batched_gemm.log"
fi
# tandem logprobs on the GPU against transformers on a committed fixture, float32 and bfloat16.
if [ -x "$bundle/bin/tandem" ]; then
  run logprobs_cuda_fp32 python3 tools/reference/check_logprobs.py --model tests/data/reference/e2b_like \
    --tandem "$bundle/bin/tandem" --device cuda --tandem-backend cuda --tandem-dtype fp32 --tolerance 1e-4
  # bfloat16 by its distance from transformers' float32 beside transformers' own bfloat16 runs
  # (eager and SDPA attention; random weights in a deep model amplify every rounding: on this
  # fixture those two are 0.029 apart on average, above the 1e-2 that issue 17 asked for).
  run logprobs_cuda_bf16 python3 tools/reference/check_logprobs.py --model tests/data/reference/e2b_like \
    --tandem "$bundle/bin/tandem" --device cuda --tandem-backend cuda --tandem-dtype bf16 \
    --tolerance 10 --from-float32
  # The E2B shape with random weights saved by transformers itself (GPU_CHECK_E2B=1: writes
  # about 10 GB to /tmp first), tandem's bfloat16 against transformers' on a few sequences.
  if [ "${GPU_CHECK_E2B:-0}" = 1 ]; then
    rm -rf /tmp/gpu-check-e2b
    run e2b_save python3 tools/reference/save_random_model.py --config configs/models/gemma-4-E2B --out /tmp/gpu-check-e2b
    run logprobs_e2b_bf16 python3 tools/reference/check_logprobs.py --model /tmp/gpu-check-e2b --tandem "$bundle/bin/tandem" \
      --device cuda --tandem-backend cuda --tandem-dtype bf16 --tolerance 10 --from-float32
    # Layer by layer against transformers in float64: where CUDA's float32 path parts from it.
    run trace_drift_e2b_fp32 python3 tools/reference/trace_drift.py --model /tmp/gpu-check-e2b --tandem "$bundle/bin/tandem" \
      --backend cuda --dtype fp32 --out "$logs/trace_drift_e2b"
    cat "$logs/trace_drift_e2b_fp32.log"
  fi
fi
# The train engine on the GPU at the E2B shape beside the transformers peer (bfloat16 weights,
# gradients and optimizer state in both), one step of each timed after warm-up; then generation.
if [ -x "$bundle/bin/tandem" ] && [ -z "$quick" ]; then
  run train_vs_peer_e2b tools/bench/train_vs_peer.sh "$bundle/bin/tandem" configs/models/gemma-4-E2B --backend cuda \
    --tokens 4096 --steps 5 --out "$logs/train_vs_peer_e2b"
  cat "$logs/train_vs_peer_e2b.log"
  # The generate engine at the E2B shape beside transformers' generate(): 256 sequences of a
  # 128-token prompt and 256 sampled tokens each (top-k 50), bfloat16.
  run generate_vs_peer_e2b tools/bench/generate_vs_peer.sh "$bundle/bin/tandem" configs/models/gemma-4-E2B --backend cuda \
    --batch 256 --prompt-len 128 --new-tokens 256 --out "$logs/generate_vs_peer_e2b"
  cat "$logs/generate_vs_peer_e2b.log"
  # The decode step op by op, and the train engine's scores of a batch sampled at temperature 0.7,
  # top-k 20, top-p 0.9 (token_mult_prob_error and the share of bit-identical logprobs).
  run generate_profile_agreement_e2b "$bundle/bin/tandem" bench generate --model configs/models/gemma-4-E2B --backend cuda \
    --dtype bf16 --batch 256 --prompt-len 128 --new-tokens 256 --profile --agreement
  cat "$logs/generate_profile_agreement_e2b.log"
  # A model with MoE blocks (26B-A4B, about 52 GB of bfloat16 weights): its decode step captured
  # (the experts over the padded layout, the pad picked on the device) and op by op (--profile).
  run generate_26b_a4b_captured "$bundle/bin/tandem" bench generate --model configs/models/gemma-4-26B-A4B \
    --backend cuda --dtype bf16 --batch 256 --prompt-len 128 --new-tokens 64
  cat "$logs/generate_26b_a4b_captured.log"
  run generate_26b_a4b_op_by_op "$bundle/bin/tandem" bench generate --model configs/models/gemma-4-26B-A4B \
    --backend cuda --dtype bf16 --batch 256 --prompt-len 128 --new-tokens 16 --profile
  cat "$logs/generate_26b_a4b_op_by_op.log"
  # One replayed decode step under Nsight Compute, by kind of kernel (where ncu is installed).
  if command -v ncu >/dev/null 2>&1; then
    run generate_step_ncu_e2b ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
      --page raw --log-file "$logs/generate_step_ncu_e2b.csv" "$bundle/bin/tandem" bench generate \
      --model configs/models/gemma-4-E2B --backend cuda --dtype bf16 --batch 256 --prompt-len 128 --new-tokens 8 --profiler-range
    python3 tools/bench/ncu_breakdown.py "$logs/generate_step_ncu_e2b.csv" | tee "$logs/generate_step_breakdown_e2b.txt"
  fi
fi
exit $failed
