#!/usr/bin/env python3
"""Checkpoint interoperability of `tandem inspect` and `tandem convert` with the Python stack.

Builds Hugging Face style checkpoints of the tiny presets with numpy + safetensors (no torch):
text-only gemma4_text files in float32, bfloat16 and float16, a sharded one with an index, a
Gemma4ForConditionalGeneration wrapper with vision and audio tensors, a
Gemma4UnifiedForConditionalGeneration wrapper with its embedders, and a tiny-e wrapper that ships
the unused K/V weights of its KV-shared layers as Google's E2B files do. Converts each with
`tandem convert` and reads the result back with safetensors: same names and shapes, float32 kept
bit for bit, bfloat16 and float16 equal bit for bit to a round-to-nearest-even reference computed
here, non-text tensors and side files copied byte for byte, an index that covers exactly its
shards, a config that transformers.AutoConfig accepts.

Usage: checkpoint_interop_test.py TANDEM [SCRATCH_DIR] [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import safetensors
import safetensors.numpy as stnp

TANDEM = None  # path of the tandem binary (argv[1])
SCRATCH = None  # fixtures and outputs live here

SIDE_FILES = {
    "generation_config.json": json.dumps(
        {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0, "top_k": 64, "top_p": 0.95,
         "transformers_version": "5.5.0"}, indent=2) + "\n",
    "tokenizer_config.json": json.dumps(
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "model_max_length": 1024,
         "padding_side": "left", "tokenizer_class": "GemmaTokenizer"}, indent=2) + "\n",
    "chat_template.jinja": "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
                           "{{ m['content'] }}<end_of_turn>\n{% endfor %}",
}

WEIGHT_FILE = re.compile(r"^model(-\d{5}-of-\d{5})?\.safetensors$")
SHARD_NAME = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
INDEX = "model.safetensors.index.json"

# ---------------------------------------------------------------------------------------------
# dtypes, bit patterns and the rounding reference

ITEMSIZE = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1, "I8": 1, "I32": 4, "I64": 8, "F64": 8}
ST_NAME = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "U8": "uint8", "I8": "int8",
           "I32": "int32", "I64": "int64", "F64": "float64"}
BITS_VIEW = {"F32": np.uint32, "BF16": np.uint16, "F16": np.uint16}
CLI_DTYPE = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


class Tensor:
    """A tensor as it lies in a file: safetensors dtype, shape, little-endian bytes."""

    def __init__(self, dtype, shape, data):
        self.dtype = dtype
        self.shape = list(shape)
        self.data = bytes(data)
        n = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        assert len(self.data) == n * ITEMSIZE[dtype], (dtype, shape, len(self.data))

    def bits(self):
        return np.frombuffer(self.data, dtype=BITS_VIEW[self.dtype]).reshape(self.shape)

    def as_f32(self):
        """The values widened to float32 (exact for every float dtype here)."""
        if self.dtype == "F32":
            return np.frombuffer(self.data, dtype=np.float32).reshape(self.shape).copy()
        if self.dtype == "BF16":
            return (self.bits().astype(np.uint32) << 16).view(np.float32)
        if self.dtype == "F16":
            return np.frombuffer(self.data, dtype=np.float16).reshape(self.shape).astype(np.float32)
        raise ValueError(self.dtype)


def f32_tensor(values):
    a = np.ascontiguousarray(values, dtype=np.float32)
    return Tensor("F32", a.shape, a.tobytes())


def bf16_bits_rne(x):
    """float32 array -> bfloat16 bit patterns (uint16), round to nearest, ties to even. NaNs map
    to a quiet NaN of the same sign (callers compare NaNs by NaN-ness only)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    nan = np.isnan(x)
    quiet = ((u >> 16) | 0x0040) & 0xFFFF
    return np.where(nan, quiet, rounded).astype(np.uint16)


def convert_reference(t, dst):
    """Expected output of converting tensor t to dst: (bit patterns, NaN mask)."""
    if t.dtype == dst:
        bits = t.bits()
        return bits, np.zeros(bits.shape, dtype=bool)
    x = t.as_f32()
    nan = np.isnan(x)
    if dst == "F32":
        return x.view(np.uint32), nan
    if dst == "BF16":
        return bf16_bits_rne(x), nan
    if dst == "F16":
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(np.float16).view(np.uint16), nan  # numpy rounds to nearest even
    raise ValueError(dst)


