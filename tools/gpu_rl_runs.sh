#!/usr/bin/env bash
# On a GPU machine: the RL loop's two GPU recipes end to end from a bundle (tools/gpu_bundle.sh),
# with what each run showed printed after it:
#   1. configs/recipes/tiny-gpu.yaml: the validation accuracy at every pass, the warm-up's and the
#      GRPO phase's seconds, and the median of each phase's seconds and the turns' figures over
#      the GRPO steps;
#   2. configs/recipes/gemma4-e2b-1gpu.yaml over random E2B weights (`tandem init`, about 20 GB
#      written to E2B_DIR): the memory plan printed at start, then per step the memory in use as
#      each turn ended beside the plan's figure for that phase, the optimizer state's offload and
#      restore beside the host link, and each phase's seconds.
# Run it from the repository root; each run's directory (metrics.jsonl, controller.log) is kept
# under LOG_DIR, its weights and checkpoints removed.
#
#   tools/gpu_rl_runs.sh BUNDLE_DIR [LOG_DIR] [DEVICE_MEMORY_GIB]
#
# DEVICE_MEMORY_GIB (default 140, an H200; 79 on an H100) is the recipes' cluster.device_memory_gib.
# Each run is limited to GPU_CHECK_TIMEOUT seconds (default 300); E2B_DIR defaults to /tmp/e2b-random.
set -uo pipefail
bundle=${1:?usage: tools/gpu_rl_runs.sh BUNDLE_DIR [LOG_DIR] [DEVICE_MEMORY_GIB]}
logs=${2:-gpu-rl-logs}
memory=${3:-140}
mkdir -p "$logs"
source "$(dirname "$0")/gpu_run_env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$logs/gpu.txt"

# Prints a run's figures from its metrics.jsonl: every validation pass, then the median and the
# largest of each phase's figure over the GRPO steps after the first.
summarize() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
passes = [(r["step"], round(r["validation/accuracy"], 3)) for r in records if "validation/accuracy" in r]
if passes: print("validation accuracy by step:", passes)
sft = [r for r in records if "timing/sft/total_step_time" in r]
rl = [r for r in records if "timing/train/total_step_time" in r]
print(f"warm-up: {len(sft)} steps in {sum(r['timing/sft/total_step_time'] for r in sft):.1f} s; "
      f"GRPO: {len(rl)} steps in {sum(r['timing/train/total_step_time'] for r in rl):.1f} s")
keys = sorted({k for r in rl for k in r if k.startswith(("timing/train/", "memory/", "performance/"))
               and isinstance(r[k], (int, float))})
for k in keys:
    values = sorted(r[k] for r in rl[1:] if k in r) or sorted(r[k] for r in rl if k in r)
    if values: print(f"  {k:64s} median {values[len(values) // 2]:.5g}  max {values[-1]:.5g}")
PY
}

run tiny_gpu "$bundle/bin/tandem" run configs/recipes/tiny-gpu.yaml cluster.device_memory_gib="$memory" \
  logger.log_dir="$logs/tiny-gpu"
[ -f "$logs/tiny-gpu/metrics.jsonl" ] && summarize "$logs/tiny-gpu"
rm -rf "$logs/tiny-gpu/final_weights" "$logs/tiny-gpu/checkpoints"

e2b=${E2B_DIR:-/tmp/e2b-random}
[ -f "$e2b/config.json" ] || run e2b_init "$bundle/bin/tandem" init --config configs/models/gemma-4-E2B --out "$e2b"
run e2b_recipe "$bundle/bin/tandem" run configs/recipes/gemma4-e2b-1gpu.yaml policy.model_name="$e2b" \
  cluster.device_memory_gib="$memory" logger.log_dir="$logs/e2b"
grep -E "memory plan|pinned host memory for the first|step [0-9]+/[0-9]+:" "$logs/e2b_recipe.log"
[ -f "$logs/e2b/metrics.jsonl" ] && summarize "$logs/e2b"
rm -rf "$logs/e2b/final_weights" "$logs/e2b/checkpoints" "$logs/e2b/generations.jsonl"
exit $failed
