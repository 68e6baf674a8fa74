"""What the Hugging Face transformers peers of tandem's benchmarks share (hf_train_peer.py,
hf_generate_peer.py): one-line failures with an exit status, argument types, importing torch and
transformers, reading a config.json as the text causal LM transformers builds for it, the device
and dtype, the fastest attention implementation transformers accepts for the model, and JSON
output. Each peer prints its failures as "PROG: error: MESSAGE" and exits with Failure.code.
"""

import argparse
import importlib.util
import json
import os
import platform
import sys

GIB = float(1 << 30)
FLASH_MAX_HEAD_DIM = 256  # flash-attn 2/3 kernels stop at head_dim 256

class Failure(Exception):
    """A one-line error; `code` is the exit status."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def fail(message, code=2):
    raise Failure(message, code)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        fail(f"bad arguments: {message} (see --help)")


def integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive(text):
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative(text):
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def import_libraries():
    try:
        import torch
    except ImportError as e:
        fail(f"cannot import torch in this Python environment ({first_line(e)})")
    try:
        import transformers
    except ImportError as e:
        fail(f"cannot import transformers in this Python environment ({first_line(e)})")
    return torch, transformers


def check_json_path(path):
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        fail(f"--json {path}: cannot write into {folder}")


def read_model_config(model_dir):
    if not os.path.isdir(model_dir):
        fail(f"--model {model_dir}: not a directory (it should hold config.json)")
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        fail(f"no config.json at {path}")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")
    return path, raw


def load_text_config(model_dir, raw, transformers):
    """The config of the text causal LM: the whole config, or its text_config if multimodal."""
    model_type = str(raw.get("model_type", ""))
    if model_type.startswith("gemma4"):
        try:
            import transformers.models.gemma4  # noqa: F401
        except ImportError:
            fail(f"transformers {transformers.__version__} has no Gemma 4 (transformers.models.gemma4); "
                 f"install a newer transformers to build {model_type}")
    try:
        config = transformers.AutoConfig.from_pretrained(model_dir)
    except (ValueError, KeyError, OSError) as e:
        fail(f"transformers {transformers.__version__} cannot read {model_dir}/config.json: {first_line(e)}")
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def torch_dtype(torch, name):
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[name]


def resolve_device(torch, requested):
    if requested == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch sees no CUDA device here (torch " + torch.__version__ + ")")
    if requested is None:
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def device_name(torch, device):
    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def config_value(config, name):
    """config.name, or None where absent or (transformers >= 5.x) ambiguous across layers."""
    try:
        return getattr(config, name, None)
    except Exception:  # AmbiguousGlobalPerLayerAttributeError: a per-layer attribute
        return None


def max_head_dim(config):
    """The widest attention head of any layer (Gemma 4's full layers are wider than head_dim)."""
    dims = [config_value(config, "head_dim") or 0, config_value(config, "global_head_dim") or 0]
    per_layer = config_value(config, "per_layer_config")
    for i in range(config_value(config, "num_hidden_layers") or 0 if per_layer is not None else 0):
        try:
            dims.append(config_value(per_layer[i], "head_dim") or 0)
        except (IndexError, KeyError, TypeError):
            break
    return max(dims)


def flash_availability(transformers):
    """[(implementation, available)] of the native flash-attention packages transformers knows."""
    from transformers.utils import import_utils

    found = []
    for version in (3, 4, 2):
        check = getattr(import_utils, f"is_flash_attn_{version}_available", None)
        if check is not None:
            try:
                found.append((f"flash_attention_{version}", bool(check(kernels_fallback_ok=False))))
            except TypeError:
                found.append((f"flash_attention_{version}", bool(check())))
    return found


def attention_candidates(torch, transformers, config, device, dtype_name, requested):
    """Implementations to try in order, and notes on those passed over."""
    if requested:
        return [requested], []
    notes = []
    candidates = []
    head_dim = max_head_dim(config)
    for impl, available in flash_availability(transformers):
        if not available:
            notes.append(f"{impl}: package not installed")
        elif device != "cuda":
            notes.append(f"{impl}: needs CUDA")
        elif dtype_name != "bf16":
            notes.append(f"{impl}: needs bf16")
        elif head_dim > FLASH_MAX_HEAD_DIM:
            notes.append(f"{impl}: head_dim {head_dim} > {FLASH_MAX_HEAD_DIM}")
        elif impl == "flash_attention_3" and torch.cuda.get_device_capability()[0] != 9:
            notes.append(f"{impl}: needs a Hopper GPU")
        else:
            candidates.append(impl)
    if importlib.util.find_spec("kernels") is not None:
        notes.append("Hub kernels (kernels-community/...): not tried, they are fetched from the Hub at load time; "
                     "pass one with --attn")
    return candidates + ["sdpa"], notes


def instantiate(torch, transformers, config, device, dtype, attn):
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)


def build_model(torch, transformers, config, device, dtype, candidates):
    """The model with the first attention implementation transformers accepts, and the refusals."""
    refused = []
    for attn in candidates:
        try:
            model = instantiate(torch, transformers, config, device, dtype, attn)
        except (ValueError, ImportError, RuntimeError) as e:
            if isinstance(e, out_of_memory_error(torch)):
                raise
            if len(candidates) == 1:  # asked for by --attn
                fail(f"--attn {attn}: {first_line(e)}")
            refused.append(f"{attn}: {first_line(e)}")
            continue
        return model, refused
    fail("no attention implementation could be used: " + "; ".join(refused), 1)


def out_of_memory_error(torch):
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def out_of_memory_message(torch, error):
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory if peak is not None else None
    where = f" (peak allocated {fmt_gib(gib(peak))} of {fmt_gib(gib(total))})" if peak is not None else ""
    return f"CUDA out of memory{where}: {first_line(error)}"


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def gib(value):
    return None if value is None else value / GIB


def fmt_gib(value):
    return "n/a" if value is None else f"{value:.3f} GiB"


def write_json(path, report):
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
            f.write("\n")
    except OSError as e:
        fail(f"cannot write --json {path}: {e}", 1)


def run(prog, main):
    """Runs main(argv) as the script: a Failure prints "PROG: error: MESSAGE" and exits with its
    code, any other error one line with status 1, an interrupt 130."""
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(e.code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # any other runtime failure: one line, status 1
        print(f"{prog}: error: {type(e).__name__}: {first_line(e)}", file=sys.stderr)
        sys.exit(1)
