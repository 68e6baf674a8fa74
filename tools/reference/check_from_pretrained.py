#!/usr/bin/env python3
"""Checks that what `tandem convert` saves is what transformers' from_pretrained loads.

Needs torch and a transformers with Gemma 4 (the GPU machine's image has both; no network used).
Builds tiny random Gemma 4 models with transformers:
  * text-only:  Gemma4ForCausalLM from configs/models/tiny-all/config.json (every text feature:
                PLE, KV sharing, k_eq_v, MoE, double-wide MLP);
  * multimodal: Gemma4ForConditionalGeneration with that text config and tiny vision and audio
                towers (skipped, and said so, where this transformers cannot build them);
saves each with save_pretrained (safetensors, float32), runs `tandem convert` on it with
--dtype float32 and with the default bfloat16 (one file, and sharded), reloads every output with
from_pretrained and checks:
  * no missing, unexpected or mismatched keys;
  * float32: every tensor of the state dict exactly equal to the original;
  * bfloat16: every text tensor equal to the original cast to bfloat16, every non-text tensor
    (copied byte for byte by tandem) exactly equal to the original;
  * one forward pass on a few token ids: float32 logits exactly equal to the original model's;
    bfloat16 (loaded with dtype=bfloat16): state dict and logits exactly equal to those of the
    original float32 save loaded with dtype=bfloat16 (transformers' own cast).

Usage: python3 tools/reference/check_from_pretrained.py [TANDEM] [--keep DIR] [--device cpu|cuda]
       (TANDEM defaults to $TANDEM, then build/tandem)
Exit:  0 every check passed, 1 a check failed, 2 the environment lacks torch or Gemma 4.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_ALL = os.path.join(ROOT, "configs", "models", "tiny-all")

RESULTS = []  # (ok, line)


def report(ok, what, detail=""):
    line = f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else "")
    RESULTS.append((ok, line))
    print(line, flush=True)
    return ok


def randomize(model, torch, seed):
    """Random values in every finite floating tensor of the state dict (HF initializes norms and
    layer_scalar to ones, which would make a bf16 round trip trivially exact). 1-D tensors get
    U[0.5, 1.5], the rest N(0, 0.15). Infinite buffers (unset clip bounds) stay as they are."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        seen = set()
        for name, t in model.state_dict().items():
            if not t.is_floating_point() or t.data_ptr() in seen or not torch.isfinite(t).all():
                continue
            seen.add(t.data_ptr())
            if t.dim() <= 1:
                values = torch.rand(t.shape, generator=gen) + 0.5
            else:
                values = torch.randn(t.shape, generator=gen) * 0.15
            t.copy_(values.to(t.dtype))


