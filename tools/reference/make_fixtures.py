#!/usr/bin/env python3
"""Writes the reference fixtures that tandem's CPU model is checked against (tests/data/reference/).

Each case is a tiny random Gemma 4 model built by Hugging Face transformers, saved with
save_pretrained (float32), reloaded, upcast to float64 and run on the CPU, one sequence at a time
(batch of one, no padding, no masks, no cache). For every case it writes <OUT>/<case>/:

  model.safetensors, config.json, generation_config.json   what save_pretrained writes (float32)
  config.alt.json          the same config in the other form (flat global_head_dim /
                           num_global_key_value_heads <-> per_layer_config), checked with
                           transformers to load the same model (same keys, shapes, logits)
  config.unforced.json     sliding_only only: layer_types all sliding; transformers forces the last
                           layer to full attention and loads the same model (checked)
  reference.json           token sequences, float64 log-probabilities (plain, and under temperature
                           0.7 / top-k 8 / top-p 0.9), loss, greedy continuations with margins,
                           router margins, hidden states of sequence 0; meta (versions, seed, checks)
  gradients.safetensors    float32 gradient of "loss" for every trainable parameter, under the
                           checkpoint's tensor names (computed in float64)

Every tensor of a checkpoint is random, also those transformers initialises to ones or zeros:
1-D tensors U[0.5, 1.5]; matrices N(0, gain/sqrt(fan_in)) (fan_in = last dimension), except the
embedding (its std sets the logits' spread), the per-layer-embedding table (unit std after its
sqrt(P) scale) and the router projection (router logits of std ROUTER_STD). A case whose smallest
greedy margin (top-1 minus top-2 logit) or router margin (K-th minus (K+1)-th router probability)
is below MARGIN, or whose smallest top-k / top-p margin at a scored position is below
SAMPLING_MARGIN, is re-drawn with the next seed; the seed used is recorded.

Sequences: fixed prefixes (token ids 0, V-1 and bos 2 among them) plus random tokens, continued by
sampling the model itself at temperature 0.7 / top-k 8 / top-p 0.9, so that the filtered
log-probabilities are not all null.

transformers computes some parts in float32 even in a float64 model (RMSNorm upcasts with .float(),
attention and router softmax use dtype=float32, RoPE cos/sin are float32): the float64 numbers here
carry that float32 rounding (about 1e-7 relative), far below the tolerances they serve.

Needs torch 2.x and transformers 5.x with Gemma 4 (the GPU machine's image has torch 2.11.0 and
transformers 5.17.0); runs on the CPU only, no network. --dry-run needs transformers only (no torch):
it builds and checks every config and prints the plan.

Usage: python3 tools/reference/make_fixtures.py [--out DIR] [--cases a,b,...] [--jobs N]
                                                [--tar FILE.tar.gz] [--search-seconds S] [--dry-run]
Exit:  0 every case written and every check passed, 1 a case failed or a check did not pass,
       2 wrong environment (missing packages, other major versions).
"""

import argparse
import copy
import json
import math
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESETS = os.path.join(ROOT, "configs", "models")
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "reference")

REQUIRED_MAJOR = {"torch": 2, "transformers": 5}
TESTED_VERSIONS = {"torch": "2.11.0", "transformers": "5.17.0"}

S, F = "sliding_attention", "full_attention"

MARGIN = 1e-3  # smallest acceptable greedy margin and router margin
SAMPLING_MARGIN = 1e-4  # smallest acceptable top-k / top-p margin at a scored position
TEMPERATURE, TOP_K, TOP_P = 0.7, 8, 0.9
GREEDY_STEPS = 8
GREEDY_SEQUENCES = 2
GAIN = 1.0
ROUTER_STD = 1.2
MAX_CASE_BYTES = 2_500_000

# Sequences: (total length, fixed prefix); None in a prefix is a uniformly random token id, "V-1" the
# last token id; after the prefix the model's own samples (temperature / top-k / top-p) fill up to
# the length. Sequence 0 is the one whose hidden states are written; 0 and 1 get greedy
# continuations; 2 (length 1) predicts nothing; 3 (length 4) fits in every sliding window used.
SEQUENCE_SPECS = [
    (13, [2, 0, "V-1", None, None]),
    (40, [2, None, None, None, None, "V-1", None, 0, None, None]),
    (1, ["V-1"]),
    (4, [0, None, "V-1", None]),
    (24, [None] * 12),
    (7, [2]),
]


def load_preset(name):
    with open(os.path.join(PRESETS, name, "config.json")) as f:
        return json.load(f)


def text_from_preset(name, **overrides):
    d = load_preset(name)
    d = copy.deepcopy(d.get("text_config", d))
    for key in ("architectures", "transformers_version", "_name_or_path"):
        d.pop(key, None)
    d.update(overrides)
    d["dtype"] = "float32"
    return d


CASES = {}


def case(name, kind, description, text, base_seed, logit_std, towers=None, unforced_layer_types=None):
    CASES[name] = dict(name=name, kind=kind, description=description, text=text, base_seed=base_seed,
                       logit_std=logit_std, towers=towers, unforced_layer_types=unforced_layer_types)


case("all_features", "causal",
     "Gemma4ForCausalLM from the tiny-all preset (hidden 48, intermediate 64 (128 on KV-shared layers), "
     "moe_intermediate 16 to keep the files small): per-layer embeddings (P 8), KV sharing (3 shared "
     "layers: 3 and 4 read sliding store layer 1, 5 reads full store layer 2), double-wide MLP, "
     "attention_k_eq_v with one KV head (MQA) and head_dim 32 on full layers, MoE (4 experts, top-2) "
     "beside the dense MLP on every layer, final_logit_softcapping 3, sliding window 4",
     text_from_preset("tiny-all", hidden_size=48, intermediate_size=64, moe_intermediate_size=16),
     base_seed=1000, logit_std=2.5)

case("e2b_like", "causal",
     "Gemma4ForCausalLM from the tiny-e preset (hidden 48, intermediate 64): the E2B/E4B path: "
     "per-layer embeddings, KV sharing (3 shared layers), double-wide MLP on shared layers, no "
     "k_eq_v (full layers keep v_proj and 2 KV heads, head_dim 32), no MoE, softcap 3, sliding window 4",
     text_from_preset("tiny-e", hidden_size=48, intermediate_size=64),
     base_seed=2000, logit_std=2.5)

case("dense", "causal",
     "Gemma4ForCausalLM from the tiny-dense preset (hidden 48, intermediate 64, moe_intermediate 16): "
     "no per-layer embeddings, no KV sharing (every layer projects its own K/V: the 12B/26B/31B path); "
     "note that the preset keeps attention_k_eq_v (1 KV head on full layers) and the MoE block on "
     "every layer; softcap 3, sliding window 4",
     text_from_preset("tiny-dense", hidden_size=48, intermediate_size=64, moe_intermediate_size=16),
     base_seed=3000, logit_std=2.5)

case("sliding_only", "causal",
     "Gemma4ForCausalLM, 3 layers asked for as all sliding_attention (sliding window 5); transformers "
     "forces the last layer to full_attention (Gemma4TextConfig.__post_init__, whatever layer_types "
     "says), so the model is [sliding, sliding, full]: config.json says so, config.unforced.json "
     "keeps the all-sliding layer_types (flat form) and was checked to load the same model. From "
     "tiny-e (hidden 32, intermediate 64): per-layer embeddings, no KV sharing, no k_eq_v, no MoE, softcap 3",
     text_from_preset("tiny-e", hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      layer_types=[S, S, S], num_kv_shared_layers=0, sliding_window=5),
     base_seed=4000, logit_std=2.5, unforced_layer_types=[S, S, S])