def is_nan_bits(bits, dtype):
    if dtype == "F32":
        return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    if dtype == "BF16":
        return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x007F) != 0)
    if dtype == "F16":
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
    raise ValueError(dtype)


# float32 bit patterns that exercise rounding to bfloat16: ties to even (both parities, both
# signs), just below and above a tie, the edge of overflow, subnormals, zeros, infinities, NaNs.
SPECIAL_F32_BITS = [
    0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0xBF808000, 0xBF818000, 0x40490FDB,
    0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7E8000, 0x7F7E8001, 0xFF7FFFFF, 0xFF7F8000,
    0x00000001, 0x00008000, 0x00018000, 0x00017FFF, 0x007FFFFF, 0x007F8000, 0x80000001, 0x807FFFFF,
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x477FE000, 0x477FF000, 0x477FEFFF,
    0x38800000, 0x33800000, 0x33800001, 0x337FFFFF,
]
# NaNs whose low bits a naive rounding would carry into the exponent or sign.
SPECIAL_NAN_BITS = [0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF, 0xFF800001, 0x7FBFFFFF]


# ---------------------------------------------------------------------------------------------
# safetensors files

def write_safetensors(path, tensors, metadata=None):
    """Writes {name: Tensor}. Files without bfloat16 go through safetensors.numpy.save_file;
    numpy has no bfloat16, so files with it go through safetensors.serialize_file with raw
    buffers (the library still writes the header)."""
    if all(t.dtype != "BF16" for t in tensors.values()):
        arrays = {}
        for name, t in tensors.items():
            np_dtype = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "I8": np.int8,
                        "I32": np.int32, "I64": np.int64, "F64": np.float64}[t.dtype]
            arrays[name] = np.frombuffer(t.data, dtype=np_dtype).reshape(t.shape)
        stnp.save_file(arrays, path, metadata=metadata)
        return
    keep = []
    specs = {}
    for name, t in tensors.items():
        buf = np.frombuffer(t.data, dtype=np.uint8).copy()
        keep.append(buf)
        specs[name] = safetensors.TensorSpec(dtype=ST_NAME[t.dtype], shape=list(t.shape),
                                             data_ptr=buf.ctypes.data, data_len=buf.nbytes)
    safetensors.serialize_file(specs, path, metadata=metadata)


def read_safetensors(path):
    """{name: Tensor} of a file, through safetensors.deserialize (raw bytes, any dtype); the
    numpy loader, where the file has no bfloat16, must agree."""
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    for name, view in safetensors.deserialize(raw):
        out[name] = Tensor(view["dtype"], view["shape"], view["data"])
    with safetensors.safe_open(path, framework="np") as f:
        keys = set(f.keys())
        for name in keys:
            s = f.get_slice(name)
            assert s.get_dtype() == out[name].dtype and list(s.get_shape()) == out[name].shape, name
    assert keys == set(out), path
    if all(t.dtype != "BF16" for t in out.values()):
        for name, arr in stnp.load_file(path).items():
            assert arr.tobytes() == out[name].data and list(arr.shape) == out[name].shape, name
    return out


def data_bytes(tensors):
    return sum(len(t.data) for t in tensors.values())


# ---------------------------------------------------------------------------------------------
# tandem