def run_tandem(tandem, *args):
    p = subprocess.run([tandem, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def save(model, path):
    try:
        model.save_pretrained(path, safe_serialization=True)
    except TypeError:  # transformers without the argument: safetensors is the only format
        model.save_pretrained(path)


def load(cls, path, torch, dtype):
    kwargs = dict(output_loading_info=True)
    try:
        return cls.from_pretrained(path, dtype=dtype, **kwargs)
    except TypeError:
        return cls.from_pretrained(path, torch_dtype=dtype, **kwargs)


def compare_state(name, original, loaded, torch, is_text, bf16):
    want = original.state_dict()
    have = loaded.state_dict()
    if set(want) != set(have):
        return report(False, f"{name}: state dict keys",
                      f"only original {sorted(set(want) - set(have))[:5]}, only loaded {sorted(set(have) - set(want))[:5]}")
    bad = []
    for key, w in want.items():
        h = have[key]
        if bf16 and is_text(key) and w.is_floating_point():
            w = w.to(torch.bfloat16).to(torch.float32)
        if h.shape != w.shape or h.dtype != w.dtype or not torch.equal(h.cpu(), w.cpu()):
            diff = (h.float().cpu() - w.float().cpu()).abs().max().item() if h.shape == w.shape else None
            bad.append(f"{key} (shape {list(h.shape)} vs {list(w.shape)}, dtype {h.dtype} vs {w.dtype}, max diff {diff})")
    return report(not bad, f"{name}: {len(want)} state-dict tensors "
                  + ("equal to the original cast to bfloat16 (text) / the original (non-text)" if bf16 else "exactly equal"),
                  "; ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else ""))


def compare_logits(name, reference, model, ids, torch, device):
    model.to(device).eval()
    reference.to(device).eval()
    with torch.no_grad():
        a = reference(input_ids=ids.to(device)).logits
        b = model(input_ids=ids.to(device)).logits
    same = a.shape == b.shape and torch.equal(a, b)
    diff = (a.float() - b.float()).abs().max().item() if a.shape == b.shape else float("nan")
    return report(same, f"{name}: logits {list(a.shape)} {a.dtype} exactly equal", "" if same else f"max |diff| {diff:g}")


def check_model(label, cls, original, tandem, work, torch, is_text, device):
    src = os.path.join(work, f"{label}-hf")
    save(original, src)
    files = sorted(os.listdir(src))
    print(f"---- {label}: saved {cls.__name__} (float32) to {src}: {', '.join(files)}", flush=True)
    ids = torch.tensor([[2, 17, 33, 250, 4, 9, 101, 7, 64, 3, 199, 12, 5, 88],
                        [2, 5, 5, 6, 200, 31, 0, 255, 42, 77, 8, 1, 150, 61]])
    ok = True
    for dtype, shard in (("float32", None), ("bfloat16", None), ("float32", "100kB"), ("bfloat16", "50kB")):
        out = os.path.join(work, f"{label}-{dtype}{'-' + shard if shard else ''}")
        args = ["convert", "--model", src, "--out", out]
        if dtype != "bfloat16":
            args += ["--dtype", dtype]
        if shard:
            args += ["--max-shard-size", shard]
        rc, stdout, stderr = run_tandem(tandem, *args)
        name = f"{label} -> tandem convert --dtype {dtype}" + (f" --max-shard-size {shard}" if shard else "")
        if not report(rc == 0, f"{name}: exit status", f"{rc}: {stderr.strip()}" if rc else ""):
            ok = False
            continue
        bf16 = dtype == "bfloat16"
        loaded, info = load(cls, out, torch, torch.float32)
        problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
        ok &= report(not problems, f"{name}: from_pretrained loading info", str(problems) if problems else "")
        ok &= compare_state(name, original, loaded, torch, is_text, bf16)
        if bf16:
            # The reference is the original float32 save loaded by transformers itself in
            # bfloat16 (its own cast): the same load path, so only the weights can differ.
            # (original.to(bfloat16) would also cast non-persistent buffers such as the RoPE
            # frequencies, which a bfloat16 from_pretrained computes differently.)
            reference, _ = load(cls, src, torch, torch.bfloat16)
            model_bf16, _ = load(cls, out, torch, torch.bfloat16)
            ok &= compare_state(f"{name} (loaded in bfloat16)", reference, model_bf16, torch, is_text, False)
            ok &= compare_logits(name, reference, model_bf16, ids, torch, device)
            del reference, model_bf16
        else:
            ok &= compare_logits(name, original, loaded, ids, torch, device)
        original.to("cpu")
        del loaded
    return ok


def tiny_multimodal_config(transformers, text_config):
    vision = transformers.Gemma4VisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, head_dim=16, patch_size=4, position_embedding_size=64,
        use_clipped_linears=True)
    audio = transformers.Gemma4AudioConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, subsampling_conv_channels=[8, 4],
        output_proj_dims=24)
    return transformers.Gemma4Config(text_config=text_config.to_dict(), vision_config=vision.to_dict(),
                                     audio_config=audio.to_dict())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tandem", nargs="?", default=os.environ.get("TANDEM", os.path.join(ROOT, "build", "tandem")))
    parser.add_argument("--keep", help="write the models here and keep them (default: a temporary folder)")
    parser.add_argument("--device", default="cpu", help="where the forward passes run (cpu: bit-reproducible)")
    args = parser.parse_args()

    try:
        import torch
        import transformers
        from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration, Gemma4TextConfig
    except ImportError as e:
        print(f"check_from_pretrained: needs torch and a transformers with Gemma 4: {e}", file=sys.stderr)
        return 2
    tandem = os.path.abspath(args.tandem)
    if not os.access(tandem, os.X_OK):
        print(f"check_from_pretrained: no tandem binary at {tandem}", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, tandem {tandem}, "
          f"forward on {args.device}", flush=True)

    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="tandem-from-pretrained-")
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    torch.manual_seed(0)
    try:
        text_config = Gemma4TextConfig.from_pretrained(TINY_ALL)
        text_config.dtype = "float32"
        causal = Gemma4ForCausalLM(text_config).to(torch.float32)
        randomize(causal, torch, seed=1)
        check_model("text", Gemma4ForCausalLM, causal, tandem, work, torch, lambda key: True, args.device)

        try:
            mm_config = tiny_multimodal_config(transformers, text_config)
            multimodal = Gemma4ForConditionalGeneration(mm_config).to(torch.float32)
        except Exception as e:  # a transformers whose towers need more than this tiny config
            report(True, "multimodal: SKIPPED, this transformers cannot build a tiny "
                   f"Gemma4ForConditionalGeneration ({type(e).__name__}: {e}); text-only checked")
        else:
            randomize(multimodal, torch, seed=2)
            is_text = lambda key: key.startswith("model.language_model.") or key == "lm_head.weight"
            towers = sorted({".".join(k.split(".")[:2]) for k in multimodal.state_dict() if not is_text(k)})
            print(f"multimodal non-text parts: {', '.join(towers)}", flush=True)
            check_model("multimodal", Gemma4ForConditionalGeneration, multimodal, tandem, work, torch,
                        is_text, args.device)
    except Exception as e:
        import traceback
        traceback.print_exc()
        report(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    failed = [line for ok, line in RESULTS if not ok]
    print(f"check_from_pretrained: {'PASS' if not failed else 'FAIL'} "
          f"({len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed)")
    for line in failed:
        print("  " + line)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