case("full_only", "causal",
     "Gemma4ForCausalLM, 4 layers all full_attention, from tiny-all (hidden 32, intermediate 48 "
     "(96 on shared layers), moe_intermediate 16): KV sharing of the last 2 layers (both read full "
     "store layer 1), double-wide MLP, attention_k_eq_v with one KV head and head_dim 32, MoE on "
     "every layer, per-layer embeddings, softcap 3; sliding_window is set but unused",
     text_from_preset("tiny-all", hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                      num_hidden_layers=4, layer_types=[F, F, F, F], num_kv_shared_layers=2),
     base_seed=5000, logit_std=2.5)

case("multimodal", "conditional",
     "Gemma4ForConditionalGeneration (model_type gemma4) with tiny vision and audio towers, used "
     "text-only: the checkpoint holds model.vision_tower, model.audio_tower, model.embed_vision and "
     "model.embed_audio beside the text stack under model.language_model.; the text config is tiny-e "
     "(hidden 32, intermediate 64: E2B-like, PLE, KV sharing, no MoE). Gradients cover the text stack "
     "only (the towers get none from text-only input)",
     text_from_preset("tiny-e", hidden_size=32, intermediate_size=64),
     base_seed=6000, logit_std=2.5,
     towers=dict(
         vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=2, head_dim=16, patch_size=4, position_embedding_size=64,
                     use_clipped_linears=True),
         audio=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    subsampling_conv_channels=[8, 4], output_proj_dims=24)))

case("unified", "unified",
     "Gemma4UnifiedForConditionalGeneration (model_type gemma4_unified, the 12B wrapper), used "
     "text-only, text_config shrunk from configs/models/gemma-4-12B: 12 layers (5 sliding, 1 full) x 2, "
     "hidden 32, intermediate 64, 4 heads, 2 KV heads (head_dim 8) on sliding layers, attention_k_eq_v "
     "with 1 KV head (head_dim 16) on full layers, no PLE, no MoE, no sharing, sliding window 6, "
     "softcap 30 as published, vocab 256; tiny encoder-free vision and audio embedders "
     "(model.embed_vision, model.embed_audio) in the checkpoint. per_layer_config keys are zero-padded "
     "(\"05\", \"11\") as transformers writes them for 10 or more layers",
     text_from_preset("gemma-4-12B", hidden_size=32, intermediate_size=64, num_hidden_layers=12,
                      layer_types=([S] * 5 + [F]) * 2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=8, global_head_dim=16, num_global_key_value_heads=1, sliding_window=6,
                      vocab_size=256),
     base_seed=7000, logit_std=3.5,
     towers=dict(vision=dict(patch_size=2, pooling_kernel_size=2, mm_embed_dim=32, mm_posemb_size=8,
                             output_proj_dims=32),
                 audio=dict(audio_embed_dim=16)))


# ---------------------------------------------------------------------------------------------
# Configs (transformers only, no torch)


def check_versions(need_torch):
    try:
        import transformers
    except ImportError as e:
        print(f"make_fixtures: needs transformers {REQUIRED_MAJOR['transformers']}.x: {e}", file=sys.stderr)
        sys.exit(2)
    versions = {"transformers": transformers.__version__}
    if need_torch:
        try:
            import torch
        except ImportError as e:
            print(f"make_fixtures: needs torch {REQUIRED_MAJOR['torch']}.x: {e}", file=sys.stderr)
            sys.exit(2)
        versions["torch"] = torch.__version__
    for name, version in versions.items():
        major = int(version.split(".")[0])
        if major != REQUIRED_MAJOR[name]:
            print(f"make_fixtures: {name} {version} found, but these fixtures are made with {name} "
                  f"{REQUIRED_MAJOR[name]}.x (tested: {TESTED_VERSIONS[name]}); another major version "
                  f"may compute differently. Use {name} {REQUIRED_MAJOR[name]}.x.", file=sys.stderr)
            sys.exit(2)
    if not hasattr(transformers, "Gemma4UnifiedForConditionalGeneration"):
        print(f"make_fixtures: transformers {transformers.__version__} lacks Gemma 4 unified models",
              file=sys.stderr)
        sys.exit(2)
    return versions


def build_config(spec):
    """The transformers config object of a case (a fresh one each call)."""
    import transformers
    text = copy.deepcopy(spec["text"])
    if spec["kind"] == "causal":
        config = transformers.Gemma4TextConfig(**{k: v for k, v in text.items() if k != "model_type"})
        config.architectures = ["Gemma4ForCausalLM"]
    elif spec["kind"] == "conditional":
        text.pop("model_type", None)
        text_config = transformers.Gemma4TextConfig(**text)
        vision = transformers.Gemma4VisionConfig(**spec["towers"]["vision"])
        audio = transformers.Gemma4AudioConfig(**spec["towers"]["audio"])
        config = transformers.Gemma4Config(text_config=text_config.to_dict(), vision_config=vision.to_dict(),
                                           audio_config=audio.to_dict(), tie_word_embeddings=True)
        config.architectures = ["Gemma4ForConditionalGeneration"]
    elif spec["kind"] == "unified":
        text.pop("model_type", None)
        text_config = transformers.Gemma4UnifiedTextConfig(**text)
        vision = transformers.Gemma4UnifiedVisionConfig(**spec["towers"]["vision"])
        audio = transformers.Gemma4UnifiedAudioConfig(**spec["towers"]["audio"])
        config = transformers.Gemma4UnifiedConfig(text_config=text_config.to_dict(),
                                                  vision_config=vision.to_dict(),
                                                  audio_config=audio.to_dict(), tie_word_embeddings=True)
        config.architectures = ["Gemma4UnifiedForConditionalGeneration"]
    else:
        raise ValueError(spec["kind"])
    config.dtype = "float32"
    return config


def text_part(config_dict):
    return config_dict["text_config"] if "text_config" in config_dict else config_dict


def resolved_layers(text_config):
    """[(layer_type, head_dim, kv_heads)] as transformers resolved them."""
    out = []
    for i, layer_type in enumerate(text_config.layer_types):
        layer = text_config.per_layer_config[i]
        out.append((layer_type, layer.head_dim, layer.num_key_value_heads))
    return out


def config_class_for(spec):
    import transformers
    return {"causal": transformers.Gemma4TextConfig, "conditional": transformers.Gemma4Config,
            "unified": transformers.Gemma4UnifiedConfig}[spec["kind"]]


