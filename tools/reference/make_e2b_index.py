#!/usr/bin/env python3
"""Writes the tensor-name index of a published google/gemma-4-E2B checkpoint (no weights).

Output: tests/data/checkpoints/gemma-4-E2B/model.safetensors.index.json, plus a copy of
configs/models/gemma-4-E2B/config.json beside it. A C++ test maps every text name of the index to
an offset of tandem's parameter layout, so the names here are written out from the published
architecture (docs/gemma4.md §3 and the E2B config), NOT from tandem's layout code or
`tandem inspect`: an independent list.

Facts used:
  * wrapper Gemma4ForConditionalGeneration: text under "model.language_model.", lm_head tied and
    not in the files;
  * 35 layers, pattern (4 sliding, 1 full) x 7: full layers 4, 9, ..., 34;
  * 20 KV-shared layers (15..34), which Google's files still ship k_proj/v_proj/k_norm for
    (HF ignores them on load): 600 text keys, 540 without them;
  * per-layer embeddings (P = 256, V_ple = 262144), no MoE, attention_k_eq_v false (every layer
    with K/V has its own v_proj), double-wide MLP (12288 instead of 6144) on layers 15..34;
  * vision tower, audio tower, embed_vision, embed_audio outside the text stack.

Shapes serve two purposes only: metadata.total_size (bfloat16 bytes) and a self-check of the
text shapes against the published parameter count (4,628,569,379, shared-layer K/V
excluded). The vision and audio tower names and shapes follow the published layout
filled in with transformers' default Gemma4VisionConfig / Gemma4AudioConfig sizes (16 vision
layers of width 768, 12 audio layers of width 1024): the published towers may differ in size and
in detail, which does not matter to a text-only loader (it skips them by prefix), but makes
total_size an estimate for the tower part.

Usage: python3 tools/reference/make_e2b_index.py [OUT_DIR]
"""

import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "checkpoints", "gemma-4-E2B")
CONFIG = os.path.join(ROOT, "configs", "models", "gemma-4-E2B", "config.json")
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
BF16 = 2  # bytes per element on disk

# E2B text stack (configs/models/gemma-4-E2B/config.json)
T = "model.language_model."
H = 1536  # hidden_size
L = 35  # num_hidden_layers
V = 262144  # vocab_size
P = 256  # hidden_size_per_layer_input
V_PLE = 262144  # vocab_size_per_layer_input
FULL = {4, 9, 14, 19, 24, 29, 34}  # (4S, 1F) x 7
FIRST_SHARED = 15  # num_kv_shared_layers 20 -> layers 15..34 share K/V
HEADS = 8
KV_HEADS = 1  # sliding and full alike (num_global_key_value_heads null)
D_SLIDING, D_FULL = 256, 512
I_NARROW, I_WIDE = 6144, 12288  # use_double_wide_mlp: 2x on the KV-shared layers
PARAMS_WITHOUT_SHARED_KV = 4_628_569_379  # the published text-stack count


def text_tensors():
    """[(name, shape, unused)]: every text tensor of the files, unused=True for the K/V weights of
    KV-shared layers."""
    out = [
        (T + "embed_tokens.weight", [V, H], False),
        (T + "embed_tokens_per_layer.weight", [V_PLE, L * P], False),
        (T + "per_layer_model_projection.weight", [L * P, H], False),
        (T + "per_layer_projection_norm.weight", [P], False),
        (T + "norm.weight", [H], False),
    ]
    for l in range(L):
        p = f"{T}layers.{l}."
        d = D_FULL if l in FULL else D_SLIDING
        shared = l >= FIRST_SHARED
        inter = I_WIDE if shared else I_NARROW
        out += [
            (p + "input_layernorm.weight", [H], False),
            (p + "self_attn.q_proj.weight", [HEADS * d, H], False),
            (p + "self_attn.q_norm.weight", [d], False),
            (p + "self_attn.k_proj.weight", [KV_HEADS * d, H], shared),
            (p + "self_attn.k_norm.weight", [d], shared),
            (p + "self_attn.v_proj.weight", [KV_HEADS * d, H], shared),
            (p + "self_attn.o_proj.weight", [H, HEADS * d], False),
            (p + "post_attention_layernorm.weight", [H], False),
            (p + "pre_feedforward_layernorm.weight", [H], False),
            (p + "mlp.gate_proj.weight", [inter, H], False),
            (p + "mlp.up_proj.weight", [inter, H], False),
            (p + "mlp.down_proj.weight", [H, inter], False),
            (p + "post_feedforward_layernorm.weight", [H], False),
            (p + "per_layer_input_gate.weight", [P, H], False),
            (p + "per_layer_projection.weight", [H, P], False),
            (p + "post_per_layer_input_norm.weight", [H], False),
            (p + "layer_scalar", [1], False),
        ]
    return out


def clippable(name, out_dim, in_dim):
    """A linear with the clip buffers of use_clipped_linears (E-series towers)."""
    return [(name + ".linear.weight", [out_dim, in_dim])] + [
        (f"{name}.{b}", []) for b in ("input_min", "input_max", "output_min", "output_max")]


def vision_tensors(hv=768, inter=3072, layers=16, heads=12, d=64, patch=16, positions=10240):
    v = "model.vision_tower."
    out = [(v + "patch_embedder.input_proj.weight", [hv, 3 * patch * patch]),
           (v + "patch_embedder.position_embedding_table", [2, positions, hv])]
    for l in range(layers):
        p = f"{v}encoder.layers.{l}."
        for proj in ("q", "k", "v"):
            out += clippable(f"{p}self_attn.{proj}_proj", heads * d, hv)
        out += clippable(f"{p}self_attn.o_proj", hv, heads * d)
        out += [(p + "self_attn.q_norm.weight", [d]), (p + "self_attn.k_norm.weight", [d])]
        out += clippable(p + "mlp.gate_proj", inter, hv) + clippable(p + "mlp.up_proj", inter, hv)
        out += clippable(p + "mlp.down_proj", hv, inter)
        out += [(p + n + ".weight", [hv]) for n in ("input_layernorm", "post_attention_layernorm",
                                                    "pre_feedforward_layernorm", "post_feedforward_layernorm")]
    return out + [("model.embed_vision.embedding_projection.weight", [H, hv])]


