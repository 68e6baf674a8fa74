#!/usr/bin/env bash
# tandem's training step beside the Hugging Face transformers peer's, in one run on one machine:
# `tandem bench train` (the Gemma 4 train engine, random initial weights, with the GEMM-only
# ceiling of the same step measured in the same run) and tools/bench/hf_train_peer.py (transformers,
# random weights, fused AdamW, the fastest attention it offers for the model), on the same config,
# tokens and micro-batch; prints both, their throughput ratio and each one's peak memory split
# into fixed (weights, gradients, optimizer state) and activations.
#
#   tools/bench/train_vs_peer.sh TANDEM MODEL_DIR [--tokens 4096] [--micro-batch 1] [--steps 10]
#                                [--backend cpu|cuda] [--dtype bf16|fp32] [--recompute M]
#                                [--out DIR]
#
# Needs python3 with torch and a transformers that has Gemma 4 (the GPU machine's image). Both
# store weights, gradients and AdamW moments in --dtype (default bf16 on cuda, fp32 on cpu; the
# CPU computes in float32), as the peer's torch.optim.AdamW keeps moments in the parameters' dtype.
set -euo pipefail
tandem=${1:?usage: tools/bench/train_vs_peer.sh TANDEM MODEL_DIR [options]}
model=${2:?usage: tools/bench/train_vs_peer.sh TANDEM MODEL_DIR [options]}
shift 2
tokens=4096 micro_batch=1 steps=10 backend=cpu dtype="" recompute=none out=train-vs-peer
while [ $# -gt 0 ]; do
  case $1 in
    --tokens) tokens=$2 ;;
    --micro-batch) micro_batch=$2 ;;
    --steps) steps=$2 ;;
    --backend) backend=$2 ;;
    --dtype) dtype=$2 ;;
    --recompute) recompute=$2 ;;
    --out) out=$2 ;;
    *) echo "train_vs_peer.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2 || { echo "train_vs_peer.sh: $1 needs a value" >&2; exit 2; }
done
case $backend in cpu|cuda) ;; *) echo "train_vs_peer.sh: --backend '$backend': expected cpu or cuda" >&2; exit 2 ;; esac
[ -n "$dtype" ] || dtype=$([ "$backend" = cuda ] && echo bf16 || echo fp32)
case $dtype in bf16|fp32) ;; *) echo "train_vs_peer.sh: --dtype '$dtype': expected bf16 or fp32" >&2; exit 2 ;; esac
peer_checkpointing=$([ "$recompute" = full ] && echo --gradient-checkpointing || true)
mkdir -p "$out"

"$tandem" bench train --model "$model" --tokens "$tokens" --micro-batch "$micro_batch" --steps "$steps" \
  --backend "$backend" --dtype "$dtype" --recompute "$recompute" --optimizer-dtype "$dtype" --json "$out/tandem.json" \
  | tee "$out/tandem.txt"
python3 "$(dirname "$0")/hf_train_peer.py" --model "$model" --tokens "$tokens" --micro-batch "$micro_batch" --steps "$steps" \
  --device "$backend" --dtype "$dtype" $peer_checkpointing --json "$out/peer.json" | tee "$out/peer.txt"

python3 - "$out/tandem.json" "$out/peer.json" <<'PY'
import json, sys
ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
gib = lambda b: b / 2**30 if b is not None else float("nan")
fixed = ours["weights_bytes"] + ours["gradients_bytes"] + ours["optimizer_bytes"]
print()
print("%-58s %14s %14s %10s %22s" % ("", "tokens/s", "model TFLOP/s", "step ms", "peak GiB (fixed + act.)"))
print("%-58s %14.0f %14.3f %10.2f %10.2f (%.2f + %.2f)" % (
    "tandem (%s, %s, %s optimizer state)" % (ours["device"], ours["weights_dtype"], ours["optimizer_dtype"]), ours["tokens_per_s"], ours["model_tflops"],
    ours["step_ms_median"], gib(fixed + ours["activation_peak_bytes"] + ours["scratch_bytes"]), gib(fixed),
    gib(ours["activation_peak_bytes"] + ours["scratch_bytes"])))
peak, pfixed = peer.get("peak_gib"), peer.get("fixed_gib")
print("%-58s %14.0f %14.3f %10.2f %10s" % (
    "transformers %s (%s, %s)" % (peer.get("transformers_version", "?"), peer.get("device_name", peer.get("device", "?")),
                                  peer.get("dtype", "?")),
    peer["tokens_per_s"], peer["model_tflops"], peer["step_ms_median"],
    "n/a" if peak is None else "%.2f (%.2f + %.2f)" % (peak, pfixed, peak - pfixed)))
print("ratio (tandem / transformers): %.2fx tokens/s; tandem at %.1f%% of its GEMM-only ceiling (%.2f ms)" % (
    ours["tokens_per_s"] / peer["tokens_per_s"], 100 * ours["ceiling_fraction"], ours["gemm_ceiling_ms"]))
if abs(ours["flops_per_step"] - peer["flops_per_step"]) > 1e-6 * peer["flops_per_step"]:
    print("note: the two FLOP counts differ: %.6g vs %.6g" % (ours["flops_per_step"], peer["flops_per_step"]))
PY