def text_config_of(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def alternate_form(config_json, text_config):
    """config.json in the other form: per_layer_config -> flat keys, flat -> per_layer_config."""
    alt = copy.deepcopy(config_json)
    t = text_part(alt)
    layers = resolved_layers(text_config)
    full = [(d, kv) for (lt, d, kv) in layers if lt == F]
    if "per_layer_config" in t:
        plc = t.pop("per_layer_config")
        # The flat form can only say: every full layer has global_head_dim, and (with k_eq_v)
        # num_global_key_value_heads KV heads; sliding layers use the globals.
        for i, (lt, d, kv) in enumerate(layers):
            if lt == S and (d != t["head_dim"] or kv != t["num_key_value_heads"]):
                raise ValueError(f"layer {i}: a sliding layer with its own head_dim/KV heads has no flat form")
        if len({d for d, _ in full}) > 1 or len({kv for _, kv in full}) > 1:
            raise ValueError("full layers differ among themselves: no flat form")
        if full:
            d_full, kv_full = full[0]
            t["global_head_dim"] = d_full
            if t.get("attention_k_eq_v", True):
                t["num_global_key_value_heads"] = kv_full if kv_full != t["num_key_value_heads"] else None
            elif kv_full != t["num_key_value_heads"]:
                raise ValueError("k_eq_v false but full layers have their own KV heads: no flat form")
            else:
                t["num_global_key_value_heads"] = None
        del plc
    else:
        gd = t.pop("global_head_dim", 512)
        gkv = t.pop("num_global_key_value_heads", None)
        digits = max(2, len(str(len(layers) - 1)))
        plc = {}
        for i, (lt, d, kv) in enumerate(layers):
            if lt != F:
                continue
            entry = {"head_dim": gd}
            if t.get("attention_k_eq_v", True) and gkv is not None and gkv != t["num_key_value_heads"]:
                entry["num_key_value_heads"] = gkv
            plc[str(i).zfill(digits)] = entry
        t["per_layer_config"] = plc
    return alt


def comparable(config):
    d = config.to_dict()
    for key in ("transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype"):
        d.pop(key, None)
    if "text_config" in d and isinstance(d["text_config"], dict):
        for key in ("transformers_version", "_name_or_path", "dtype", "torch_dtype"):
            d["text_config"].pop(key, None)
    return d


def config_checks(spec, config_json):
    """Loads config.json, its alternate form and (sliding_only) the unforced form with
    transformers and checks that they resolve to the same config. Returns (alt, unforced, notes)."""
    cls = config_class_for(spec)
    base = cls.from_dict(copy.deepcopy(config_json))
    alt = alternate_form(config_json, text_config_of(base))
    alt_config = cls.from_dict(copy.deepcopy(alt))
    notes = {}
    if comparable(base) != comparable(alt_config):
        a, b = comparable(base), comparable(alt_config)
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        raise AssertionError(f"{spec['name']}: config.alt.json resolves differently: {diff}")
    if resolved_layers(text_config_of(base)) != resolved_layers(text_config_of(alt_config)):
        raise AssertionError(f"{spec['name']}: config.alt.json resolves to other layer shapes")
    notes["alt_form"] = "flat" if "per_layer_config" not in text_part(alt) else "per_layer_config"
    unforced = None
    if spec["unforced_layer_types"]:
        flat = alt if notes["alt_form"] == "flat" else config_json
        unforced = copy.deepcopy(flat)
        text_part(unforced)["layer_types"] = list(spec["unforced_layer_types"])
        unforced_config = cls.from_dict(copy.deepcopy(unforced))
        if comparable(unforced_config) != comparable(base):
            raise AssertionError(f"{spec['name']}: config.unforced.json resolves differently")
        notes["unforced_layer_types"] = list(spec["unforced_layer_types"])
        notes["forced_layer_types"] = list(text_config_of(unforced_config).layer_types)
    return alt, unforced, notes


def dry_run(names):
    import transformers
    print(f"transformers {transformers.__version__} (dry run: configs only)")
    ok = True
    for name in names:
        spec = CASES[name]
        try:
            config = build_config(spec)
            with tempfile.TemporaryDirectory() as d:
                config.save_pretrained(d)
                with open(os.path.join(d, "config.json")) as f:
                    config_json = json.load(f)
            alt, unforced, notes = config_checks(spec, config_json)
            t = text_config_of(config)
            layers = resolved_layers(t)
            print(f"{name}: {type(config).__name__}, {len(layers)} layers "
                  f"{[('S' if lt == S else 'F') + f'{d}x{kv}' for lt, d, kv in layers]}, "
                  f"shared {t.num_kv_shared_layers}, P {getattr(t, 'hidden_size_per_layer_input', None)}, "
                  f"moe {getattr(t, 'enable_moe_block', False)}, W {t.sliding_window}, "
                  f"softcap {t.final_logit_softcapping}; config.json per_layer_config "
                  f"{text_part(config_json).get('per_layer_config')}; alt {notes['alt_form']} "
                  f"{ {k: text_part(alt).get(k) for k in ('global_head_dim', 'num_global_key_value_heads', 'per_layer_config')} }"
                  + (f"; unforced {notes['unforced_layer_types']} -> {notes['forced_layer_types']}" if unforced else ""))
        except Exception as e:
            ok = False
            traceback.print_exc()
            print(f"{name}: FAIL {type(e).__name__}: {e}")
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# Models (torch)

_WORKER = {}  # per process: case name -> search model


def _worker_init():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    torch.set_num_threads(1)
    import transformers
    transformers.logging.set_verbosity_error()


def model_class(spec):
    import transformers
    return {"causal": transformers.Gemma4ForCausalLM,
            "conditional": transformers.Gemma4ForConditionalGeneration,
            "unified": transformers.Gemma4UnifiedForConditionalGeneration}[spec["kind"]]


IMPL = dict(attn_implementation="eager", experts_implementation="eager")


def new_model(spec, torch):
    cls = model_class(spec)
    config = build_config(spec)
    try:
        model = cls._from_config(config, dtype=torch.float32, **IMPL)
    except TypeError:
        model = cls._from_config(config, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def load_model(spec, path, torch, config=None):
    cls = model_class(spec)
    kwargs = dict(dtype=torch.float32, output_loading_info=True)
    if config is not None:
        kwargs["config"] = config
    try:
        model, info = cls.from_pretrained(path, **kwargs, **IMPL)
    except TypeError:
        model, info = cls.from_pretrained(path, **kwargs, attn_implementation="eager")
    return model.eval(), info


def text_prefix(spec):
    return "model." if spec["kind"] == "causal" else "model.language_model."


def tensor_role(name, spec):
    """What a state-dict tensor is, for its random distribution."""
    prefix = text_prefix(spec)
    if not name.startswith(prefix) and name != "lm_head.weight":
        return "tower"
    rest = name[len(prefix):]
    if rest == "embed_tokens.weight" or name == "lm_head.weight":
        return "embed"
    if rest == "embed_tokens_per_layer.weight":
        return "ple_table"
    if rest.endswith("router.proj.weight"):
        return "router"
    return "text"


def randomize(model, spec, seed, torch):
    """Every finite floating tensor of the state dict random (in place, float32 values). Each
    tensor's values depend on the seed and its name only. Returns {name: std or 'U[0.5,1.5]'}."""
    text = text_config_of(model.config)
    H = text.hidden_size
    P = getattr(text, "hidden_size_per_layer_input", 0) or 0
    drawn = {}
    seen = set()
    with torch.no_grad():
        for name, t in model.state_dict(keep_vars=True).items():
            if not t.is_floating_point() or t.data_ptr() in seen:
                continue
            seen.add(t.data_ptr())
            if not bool(torch.isfinite(t).all()):
                drawn[name] = "kept (non-finite: unset clip bounds)"
                continue
            gen = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63))
            role = tensor_role(name, spec)
            if t.dim() <= 1:
                values = torch.rand(t.shape, generator=gen, dtype=torch.float64) + 0.5
                drawn[name] = "U[0.5,1.5]"
            else:
                if role == "embed":
                    std = spec["logit_std"] / (1.04 * math.sqrt(H))
                elif role == "ple_table":
                    std = 1.0 / math.sqrt(P)
                elif role == "router":
                    std = ROUTER_STD
                else:
                    std = GAIN / math.sqrt(t.shape[-1])
                values = torch.randn(t.shape, generator=gen, dtype=torch.float64) * std
                drawn[name] = f"N(0,{std:.6g})"
            t.copy_(values.to(torch.float32).to(t.dtype))
    return drawn


