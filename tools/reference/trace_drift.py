#!/usr/bin/env python3
"""Where a path of tandem parts from float64: layer by layer, against transformers.

Runs `TANDEM logprobs --trace` (every activation tandem's forward names) on a few seeded random
sequences of the model in DIR, and transformers on the same sequences in float64 (the truth) and
in the dtype tandem ran in, with a hook on every decoder layer. For each layer it prints the
relative distance of the layer's output from float64's (mean |x - x64| / mean |x64| over every
token and channel) for tandem and for transformers, then the same for the final norm and the
mean and max |dlogprob|. A path whose distance grows faster than transformers' own in that dtype
shows the layer where it starts.

Usage: trace_drift.py --model DIR --tandem BIN [--backend cpu|cuda] [--dtype fp32|bf16]
                      [--device cpu|cuda] [--sequences N] [--length L] [--out DIR]
--device is where transformers runs (default: --backend). Needs torch, safetensors and a
transformers with Gemma 4 (the GPU machine's image).
Exit: 0 done, 1 tandem failed, 2 the environment lacks torch or Gemma 4.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def sequences(model_dir, count, length):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    vocab = config.get("text_config", config)["vocab_size"]
    bos = config.get("bos_token_id", 2)
    rng = random.Random(20261205)
    return [[bos] + [rng.randrange(vocab) for _ in range(rng.randint(length // 2, length))] for _ in range(count)]


def run_tandem(a, seqs, out_dir):
    tokens = os.path.join(out_dir, "tokens.json")
    trace = os.path.join(out_dir, "tandem-%s-%s.safetensors" % (a.backend, a.dtype))
    with open(tokens, "w") as f:
        json.dump(seqs, f)
    if os.path.exists(trace):
        os.unlink(trace)
    p = subprocess.run([a.tandem, "logprobs", "--model", a.model, "--tokens", tokens, "--backend", a.backend, "--dtype", a.dtype,
                        "--trace", trace], capture_output=True, text=True)
    if p.returncode != 0:
        print("trace_drift.py: tandem logprobs failed (%d): %s" % (p.returncode, p.stderr.strip()), file=sys.stderr)
        return None, None
    return json.loads(p.stdout), trace


def run_transformers(torch, transformers, a, seqs, dtype):
    """Per layer the outputs of every sequence concatenated along tokens (tandem's packed order), the
    final norm's output likewise, and the logprobs of each sequence's next tokens."""
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="eager").to(a.device)
    model.eval()
    inner = model.model.language_model if hasattr(model.model, "language_model") else model.model
    outputs, finals, logprobs = {}, [], []
    current = {}

    def layer_hook(i):
        def hook(module, args, output):
            current[i] = (output[0] if isinstance(output, (tuple, list)) else output).detach()[0].double().cpu()
        return hook

    def norm_hook(module, args, output):
        current["final"] = output.detach()[0].double().cpu()

    handles = [layer.register_forward_hook(layer_hook(i)) for i, layer in enumerate(inner.layers)]
    handles.append(inner.norm.register_forward_hook(norm_hook))
    with torch.no_grad():
        for s in seqs:
            current.clear()
            logits = model(input_ids=torch.tensor([s], device=a.device), use_cache=False).logits[0].double()
            lp = torch.log_softmax(logits, dim=-1)
            logprobs.append([lp[t, s[t + 1]].item() for t in range(len(s) - 1)])
            for i in range(len(inner.layers)):
                outputs.setdefault(i, []).append(current[i])
            finals.append(current["final"])
    for h in handles:
        h.remove()
    del model
    return {i: torch.cat(v) for i, v in outputs.items()}, torch.cat(finals), logprobs


def distance(x, ref):
    return float((x.double() - ref).abs().mean() / ref.abs().mean().clamp_min(1e-300))


def logprob_distance(got, want):
    diffs = [abs(x - y) for g, w in zip(got, want) for x, y in zip(g, w) if x is not None]
    return (sum(diffs) / max(len(diffs), 1), max(diffs, default=0.0))


def main():
    ap = argparse.ArgumentParser(description="tandem's and transformers' layer outputs against float64")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--device", choices=["cpu", "cuda"])
    ap.add_argument("--sequences", type=int, default=4)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--out")
    a = ap.parse_args()
    a.device = a.device or a.backend
    out_dir = a.out or tempfile.mkdtemp(prefix="trace-drift-")
    os.makedirs(out_dir, exist_ok=True)
    seqs = sequences(a.model, a.sequences, a.length)
    got, trace = run_tandem(a, seqs, out_dir)
    if got is None:
        return 1
    try:
        import torch
        import transformers
        from safetensors.torch import load_file
    except ImportError as e:
        print("trace_drift.py: needs torch, safetensors and transformers: %s" % e, file=sys.stderr)
        return 2
    ours = load_file(trace)
    truth, truth_final, truth_lp = run_transformers(torch, transformers, a, seqs, torch.float64)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    peer, peer_final, peer_lp = run_transformers(torch, transformers, a, seqs, dtype)
    print("%s: %d sequences (%d tokens); distance from float64 = mean |x - x64| / mean |x64|" %
          (a.model, len(seqs), sum(len(s) for s in seqs)))
    print("%-12s %18s %22s %8s" % ("", "tandem %s %s" % (a.backend, a.dtype), "transformers %s %s" % (a.device, a.dtype), "ratio"))
    for i in sorted(truth):
        key = "layers.%d.layer_out" % i
        if key not in ours:
            print("%-12s %18s" % ("layer %d" % i, "(not traced)"))
            continue
        t, p = distance(ours[key], truth[i]), distance(peer[i], truth[i])
        print("%-12s %18.3e %22.3e %8.2f" % ("layer %d" % i, t, p, t / p if p > 0 else float("inf")))
    t, p = distance(ours["final_norm"], truth_final), distance(peer_final, truth_final)
    print("%-12s %18.3e %22.3e %8.2f" % ("final norm", t, p, t / p if p > 0 else float("inf")))
    (tm, tx), (pm, px) = logprob_distance(got, truth_lp), logprob_distance(peer_lp, truth_lp)
    print("%-12s %18s %22s" % ("|dlogprob|", "mean %.3e max %.3e" % (tm, tx), "mean %.3e max %.3e" % (pm, px)))
    print("trace and tokens in %s" % out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
