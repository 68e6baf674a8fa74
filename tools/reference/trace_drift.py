#!/usr/bin/env python3
"""Where a path of tandem parts from float64: layer by layer and stage by stage, against transformers.

Runs `TANDEM logprobs --trace` (every activation tandem's forward names) on a few seeded random
sequences of the model in DIR, and transformers on the same sequences in float64 (the truth) and
in the dtype tandem ran in, with hooks on every decoder layer. The truth is float64 throughout:
transformers' float64 model computes its norms and softmax in float32 (it upcasts half precision
to float32, which for float64 is a downcast), so for the truth they run in float64 too
(--as-transformers keeps them as they are). For each layer and each stage of it that both name
(the input norm's output, the query projection, the rotated query and key, the normed value, the
attention core before o_proj, the attention branch after its norm, the dense MLP's output, the
per-layer input's branch, the layer's output) it prints the relative distance from float64's
(mean |x - x64| / mean |x64| over every token and channel) of tandem's activation and its ratio
to transformers' own distance in that dtype; then the final norm and the mean and max |dlogprob|
(each from float64's, then tandem's from transformers'); then each op of LOCAL alone (the input
norm, the query projection): its distance from the same op in float64 applied to the path's own
input, which isolates an op's rounding from what reached it; and last the first stage where
tandem's ratio passes --flag (default 1.5): where a path starts to drift faster than
transformers'.

Usage: trace_drift.py --model DIR --tandem BIN [--backend cpu|cuda] [--dtype fp32|bf16]
                      [--device cpu|cuda] [--sequences N] [--length L] [--flag R]
                      [--as-transformers] [--out DIR]
--device is where transformers runs (default: --backend). Needs torch, safetensors and a
transformers with Gemma 4 (the GPU machine's image).
Exit: 0 done, 1 tandem failed (or is missing), 2 the environment lacks torch or Gemma 4.
"""
import argparse
import contextlib
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
    if not (os.path.isfile(a.tandem) and os.access(a.tandem, os.X_OK)):
        print("trace_drift.py: --tandem %s is not an executable file" % a.tandem, file=sys.stderr)
        return None, None
    p = subprocess.run([a.tandem, "logprobs", "--model", a.model, "--tokens", tokens, "--backend", a.backend, "--dtype", a.dtype,
                        "--trace", trace], capture_output=True, text=True)
    if p.returncode != 0:
        print("trace_drift.py: tandem logprobs failed (%d): %s" % (p.returncode, p.stderr.strip()), file=sys.stderr)
        return None, None
    return json.loads(p.stdout), trace


# Stages of a decoder layer that tandem traces and transformers' modules show: tandem's name, the
# module of the layer (a dotted path), and whether its input (the attention core enters o_proj)
# or its output is the activation. "layer_out" is the layer's own output.
# q and k are the rotated query and key: the outputs of the attention's first and second call of
# the model module's apply_rotary_pos_emb (a KV-shared layer makes only the first); v is v_norm's.
STAGES = [("attn_in", "input_layernorm", "output"), ("q_raw", "self_attn.q_proj", "output"),
          ("q", "self_attn", "rope"), ("k", "self_attn", "rope"), ("v", "self_attn.v_norm", "output"),
          ("attn_core", "self_attn.o_proj", "input"), ("attn_out", "post_attention_layernorm", "output"),
          ("mlp_out", "mlp", "output"), ("ple_out", "post_per_layer_input_norm", "output"), ("layer_out", "", "output")]

# Ops measured locally: each applied in float64 (float64 transformers' own module) to the input
# that a path itself computed, so the distance is the op's own rounding, not what reached it. The
# stage, the module of the layer, and the stage that is its input ("layer_in": the embedding's
# output for layer 0, else the previous layer's output).
LOCAL = [("attn_in", "input_layernorm", "layer_in"), ("q_raw", "self_attn.q_proj", "attn_in")]