def run_tandem(*args, check=True):
    p = subprocess.run([TANDEM, *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"tandem {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}"
                             f"\nstderr:\n{p.stderr}")
    return p


def inspect_json(model):
    return json.loads(run_tandem("inspect", "--model", model, "--json").stdout)


def layout_of(model):
    """(inspect JSON, [(name, shape)]) of a preset or config-only directory."""
    info = inspect_json(model)
    return info, [(t["name"], t["shape"]) for t in info["text_tensors"]]


# ---------------------------------------------------------------------------------------------
# fixtures

class Fixture:
    """A checkpoint directory written here, and what it holds."""

    def __init__(self, name, path, config, text, other, text_prefix, lm_head=False):
        self.name = name
        self.path = path
        self.config = config  # parsed config.json
        self.text = text  # {full name: Tensor} of the layout's text tensors
        self.other = other  # {full name: Tensor}: non-text and unused-KV tensors, copied as is
        self.text_prefix = text_prefix
        self.lm_head = lm_head  # the file also holds a tied lm_head.weight (equal to the embedding)

    @property
    def tensors(self):
        return {**self.text, **self.other}


def random_values(rng, name, shape):
    if len(shape) == 1 or name.endswith("layer_scalar") or name.endswith("router.scale"):
        return rng.uniform(0.5, 1.5, size=shape)  # what HF initializes to ones
    return rng.normal(0.0, 0.15, size=shape)


def make_text(rng, layout, prefix_from, prefix_to, dtype, special=False):
    """Random text tensors for a layout listed under prefix_from, named under prefix_to."""
    out = {}
    for name, shape in layout:
        assert name.startswith(prefix_from), name
        full = prefix_to + name[len(prefix_from):]
        x = random_values(rng, full, shape).astype(np.float32)
        if special and full.endswith("embed_tokens.weight"):
            flat = x.reshape(-1).view(np.uint32)
            patterns = SPECIAL_F32_BITS + (SPECIAL_NAN_BITS if dtype == "F32" else [])
            flat[:len(patterns)] = np.array(patterns, dtype=np.uint32)
        if dtype == "F32":
            out[full] = f32_tensor(x)
        elif dtype == "BF16":
            out[full] = Tensor("BF16", shape, bf16_bits_rne(x).tobytes())
        elif dtype == "F16":
            with np.errstate(over="ignore"):
                out[full] = Tensor("F16", shape, x.astype(np.float16).tobytes())
        else:
            raise ValueError(dtype)
    return out


def unused_kv(rng, info, prefix, hidden, dtype):
    """The k_proj/v_proj/k_norm weights a KV-shared layer does not use, shaped like its own
    attention would have them (Google's E2B/E4B files ship them)."""
    out = {}
    for layer in info["config"]["layers"]:
        if not layer["kv_shared"]:
            continue
        kv, d, l = layer["num_key_value_heads"], layer["head_dim"], layer["layer"]
        shapes = {"self_attn.k_proj.weight": [kv * d, hidden], "self_attn.k_norm.weight": [d]}
        if not layer["k_eq_v"]:
            shapes["self_attn.v_proj.weight"] = [kv * d, hidden]
        for key, shape in shapes.items():
            name = f"{prefix}layers.{l}.{key}"
            x = random_values(rng, name, shape).astype(np.float32)
            out[name] = f32_tensor(x) if dtype == "F32" else Tensor(dtype, shape, bf16_bits_rne(x).tobytes())
    return out


def gemma4_towers(rng, hidden):
    """Non-text tensors of a Gemma4ForConditionalGeneration file, shrunk: vision tower (with
    clip buffers), its embedder, audio tower (one int8 and one uint8 buffer), its embedder."""
    hv, ha = 24, 16
    out = {}

    def bf16(name, shape):
        out[name] = Tensor("BF16", shape, bf16_bits_rne(rng.normal(0, 0.1, shape).astype(np.float32)).tobytes())

    def f32(name, shape):
        out[name] = f32_tensor(rng.normal(0, 0.1, shape))

    bf16("model.vision_tower.patch_embedder.input_proj.weight", [hv, 48])
    bf16("model.vision_tower.patch_embedder.position_embedding_table", [2, 40, hv])
    for l in range(2):
        for p in ("q", "k", "v", "o"):
            base = f"model.vision_tower.encoder.layers.{l}.self_attn.{p}_proj"
            bf16(f"{base}.linear.weight", [hv, hv])
            for clip in ("input_min", "input_max", "output_min", "output_max"):
                f32(f"{base}.{clip}", [])  # scalar buffers in float32
        bf16(f"model.vision_tower.encoder.layers.{l}.input_layernorm.weight", [hv])
    bf16("model.embed_vision.embedding_projection.weight", [hidden, hv])
    bf16("model.audio_tower.subsample_conv_projection.layer0.conv.weight", [8, 1, 3, 3])
    bf16("model.audio_tower.layers.0.self_attn.q_proj.linear.weight", [ha, ha])
    f32("model.audio_tower.layers.0.self_attn.relative_position_embedding", [ha])
    out["model.audio_tower.layers.0.self_attn.mask_buffer"] = Tensor(
        "I8", [4, 4], rng.integers(-128, 128, size=16, dtype=np.int8).tobytes())
    out["model.audio_tower.output_proj.quant_flags"] = Tensor(
        "U8", [3], np.array([0, 1, 255], dtype=np.uint8).tobytes())
    bf16("model.embed_audio.embedding_projection.weight", [hidden, 1536 // 64])
    return out


def unified_embedders(rng, hidden):
    """Non-text tensors of a Gemma4UnifiedForConditionalGeneration file, shrunk (no towers)."""
    out = {}
    mm, patch = 32, 12

    def bf16(name, shape):
        out[name] = Tensor("BF16", shape, bf16_bits_rne(rng.normal(0, 0.1, shape).astype(np.float32)).tobytes())

    for ln in ("patch_ln1", "patch_ln2", "pos_norm"):
        dim = patch if ln == "patch_ln1" else mm
        bf16(f"model.embed_vision.{ln}.weight", [dim])
        bf16(f"model.embed_vision.{ln}.bias", [dim])
    bf16("model.embed_vision.patch_dense.weight", [mm, patch])
    out["model.embed_vision.patch_dense.bias"] = f32_tensor(rng.normal(0, 0.1, [mm]))
    bf16("model.embed_vision.pos_embedding", [20, 2, mm])
    bf16("model.embed_vision.multimodal_embedder.embedding_projection.weight", [hidden, mm])
    bf16("model.embed_audio.embedding_projection.weight", [hidden, 10])
    return out


def write_dir(path, config_text, tensors, shards=1):
    """A checkpoint directory: config.json (verbatim text), side files, the tensors in one file
    or in `shards` files with an index."""
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(config_text)
    for name, text in SIDE_FILES.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    if shards == 1:
        write_safetensors(os.path.join(path, "model.safetensors"), tensors, metadata={"format": "pt"})
        return
    names = list(tensors)
    target = data_bytes(tensors) / shards
    groups, current, size = [], [], 0
    for name in names:
        if current and size >= target and len(groups) < shards - 1:
            groups.append(current)
            current, size = [], 0
        current.append(name)
        size += len(tensors[name].data)
    groups.append(current)
    assert len(groups) == shards, len(groups)
    weight_map = {}
    for i, group in enumerate(groups):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(path, file), {n: tensors[n] for n in group}, metadata={"format": "pt"})
        weight_map.update({n: file for n in group})
    with open(os.path.join(path, INDEX), "w") as f:
        json.dump({"metadata": {"total_size": data_bytes(tensors)}, "weight_map": weight_map}, f, indent=2)


def preset_config_text(info):
    with open(os.path.join(info["directory"], "config.json")) as f:
        return f.read()


def text_fixture(name, preset, dtype, shards=1, seed=0, special=False):
    rng = np.random.default_rng(seed)
    info, layout = layout_of(preset)
    config_text = preset_config_text(info)
    text = make_text(rng, layout, "model.", "model.", dtype, special=special)
    path = os.path.join(SCRATCH, "in", name)
    write_dir(path, config_text, text, shards)
    return Fixture(name, path, json.loads(config_text), text, {}, "model.")


def wrapper_config(text_config, model_type, architecture, extra=None):
    config = {"architectures": [architecture], "dtype": "bfloat16", "model_type": model_type,
              "text_config": text_config, "tie_word_embeddings": True, "transformers_version": "5.5.0"}
    config.update(extra or {})
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def text_config_of(info):
    config = json.loads(preset_config_text(info))
    for key in ("architectures", "transformers_version"):
        config.pop(key, None)
    return config


def multimodal_fixture(name, preset, dtype, shards=1, seed=1, kv_unused=False, lm_head=False):
    """A Gemma4ForConditionalGeneration checkpoint: the preset's text stack under
    model.language_model., tiny vision and audio towers and embedders."""
    rng = np.random.default_rng(seed)
    info, layout = layout_of(preset)
    text_config = text_config_of(info)
    hidden = text_config["hidden_size"]
    vision = {"model_type": "gemma4_vision", "hidden_size": 24, "intermediate_size": 48,
              "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
              "head_dim": 12, "patch_size": 4, "position_embedding_size": 40,
              "use_clipped_linears": True}
    audio = {"model_type": "gemma4_audio", "hidden_size": 16, "num_hidden_layers": 1,
             "num_attention_heads": 2, "output_proj_dims": 24}
    config_text = wrapper_config(text_config, "gemma4", "Gemma4ForConditionalGeneration",
                                 {"vision_config": vision, "audio_config": audio})
    prefix = "model.language_model."
    text = make_text(rng, layout, "model.", prefix, dtype)
    other = gemma4_towers(rng, hidden)
    if kv_unused:
        other.update(unused_kv(rng, info, prefix, hidden, dtype))
    tensors = {**text, **other}
    if lm_head:  # tied, saved anyway: must equal the embedding
        tensors["lm_head.weight"] = text[prefix + "embed_tokens.weight"]
    path = os.path.join(SCRATCH, "in", name)
    write_dir(path, config_text, tensors, shards)
    return Fixture(name, path, json.loads(config_text), text, other, prefix, lm_head)


def unified_fixture(name, dtype, seed=2):
    """A Gemma4UnifiedForConditionalGeneration checkpoint shrunk from the 12B file's shape: no
    PLE, no MoE, no KV sharing, k_eq_v with one global KV head, embedders only."""
    rng = np.random.default_rng(seed)
    tiny, _ = layout_of("tiny-all")
    text_config = text_config_of(tiny)
    for key in ("hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block",
                "num_experts", "top_k_experts", "moe_intermediate_size"):
        text_config.pop(key)
    text_config.update({"model_type": "gemma4_unified_text", "num_kv_shared_layers": 0,
                        "use_double_wide_mlp": False, "use_bidirectional_attention": "vision",
                        "sliding_window": 8, "final_logit_softcapping": 30.0})
    text_config.pop("dtype", None)
    config_text = wrapper_config(text_config, "gemma4_unified", "Gemma4UnifiedForConditionalGeneration")
    config_dir = os.path.join(SCRATCH, "layouts", name)
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "config.json"), "w") as f:
        f.write(config_text)
    info, layout = layout_of(config_dir)
    prefix = "model.language_model."
    assert info["text_prefix"] == prefix, info["text_prefix"]
    text = make_text(rng, layout, prefix, prefix, dtype)
    other = unified_embedders(rng, text_config["hidden_size"])
    path = os.path.join(SCRATCH, "in", name)
    write_dir(path, config_text, {**text, **other})
    return Fixture(name, path, json.loads(config_text), text, other, prefix)


