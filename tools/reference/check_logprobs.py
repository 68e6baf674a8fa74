#!/usr/bin/env python3
"""transformers loads a checkpoint directory tandem wrote (a run's final_weights, `tandem convert`,
`tandem init`) as it is and gives tandem's logprobs.

Loads DIR with transformers' AutoModelForCausalLM (float32, eager attention, no conversion), scores
a few seeded random sequences over the model's vocabulary, and compares each token's logprob with
`TANDEM logprobs --model DIR` on the same sequences (on the CPU in float32, or with
--tandem-backend cuda and --tandem-dtype fp32|bf16 on the GPU).

Usage: check_logprobs.py --model DIR --tandem BIN [--device cpu|cuda] [--sequences N] [--length L]
                         [--tandem-backend cpu|cuda] [--tandem-dtype fp32|bf16] [--hf-dtype fp32|bf16]
                         [--tolerance MAX] [--mean-tolerance MEAN] [--within-spread]
                         [--from-float32]
       check_logprobs.py --model DIR --tandem BIN --save FILE   tandem's side only (no torch):
                                                                the sequences and their logprobs
       check_logprobs.py --model DIR --against FILE [--device]  transformers against a saved FILE
                                                                (a machine without tandem's build)
--hf-dtype bf16 runs transformers in bfloat16 (its own bf16 numbers, for tandem's bf16 path);
--mean-tolerance also bounds the mean |dlogprob| (bfloat16 is judged by its mean).
--within-spread also runs transformers with its SDPA attention (same weights and dtype) and requires
tandem's mean |dlogprob| from the eager run to be no larger than SDPA's: within the distance
between transformers' own two implementations.
--from-float32 (with --tandem-dtype bf16) judges bfloat16 by its distance from transformers' float32
instead: tandem's mean |dlogprob| from it beside transformers' own bfloat16 eager and SDPA runs'
(the same weights), and requires tandem's to be no larger than the farther of the two.
Exit:  0 within --tolerance (default 2e-5) and --mean-tolerance (default none), 1 beyond, 2 the
       environment lacks torch or Gemma 4.
Needs torch and a transformers with Gemma 4 (the GPU machine's image), except with --save.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def sequences(a):
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    vocab = config.get("text_config", config)["vocab_size"]
    bos = config.get("bos_token_id", 2)
    rng = random.Random(20261202)
    return [[bos] + [rng.randrange(vocab) for _ in range(rng.randint(a.length // 2, a.length))] for _ in range(a.sequences)]


def tandem_logprobs(binary, model, seqs, backend, dtype):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(seqs, f)
        tokens = f.name
    p = subprocess.run([binary, "logprobs", "--model", model, "--tokens", tokens, "--backend", backend, "--dtype", dtype],
                       capture_output=True, text=True)
    os.unlink(tokens)
    if p.returncode != 0:
        print("tandem logprobs failed (%d): %s" % (p.returncode, p.stderr), file=sys.stderr)
        return None
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tandem")
    ap.add_argument("--save")
    ap.add_argument("--against")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sequences", type=int, default=4)
    ap.add_argument("--length", type=int, default=24)
    ap.add_argument("--tolerance", type=float, default=2e-5)
    ap.add_argument("--tandem-backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tandem-dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--hf-dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--mean-tolerance", type=float)
    ap.add_argument("--within-spread", action="store_true")
    ap.add_argument("--from-float32", action="store_true")
    a = ap.parse_args()
    if a.from_float32 and (a.tandem_dtype != "bf16" or a.within_spread):
        ap.error("--from-float32 judges --tandem-dtype bf16, and replaces --within-spread")
    if bool(a.tandem) == bool(a.against) or (a.save and not a.tandem):
        ap.error("give --tandem BIN (with --save FILE for tandem's side only) or --against FILE")
    if a.against:
        with open(a.against) as f:
            saved = json.load(f)
        seqs, got = saved["sequences"], saved["tandem"]
    else:
        seqs = sequences(a)
        got = tandem_logprobs(a.tandem, a.model, seqs, a.tandem_backend, a.tandem_dtype)
        if got is None:
            return 1
        if a.save:
            with open(a.save, "w") as f:
                json.dump({"model": a.model, "sequences": seqs, "tandem": got}, f)
            print("saved tandem's logprobs of %d sequences to %s" % (len(seqs), a.save))
            return 0
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print("check_logprobs.py: needs torch and transformers: %s" % e, file=sys.stderr)
        return 2
    hf_dtype = torch.bfloat16 if a.hf_dtype == "bf16" else torch.float32

    def hf_logprobs(attention, dtype=hf_dtype):
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation=attention).to(a.device)
        model.eval()
        rows = []
        with torch.no_grad():
            for s in seqs:
                ids = torch.tensor([s], device=a.device)
                logits = model(input_ids=ids).logits[0].double()
                lp = torch.log_softmax(logits, dim=-1)
                rows.append([lp[t, s[t + 1]].item() for t in range(len(s) - 1)])
        del model
        return rows

    if a.from_float32:
        return from_float32(a, got, hf_logprobs("eager", torch.float32),
                            {name: hf_logprobs(name, torch.bfloat16) for name in ("eager", "sdpa")})
    want = hf_logprobs("eager")
    worst, mean, n = differences(got, want)
    ok = n == sum(len(w) for w in want) and worst <= a.tolerance and (a.mean_tolerance is None or mean <= a.mean_tolerance)
    spread = ""
    if a.within_spread:
        # transformers' own two attention implementations on the same weights and dtype: how far
        # apart two faithful implementations land on this model (a deep model with random weights
        # amplifies every rounding difference).
        spread_worst, spread_mean, _ = differences(hf_logprobs("sdpa"), want)
        ok = ok and mean <= spread_mean
        spread = "; transformers eager vs sdpa: max %.3g, mean %.3g" % (spread_worst, spread_mean)
    print("%s %s: %d tokens of %d sequences, max |dlogprob| %.3g, mean %.3g (transformers %s on %s, tandem %s %s)%s"
          % ("PASS" if ok else "FAIL", a.model, n, len(seqs), worst, mean, a.hf_dtype, a.device,
             a.tandem_backend, a.tandem_dtype, spread))
    return 0 if ok else 1


def from_float32(a, got, truth, peers):
    """tandem's bfloat16 logprobs and transformers' bfloat16 runs (peers, by attention), each against
    transformers' float32: a pass when tandem is no farther from it than the farther peer."""
    worst, mean, n = differences(got, truth)
    far = {name: differences(rows, truth) for name, rows in peers.items()}
    ok = n == sum(len(t) for t in truth) and worst <= a.tolerance and mean <= max(m for _, m, _ in far.values())
    print("%s %s: %d tokens of %d sequences, from transformers' float32 on %s: tandem %s bf16 max |dlogprob| %.3g, "
          "mean %.3g; %s" % ("PASS" if ok else "FAIL", a.model, n, len(got), a.device, a.tandem_backend, worst, mean,
                             "; ".join("transformers bf16 %s max %.3g, mean %.3g" % (name, w, m)
                                       for name, (w, m, _) in far.items())))
    return 0 if ok else 1


def differences(got, want):
    """The largest and the mean |got - want| over every token, and the tokens compared."""
    worst, total, n = 0.0, 0.0, 0
    for g, w in zip(got, want):
        for x, y in zip(g, w):
            d = abs(x - y)
            worst, total, n = max(worst, d), total + d, n + 1
    return worst, total / max(n, 1), n


if __name__ == "__main__":
    sys.exit(main())