class Reject(Exception):
    def __init__(self, value, message):
        super().__init__(message)
        self.value = value


class Runner:
    """Forward passes of one model (float64, CPU, batch 1) with router and layer hooks."""

    def __init__(self, model, spec, torch):
        self.model = model
        self.spec = spec
        self.torch = torch
        self.text = text_config_of(model.config)
        self.V = self.text.vocab_size
        self.router_probs = []
        self.layer_outputs = None
        self.layer_inputs_ple = None
        self.handles = []
        self.layers = self._decoder_layers()
        for i, layer in enumerate(self.layers):
            router = getattr(layer, "router", None)
            if router is not None:
                self.handles.append(router.register_forward_hook(self._router_hook(i)))
            self.handles.append(layer.register_forward_hook(self._layer_hook(i)))
            self.handles.append(layer.register_forward_pre_hook(self._layer_pre_hook(i)))

    def _decoder_layers(self):
        m = self.model
        inner = m.model
        if hasattr(inner, "language_model"):
            inner = inner.language_model
        return list(inner.layers)

    def text_model(self):
        inner = self.model.model
        return inner.language_model if hasattr(inner, "language_model") else inner

    def _router_hook(self, i):
        def hook(module, args, output):
            probs = output[0] if isinstance(output, (tuple, list)) else output
            self.router_probs.append((i, probs.detach()))
        return hook

    def _layer_hook(self, i):
        def hook(module, args, output):
            out = output[0] if isinstance(output, (tuple, list)) else output
            if self.layer_outputs is not None:
                self.layer_outputs[i] = out.detach().clone()
        return hook

    def _layer_pre_hook(self, i):
        torch = self.torch

        def hook(module, args):
            if (self.layer_inputs_ple is not None and hasattr(module, "per_layer_input_gate")
                    and len(args) > 1 and isinstance(args[1], torch.Tensor)):
                self.layer_inputs_ple[i] = args[1].detach().clone()
        return hook

    def forward(self, ids, hidden=False, grad=False):
        torch = self.torch
        self.router_probs = []
        x = torch.tensor([ids], dtype=torch.long)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            out = self.model(input_ids=x, use_cache=False, output_hidden_states=hidden, return_dict=True)
        return out

    def router_margin(self):
        """min over tokens of (K-th minus (K+1)-th router probability) per layer of the last forward."""
        per_layer = {}
        if not self.router_probs:
            return per_layer
        k = self.text.top_k_experts
        for i, probs in self.router_probs:
            p = probs.double().sort(dim=-1, descending=True).values
            m = float((p[:, k - 1] - p[:, k]).min())
            per_layer[i] = min(per_layer.get(i, math.inf), m)
        return per_layer


def processed_logprobs(row, torch):
    """log-probabilities after temperature, top-k, then top-p on the renormalised top-k softmax
    (vLLM's order); -inf where a token is filtered out. Also the position's margin: the smallest of
    the scaled-logit gap between ranks k and k+1, the gap between the kept set's last token and the
    next one, and |cumulative probability - top_p| on both sides of the cut."""
    z = row.double() / TEMPERATURE
    vals, idx = torch.topk(z, TOP_K + 1)
    top = vals[:TOP_K]
    q = torch.softmax(top, dim=-1)
    c = torch.cumsum(q, dim=-1)
    m = int(torch.nonzero(c >= TOP_P)[0]) if bool((c >= TOP_P).any()) else TOP_K - 1
    kept = idx[: m + 1]
    out = torch.full_like(z, -math.inf)
    out[kept] = torch.log_softmax(z[kept], dim=-1)
    margins = [float(vals[TOP_K - 1] - vals[TOP_K]), float(c[m] - TOP_P)]
    if m > 0:
        margins.append(float(TOP_P - c[m - 1]))
    if m + 1 < TOP_K:
        margins.append(float(vals[m] - vals[m + 1]))
    return out, min(margins)


def make_sequences(runner, seed, check, torch):
    """The case's token sequences (see SEQUENCE_SPECS), the greedy continuations of the first
    GREEDY_SEQUENCES, their margins and the router margins of every forward pass. With check set,
    raises Reject as soon as a margin is below MARGIN."""
    V = runner.V
    gen = torch.Generator().manual_seed(seed * 7919 + 17)
    router = {}
    state = {"greedy_min": math.inf}

    def note_router():
        for i, m in runner.router_margin().items():
            router[i] = min(router.get(i, math.inf), m)
            if check and m < MARGIN:
                raise Reject(m, f"router margin {m:.3g} (layer {i})")

    sequences = []
    for length, prefix in SEQUENCE_SPECS:
        seq = []
        for tok in prefix:
            if tok is None:
                seq.append(int(torch.randint(0, V, (1,), generator=gen)))
            elif tok == "V-1":
                seq.append(V - 1)
            else:
                seq.append(int(tok))
        while len(seq) < length:
            logits = runner.forward(seq).logits[0, -1]
            note_router()
            lp, _ = processed_logprobs(logits, torch)
            tok = int(torch.multinomial(torch.exp(lp), 1, generator=gen))
            seq.append(tok)
        sequences.append(seq)

    greedy, greedy_margins = [], []
    for s in range(GREEDY_SEQUENCES):
        seq = list(sequences[s])
        toks, margins = [], []
        for _ in range(GREEDY_STEPS):
            logits = runner.forward(seq).logits[0, -1].double()
            note_router()
            top2 = torch.topk(logits, 2).values
            margin = float(top2[0] - top2[1])
            margins.append(margin)
            state["greedy_min"] = min(state["greedy_min"], margin)
            if check and margin < MARGIN:
                raise Reject(margin, f"greedy margin {margin:.3g}")
            tok = int(torch.argmax(logits))
            toks.append(tok)
            seq.append(tok)
        greedy.append(toks)
        greedy_margins.append(margins)

    for seq in sequences:  # the scoring passes: every position of every sequence
        logits = runner.forward(seq).logits[0]
        note_router()
        if check:
            for t in range(len(seq) - 1):
                _, m = processed_logprobs(logits[t], torch)
                if m < SAMPLING_MARGIN:
                    raise Reject(m * MARGIN / SAMPLING_MARGIN, f"sampling margin {m:.3g}")
    return sequences, greedy, greedy_margins, router


def search_model(spec, torch):
    if spec["name"] not in _WORKER:
        model = new_model(spec, torch).to(torch.float64)
        _WORKER[spec["name"]] = (model, Runner(model, spec, torch))
    return _WORKER[spec["name"]]


def task_search(name, seed):
    """Worker task: does this seed give margins of at least MARGIN?"""
    import torch
    spec = CASES[name]
    t0 = time.time()
    model, runner = search_model(spec, torch)
    randomize(model, spec, seed, torch)
    try:
        sequences, greedy, greedy_margins, router = make_sequences(runner, seed, True, torch)
    except Reject as e:
        return dict(name=name, seed=seed, ok=False, why=str(e), value=e.value, seconds=time.time() - t0)
    gmin = min(min(m) for m in greedy_margins)
    rmin = min(router.values()) if router else None
    return dict(name=name, seed=seed, ok=True, greedy_min=gmin, router_min=rmin, sequences=sequences,
                seconds=time.time() - t0)