def run_transformers(torch, transformers, a, seqs, dtype, local_modules=None, exact=False):
    """Per (layer, stage) the activations of every sequence concatenated along tokens (tandem's packed
    order; "embed" the embedding's output), the final norm's output likewise, and the logprobs of
    each sequence's next tokens. With local_modules (a dict), copies of the LOCAL modules of every
    layer, on the CPU, go into it by (layer, stage). exact: the model runs under exact_float64."""
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="eager").to(a.device)
    model.eval()
    inner = model.model.language_model if hasattr(model.model, "language_model") else model.model
    if local_modules is not None:
        import copy
        for i, layer in enumerate(inner.layers):
            for stage, path, _ in LOCAL:
                local_modules[(i, stage)] = copy.deepcopy(layer.get_submodule(path)).cpu()
    outputs, finals, logprobs = {}, [], []
    current = {}

    def first(x):
        return (x[0] if isinstance(x, (tuple, list)) else x).detach()[0].double().cpu()

    def keep(key, where):
        if where == "input":
            return lambda module, args: current.__setitem__(key, first(args))
        return lambda module, args, output: current.__setitem__(key, first(output))

    handles = []
    # The rotated q and k: the attention module's calls of apply_rotary_pos_emb, in order.
    module_of_attention = sys.modules[type(inner.layers[0].self_attn).__module__]
    rotate = module_of_attention.apply_rotary_pos_emb
    rotating = {"layer": None, "calls": 0}

    def recording_rotation(x, cos, sin, *args, **kwargs):
        y = rotate(x, cos, sin, *args, **kwargs)
        if rotating["layer"] is not None and rotating["calls"] < 2:
            current[(rotating["layer"], "qk"[rotating["calls"]])] = first(y)
            rotating["calls"] += 1
        return y

    def entering_attention(i):
        def hook(module, args):
            rotating["layer"], rotating["calls"] = i, 0
        return hook

    module_of_attention.apply_rotary_pos_emb = recording_rotation
    for i, layer in enumerate(inner.layers):
        handles.append(layer.self_attn.register_forward_pre_hook(entering_attention(i)))
        for stage, path, where in STAGES:
            if where == "rope":
                continue
            module = layer
            for part in filter(None, path.split(".")):
                module = getattr(module, part, None)
                if module is None:
                    break
            if module is None:
                continue
            hook = keep((i, stage), where)
            handles.append(module.register_forward_pre_hook(hook) if where == "input" else module.register_forward_hook(hook))
    handles.append(inner.embed_tokens.register_forward_hook(lambda module, args, output: current.__setitem__("embed", first(output))))
    handles.append(inner.norm.register_forward_hook(lambda module, args, output: current.__setitem__("final", first(output))))
    try:
        with torch.no_grad(), (exact_float64(torch, type(inner.norm)) if exact else contextlib.nullcontext()):
            for s in seqs:
                current.clear()
                logits = model(input_ids=torch.tensor([s], device=a.device), use_cache=False).logits[0].double()
                lp = torch.log_softmax(logits, dim=-1)
                logprobs.append([lp[t, s[t + 1]].item() for t in range(len(s) - 1)])
                for key, value in current.items():
                    if key != "final":
                        outputs.setdefault(key, []).append(value)
                finals.append(current["final"])
    finally:
        module_of_attention.apply_rotary_pos_emb = rotate
        for h in handles:
            h.remove()
    del model
    return {key: torch.cat(v) for key, v in outputs.items()}, torch.cat(finals), logprobs


def local_distances(torch, modules, activations, key_of, exact):
    """Per (layer, stage) of LOCAL: the distance of a path's stage from its module in float64 applied
    to the path's own input (under exact_float64 when exact). key_of(layer, stage) names a stage in
    activations ("embed" for the embedding); a stage the path lacks is left out."""
    out = {}
    norm_class = type(modules[(0, "attn_in")]) if (0, "attn_in") in modules else None
    with torch.no_grad(), (exact_float64(torch, norm_class) if exact and norm_class else contextlib.nullcontext()):
        for (i, stage), module in modules.items():
            source = next(src for st, _, src in LOCAL if st == stage)
            if source == "layer_in":
                source_key = key_of(None, "embed") if i == 0 else key_of(i - 1, "layer_out")
            else:
                source_key = key_of(i, source)
            got_key = key_of(i, stage)
            if source_key not in activations or got_key not in activations:
                continue
            out[(i, stage)] = distance(activations[got_key], module(activations[source_key].double()))
    return out