FIXTURES = {}


def setUpModule():
    os.makedirs(os.path.join(SCRATCH, "in"))
    os.makedirs(os.path.join(SCRATCH, "out"))
    add = lambda fx: FIXTURES.__setitem__(fx.name, fx)
    add(text_fixture("text-f32", "tiny-all", "F32", special=True))
    add(text_fixture("text-bf16", "tiny-all", "BF16", seed=3, special=True))
    add(text_fixture("text-f16", "tiny-all", "F16", seed=4))
    add(text_fixture("text-f32-sharded", "tiny-all", "F32", shards=3, seed=5))
    add(text_fixture("dense-f32", "tiny-dense", "F32", seed=6))
    add(multimodal_fixture("multimodal-bf16", "tiny-all", "BF16", lm_head=True))
    add(multimodal_fixture("multimodal-f32-sharded", "tiny-all", "F32", shards=2, seed=7))
    add(unified_fixture("unified-bf16", "BF16"))
    add(multimodal_fixture("e2b-style-bf16", "tiny-e", "BF16", shards=2, seed=8, kv_unused=True))


# ---------------------------------------------------------------------------------------------
# reading an output directory back

def read_checkpoint(path):
    """{name: Tensor}, {name: shard file} of a saved directory (one file or an index)."""
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    index_path = os.path.join(path, INDEX)
    if not os.path.exists(index_path):
        assert files == ["model.safetensors"], files
        tensors = read_safetensors(os.path.join(path, "model.safetensors"))
        return tensors, {n: "model.safetensors" for n in tensors}
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    assert "model.safetensors" not in files, "a sharded save also left model.safetensors"
    assert sorted(set(weight_map.values())) == files, (sorted(set(weight_map.values())), files)
    total = len(files)
    for file in files:
        m = SHARD_NAME.match(file)
        assert m and int(m.group(2)) == total and 1 <= int(m.group(1)) <= total, file
    tensors, where = {}, {}
    for file in files:
        shard = read_safetensors(os.path.join(path, file))
        assert shard, f"{file} holds no tensor"
        named = {n for n, v in weight_map.items() if v == file}
        assert set(shard) == named, (file, sorted(set(shard) ^ named))
        for name, t in shard.items():
            assert name not in tensors, f"{name} in two shards"
            tensors[name] = t
            where[name] = file
    assert set(weight_map) == set(tensors)
    if "total_size" in index.get("metadata", {}):
        assert int(index["metadata"]["total_size"]) == data_bytes(tensors), (
            index["metadata"]["total_size"], data_bytes(tensors))
    return tensors, where