def save_checkpoint(model, path):
    model.save_pretrained(path)  # transformers 5 writes safetensors only


def read_safetensors(path):
    from safetensors.torch import load_file
    return load_file(path)


def tolist(t):
    return t.detach().double().tolist()


def task_final(name, seed, out_dir, tries, search_seconds, expected_sequences, versions, fallback):
    """Worker task: writes the case's directory for this seed. Returns a summary."""
    import torch
    from safetensors.torch import save_file
    spec = CASES[name]
    t0 = time.time()
    problems, checks = [], {}

    def check(ok, what, detail=""):
        checks[what] = bool(ok) if not detail else {"ok": bool(ok), "detail": detail}
        if not ok:
            problems.append(f"{what}: {detail}")

    case_dir = os.path.join(out_dir, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)

    # 1. The float32 checkpoint, as save_pretrained writes it.
    model32 = new_model(spec, torch)
    drawn = randomize(model32, spec, seed, torch)
    save_checkpoint(model32, case_dir)
    with open(os.path.join(case_dir, "config.json")) as f:
        config_json = json.load(f)
    files = sorted(os.listdir(case_dir))
    check(files == ["config.json", "generation_config.json", "model.safetensors"], "save_pretrained files",
          "" if files == ["config.json", "generation_config.json", "model.safetensors"] else str(files))

    # 2. Alternate config forms.
    alt, unforced, config_notes = config_checks(spec, config_json)
    with open(os.path.join(case_dir, "config.alt.json"), "w") as f:
        json.dump(alt, f, indent=2, sort_keys=True)
        f.write("\n")
    if unforced is not None:
        with open(os.path.join(case_dir, "config.unforced.json"), "w") as f:
            json.dump(unforced, f, indent=2, sort_keys=True)
            f.write("\n")

    # 3. Reload what was written; float64 from here on.
    model, info = load_model(spec, case_dir, torch)
    bad_info = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    check(not bad_info, "from_pretrained loading info", str(bad_info) if bad_info else "")
    want, have = model32.state_dict(), model.state_dict()
    same = set(want) == set(have) and all(torch.equal(want[k], have[k]) for k in want)
    check(same, "reloaded state dict equals the saved model")
    attn = getattr(model.config, "_attn_implementation", None)
    experts = getattr(model.config, "_experts_implementation", None)
    model = model.to(torch.float64)
    runner = Runner(model, spec, torch)
    text = runner.text
    V = runner.V

    file_tensors = read_safetensors(os.path.join(case_dir, "model.safetensors"))
    random_check = [k for k, v in file_tensors.items() if v.is_floating_point() and v.numel() > 1
                    and bool(torch.isfinite(v).all()) and (bool((v == 0).all()) or bool((v == 1).all()))]
    check(not random_check, "no all-zero or all-one tensor in the checkpoint", ", ".join(random_check[:5]))
    text_prefix_ = text_prefix(spec)
    checks["lm_head_weight_in_file"] = "lm_head.weight" in file_tensors
    ones_like = [k for k, v in file_tensors.items() if k.startswith(text_prefix_) and v.numel() == 1
                 and float(v.reshape(-1)[0]) == 1.0]
    check(not ones_like, "layer_scalar values random", ", ".join(ones_like))

    # 4. Sequences, greedy continuations, margins (same procedure as the search).
    sequences, greedy, greedy_margins, router = make_sequences(runner, seed, False, torch)
    if expected_sequences is not None:
        check(sequences == expected_sequences, "sequences equal the seed search's")
    greedy_min = min(min(m) for m in greedy_margins)
    router_min = min(router.values()) if router else None
    margins_met = greedy_min >= MARGIN and (router_min is None or router_min >= MARGIN)

    # 5. Log-probabilities, sampling log-probabilities, loss, entropy, hidden states.
    logprobs, logprobs_f, sampling_margins, entropies = [], [], [], []
    hf_loss_diff = 0.0
    hidden = None
    tokens = sum(len(s) - 1 for s in sequences)
    total_nll = 0.0
    for n, seq in enumerate(sequences):
        want_hidden = n == 0
        if want_hidden:
            runner.layer_outputs = {}
            runner.layer_inputs_ple = {}
        out = runner.forward(seq, hidden=want_hidden)
        logits = out.logits[0].double()
        check(out.logits.dtype == torch.float64, f"sequence {n}: logits float64", str(out.logits.dtype))
        lsm = torch.log_softmax(logits, dim=-1)
        ids = torch.tensor(seq)
        lp = lsm[:-1].gather(1, ids[1:, None])[:, 0] if len(seq) > 1 else lsm[:0, 0]
        logprobs.append(lp.tolist())
        total_nll -= float(lp.sum())
        ent = -(lsm.exp() * lsm).sum(-1)[:-1]
        entropies.extend(ent.tolist())
        row_f, row_m = [], []
        for t in range(len(seq) - 1):
            plp, margin = processed_logprobs(logits[t], torch)
            v = float(plp[seq[t + 1]])
            row_f.append(v if math.isfinite(v) else None)
            row_m.append(margin)
        logprobs_f.append(row_f)
        sampling_margins.append(row_m)
        if len(seq) > 1:  # transformers' own loss (it upcasts logits to float32 only)
            with torch.no_grad():
                hf = runner.model(input_ids=ids[None], labels=ids[None], use_cache=False).loss
            hf_loss_diff = max(hf_loss_diff, abs(float(hf) + float(lp.mean())))
        if want_hidden:
            L = len(runner.layers)
            raw = [runner.layer_outputs[i][0] for i in range(L)]
            hs = out.hidden_states
            check(hs is not None and len(hs) == L + 1, "hidden_states has num_hidden_layers + 1 entries",
                  "" if hs is not None and len(hs) == L + 1 else str(None if hs is None else len(hs)))
            if hs is None or len(hs) != L + 1:  # rebuild it from the hooks
                with torch.no_grad():
                    final = runner.text_model().norm(raw[L - 1][None])
                    hs = [runner.text_model().embed_tokens(ids[None])] + [r[None] for r in raw[:-1]] + [final]
            agree = all(torch.equal(hs[i + 1][0], raw[i]) for i in range(L - 1))
            check(agree, "hidden_states[1..L-1] equal the decoder layers' outputs")
            with torch.no_grad():
                final = runner.text_model().norm(raw[L - 1][None])[0]
            check(float((hs[L][0] - final).abs().max()) == 0.0, "hidden_states[L] is norm(last layer output)")
            hidden = dict(hidden_states=[tolist(h[0]) for h in hs], last_layer_output=tolist(raw[L - 1]))
            if runner.layer_inputs_ple:
                hidden["per_layer_inputs"] = [tolist(runner.layer_inputs_ple[i][0]) for i in range(L)]
            runner.layer_outputs = None
            runner.layer_inputs_ple = None
    loss = total_nll / tokens
    check(hf_loss_diff < 1e-5, "transformers' loss (labels=input_ids) agrees within 1e-5", f"{hf_loss_diff:.3g}")
    logV = math.log(V)
    entropy = dict(mean=sum(entropies) / len(entropies), min=min(entropies), max=max(entropies), log_vocab=logV)
    entropy["mean_over_log_vocab"] = entropy["mean"] / logV
    flat_lp = [x for row in logprobs for x in row]
    lp_mean = sum(flat_lp) / len(flat_lp)
    lp_std = math.sqrt(sum((x - lp_mean) ** 2 for x in flat_lp) / len(flat_lp))
    check(0.05 < entropy["mean_over_log_vocab"] < 0.97, "mean entropy neither ~0 nor ~log V",
          f"{entropy['mean_over_log_vocab']:.3f}")
    non_null = sum(1 for row in logprobs_f for x in row if x is not None)
    min_sampling = min((m for row in sampling_margins for m in row), default=math.inf)
    margins_met = margins_met and min_sampling >= SAMPLING_MARGIN
    if not fallback:
        check(margins_met, "margins at least their thresholds",
              f"greedy {greedy_min:.3g}, router {router_min}, sampling {min_sampling:.3g}")

    # 6. Gradients of the loss (float64), per sequence, accumulated.
    model.zero_grad(set_to_none=True)
    for seq in sequences:
        if len(seq) < 2:
            continue
        out = runner.forward(seq, grad=True)
        lsm = torch.log_softmax(out.logits[0].double(), dim=-1)
        ids = torch.tensor(seq)
        nll = -lsm[:-1].gather(1, ids[1:, None]).sum() / tokens
        nll.backward()
    name_of = {}
    for pname, p in model.named_parameters():
        if pname in file_tensors:
            name_of[pname] = pname
    grads, no_grad_text, no_grad_other = {}, [], []
    for pname, p in model.named_parameters():
        is_text = pname.startswith(text_prefix_) or pname == "lm_head.weight"
        if p.grad is None:
            (no_grad_text if is_text else no_grad_other).append(pname)
            continue
        if pname not in name_of:
            problems.append(f"parameter {pname} has no tensor of that name in model.safetensors")
            continue
        grads[name_of[pname]] = p.grad.detach().to(torch.float32).contiguous()
    check(not no_grad_text, "every text parameter has a gradient", ", ".join(no_grad_text[:5]))
    save_file(grads, os.path.join(case_dir, "gradients.safetensors"),
              metadata={"format": "pt", "loss": repr(loss), "computed_in": "float64", "case": name})

    # 7. A directional finite-difference check of the gradients (float64 central difference).
    fd = finite_difference(model, runner, sequences, tokens, seed, torch)
    checks["finite_difference"] = fd
    if not fd_verdict(fd):
        problems.append(f"finite difference: |numeric - analytic| {fd['abs_err_eps_1e-05']:.3g} > "
                        f"{fd['tolerance']:.3g}")

    # 8. config.alt.json (and config.unforced.json) load the same model: keys, shapes, logits.
    for label, cfg_json in (("config.alt.json", alt), ("config.unforced.json", unforced)):
        if cfg_json is None:
            continue
        diff = compare_with_config(spec, case_dir, cfg_json, model, sequences, torch)
        check(diff["ok"], f"{label} loads the same model", diff["detail"])

    # 9. transformers' generate (KV cache) gives the same greedy tokens.
    gen_check = generate_check(runner, sequences, greedy, torch)
    checks["hf_generate_greedy"] = gen_check
    if not gen_check.get("agrees", False):
        problems.append(f"hf generate: {gen_check}")

    # 10. Wrappers: the text model alone gives the same logits.
    if spec["kind"] != "causal":
        d = wrapper_vs_text(runner, sequences, torch)
        checks["wrapper_vs_language_model_max_abs_logit_diff"] = d
        check(d <= 1e-12, "wrapper logits equal the language model's own (text-only)", f"{d:.3g}")

    towers = sorted({".".join(k.split(".")[:2]) for k in file_tensors
                     if not (k.startswith(text_prefix_) or k == "lm_head.weight")})
    layers = resolved_layers(text)
    meta = dict(
        case=name, description=spec["description"], seed=seed, seeds_tried=tries,
        seed_search_seconds=round(search_seconds, 2),
        margin_threshold=MARGIN, sampling_margin_threshold=SAMPLING_MARGIN, margins_met=margins_met,
        torch=versions["torch"], transformers=versions["transformers"], python=platform.python_version(),
        architecture=type(model).__name__, model_type=model.config.model_type,
        text_prefix=text_prefix_, non_text_prefixes=towers,
        lm_head="tied to embed_tokens" + ("" if "lm_head.weight" in file_tensors else " (absent from the file)"),
        attn_implementation=attn, experts_implementation=experts,
        compute="checkpoint float32 upcast to float64 (model.to(torch.float64)), CPU, one sequence at a "
                "time (batch 1, no padding, no attention mask, use_cache=False)",
        float32_inside_transformers="RMSNorm upcasts with .float(), attention and router softmax use "
                                    "dtype=float32, RoPE cos/sin are computed in float32: results carry "
                                    "float32 rounding (~1e-7 relative) at those points",
        layers=[dict(index=i, type=lt, head_dim=d, kv_heads=kv) for i, (lt, d, kv) in enumerate(layers)],
        num_kv_shared_layers=text.num_kv_shared_layers, sliding_window=text.sliding_window,
        vocab_size=V, final_logit_softcapping=text.final_logit_softcapping,
        config_forms=config_notes,
        random_weights=dict(one_dimensional="U[0.5, 1.5] (norm weights, layer_scalar, router.scale, "
                                            "router.per_expert_scale, biases, ...)",
                            matrices=f"N(0, {GAIN}/sqrt(fan_in)), fan_in = last dimension",
                            embed_tokens=f"N(0, {spec['logit_std']}/(1.04*sqrt(hidden_size))): raw logits of std ~{spec['logit_std']}",
                            embed_tokens_per_layer="N(0, 1/sqrt(hidden_size_per_layer_input))",
                            router_proj=f"N(0, {ROUTER_STD})",
                            kept="non-finite buffers (the towers' unset clip bounds) are left as they are",
                            per_tensor=drawn),
        sequences="fixed prefixes with random token ids, continued by sampling the model (temperature "
                  f"{TEMPERATURE}, top-k {TOP_K}, top-p {TOP_P}) with torch.Generator seeded from the seed",
        logprobs="log_softmax of the softcapped logits (temperature 1, no filtering): entry t of a "
                 "sequence is log p(token t+1 | tokens 0..t)",
        logprobs_t07_k8_p09=f"the same under temperature {TEMPERATURE}, then top-k {TOP_K}, then top-p "
                            f"{TOP_P} on the renormalised top-k softmax (kept set: the shortest ranking "
                            "prefix whose probability reaches top_p), renormalised over the kept set; "
                            "null where the token is filtered out",
        sampling_margins="per position, the smallest of: scaled-logit gap between ranks k and k+1, "
                         "scaled-logit gap between the last kept token and the next, cumulative "
                         "probability minus top_p at the cut and top_p minus the cumulative before it; "
                         "a position whose margin is tiny can flip between implementations",
        loss="mean over every predicted token of every sequence (sum of -logprobs / tokens)",
        greedy=f"argmax of the softcapped logits, {GREEDY_STEPS} steps, no stop at eos, full forward each step",
        greedy_margins="top-1 minus top-2 softcapped logit at each greedy step",
        router_margins="min over layers and tokens (of every forward pass made, sequences and greedy "
                       "steps) of the K-th minus the (K+1)-th router probability (router softmax over all "
                       "experts, float32 in transformers); null without MoE",
        hidden_states="sequence 0 only: transformers' output_hidden_states: [0] the scaled input "
                      "embeddings, [i] the output of decoder layer i-1 for i < L, [L] the final norm of "
                      "the last layer's output; last_layer_output is that layer's output before the norm; "
                      "per_layer_inputs (PLE models) the per-layer input each layer received [L][S][P]",
        gradients=GRADIENTS_NOTE,
        entropy=entropy, logprob_mean=lp_mean, logprob_std=lp_std,
        filtered_logprobs_not_null=non_null, filtered_logprobs_total=tokens,
        min_sampling_margin=min_sampling if math.isfinite(min_sampling) else None,
        router_margins_per_layer={str(k): v for k, v in sorted(router.items())} if router else None,
        checks=checks, problems=problems,
    )
    reference = dict(meta=meta, sequences=sequences, logprobs=logprobs, logprobs_t07_k8_p09=logprobs_f,
                     sampling_margins=sampling_margins, loss=loss, tokens=tokens, greedy=greedy,
                     greedy_margins=greedy_margins, router_margins=router_min, **hidden)
    with open(os.path.join(case_dir, "reference.json"), "w") as f:
        json.dump(reference, f, allow_nan=False)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(case_dir, f)) for f in os.listdir(case_dir))
    if size > MAX_CASE_BYTES:
        problems.append(f"case size {size} > {MAX_CASE_BYTES}")
    return dict(name=name, seed=seed, tries=tries, ok=not problems, problems=problems, size=size,
                greedy_min=greedy_min, router_min=router_min, entropy=entropy, lp_std=lp_std,
                non_null=non_null, tokens=tokens, loss=loss, fd=fd, margins_met=margins_met,
                min_sampling_margin=meta["min_sampling_margin"], seconds=time.time() - t0,
                files={f: os.path.getsize(os.path.join(case_dir, f)) for f in sorted(os.listdir(case_dir))})