class exact_float64:
    """While active, a float64 model of transformers computes in float64 throughout: its RMSNorm
    (which casts to float32 and back whatever the model's dtype) and the softmax of its attention
    and router (asked for in float32) keep float64 inputs in float64. Without this the "float64"
    reference rounds to float32 at every norm and softmax, the very roundings its own float32 run
    repeats bit for bit, so any other float32 path looks further from it than it is. The RoPE
    tables are left as the model defines them: float32 inv_freq and angles (tandem's too)."""

    def __init__(self, torch, norm_class):
        self.torch, self.norm_class = torch, norm_class

    def __enter__(self):
        torch = self.torch
        self.norm_forward, self.softmax = self.norm_class.forward, torch.nn.functional.softmax
        norm_forward, softmax = self.norm_forward, self.softmax
        checked = set()  # the norm modules whose formula was checked against transformers' own

        def forward(module, x):
            if x.dtype != torch.float64:
                return norm_forward(module, x)
            eps = next(getattr(module, n) for n in ("variance_epsilon", "eps") if hasattr(module, n))
            y = x * (x.pow(2).mean(-1, keepdim=True) + eps).pow(-0.5)
            if getattr(module, "with_scale", getattr(module, "weight", None) is not None):
                y = y * module.weight
            # The formula above is Gemma 4's; a transformers whose norm computes another fails here, at
            # each module's first call.
            if id(module) not in checked:
                theirs = norm_forward(module, x)
                if float((y - theirs).abs().max()) > 1e-5 * max(float(theirs.abs().max()), 1.0):
                    raise RuntimeError("trace_drift.py: transformers' %s computes other than x / rms(x) * w; "
                                       "run with --as-transformers" % type(module).__name__)
                checked.add(id(module))
            return y

        def softmax64(x, *args, **kwargs):
            if x.dtype == torch.float64 and kwargs.get("dtype") == torch.float32:
                kwargs["dtype"] = torch.float64
            return softmax(x, *args, **kwargs)

        self.norm_class.forward, torch.nn.functional.softmax = forward, softmax64
        return self

    def __exit__(self, *exc):
        self.norm_class.forward, self.torch.nn.functional.softmax = self.norm_forward, self.softmax
        return False


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
    ap.add_argument("--flag", type=float, default=1.5, help="the ratio to transformers' distance that marks a drift")
    ap.add_argument("--as-transformers", action="store_true",
                    help="take transformers' float64 model as it is (norms and softmax in float32) for the reference")
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
    modules = {}
    truth, truth_final, truth_lp = run_transformers(torch, transformers, a, seqs, torch.float64, modules, exact=not a.as_transformers)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    peer, peer_final, peer_lp = run_transformers(torch, transformers, a, seqs, dtype)
    print("%s: %d sequences (%d tokens); distance from float64 = mean |x - x64| / mean |x64|" %
          (a.model, len(seqs), sum(len(s) for s in seqs)))
    print("float64: transformers' float64 model as it is (its norms and softmax in float32)" if a.as_transformers else
          "float64: transformers' float64 model with its norms and softmax in float64 too")
    print("each stage: tandem %s %s's distance, then its ratio to transformers %s %s's" % (a.backend, a.dtype, a.device, a.dtype))
    print("%-9s" % "" + "".join("%19s" % stage for stage, _, _ in STAGES))
    flagged = None
    for i in sorted({key[0] for key in truth if isinstance(key, tuple)}):
        cells = []
        for stage, _, _ in STAGES:
            key = "layers.%d.%s" % (i, stage)
            if (i, stage) not in truth or key not in ours:
                cells.append("%19s" % "-")  # a stage one side does not have (no per-layer input, ...)
                continue
            if tuple(ours[key].shape) != tuple(truth[(i, stage)].shape):
                cells.append("%19s" % ("shape %s" % "x".join(str(n) for n in ours[key].shape)))
                continue
            t, p = distance(ours[key], truth[(i, stage)]), distance(peer[(i, stage)], truth[(i, stage)])
            ratio = t / p if p > 0 else float("inf")
            cells.append("%11.3e %6.2f " % (t, ratio))
            if flagged is None and ratio > a.flag:
                flagged = "layer %d %s (%.2fx transformers' distance)" % (i, stage, ratio)
        print("%-9s" % ("layer %d" % i) + "".join(cells))
    t, p = distance(ours["final_norm"], truth_final), distance(peer_final, truth_final)
    print("%-12s %18.3e %22.3e %8.2f" % ("final norm", t, p, t / p if p > 0 else float("inf")))
    (tm, tx), (pm, px) = logprob_distance(got, truth_lp), logprob_distance(peer_lp, truth_lp)
    print("%-12s %18s %22s" % ("|dlogprob|", "mean %.3e max %.3e" % (tm, tx), "mean %.3e max %.3e" % (pm, px)))
    (bm, bx) = logprob_distance(got, peer_lp)
    print("tandem %s %s against transformers %s %s: |dlogprob| mean %.3e max %.3e" % (a.backend, a.dtype, a.device, a.dtype, bm, bx))
    print("each op alone, on its own path's input: tandem's distance from the op in float64, then its ratio to transformers'")
    print("%-9s" % "" + "".join("%19s" % stage for stage, _, _ in LOCAL))
    mine = local_distances(torch, modules, ours, lambda i, stage: stage if i is None else "layers.%d.%s" % (i, stage),
                           not a.as_transformers)
    theirs = local_distances(torch, modules, peer, lambda i, stage: stage if i is None else (i, stage), not a.as_transformers)
    for i in sorted({layer for layer, _ in modules}):
        cells = []
        for stage, _, _ in LOCAL:
            if (i, stage) not in mine or (i, stage) not in theirs:
                cells.append("%19s" % "-")
                continue
            t, p = mine[(i, stage)], theirs[(i, stage)]
            cells.append("%11.3e %6.2f " % (t, t / p if p > 0 else float("inf")))
        print("%-9s" % ("layer %d" % i) + "".join(cells))
    print("first stage past %.2fx: %s" % (a.flag, flagged or "none"))
    print("trace and tokens in %s" % out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