def audio_tensors(ha=1024, layers=12, heads=8, channels=(128, 32), kernel=5, out_dims=1536):
    a = "model.audio_tower."
    c0, c1 = channels
    out = [(a + "subsample_conv_projection.layer0.conv.weight", [c0, 1, 3, 3]),
           (a + "subsample_conv_projection.layer0.norm.weight", [c0]),
           (a + "subsample_conv_projection.layer1.conv.weight", [c1, c0, 3, 3]),
           (a + "subsample_conv_projection.layer1.norm.weight", [c1]),
           (a + "subsample_conv_projection.input_proj_linear.weight", [ha, c1 * 32])]
    d = ha // heads
    for l in range(layers):
        p = f"{a}layers.{l}."
        for ff in ("feed_forward1", "feed_forward2"):
            out += clippable(f"{p}{ff}.ffw_layer_1", 4 * ha, ha) + clippable(f"{p}{ff}.ffw_layer_2", ha, 4 * ha)
            out += [(f"{p}{ff}.pre_layer_norm.weight", [ha]), (f"{p}{ff}.post_layer_norm.weight", [ha])]
        for proj in ("q_proj", "k_proj", "v_proj", "post"):
            out += clippable(f"{p}self_attn.{proj}", ha, ha)
        out += [(p + "self_attn.relative_k_proj.weight", [ha, ha]), (p + "self_attn.per_dim_scale", [d])]
        out += clippable(p + "lconv1d.linear_start", 2 * ha, ha) + clippable(p + "lconv1d.linear_end", ha, ha)
        out += [(p + "lconv1d.depthwise_conv1d.weight", [ha, 1, kernel]),
                (p + "lconv1d.pre_layer_norm.weight", [ha]), (p + "lconv1d.conv_norm.weight", [ha])]
        out += [(p + n + ".weight", [ha]) for n in ("norm_pre_attn", "norm_post_attn", "norm_out")]
    out += [(a + "output_proj.weight", [out_dims, ha]), (a + "output_proj.bias", [out_dims])]
    return out + [("model.embed_audio.embedding_projection.weight", [H, out_dims])]


def elements(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def check_against_config():
    """The facts above against the preset's config.json (a consistency check, not a source)."""
    with open(CONFIG) as f:
        c = json.load(f)
    t = c["text_config"]
    assert c["model_type"] == "gemma4" and t["model_type"] == "gemma4_text"
    assert (t["hidden_size"], t["num_hidden_layers"], t["vocab_size"]) == (H, L, V)
    assert (t["hidden_size_per_layer_input"], t["vocab_size_per_layer_input"]) == (P, V_PLE)
    assert {i for i, k in enumerate(t["layer_types"]) if k == "full_attention"} == FULL
    assert L - t["num_kv_shared_layers"] == FIRST_SHARED
    assert (t["num_attention_heads"], t["num_key_value_heads"], t["num_global_key_value_heads"]) == (HEADS, KV_HEADS, None)
    assert (t["head_dim"], t["global_head_dim"], t["intermediate_size"]) == (D_SLIDING, D_FULL, I_NARROW)
    assert t["use_double_wide_mlp"] and not t["attention_k_eq_v"] and not t["enable_moe_block"]


def main():
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    check_against_config()
    text = text_tensors()
    used = sum(elements(s) for _, s, unused in text if not unused)
    if used != PARAMS_WITHOUT_SHARED_KV:
        sys.exit(f"make_e2b_index.py: text shapes give {used:,} parameters, the reference says "
                 f"{PARAMS_WITHOUT_SHARED_KV:,}")
    non_text = vision_tensors() + audio_tensors()
    names = [n for n, _, _ in text] + [n for n, _ in non_text]
    assert len(set(names)) == len(names), "duplicate names"

    # Two shards: text tensors in order until half the bytes, then the rest and the towers.
    sized = [(n, elements(s) * BF16) for n, s, _ in text] + [(n, elements(s) * BF16) for n, s in non_text]
    total = sum(b for _, b in sized)
    weight_map, acc = {}, 0
    for name, nbytes in sized:
        weight_map[name] = SHARDS[0] if acc < total // 2 else SHARDS[1]
        acc += nbytes
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    shutil.copyfile(CONFIG, os.path.join(out_dir, "config.json"))

    unused = sum(1 for _, _, u in text if u)
    prefixes = {}
    for n, _ in non_text:
        p = ".".join(n.split(".")[:2]) + "."
        prefixes[p] = prefixes.get(p, 0) + 1
    print(f"wrote {os.path.relpath(out_dir, ROOT)}/model.safetensors.index.json and config.json")
    print(f"text keys          {len(text)} ({len(text) - unused} used by the text stack, "
          f"{used:,} parameters)")
    print(f"KV-shared unused   {unused} (k_proj, v_proj, k_norm of layers {FIRST_SHARED}..{L - 1})")
    print(f"non-text keys      {len(non_text)}: " + ", ".join(f"{p} {c}" for p, c in prefixes.items()))
    print(f"total keys         {len(names)} in {len(SHARDS)} shards, total_size {total:,} bytes (bfloat16)")


if __name__ == "__main__":
    main()