def finite_difference(model, runner, sequences, tokens, seed, torch):
    """<grad, D> against (loss(w + eps D) - loss(w - eps D)) / 2 eps for a random direction D over
    every trainable parameter (scaled by each parameter's RMS), except the padding rows of the
    embedding tables: their lookup gets no gradient (padding_idx), by transformers' design, so a
    finite difference through them measures more than the gradient holds. A second direction over
    those rows alone shows that difference (pad_rows)."""
    params = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    pad = text_config_of(model.config).pad_token_id
    gen = torch.Generator().manual_seed(seed + 99991)
    dirs, pad_dirs = [], []
    for n, p in params:
        rms = float(p.detach().pow(2).mean().sqrt()) or 1.0
        d = torch.randn(p.shape, generator=gen, dtype=torch.float64) * rms
        e = torch.zeros_like(d)
        if pad is not None and (n.endswith("embed_tokens.weight") or n.endswith("embed_tokens_per_layer.weight")):
            e[pad] = d[pad]
            d[pad] = 0.0
        dirs.append(d)
        pad_dirs.append(e)

    originals = [p.detach().clone() for n, p in params]

    def loss_at(sign, eps, dirs):
        with torch.no_grad():
            for (n, p), d, w in zip(params, dirs, originals):
                p.copy_(w + sign * eps * d)
            total = 0.0
            for seq in sequences:
                if len(seq) < 2:
                    continue
                lsm = torch.log_softmax(runner.forward(seq).logits[0].double(), dim=-1)
                total -= float(lsm[:-1].gather(1, torch.tensor(seq)[1:, None]).sum())
            for (n, p), w in zip(params, originals):
                p.copy_(w)  # exactly the weights of before
        return total / tokens

    result = {}
    for label, ds in (("all_but_pad_rows", dirs), ("pad_rows", pad_dirs)):
        analytic = sum(float((p.grad.double() * d).sum()) for (n, p), d in zip(params, ds))
        r = {"analytic": analytic}
        for eps in (1e-5, 1e-6):
            numeric = (loss_at(1, eps, ds) - loss_at(-1, eps, ds)) / (2 * eps)
            r[f"numeric_eps_{eps:g}"] = numeric
            r[f"rel_err_eps_{eps:g}"] = abs(numeric - analytic) / max(abs(analytic), 1e-30)
        result[label] = r
    main = result["all_but_pad_rows"]
    result["rel_err"] = min(main["rel_err_eps_1e-05"], main["rel_err_eps_1e-06"])
    return result


