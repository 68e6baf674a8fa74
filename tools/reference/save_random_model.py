#!/usr/bin/env python3
"""Saves a Gemma 4 text model with transformers' own random initialization, so that tandem can be
checked against transformers at a real shape (the E2B config, say) with no weights downloaded.

Builds AutoModelForCausalLM.from_config over the text config of --config (a model directory's
config.json: a multimodal config is saved as its text stack, Gemma4ForCausalLM) after
torch.manual_seed(--seed), directly on --device in --dtype, and writes it with save_pretrained
(safetensors). The directory is written beside --out and renamed into place when complete, so an
interrupted run leaves no half-written model behind. tools/reference/check_logprobs.py then scores
it with both transformers and tandem.

Usage: save_random_model.py --config configs/models/gemma-4-E2B --out DIR [--dtype bf16|fp32]
                            [--device cuda|cpu] [--seed N]
Exit:  0 saved, 1 a runtime failure, 2 bad arguments, an existing --out, or an environment without
       torch or Gemma 4.
Needs torch and a transformers with Gemma 4 (the GPU machine's image).
"""
import argparse
import os
import shutil
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="a model directory with config.json")
    ap.add_argument("--out", required=True, help="the directory to create (must not exist)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=20261205)
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.config, "config.json")):
        print(f"save_random_model.py: --config {a.config}: no config.json there", file=sys.stderr)
        return 2
    if os.path.exists(a.out):
        print(f"save_random_model.py: --out {a.out} exists: refusing to overwrite it", file=sys.stderr)
        return 2
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"save_random_model.py: needs torch and transformers ({e})", file=sys.stderr)
        return 2
    config = transformers.AutoConfig.from_pretrained(a.config)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text, "model_type", "").startswith("gemma4"):
        print(f"save_random_model.py: {a.config}: model_type {getattr(text, 'model_type', None)!r} is not Gemma 4 "
              f"(or this transformers {transformers.__version__} does not know Gemma 4)", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    partial = a.out.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        torch.manual_seed(a.seed)
        with torch.device(a.device):
            model = transformers.AutoModelForCausalLM.from_config(text, dtype=dtype)
        model.save_pretrained(partial, safe_serialization=True)
        os.rename(partial, a.out)
    except Exception as e:  # a full disk, an out-of-memory device: nothing is left half-written
        shutil.rmtree(partial, ignore_errors=True)
        print(f"save_random_model.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    params = sum(p.numel() for p in model.parameters())
    print(f"save_random_model.py: {type(model).__name__} with {params:,} parameters in {a.dtype} "
          f"(transformers {transformers.__version__}, seed {a.seed}) saved to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
