#!/usr/bin/env bash
# The default recipe's CI variant (configs/recipes/tiny-cpu-ci.yaml) end to end: 40 warm-up steps
# and 10 GRPO steps of the tiny arithmetic model, then gates on its metrics. The warm-up's
# cross-entropy falls; validation runs right after the warm-up (step 40) and every 5th RL step
# (45, 50); the trainer scores every sampled token exactly as the generator did; the run ends with
# its final weights saved and its metrics plotted. Usage: TEST TANDEM_BINARY.
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
tandem="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$source_dir"
if ! "$tandem" run configs/recipes/tiny-cpu-ci.yaml logger.log_dir="$work/run" >"$work/out.txt" 2>&1; then
  cat "$work/out.txt"
  echo "FAILED: the tiny-cpu-ci run did not finish" >&2
  exit 1
fi
grep -q "40 warm-up and 10 RL steps done" "$work/out.txt" || { cat "$work/out.txt"; echo "FAILED: no summary line" >&2; exit 1; }
"$tandem" metrics export "$work/run" -o "$work/metrics.json"
python3 - "$work/metrics.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sft = {int(k): v for k, v in d["sft/loss"].items()}
assert sorted(sft) == list(range(1, 41)), sorted(sft)
first, last = sum(sft[s] for s in range(1, 6)) / 5, sum(sft[s] for s in range(36, 41)) / 5
assert last < first - 0.2, (first, last)
assert sorted(int(k) for k in d["train/loss"]) == list(range(41, 51)), d["train/loss"]
assert sorted(int(k) for k in d["validation/accuracy"]) == [40, 45, 50], d["validation/accuracy"]
PY
"$tandem" metrics check "$work/run" \
  'max(train/token_mult_prob_error) == 1' 'max(train/gen_kl_error) == 0' \
  'min(train/reward) >= 0' 'max(train/reward) <= 1' 'max(train/max_gen_tokens_per_sample) <= 5' \
  'min(validation/accuracy) >= 0' 'max(validation/accuracy) <= 1'
# The run ends saying where its results are: the final weights (a checkpoint directory tandem
# reads back) and the plot of its metrics.
grep -q "final weights (v50) in $work/run/final_weights" "$work/out.txt" && grep -q "tandem run: final weights in $work/run/final_weights; metrics in" "$work/out.txt" || { cat "$work/out.txt"; echo "FAILED: no final weights line" >&2; exit 1; }
grep -q "plotted in $work/run/metrics.png" "$work/out.txt" || { cat "$work/out.txt"; echo "FAILED: no plot line" >&2; exit 1; }
test -s "$work/run/metrics.png" || { echo "FAILED: no metrics.png" >&2; exit 1; }
"$tandem" inspect --model "$work/run/final_weights" >"$work/inspect.txt" 2>&1 || { cat "$work/inspect.txt"; echo "FAILED: the final weights do not read back" >&2; exit 1; }