GRADIENTS_NOTE = (
    "gradients.safetensors: float32 gradient of loss for each trainable parameter (named_parameters, "
    "the tied lm_head once, as embed_tokens), towers excluded (no gradient from text-only input); "
    "As in transformers, the embedding lookups "
    "of the padding token (id pad_token_id) give no gradient (padding_idx); the tied head still does. "
    "checks.finite_difference compares <grad, D> with central differences along a random direction D "
    "that leaves the padding rows out (pass: within 1% plus 5e-3, the noise floor that transformers' "
    "float32 steps give the difference at eps 1e-5); pad_rows is the same along those rows alone "
    "(where the two differ by design)")

FD_NOISE = 5e-3  # the float32 steps inside transformers make loss(w +- eps D) noisy by ~1e-8..1e-7


def fd_verdict(fd):
    """Passes when the central difference at eps 1e-5 is within 1% of <grad, D> plus FD_NOISE (the
    finite difference's own noise floor at that eps; a directional derivative much smaller than
    FD_NOISE is only checked to that absolute precision). Adds the verdict to fd; returns it."""
    main = fd["all_but_pad_rows"]
    err = abs(main["numeric_eps_1e-05"] - main["analytic"])
    tol = 1e-2 * abs(main["analytic"]) + FD_NOISE
    fd["abs_err_eps_1e-05"] = err
    fd["tolerance"] = tol
    fd["ok"] = err <= tol
    return fd["ok"]


def compare_with_config(spec, case_dir, cfg_json, model, sequences, torch):
    with tempfile.TemporaryDirectory() as d:
        for f in ("model.safetensors", "generation_config.json"):
            os.symlink(os.path.join(os.path.abspath(case_dir), f), os.path.join(d, f))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg_json, f)
        other, info = load_model(spec, d, torch)
        other = other.to(torch.float64)
        problems = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")]
        a, b = model.state_dict(), other.state_dict()
        if set(a) != set(b):
            problems.append(f"keys differ: {sorted(set(a) ^ set(b))[:5]}")
        else:
            shapes = [k for k in a if a[k].shape != b[k].shape]
            if shapes:
                problems.append(f"shapes differ: {shapes[:5]}")
            values = [k for k in a if a[k].shape == b[k].shape and not torch.equal(a[k], b[k])]
            if values:
                problems.append(f"values differ: {values[:5]}")
        worst = 0.0
        with torch.no_grad():
            for seq in sequences:
                x = torch.tensor([seq])
                la = model(input_ids=x, use_cache=False).logits
                lb = other(input_ids=x, use_cache=False).logits
                worst = max(worst, float((la - lb).abs().max()))
        del other
    if worst != 0.0:
        problems.append(f"logits differ by {worst:.3g}")
    return {"ok": not problems, "detail": "; ".join(problems), "max_abs_logit_diff": worst}


def generate_check(runner, sequences, greedy, torch):
    model = runner.model
    result = {"agrees": True, "tokens": []}
    try:
        for s in range(GREEDY_SEQUENCES):
            x = torch.tensor([sequences[s]])
            with torch.no_grad():
                out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=GREEDY_STEPS,
                                     do_sample=False, num_beams=1, use_cache=True)
            toks = out[0, len(sequences[s]):].tolist()
            result["tokens"].append(toks)
            # generate stops at eos; the reference does not: compare the common part
            if toks != greedy[s][: len(toks)] or not toks:
                result["agrees"] = False
    except Exception as e:  # a transformers whose generate cannot run this tiny model
        return {"agrees": False, "error": f"{type(e).__name__}: {e}"}
    return result


