#!/usr/bin/env bash
# A metric-gated functional run, as NeMo-RL's nightly tests gate theirs: the tiny Gemma 4 recipe on
# the CPU engines for 12 steps, then gates on the exported metrics. On the CPU the trainer scores
# every sampled token exactly as the generator did, so token_mult_prob_error is exactly 1 and
# gen_kl_error exactly 0 at every step, and with one optimizer step per GRPO step the PPO ratio is
# exactly 1. The recipe validates every 4th step (greedy, on held-out parity prompts): its accuracy
# is a mean reward, in [0, 1], at steps 4, 8 and 12. Usage: TEST TANDEM_BINARY.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
tandem="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$source_dir"
if ! "$tandem" run configs/recipes/tiny-gemma4-cpu.yaml grpo.max_num_steps=12 logger.log_dir="$work/run" \
    >"$work/out.txt" 2>&1; then
  cat "$work/out.txt"
  echo "FAILED: the tiny Gemma 4 run did not finish" >&2
  exit 1
fi
"$tandem" metrics export "$work/run" -o "$work/metrics.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['train/loss']) == 12, d['train/loss']; \
assert sorted(d['validation/accuracy'], key=int) == ['4', '8', '12'], d['validation/accuracy']" "$work/metrics.json"
"$tandem" metrics check "$work/run" \
  'median(train/token_mult_prob_error) == 1' 'max(train/token_mult_prob_error) == 1' \
  'max(train/gen_kl_error) == 0' 'min(train/probs_ratio_min) == 1' 'max(train/probs_ratio_max) == 1' \
  'min(train/reward) >= 0' 'max(train/reward) <= 1' 'max(train/max_gen_tokens_per_sample) <= 8' \
  'min(validation/accuracy) >= 0' 'max(validation/accuracy) <= 1'