def parse_size(text):
    m = re.fullmatch(r"(\d+)(B|kB|KB|KiB|MB|MiB|GB|GiB)?", text)
    mult = {None: 1, "B": 1, "kB": 1000, "KB": 1000, "KiB": 1024, "MB": 10**6, "MiB": 2**20,
            "GB": 10**9, "GiB": 2**30}[m.group(2)]
    return int(m.group(1)) * mult


class Interop(unittest.TestCase):
    maxDiff = 4000

    def convert(self, fx, dst, max_shard=None, tag=None):
        out = os.path.join(SCRATCH, "out", f"{fx.name}.{dst}{'.' + max_shard if max_shard else ''}{tag or ''}")
        args = ["convert", "--model", fx.path, "--out", out]
        if dst != "BF16":  # bfloat16 is the default: leave it implicit
            args += ["--dtype", CLI_DTYPE[dst]]
        if max_shard:
            args += ["--max-shard-size", max_shard]
        run_tandem(*args)
        return out

    def check_converted(self, fx, out, dst, max_shard=None):
        tensors, where = read_checkpoint(out)
        expected_names = set(fx.tensors) | ({"lm_head.weight"} if fx.lm_head else set())
        self.assertEqual(sorted(set(tensors) - expected_names), [], f"{out}: tensors not in the input")
        self.assertEqual(sorted(expected_names - set(tensors)), [], f"{out}: input tensors missing")
        for name, src in fx.tensors.items():
            got = tensors[name]
            self.assertEqual(got.shape, src.shape, f"{out}: {name} shape")
            if name in fx.other:
                self.assertEqual(got.dtype, src.dtype, f"{out}: {name} is copied, dtype kept")
                self.assertTrue(got.data == src.data, f"{out}: {name} not copied byte for byte")
                continue
            self.assertEqual(got.dtype, dst, f"{out}: {name} dtype")
            want, nan = convert_reference(src, dst)
            have = got.bits()
            bad = (have != want) & ~nan
            if nan.any():
                bad |= nan & ~is_nan_bits(have, dst)
            if bad.any():
                i = np.flatnonzero(bad.reshape(-1))[:6]
                src_bits = (src.bits().reshape(-1)[i])
                self.fail(f"{out}: {name}: {int(bad.sum())} of {bad.size} elements differ from the "
                          f"{dst} reference; flat index {i.tolist()}: input {src.dtype} "
                          f"{[hex(int(b)) for b in src_bits]} -> got {[hex(int(b)) for b in have.reshape(-1)[i]]},"
                          f" want {[hex(int(b)) for b in want.reshape(-1)[i]]}")
        if fx.lm_head:
            emb = tensors[fx.text_prefix + "embed_tokens.weight"]
            head = tensors["lm_head.weight"]
            self.assertEqual((head.dtype, head.shape), (emb.dtype, emb.shape), f"{out}: lm_head.weight")
            self.assertTrue(head.data == emb.data, f"{out}: lm_head.weight differs from the embedding")
        # sharding
        sharded = os.path.exists(os.path.join(out, INDEX))
        if max_shard:
            limit = parse_size(max_shard)
            by_file = {}
            for name, file in where.items():
                by_file.setdefault(file, []).append(name)
            for file, names in by_file.items():
                size = sum(len(tensors[n].data) for n in names)
                self.assertTrue(size <= limit or len(names) == 1,
                                f"{out}: {file} holds {size} bytes of {len(names)} tensors, over {max_shard}")
            if data_bytes(tensors) > limit:
                self.assertTrue(sharded, f"{out}: {data_bytes(tensors)} bytes over {max_shard} but one file")
        else:
            self.assertFalse(sharded, f"{out}: default shard size is 5GB, yet sharded")
        # side files and nothing else
        for name in ["config.json", *SIDE_FILES]:
            with open(os.path.join(fx.path, name), "rb") as a, open(os.path.join(out, name), "rb") as b:
                self.assertTrue(a.read() == b.read(), f"{out}: {name} not copied byte for byte")
        listed = sorted(os.listdir(out))
        extra = [f for f in listed if f not in ("config.json", INDEX, *SIDE_FILES) and not WEIGHT_FILE.match(f)]
        self.assertEqual(extra, [], f"{out}: unexpected files")
        # transformers accepts the config
        import transformers
        config = transformers.AutoConfig.from_pretrained(out)
        self.assertEqual(config.model_type, fx.config["model_type"], out)
        if "text_config" in fx.config:
            self.assertEqual(config.text_config.model_type, fx.config["text_config"]["model_type"])
            self.assertEqual(config.text_config.hidden_size, fx.config["text_config"]["hidden_size"])
        else:
            self.assertEqual(config.num_hidden_layers, fx.config["num_hidden_layers"])
        return tensors

    def roundtrip(self, name, dst, max_shard=None):
        fx = FIXTURES[name]
        out = self.convert(fx, dst, max_shard)
        tensors = self.check_converted(fx, out, dst, max_shard)
        # tandem reads its own output back
        info = inspect_json(out)
        self.assertEqual(info["model_type"], fx.config["model_type"])
        self.assertEqual(sorted(t["name"] for t in info["text_tensors"]), sorted(fx.text))
        return out, tensors

    # text-only gemma4_text ----------------------------------------------------------------------
    def test_f32_to_f32_keeps_every_bit(self):
        self.roundtrip("text-f32", "F32")

    def test_f32_to_bf16_rounds_to_nearest_even(self):
        self.roundtrip("text-f32", "BF16")

    def test_f32_to_bf16_sharded(self):
        out, _ = self.roundtrip("text-f32", "BF16", max_shard="100kB")
        self.assertTrue(os.path.exists(os.path.join(out, INDEX)))

    def test_f32_to_f16_rounds_to_nearest_even(self):
        self.roundtrip("text-f32", "F16")

    def test_bf16_to_bf16_is_identical(self):
        self.roundtrip("text-bf16", "BF16")

    def test_bf16_to_f32_widens_exactly(self):
        self.roundtrip("text-bf16", "F32")

    def test_f16_to_f32_widens_exactly(self):
        self.roundtrip("text-f16", "F32")

    def test_f16_to_bf16(self):
        self.roundtrip("text-f16", "BF16")

    def test_f16_to_f16_is_identical(self):
        self.roundtrip("text-f16", "F16")

    def test_dense_preset(self):
        self.roundtrip("dense-f32", "BF16")

    # sharded input ------------------------------------------------------------------------------
    def test_sharded_input_to_one_file(self):
        self.roundtrip("text-f32-sharded", "F32")

    def test_sharded_input_to_bf16_shards(self):
        self.roundtrip("text-f32-sharded", "BF16", max_shard="20kB")

    def test_sharded_input_to_f32_shards(self):
        self.roundtrip("text-f32-sharded", "F32", max_shard="200000")

    # wrappers -----------------------------------------------------------------------------------
    def test_multimodal_to_bf16(self):
        self.roundtrip("multimodal-bf16", "BF16")

    def test_multimodal_to_f32_sharded(self):
        self.roundtrip("multimodal-bf16", "F32", max_shard="300kB")

    def test_multimodal_sharded_input(self):
        self.roundtrip("multimodal-f32-sharded", "BF16")
        self.roundtrip("multimodal-f32-sharded", "F32", max_shard="50kB")

    def test_unified_to_bf16_and_f32(self):
        self.roundtrip("unified-bf16", "BF16")
        self.roundtrip("unified-bf16", "F32", max_shard="64KiB")

    def test_kv_shared_unused_weights_are_copied(self):
        fx = FIXTURES["e2b-style-bf16"]
        info = inspect_json(fx.path)
        unused = {n for n in fx.other if n.startswith(fx.text_prefix)}
        self.assertTrue(unused)
        listed = info["unused_kv_tensors"]
        names = sorted(t if isinstance(t, str) else t["name"] for t in listed)
        self.assertEqual(names, sorted(unused))
        self.roundtrip("e2b-style-bf16", "F32")
        self.roundtrip("e2b-style-bf16", "BF16", max_shard="40kB")

    # inspect ------------------------------------------------------------------------------------
    def check_skipped(self, fx):
        non_text = [n for n in fx.other if not re.match(r"^model\.language_model\.", n)]
        prefixes = {}
        for n in non_text:
            p = re.match(r"^(model\.[a-z_]+\.)", n).group(1)
            prefixes[p] = prefixes.get(p, 0) + 1
        text = run_tandem("inspect", "--model", fx.path).stdout
        lines = [l for l in text.splitlines() if l.startswith("skipped ")]
        self.assertEqual(len(lines), 1, f"inspect {fx.name}: lines starting with 'skipped ':\n{text}")
        line = lines[0]
        for p, count in prefixes.items():
            bare = p.rstrip(".")
            m = re.search(re.escape(bare) + r"\.?\*?\s*[:(]?\s*(\d+)", line)
            self.assertIsNotNone(m, f"inspect {fx.name}: '{line}' does not name {p} with a count")
            self.assertEqual(int(m.group(1)), count, f"inspect {fx.name}: '{line}': {p} has {count} tensors")
        info = inspect_json(fx.path)
        got = {g["prefix"]: g["tensors"] for g in info["skipped"]}
        self.assertEqual(got, prefixes, f"inspect --json {fx.name}: skipped")
        for g in info["skipped"]:
            want = sum(len(fx.other[n].data) for n in non_text if n.startswith(g["prefix"]))
            self.assertEqual(g["bytes"], want, f"inspect --json {fx.name}: bytes of {g['prefix']}")

    def test_inspect_names_skipped_prefixes_multimodal(self):
        self.check_skipped(FIXTURES["multimodal-bf16"])
        self.check_skipped(FIXTURES["multimodal-f32-sharded"])

    def test_inspect_names_skipped_prefixes_unified(self):
        self.check_skipped(FIXTURES["unified-bf16"])

    def test_inspect_describes_the_files(self):
        for fx in FIXTURES.values():
            info = inspect_json(fx.path)
            self.assertEqual(info["text_prefix"], fx.text_prefix, fx.name)
            self.assertEqual(info["model_type"], fx.config["model_type"], fx.name)
            got = {t["name"]: (t["dtype"], t["shape"]) for t in info["text_tensors"]}
            want = {n: (t.dtype, t.shape) for n, t in fx.text.items()}
            want_st = {n: (ST_NAME[d], s) for n, (d, s) in want.items()}
            self.assertEqual(set(got), set(want), fx.name)
            for n, (dtype, shape) in got.items():
                self.assertEqual(shape, want[n][1], f"{fx.name}: {n}")
                self.assertIn(dtype, (want[n][0], want_st[n][0]), f"{fx.name}: {n}")
            self.assertEqual(info["tied_lm_head_in_file"], bool(fx.lm_head), fx.name)
            sharded = os.path.exists(os.path.join(fx.path, INDEX))
            self.assertEqual(len(info["weights"]["shards"]), 3 if fx.name == "text-f32-sharded"
                             else 2 if sharded else 1, fx.name)

    # refusals -----------------------------------------------------------------------------------
    def test_existing_out_needs_replace(self):
        fx = FIXTURES["text-bf16"]
        out = os.path.join(SCRATCH, "out", "replace")
        run_tandem("convert", "--model", fx.path, "--out", out)
        before = sorted(os.listdir(out))
        p = run_tandem("convert", "--model", fx.path, "--out", out, "--dtype", "float32", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(sorted(os.listdir(out)), before)
        self.assertEqual(read_checkpoint(out)[0]["model.norm.weight"].dtype, "BF16")
        run_tandem("convert", "--model", fx.path, "--out", out, "--dtype", "float32", "--replace")
        self.check_converted(fx, out, "F32")
        leftovers = [f for f in os.listdir(os.path.dirname(out)) if f.startswith(".")]
        self.assertEqual(leftovers, [], "hidden partial directories left beside --out")

    def test_untied_lm_head_is_refused(self):
        fx = FIXTURES["multimodal-bf16"]
        bad = os.path.join(SCRATCH, "in", "bad-lm-head")
        shutil.copytree(fx.path, bad)
        tensors = read_safetensors(os.path.join(bad, "model.safetensors"))
        head = bytearray(tensors["lm_head.weight"].data)
        head[10] ^= 0x01
        tensors["lm_head.weight"] = Tensor("BF16", tensors["lm_head.weight"].shape, head)
        write_safetensors(os.path.join(bad, "model.safetensors"), tensors)
        out = os.path.join(SCRATCH, "out", "bad-lm-head")
        p = run_tandem("convert", "--model", bad, "--out", out, check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("lm_head.weight", lines[0])
        self.assertIn("model.safetensors", lines[0])
        self.assertFalse(os.path.exists(out))


def main():
    global TANDEM, SCRATCH
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        print("checkpoint_interop_test.py: need the tandem binary as the first argument", file=sys.stderr)
        return 2
    TANDEM = os.path.abspath(sys.argv[1])
    rest = sys.argv[2:]
    keep = None
    if rest and not rest[0].startswith("-"):
        keep = os.path.abspath(rest.pop(0))
        shutil.rmtree(keep, ignore_errors=True)
        os.makedirs(keep)
        SCRATCH = keep
    else:
        SCRATCH = tempfile.mkdtemp(prefix="tandem-interop-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        prog = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
        ok = prog.result.wasSuccessful()
    finally:
        if keep is None:
            shutil.rmtree(SCRATCH, ignore_errors=True)
    print("checkpoint_interop_test: " + ("PASS" if ok else f"FAIL (scratch kept in {SCRATCH})" if keep else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