def wrapper_vs_text(runner, sequences, torch):
    model = runner.model
    text_model = runner.text_model()
    cap = runner.text.final_logit_softcapping
    worst = 0.0
    with torch.no_grad():
        for seq in sequences:
            x = torch.tensor([seq])
            a = model(input_ids=x, use_cache=False).logits
            h = text_model(input_ids=x, use_cache=False).last_hidden_state
            b = model.lm_head(h)
            if cap is not None:
                b = torch.tanh(b / cap) * cap
            worst = max(worst, float((a - b).abs().max()))
    return worst


# ---------------------------------------------------------------------------------------------
# Driver


def run_all(args, names, versions):
    import concurrent.futures as cf
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    start = time.time()
    state = {n: dict(next=0, results={}, outstanding=0, resolved=None, start=time.time()) for n in names}
    summaries, failures = {}, []
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx, initializer=_worker_init) as pool:
        futures = {}

        def submit_search(n):
            st = state[n]
            seed = CASES[n]["base_seed"] + st["next"]
            st["next"] += 1
            st["outstanding"] += 1
            futures[pool.submit(task_search, n, seed)] = ("search", n, seed)

        def resolve(n):
            st = state[n]
            results = st["results"]
            i = 0
            while i in results:
                if results[i]["ok"]:
                    return i, False
                i += 1
            elapsed = time.time() - st["start"]
            if elapsed > args.search_seconds or st["next"] >= args.max_tries:
                if st["outstanding"] == 0 or elapsed > args.search_seconds * 1.5:
                    oks = [j for j in results if results[j]["ok"]]
                    if oks:
                        return min(oks), False
                    if not results:
                        return None, True
                    # none met the margins: the seed whose first failing margin was largest
                    return max(results, key=lambda j: (results[j].get("value", -1.0), -j)), True
            return None, False

        def fill():
            unresolved = [n for n in names if state[n]["resolved"] is None]
            if not unresolved:
                return
            per_case = max(1, args.jobs // len(unresolved))
            for n in unresolved:
                st = state[n]
                if time.time() - st["start"] > args.search_seconds or st["next"] >= args.max_tries:
                    continue
                while st["outstanding"] < per_case:
                    submit_search(n)

        fill()
        while futures:
            done, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED, timeout=5)
            for fut in done:
                kind, n, seed = futures.pop(fut)
                try:
                    res = fut.result()
                except Exception as e:
                    tb = traceback.format_exc()
                    if kind == "final":
                        failures.append(n)
                        print(f"[{n}] FAILED writing seed {seed}: {type(e).__name__}: {e}\n{tb}", flush=True)
                        continue
                    res = dict(name=n, seed=seed, ok=False, why=f"error {type(e).__name__}: {e}", error=tb)
                if kind == "final":
                    summaries[n] = res
                    status = "ok" if res["ok"] else "PROBLEMS: " + "; ".join(res["problems"])
                    print(f"[{n}] written (seed {res['seed']}, {res['seconds']:.1f} s): {status}", flush=True)
                    continue
                st = state[n]
                st["outstanding"] -= 1
                st["results"][seed - CASES[n]["base_seed"]] = res
                if "error" in res and st["resolved"] is None:
                    print(f"[{n}] seed {seed}: {res['why']}\n{res['error']}", flush=True)
                    st["resolved"] = "error"
                    failures.append(n)
                    continue
                if st["resolved"] is None:
                    idx, fallback = resolve(n)
                    if idx is not None:
                        st["resolved"] = idx
                        chosen = st["results"][idx]
                        tries = len(st["results"])
                        why = "" if chosen["ok"] else f" (no seed met the margins in {tries} tries; using the best)"
                        print(f"[{n}] seed {chosen['seed']} after {tries} tries, "
                              f"{time.time() - st['start']:.1f} s{why}", flush=True)
                        futures[pool.submit(task_final, n, chosen["seed"], out_dir, tries,
                                            time.time() - st["start"], chosen.get("sequences"), versions,
                                            fallback or not chosen["ok"])] = ("final", n, chosen["seed"])
            # cases whose search timed out with nothing outstanding
            for n in names:
                st = state[n]
                if st["resolved"] is None and st["outstanding"] == 0 and st["results"]:
                    idx, fallback = resolve(n)
                    if idx is not None:
                        st["resolved"] = idx
                        chosen = st["results"][idx]
                        print(f"[{n}] search budget spent ({len(st['results'])} tries): seed {chosen['seed']}", flush=True)
                        futures[pool.submit(task_final, n, chosen["seed"], out_dir, len(st["results"]),
                                            time.time() - st["start"], chosen.get("sequences"), versions,
                                            True)] = ("final", n, chosen["seed"])
            fill()
    print(f"\n{'case':14} {'seed':>6} {'tries':>5} {'greedy_min':>10} {'router_min':>10} {'H/logV':>6} "
          f"{'H min..max':>13} {'lp std':>6} {'kept':>7} {'loss':>8} {'fd err':>8} {'bytes':>9}")
    total = 0
    for n in names:
        r = summaries.get(n)
        if r is None:
            print(f"{n:14} FAILED")
            continue
        total += r["size"]
        rm = f"{r['router_min']:.3g}" if r["router_min"] is not None else "-"
        print(f"{n:14} {r['seed']:>6} {r['tries']:>5} {r['greedy_min']:>10.3g} {rm:>10} "
              f"{r['entropy']['mean_over_log_vocab']:>6.3f} {r['entropy']['min']:>6.2f}..{r['entropy']['max']:<6.2f} "
              f"{r['lp_std']:>6.2f} {r['non_null']:>3}/{r['tokens']:<3} {r['loss']:>8.4f} "
              f"{r['fd']['abs_err_eps_1e-05']:>8.1e} {r['size']:>9}")
        for p in r["problems"]:
            print(f"    problem: {p}")
    print(f"total {total} bytes, {time.time() - start:.1f} s")
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as tar:
            for n in names:
                if n in summaries:
                    tar.add(os.path.join(out_dir, n), arcname=n)
        print(f"packed {args.tar} ({os.path.getsize(args.tar)} bytes)")
    bad = failures or [n for n in names if n not in summaries or not summaries[n]["ok"]]
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="where the case directories go (default %(default)s)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    parser.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)),
                        help="worker processes (single-threaded each)")
    parser.add_argument("--tar", help="also pack the written case directories into this .tar.gz")
    parser.add_argument("--search-seconds", type=float, default=100.0,
                        help="time for a case's seed search before its best seed is taken")
    parser.add_argument("--max-tries", type=int, default=5000, help="seeds a case may try")
    parser.add_argument("--dry-run", action="store_true", help="configs only (transformers, no torch)")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if args.dry_run:
        check_versions(need_torch=False)
        return dry_run(names)
    versions = check_versions(need_torch=True)
    print(f"torch {versions['torch']}, transformers {versions['transformers']}, python "
          f"{platform.python_version()}, {args.jobs} workers, cases {', '.join(names)}", flush=True)
    return run_all(args, names, versions)


if __name__ == "__main__":
    sys.exit(main())
