#!/usr/bin/env bash
# tandem's generation beside the Hugging Face transformers peer's, in one run on one machine:
# `tandem bench generate` (the Gemma 4 generate engine, random initial weights, with the decode
# step's GEMM-only ceiling and memory roofline measured in the same run) and
# tools/bench/hf_generate_peer.py (transformers' generate(), random weights, the fastest attention
# it offers for the model), on the same config, batch, prompt length, new tokens and sampling;
# prints both throughputs, their ratio and where tandem's decode step stands against its ceilings.
#
#   tools/bench/generate_vs_peer.sh TANDEM MODEL_DIR [--batch 256] [--prompt-len 128] [--new-tokens 256]
#                                   [--temperature 1] [--top-k 50] [--top-p 1] [--backend cpu|cuda]
#                                   [--dtype bf16|fp32] [--out DIR]
#
# Needs python3 with torch and a transformers that has Gemma 4 (the GPU machine's image). Both
# store weights and activations in --dtype (default bf16 on cuda, fp32 on cpu).
set -euo pipefail
tandem=${1:?usage: tools/bench/generate_vs_peer.sh TANDEM MODEL_DIR [options]}
model=${2:?usage: tools/bench/generate_vs_peer.sh TANDEM MODEL_DIR [options]}
shift 2
batch=256 prompt_len=128 new_tokens=256 temperature=1 top_k=50 top_p=1 backend=cpu dtype="" out=generate-vs-peer
while [ $# -gt 0 ]; do
  case $1 in
    --batch) batch=$2 ;;
    --prompt-len) prompt_len=$2 ;;
    --new-tokens) new_tokens=$2 ;;
    --temperature) temperature=$2 ;;
    --top-k) top_k=$2 ;;
    --top-p) top_p=$2 ;;
    --backend) backend=$2 ;;
    --dtype) dtype=$2 ;;
    --out) out=$2 ;;
    *) echo "generate_vs_peer.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2 || { echo "generate_vs_peer.sh: $1 needs a value" >&2; exit 2; }
done
case $backend in cpu|cuda) ;; *) echo "generate_vs_peer.sh: --backend '$backend': expected cpu or cuda" >&2; exit 2 ;; esac
[ -n "$dtype" ] || dtype=$([ "$backend" = cuda ] && echo bf16 || echo fp32)
case $dtype in bf16|fp32) ;; *) echo "generate_vs_peer.sh: --dtype '$dtype': expected bf16 or fp32" >&2; exit 2 ;; esac
mkdir -p "$out"

"$tandem" bench generate --model "$model" --batch "$batch" --prompt-len "$prompt_len" --new-tokens "$new_tokens" \
  --temperature "$temperature" --top-k "$top_k" --top-p "$top_p" --backend "$backend" --dtype "$dtype" \
  --json "$out/tandem.json" | tee "$out/tandem.txt"
python3 "$(dirname "$0")/hf_generate_peer.py" --model "$model" --batch "$batch" --prompt-len "$prompt_len" \
  --new-tokens "$new_tokens" --temperature "$temperature" --top-k "$top_k" --top-p "$top_p" --device "$backend" \
  --dtype "$dtype" --json "$out/peer.json" | tee "$out/peer.txt"

python3 - "$out/tandem.json" "$out/peer.json" <<'PY'
import json, sys
ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
print()
print("%-58s %16s %12s" % ("", "generated tok/s", "run ms"))
print("%-58s %16.0f %12.1f" % ("tandem (%s, %s)" % (ours["device"], ours["weights_dtype"]), ours["tokens_per_s"], ours["total_ms"]))
print("%-58s %16.0f %12.1f" % (
    "transformers %s generate() (%s, %s, %s)" % (peer["transformers_version"], peer["device_name"], peer["dtype"],
                                                 peer["attn_implementation"]), peer["tokens_per_s"], peer["total_ms"]))
print("ratio (tandem / transformers): %.2fx generated tokens/s" % (ours["tokens_per_s"] / peer["tokens_per_s"]))
print("tandem's decode step: %.3f ms median, %.2f host waits, %.3f ms enqueueing outside them; %.1f%% of its GEMM-only ceiling (%.3f ms), %.1f%% of its memory "
      "roofline (%.3f ms: %.3f GB at %.1f GB/s)" % (ours["decode_step_ms_median"], ours["host_waits_per_decode_step"],
                                                  ours["decode_host_ms_mean"], 100 * ours["ceiling_fraction"],
                                          ours["decode_gemm_ceiling_ms"], 100 * ours["roofline_fraction"], ours["roofline_ms"],
                                          ours["decode_bytes"] / 1e9, ours["copy_gb_per_s"]))
PY
